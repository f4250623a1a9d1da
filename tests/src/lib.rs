//! Helpers for the end-to-end tests: start the real `toolvisor` binary on a temp socket,
//! connect clients in either codec, wait for conditions with named deadlines, inspect /proc.

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub mod clients;
pub mod debug;
pub mod eval;
pub mod harness;
pub mod hf;
pub mod inference;
pub mod lsp;
pub mod mcp;
pub mod structural;

use serde_json::Value as Json;
use toolvisor_protocol::client::{CallReply, Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};

/// The `toolvisor` binary built alongside this test (`target/<profile>/toolvisor`).
pub fn bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLVISOR_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test> -> target/<profile>/toolvisor
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("toolvisor");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p toolvisor` first (scripts/test does)",
        bin.display()
    );
    bin
}

/// Poll `f` until it returns Some, or fail naming `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True while `pid` exists and is not a zombie.
/// Tests that play another user (uid 65534) or give files away need root: the suite runs as
/// root (`scripts/test` refuses to start otherwise). Such a test fails here, saying so,
/// rather than passing without having checked anything.
pub fn require_root(what: &str) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "{what} needs root; the suite runs as root (scripts/test refuses to start otherwise)"
    );
}

pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// The processes whose parent is `pid`, with their names (`/proc/<pid>/stat`: the name in
/// parentheses, the parent pid the second field after them).
pub fn children(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let (Some((head, rest)), Some(open)) = (stat.rsplit_once(')'), stat.find('(')) else {
            continue;
        };
        if rest.split_whitespace().nth(1) == Some(pid.to_string().as_str()) {
            found.push((child, head[open + 1..].to_string()));
        }
    }
    found
}

/// A daemon started for one test, killed (and its temp dir removed) on drop.
pub struct TestDaemon {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub child: Option<Child>,
    pub log: PathBuf,
    /// Extra environment variables of the daemon process (kept across restarts).
    pub env: Vec<(String, String)>,
}

impl TestDaemon {
    /// Start with embedded defaults plus `config` (TOML; may be empty).
    pub fn start(config: &str) -> TestDaemon {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::start_in(dir, config)
    }

    pub fn start_in(dir: tempfile::TempDir, config: &str) -> TestDaemon {
        Self::start_with_env(dir, config, &[])
    }

    /// Start in `dir` with `env` added to the daemon's environment (secrets, say).
    pub fn start_with_env(
        dir: tempfile::TempDir,
        config: &str,
        env: &[(&str, &str)],
    ) -> TestDaemon {
        let socket = dir.path().join("toolvisor.sock");
        let log = dir.path().join("daemon.log");
        let mut d = TestDaemon {
            dir,
            socket,
            child: None,
            log,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        d.spawn(config);
        d
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// (Re)start the daemon process on this daemon's socket.
    pub fn spawn(&mut self, config: &str) {
        let cfg = format!(
            "state_dir = {:?}\n{config}",
            self.state_dir().display().to_string()
        );
        std::fs::write(self.config_path(), cfg).expect("write config");
        // As an operator's umask 022 makes it, whatever this test's umask: the daemon refuses a
        // config file others may write.
        std::fs::set_permissions(
            self.config_path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .expect("set the config file's mode");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("log file");
        let child = Command::new(bin())
            .arg("serve")
            .arg("--socket")
            .arg(&self.socket)
            .arg("--config")
            .arg(self.config_path())
            .env("TOOLVISOR_LOG", "debug")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn toolvisor serve");
        self.child = Some(child);
        let socket = self.socket.clone();
        wait_for(
            "the daemon to accept connections",
            Duration::from_secs(20),
            || {
                Client::connect(&socket, options(Codec::Json, Tier::Read, false))
                    .ok()
                    .map(|_| ())
            },
        );
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("daemon running").id()
    }

    pub fn client(&self, codec: Codec, tier: Tier, approvals: bool) -> Client {
        Client::connect(&self.socket, options(codec, tier, approvals))
            .expect("connect to the test daemon")
    }

    /// Call with an exec-surface client that approves everything; return the outcome.
    pub fn call(&self, conversation: &str, tool: &str, args: Json) -> Outcome {
        let mut c = self.client(Codec::Bincode, Tier::Exec, true);
        c.call_with(conversation, tool, args, |_| true)
            .expect("call")
            .outcome
    }

    /// Like `call`, but the call must succeed; returns its value.
    pub fn ok(&self, conversation: &str, tool: &str, args: Json) -> Json {
        match self.call(conversation, tool, args.clone()) {
            Outcome::Ok(v) => v.0,
            Outcome::Err(e) => panic!(
                "{tool} {args} failed: {e}\n--- daemon log ---\n{}",
                self.log_text()
            ),
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The node `id` under the supervisor `parent` in `toolvisor tree --json`, if there.
    pub fn tree_node(&self, parent: &str, id: &str) -> Option<Json> {
        let out = std::process::Command::new(bin())
            .args(["tree", "--json", "--socket"])
            .arg(&self.socket)
            .output()
            .expect("run toolvisor tree");
        let tree: Json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "toolvisor tree --json gave no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let children = |n: &Json| n["children"].as_array().cloned().unwrap_or_default();
        children(&tree["root"])
            .into_iter()
            .find(|n| n["id"] == parent)
            .and_then(|sup| children(&sup).into_iter().find(|n| n["id"] == id))
    }

    /// SIGKILL the daemon and reap it.
    pub fn kill_hard(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        let _ = sigterm(child.id());
        wait_for(
            "the daemon to exit after SIGTERM",
            Duration::from_secs(20),
            || child.try_wait().ok().flatten(),
        )
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.kill_hard();
    }
}

/// Send SIGTERM to `pid` (a daemon to drain, or a service manager standing in for one).
pub fn sigterm(pid: u32) -> nix::Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
}

pub fn options(codec: Codec, tier: Tier, approvals: bool) -> ClientOptions {
    ClientOptions {
        codec,
        client_kind: ClientKind::Harness,
        run_id: "test-run".into(),
        workdir: std::env::temp_dir().display().to_string(),
        surface: Surface {
            max_tier: tier,
            approvals,
            questions: false,
            bridge_tools: vec![],
        },
        ..ClientOptions::default()
    }
}

/// The error of a reply that must have failed.
pub fn err_of(reply: &CallReply) -> &toolvisor_protocol::ToolError {
    match &reply.outcome {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("expected an error, got {}", v.0),
    }
}

/// The value of a reply that must have succeeded.
pub fn ok_of(reply: &CallReply) -> &Json {
    match &reply.outcome {
        Outcome::Ok(v) => &v.0,
        Outcome::Err(e) => panic!("expected success, got {e}"),
    }
}

/// The file tools' `out_of_scope` answer: kind, the path's real location, what is allowed,
/// and the switch that lifts it.
pub fn assert_out_of_scope(
    e: &toolvisor_protocol::ToolError,
    tool: &str,
    real: &Path,
    workdir: &Path,
) {
    assert_eq!(
        e.kind,
        toolvisor_protocol::error::ErrorKind::OutOfScope,
        "{e}"
    );
    assert!(e.message.starts_with(&format!("{tool}: ")), "{e}");
    assert!(
        e.message
            .contains(&format!("resolves to {}", real.display())),
        "{e}"
    );
    assert!(
        e.message
            .contains(&format!("outside the workdir {}", workdir.display())),
        "{e}"
    );
    assert!(e.hint.contains("allow_outside_workdir"), "{e}");
}
