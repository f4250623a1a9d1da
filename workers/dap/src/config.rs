//! `[debug]` of the daemon config: the adapter registry as data (embedded defaults, replaced
//! or extended per adapter), where binaries are searched, the session TTL and the waits.
//!
//! Read-only input: with `protocol`, the config file is the one serde user.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// One debug adapter.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    /// Candidate commands, program first, tried in order: the first whose program resolves
    /// runs. `{python}` stands for the resolved Python interpreter (debugpy); a program
    /// ending in `-*` matches the highest numbered `NAME-NN` (e.g. `lldb-dap-19`).
    pub commands: Vec<Vec<String>>,
    /// Files that mark a project of this adapter's language (reported by `adapters`).
    pub markers: Vec<String>,
    /// Program extensions (without the dot) `launch` picks this adapter for.
    #[serde(default)]
    pub extensions: Vec<String>,
    /// `launch` picks this adapter for native executables (ELF files).
    #[serde(default)]
    pub native: bool,
    /// How DAP reaches the adapter: `stdio` (default) or `tcp-listen`.
    #[serde(default)]
    pub transport: Transport,
}

/// How the daemon speaks DAP with an adapter it starts.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Over the adapter's stdin and stdout.
    #[default]
    Stdio,
    /// The adapter listens on a loopback port it chose and prints on stdout (`dlv dap
    /// --listen=127.0.0.1:0` prints `DAP server listening at: 127.0.0.1:PORT`); the daemon
    /// reads the address, connects, and keeps reading stdout as the program's output.
    TcpListen,
}

/// `[debug]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebugConfig {
    /// Adapters by name; an entry replaces the embedded one of the same name. The names
    /// `debugpy`, `lldb`, `delve` and `dart` keep their launch conventions; other names get
    /// plain `{program, args, cwd, stopOnEntry}` launches.
    pub adapters: BTreeMap<String, AdapterSpec>,
    /// Directories searched for adapter binaries (and for `python3`) after the project-local
    /// ones (`.venv/bin`, `venv/bin`) and before `$PATH`.
    pub search_path: Vec<String>,
    /// The Python interpreter for debugpy (path or name); default: the project's
    /// `.venv/bin/python` or `venv/bin/python`, else `python3` on the search path.
    pub python: Option<String>,
    /// Hard TTL of a session: then it is terminated and the next call says it expired.
    pub session_ttl_s: u64,
    /// Longest wait for any one request to the adapter.
    pub request_timeout_s: u64,
    /// Longest wait for the adapter to start and to take the launch (`initialize`,
    /// `initialized`, the `launch` answer).
    pub start_timeout_s: u64,
    /// How long `launch`, `continue`, `step_*` and `pause` wait for the program to stop (or
    /// end) before answering that it is running.
    pub stop_wait_s: u64,
    /// Bytes of debuggee output kept per session (oldest dropped first; offsets keep counting).
    pub output_bytes: usize,
    /// When the caller set no exception filters, a launch or attach turns on the adapter's
    /// `uncaught` filter (debugpy), so an uncaught exception pauses the program where it was
    /// raised instead of ending it; `false` turns it off. Adapters without such a filter are
    /// unaffected (lldb-dap stops on the SIGABRT of an uncaught C++ exception either way).
    pub pause_on_uncaught: bool,
    /// Where `attach {pid}` reads the kernel's ptrace rule (`[testing] ptrace_scope` sets
    /// it; not a `[debug]` key).
    #[serde(skip)]
    pub ptrace_scope_file: std::path::PathBuf,
}

/// Where the kernel says who may ptrace whom (absent without the Yama LSM: then the
/// classic rule, same user, applies).
pub const PTRACE_SCOPE: &str = "/proc/sys/kernel/yama/ptrace_scope";

impl Default for DebugConfig {
    fn default() -> Self {
        DebugConfig {
            adapters: BTreeMap::new(),
            search_path: Vec::new(),
            python: None,
            session_ttl_s: 30 * 60,
            request_timeout_s: 30,
            start_timeout_s: 60,
            stop_wait_s: 30,
            output_bytes: 1024 * 1024,
            pause_on_uncaught: true,
            ptrace_scope_file: PTRACE_SCOPE.into(),
        }
    }
}

impl DebugConfig {
    /// Embedded adapters overlaid with the configured ones.
    pub fn adapters(&self) -> BTreeMap<String, AdapterSpec> {
        let mut all = default_adapters();
        for (name, spec) in &self.adapters {
            all.insert(name.clone(), spec.clone());
        }
        all
    }

    /// The keys that must be positive; the error names the key.
    pub fn check(&self) -> Result<(), String> {
        for (key, value) in [
            ("debug.session_ttl_s", self.session_ttl_s),
            ("debug.request_timeout_s", self.request_timeout_s),
            ("debug.start_timeout_s", self.start_timeout_s),
            ("debug.stop_wait_s", self.stop_wait_s),
            ("debug.output_bytes", self.output_bytes as u64),
        ] {
            if value == 0 {
                return Err(format!("{key} = 0: it must be a positive integer"));
            }
        }
        for (name, spec) in &self.adapters {
            if spec.commands.is_empty()
                || spec
                    .commands
                    .iter()
                    .any(|c| c.first().is_none_or(String::is_empty))
            {
                return Err(format!(
                    "debug.adapters.{name}.commands: every command needs a program, e.g. [[\"my-adapter\", \"--stdio\"]]"
                ));
            }
        }
        Ok(())
    }

    pub fn session_ttl(&self) -> Duration {
        Duration::from_secs(self.session_ttl_s)
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_s)
    }

    pub fn start_timeout(&self) -> Duration {
        Duration::from_secs(self.start_timeout_s)
    }

    pub fn stop_wait(&self) -> Duration {
        Duration::from_secs(self.stop_wait_s)
    }
}

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The embedded registry (spec §2, debug).
pub fn default_adapters() -> BTreeMap<String, AdapterSpec> {
    let mut m = BTreeMap::new();
    m.insert(
        "debugpy".into(),
        AdapterSpec {
            commands: vec![v(&["{python}", "-m", "debugpy.adapter"])],
            markers: v(&["pyproject.toml", "setup.py", "requirements.txt"]),
            extensions: v(&["py"]),
            native: false,
            transport: Transport::Stdio,
        },
    );
    m.insert(
        "lldb".into(),
        AdapterSpec {
            commands: vec![
                v(&["lldb-dap"]),
                v(&["lldb-dap-*"]),
                v(&["lldb-vscode"]),
                v(&["lldb-vscode-*"]),
            ],
            markers: v(&["Cargo.toml", "CMakeLists.txt"]),
            extensions: Vec::new(),
            native: true,
            transport: Transport::Stdio,
        },
    );
    m.insert(
        "delve".into(),
        AdapterSpec {
            // `dlv dap` never reads stdin: it listens on TCP. Port 0: the kernel picks a free
            // one and delve prints it.
            commands: vec![v(&["dlv", "dap", "--listen=127.0.0.1:0"])],
            markers: v(&["go.mod"]),
            extensions: v(&["go"]),
            native: false,
            transport: Transport::TcpListen,
        },
    );
    m.insert(
        "dart".into(),
        AdapterSpec {
            commands: vec![v(&["dart", "debug_adapter"])],
            markers: v(&["pubspec.yaml"]),
            extensions: v(&["dart"]),
            native: false,
            transport: Transport::Stdio,
        },
    );
    m
}
