//! The real harnesses, headless, for the `tests/tests/harness_*.rs` tests: Claude Code and
//! the Codex CLI as `scripts/install-test-deps` installs them from npm (`.test-deps/harnesses`),
//! pointed at a scripted model endpoint of our own on loopback (`tests/harness/endpoint.py`:
//! the Anthropic Messages and OpenAI Responses APIs, one scripted turn per model request, every
//! request recorded) and at `toolvisor mcp` as their one MCP server. Each run gets a temp HOME
//! and config dir, and the env and config that keep it off the network (found by strace: the
//! only connections are the endpoint and the daemon's socket).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value as Json, json};

use crate::{TestDaemon, bin, wait_for};

fn deps() -> PathBuf {
    match std::env::var_os("TOOLVISOR_TEST_DEPS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"),
    }
}

/// A harness's executable; panics (never skips) with what to run when it is missing.
pub fn harness_bin(name: &str) -> PathBuf {
    let path = deps().join("harnesses/node_modules/.bin").join(name);
    let ok = Command::new(&path)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} does not run: run scripts/install-test-deps (it installs Claude Code and the Codex CLI from npm)",
        path.display()
    );
    path
}

/// The scripted model endpoint, stopped on drop.
pub struct Endpoint {
    child: Child,
    pub port: u16,
    script: PathBuf,
    record: PathBuf,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn endpoint_py() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("harness/endpoint.py")
}

impl Endpoint {
    /// Serve `turns` (`{"tool": NAME, "args": {...}}` or `{"final": TEXT}`), recording into `dir`.
    pub fn start(dir: &Path, turns: Json) -> Endpoint {
        std::fs::create_dir_all(dir).unwrap();
        let script = dir.join("script.json");
        let record = dir.join("record.jsonl");
        let port_file = dir.join("port");
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        let child = Command::new("python3")
            .arg(endpoint_py())
            .arg("--script")
            .arg(&script)
            .arg("--record")
            .arg(&record)
            .arg("--port-file")
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("endpoint.err")).unwrap())
            .spawn()
            .expect("start tests/harness/endpoint.py");
        let port = wait_for(
            "the scripted endpoint to listen",
            Duration::from_secs(20),
            || {
                std::fs::read_to_string(&port_file)
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            },
        );
        Endpoint {
            child,
            port,
            script,
            record,
        }
    }

    /// What the endpoint saw: `turns_served`, `tool_results` (what the harness sent back),
    /// `problems` (a turn never served), `requests`.
    pub fn summary(&self) -> Json {
        let out = Command::new("python3")
            .arg(endpoint_py())
            .arg("check")
            .arg("--script")
            .arg(&self.script)
            .arg("--record")
            .arg(&self.record)
            .output()
            .unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "endpoint.py check: {e}: {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// Every request the harness sent, as recorded (`method`, `path`, `body`, …).
    pub fn requests(&self) -> Vec<Json> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The text of every tool result the harness sent back, joined.
    pub fn results_text(&self) -> String {
        fn strings(v: &Json, out: &mut String) {
            match v {
                Json::String(s) => {
                    out.push_str(s);
                    out.push('\n');
                }
                Json::Array(a) => a.iter().for_each(|x| strings(x, out)),
                Json::Object(o) => o.values().for_each(|x| strings(x, out)),
                _ => {}
            }
        }
        let mut out = String::new();
        strings(&self.summary()["tool_results"], &mut out);
        out
    }
}

/// A small Python project (`pyproject.toml`, `pkg/greet.py`) for a harness to work in.
pub fn project(d: &TestDaemon) -> PathBuf {
    let w = d.dir.path().join("proj");
    std::fs::create_dir_all(w.join("pkg")).unwrap();
    std::fs::write(
        w.join("pyproject.toml"),
        "[project]\nname = \"harnessproj\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(w.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(
        w.join("pkg/greet.py"),
        "\"\"\"A tiny module.\"\"\"\n\nMAGIC = \"toolvisor-harness-7731\"\n\n\ndef greet(name: str) -> str:\n    return f\"hello, {name}\"\n",
    )
    .unwrap();
    w
}

/// How a harness run ended.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

fn run(mut cmd: Command, what: &str, timeout: Duration) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let out_pipe = child.stdout.take().unwrap();
    let err_pipe = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(out_pipe).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(err_pipe).unwrap_or_default());
    let status = wait_for(&format!("{what} to finish"), timeout, || {
        child.try_wait().ok().flatten()
    });
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// The run ended well and the harness played the endpoint's whole script, else a panic
/// with both streams and `context` (the config it ran with, say); the endpoint's summary.
pub fn played(run: &Run, ep: &Endpoint, context: &str) -> Json {
    assert!(
        run.status.success(),
        "the harness failed ({}):{context}\nstdout: {}\nstderr: {}",
        run.status,
        run.stdout,
        run.stderr
    );
    let summary = ep.summary();
    assert!(
        summary["problems"].as_array().is_some_and(|p| p.is_empty()),
        "the harness did not play the whole script: {summary}{context}\nstdout: {}\nstderr: {}",
        run.stdout,
        run.stderr
    );
    summary
}

/// `toolvisor mcp`'s arguments for a harness's config.
fn mcp_args(d: &TestDaemon, workdir: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["mcp", "--socket"].iter().map(|s| s.to_string()).collect();
    args.push(d.socket.display().to_string());
    args.push("--workdir".into());
    args.push(workdir.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `claude -p` with `toolvisor mcp EXTRA…` as its one MCP server; `allow`: the MCP tools it
/// may call without asking (`--allowedTools mcp__toolvisor__<tool>`).
pub fn claude(
    d: &TestDaemon,
    ep: &Endpoint,
    workdir: &Path,
    extra: &[&str],
    allow: &[&str],
) -> Run {
    let home = d.dir.path().join("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    let config = home.join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"toolvisor": {"type": "stdio", "command": bin(), "args": mcp_args(d, workdir, extra)}}}).to_string(),
    )
    .unwrap();
    let mut cmd = Command::new(harness_bin("claude"));
    cmd.args(["-p", "Do the task.", "--mcp-config"])
        .arg(&config)
        .args([
            "--strict-mcp-config",
            "--output-format",
            "json",
            "--no-session-persistence",
        ]);
    if !allow.is_empty() {
        let list: Vec<String> = allow
            .iter()
            .map(|t| format!("mcp__toolvisor__{t}"))
            .collect();
        cmd.arg("--allowedTools").arg(list.join(","));
    }
    cmd.current_dir(workdir);
    claude_env(&mut cmd, d, ep);
    run(cmd, "claude -p", Duration::from_secs(180))
}

/// The environment of a `claude` run: a temp HOME and config dir, the endpoint, no traffic
/// elsewhere, `toolvisor` on PATH.
fn claude_env(cmd: &mut Command, d: &TestDaemon, ep: &Endpoint) {
    claude_env_in(cmd, d.dir.path(), ep, &[]);
}

/// [`claude_env`] with its HOME under `dir` and `extra_path` on PATH after `toolvisor`'s.
fn claude_env_in(cmd: &mut Command, dir: &Path, ep: &Endpoint, extra_path: &[PathBuf]) {
    let home = dir.join("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    // No phoning home (telemetry, error reports, updates, other traffic), and MCP tools in
    // the tool list itself rather than behind its ToolSearch.
    cmd.env_clear()
        .env("PATH", path_with_toolvisor(extra_path))
        .env("HOME", &home)
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", ep.port),
        )
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted-endpoint")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("ENABLE_TOOL_SEARCH", "false");
}

/// Run `claude ARGS…` (the words of a command line, `claude` first) in `workdir` with
/// [`claude_env`]; `"$TASK"` becomes the scripted task.
pub fn claude_line(d: &TestDaemon, ep: &Endpoint, workdir: &Path, words: &[&str]) -> Run {
    claude_line_in(d.dir.path(), ep, workdir, words, &[])
}

/// [`claude_line`] with the harness's HOME under `dir` (no test daemon of ours: a
/// `toolvisor mcp` it starts finds or starts its own) and `extra_path` on its PATH.
pub fn claude_line_in(
    dir: &Path,
    ep: &Endpoint,
    workdir: &Path,
    words: &[&str],
    extra_path: &[PathBuf],
) -> Run {
    assert_eq!(words.first(), Some(&"claude"), "{words:?}");
    let mut cmd = Command::new(harness_bin("claude"));
    for w in &words[1..] {
        cmd.arg(if *w == "\"$TASK\"" { "Do the task." } else { w });
    }
    cmd.current_dir(workdir);
    claude_env_in(&mut cmd, dir, ep, extra_path);
    run(cmd, "claude", Duration::from_secs(180))
}

/// `codex exec` with a provider pointing at the endpoint and `toolvisor mcp EXTRA…` as its
/// MCP server; `allow`: the MCP tools it may call (`approval_mode = "approve"`; under
/// `approval_policy = "never"` Codex refuses any other tool that is not read-only).
pub fn codex(d: &TestDaemon, ep: &Endpoint, workdir: &Path, extra: &[&str], allow: &[&str]) -> Run {
    let q = |s: &str| Json::String(s.to_string()).to_string();
    let args: Vec<Json> = mcp_args(d, workdir, extra)
        .into_iter()
        .map(Json::String)
        .collect();
    let mut mcp = format!(
        "[mcp_servers.toolvisor]\ncommand = {}\nargs = {}\nstartup_timeout_sec = 30\ntool_timeout_sec = 120\n",
        q(&bin().display().to_string()),
        Json::Array(args)
    );
    for t in allow {
        mcp.push_str(&format!(
            "\n[mcp_servers.toolvisor.tools.{t}]\napproval_mode = \"approve\"\n"
        ));
    }
    codex_with(d, ep, workdir, &mcp)
}

/// `codex exec` with a provider pointing at the endpoint and `mcp` (TOML: the
/// `[mcp_servers.toolvisor]` block and its tables) as the rest of its config; `toolvisor`
/// resolves on PATH to the binary under test.
pub fn codex_with(d: &TestDaemon, ep: &Endpoint, workdir: &Path, mcp: &str) -> Run {
    codex_with_in(d.dir.path(), ep, workdir, mcp, &[])
}

/// [`codex_with`] with Codex's HOME under `dir` and `extra_path` on its PATH.
pub fn codex_with_in(
    dir: &Path,
    ep: &Endpoint,
    workdir: &Path,
    mcp: &str,
    extra_path: &[PathBuf],
) -> Run {
    // Codex warns about helper binaries under /tmp: its home goes under the test's dir anyway
    // (a tempdir), which is what a CI machine has.
    let home = dir.join("codex-home");
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let toml = format!(
        "model = \"scripted-model\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\nsandbox_mode = \"read-only\"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n[features]\nplugins = false\nremote_plugin = false\napps = false\nin_app_updates = false\napi_key_model_discovery = false\nunbounded_connection_retries = false\nskill_mcp_dependency_install = false\n\n[model_providers.scripted]\nname = \"scripted endpoint\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n{mcp}",
        ep.port,
    );
    std::fs::write(codex_home.join("config.toml"), toml).unwrap();
    let mut cmd = Command::new(harness_bin("codex"));
    cmd.args([
        "exec",
        "--skip-git-repo-check",
        "--ephemeral",
        "--json",
        "--color",
        "never",
        "-C",
    ])
    .arg(workdir)
    .arg("Do the task.")
    .current_dir(workdir)
    .env_clear()
    .env("PATH", path_with_toolvisor(extra_path))
    .env("HOME", &home)
    .env("CODEX_HOME", &codex_home)
    .env("SCRIPTED_API_KEY", "scripted-endpoint")
    .env("RUST_LOG", "warn");
    run(cmd, "codex exec", Duration::from_secs(180))
}

/// PATH with the directory of the `toolvisor` under test first, as `cargo install` puts it
/// on a user's PATH, then `extra`, then the test's own.
pub fn path_with_toolvisor(extra: &[PathBuf]) -> std::ffi::OsString {
    let dir = bin().parent().unwrap().to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(
        std::iter::once(dir)
            .chain(extra.iter().cloned())
            .chain(std::env::split_paths(&rest)),
    )
    .unwrap()
}

/// The daemon's audit records.
pub fn audit(d: &TestDaemon) -> Vec<Json> {
    std::fs::read_to_string(d.state_dir().join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A `sleep` whose argument no other process on the machine has.
pub fn unique_sleep(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "{}.{}{:09}",
        3000 + std::process::id() % 1000,
        tag.len(),
        nanos
    )
}

/// Pids of live processes whose command line is `sleep SECS`.
pub fn sleeps(secs: &str) -> Vec<u32> {
    let want = format!("sleep\0{secs}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.ends_with(want.as_bytes()) && !zombie(*pid))
        })
        .collect()
}

pub fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}
