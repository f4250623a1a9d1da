//! Helpers for the `eval` tests: the real interpreters `scripts/install-test-deps` installs
//! (a venv with pandas and matplotlib; node), failing loudly when one is missing, and calls
//! that approve (and record) every approval request.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Value as Json, json};
use toolvisor_protocol::ToolError;
use toolvisor_protocol::client::{CallReply, Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};

use crate::TestDaemon;

/// A description that passes the 5-10 words rule.
pub const DESCRIPTION: &str = "run a cell for the test suite";

/// The test venv's python, which must import pandas and matplotlib. Panics (never skips)
/// with what to run when it is missing.
pub fn python() -> PathBuf {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let deps = match std::env::var_os("TOOLVISOR_TEST_DEPS") {
                Some(p) => PathBuf::from(p),
                None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"),
            };
            let python = deps.join("venv/bin/python");
            let ok = std::process::Command::new(&python)
                .args(["-c", "import pandas, matplotlib"])
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(
                ok,
                "{} cannot import pandas and matplotlib: run scripts/install-test-deps (it makes that venv)",
                python.display()
            );
            python
        })
        .clone()
}

/// `node` on the PATH; panics with what to run when it is missing.
pub fn node() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .expect("node is not installed: run scripts/install-test-deps")
}

/// A `[kernels]` section naming the test interpreters, plus `extra` keys of that section.
pub fn kernels_config(extra: &str) -> String {
    format!(
        "[kernels]\npython = {:?}\nnode = {:?}\n{extra}\n",
        python().display().to_string(),
        node().display().to_string()
    )
}

/// The `typescript` package `scripts/install-test-deps` installs (for TypeScript cells on a
/// Node without its own type stripping); panics with what to run when it is missing.
pub fn typescript() -> PathBuf {
    let deps = match std::env::var_os("TOOLVISOR_TEST_DEPS") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"),
    };
    let dir = deps.join("node_modules/typescript");
    assert!(
        dir.join("package.json").is_file(),
        "{} is missing: run scripts/install-test-deps",
        dir.display()
    );
    dir
}

/// A daemon whose kernels use the test interpreters.
pub fn daemon(extra: &str) -> TestDaemon {
    TestDaemon::start(&kernels_config(extra))
}

/// Options of an exec-surface harness with approvals, working in `workdir`.
pub fn options_in(workdir: &std::path::Path, bridge_tools: &[&str]) -> ClientOptions {
    ClientOptions {
        codec: Codec::Bincode,
        client_kind: ClientKind::Harness,
        run_id: "eval-test".into(),
        workdir: workdir.display().to_string(),
        surface: Surface {
            max_tier: Tier::Exec,
            approvals: true,
            questions: false,
            bridge_tools: bridge_tools.iter().map(|s| s.to_string()).collect(),
        },
        ..ClientOptions::default()
    }
}

/// The args of an `eval` call of `code` with the default description, plus `extra` fields.
pub fn args(code: &str, extra: Json) -> Json {
    let mut a = json!({"code": code, "description": DESCRIPTION});
    if let (Some(a), Some(extra)) = (a.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            a.insert(k.clone(), v.clone());
        }
    }
    a
}

/// Run one cell on a connected client, approving everything; the summaries of the approval
/// requests are appended to `asked`.
pub fn run(
    client: &mut Client,
    conversation: &str,
    args: Json,
    asked: &mut Vec<String>,
) -> CallReply {
    client
        .call_with(conversation, "eval", args, |req| {
            asked.push(req.summary.clone());
            true
        })
        .expect("eval call")
}

/// Run `code` in `conversation` on a fresh connection; the cell must succeed (`status` ok).
pub fn ok(d: &TestDaemon, conversation: &str, code: &str) -> Json {
    ok_with(d, conversation, args(code, json!({})))
}

pub fn ok_with(d: &TestDaemon, conversation: &str, args: Json) -> Json {
    let v = result_with(d, conversation, args.clone());
    assert_eq!(
        v["status"],
        "ok",
        "cell {} failed: {}\n--- daemon log ---\n{}",
        args["code"],
        v["text"],
        tail(&d.log_text())
    );
    v
}

/// Run a cell that must get a result (ok or a Python error), not a tool error.
pub fn result_with(d: &TestDaemon, conversation: &str, args: Json) -> Json {
    match d.call(conversation, "eval", args.clone()) {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!(
            "eval {} failed: {e}\n--- daemon log ---\n{}",
            args["code"],
            tail(&d.log_text())
        ),
    }
}

/// Run a cell that must fail as a tool; returns the error.
pub fn err_with(d: &TestDaemon, conversation: &str, args: Json) -> ToolError {
    match d.call(conversation, "eval", args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("eval {} should have failed, got {}", args["code"], v.0),
    }
}

/// The last part of a log, for failure messages.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}
