//! Helpers for the `debug` tests: find the real adapters that `scripts/install-test-deps`
//! installs (debugpy in `.test-deps/venv`, Debian's lldb-dap, gcc, Go and delve), failing
//! loudly when one is missing; write and build small programs; call `debug` with a project as
//! the workdir.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::wire::Outcome;

use crate::lsp::{call_in, tail, test_deps};
use crate::{TestDaemon, wait_for};

const INSTALL: &str = "run scripts/install-test-deps (it installs debugpy into .test-deps/venv, lldb-19, gcc, and golang-go, delve and gopls)";

/// The test venv's Python, which must import debugpy; panics (never skips) otherwise.
pub fn require_debugpy() -> PathBuf {
    let python = test_deps().join("venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import debugpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "debugpy is not importable by {}: {INSTALL}",
        python.display()
    );
    python
}

/// lldb-dap (any of its names); panics (never skips) when none is installed.
pub fn require_lldb_dap() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let numbered = |prefix: &str| {
                name.strip_prefix(prefix)
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
            };
            if numbered("lldb-dap")
                || numbered("lldb-dap-")
                || numbered("lldb-vscode")
                || numbered("lldb-vscode-")
            {
                return entry.path();
            }
        }
    }
    panic!("no lldb-dap on PATH: {INSTALL}");
}

/// `go` and `dlv` on `PATH`, each answering `version`; panics (never skips) otherwise.
pub fn require_go() {
    for (bin, arg) in [("go", "version"), ("dlv", "version")] {
        let ok = Command::new(bin)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "`{bin} {arg}` does not run: {INSTALL}");
    }
}

/// The environment of the go command in the Go tests: the build cache and GOPATH in
/// `.test-deps/go` (shared by the Go tests: the cache is safe to share), modules from the
/// module itself only and no network (`GOPROXY=off`, `GOTOOLCHAIN=local`).
pub fn go_vars() -> Vec<(String, String)> {
    let go = test_deps().join("go");
    vec![
        ("GOCACHE".into(), go.join("cache").display().to_string()),
        ("GOPATH".into(), go.join("path").display().to_string()),
        ("GOFLAGS".into(), "-mod=mod".into()),
        ("GOTOOLCHAIN".into(), "local".into()),
        ("GOPROXY".into(), "off".into()),
    ]
}

/// `[env] set` for a daemon whose children run the go command: [`go_vars`] on top of the
/// default set.
pub fn go_env() -> String {
    let vars: Vec<String> = go_vars()
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}"))
        .collect();
    format!(
        "[env]\nset = {{ PYTHONDONTWRITEBYTECODE = \"1\", {} }}\n",
        vars.join(", ")
    )
}

/// Builds `name.c` in `dir` with `gcc -g -O0`; returns the executable.
pub fn gcc(dir: &Path, name: &str, source: &str) -> PathBuf {
    std::fs::write(dir.join(format!("{name}.c")), source).expect("write C source");
    let out = Command::new("gcc")
        .args(["-g", "-O0", "-o", name, &format!("{name}.c")])
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("gcc is not installed ({e}): {INSTALL}"));
    assert!(
        out.status.success(),
        "gcc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(name)
}

/// The `[debug]` config every debug test uses (the test venv on the search path), plus
/// `extra` lines inside `[debug]`.
pub fn debug_config(extra: &str) -> String {
    format!(
        "[debug]\nsearch_path = [{:?}]\n{extra}",
        test_deps().join("venv/bin").display().to_string()
    )
}

/// `debug` in `workdir`; the value, or a panic with the daemon log's tail.
pub fn dbg(d: &TestDaemon, workdir: &Path, args: Json) -> Json {
    match call_in(d, workdir, "debug", args.clone()) {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!(
            "debug {args} failed: {e}\n--- daemon log (tail) ---\n{}",
            tail(&d.log_text(), 60)
        ),
    }
}

/// `debug` in `workdir` that must fail; the error.
pub fn dbg_err(d: &TestDaemon, workdir: &Path, args: Json) -> toolvisor_protocol::ToolError {
    match call_in(d, workdir, "debug", args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("debug {args} should have failed, got {}", v.0),
    }
}

/// The file name and line where a `launch`/`continue`/`step_*` result says it stopped.
pub fn stopped_at(v: &Json) -> (String, u64) {
    let frame = &v["stopped"]["frame"];
    let file = frame["file"]
        .as_str()
        .unwrap_or_else(|| panic!("no stop frame in {v}"));
    (
        Path::new(file)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        frame["line"].as_u64().unwrap(),
    )
}

/// Waits until `status` says the conversation's session is in `state`.
pub fn wait_state(d: &TestDaemon, workdir: &Path, state: &str) -> Json {
    wait_for(
        &format!("the debug session to be {state}"),
        Duration::from_secs(30),
        || {
            let s = dbg(d, workdir, json!({"op": "status"}));
            (s["session"]["state"] == state).then_some(s)
        },
    )
}

/// A program a test starts itself (a debug server, a process to attach to), in `dir` with
/// its output discarded; killed and reaped when dropped, whatever the test did.
pub struct Started(pub Child);

impl Started {
    pub fn spawn(command: &mut Command, dir: &Path) -> Started {
        Started(
            command
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}")),
        )
    }

    /// It has not exited.
    pub fn running(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
