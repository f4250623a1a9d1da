//! Language servers that die: a SIGKILLed pyright between two calls is restarted and the
//! second call answers correctly (documents re-opened); a server that crashes on start ends
//! `failed` in `lsp status` and in the tree after its restart intensity — not a loop.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};
use toolvisor_tests::{TestDaemon, alive, bin, wait_for};

#[test]
fn sigkilled_pyright_is_restarted_and_the_next_call_answers() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"k\"\n"),
        (
            "m.py",
            "def target(x: int) -> int:\n    return x\n\n\nresult = target(1)\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let ask = json!({"op": "definition", "file": "m.py", "line": 5, "symbol": "target"});
    let first = ok_in(&d, w, "lsp", ask.clone());
    assert!(
        first["text"]
            .as_str()
            .unwrap()
            .contains("m.py:1: def target"),
        "{first}"
    );
    let pid = first["server"]["pid"].as_u64().unwrap() as u32;
    let killed_at = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for(
        "the killed server to be gone",
        Duration::from_secs(10),
        || (!alive(pid)).then_some(()),
    );
    let second = ok_in(&d, w, "lsp", ask);
    assert_eq!(second["text"], first["text"], "{second}");
    let new_pid = second["server"]["pid"].as_u64().unwrap() as u32;
    assert_ne!(new_pid, pid);
    assert!(alive(new_pid));
    // The restarted server's uptime in the tree is its own incarnation's, begun
    // after the kill, not the first incarnation's.
    let since_kill = killed_at.elapsed().as_millis() as u64;
    let sup = language_servers_in_tree(&d);
    let node = &sup["children"][0];
    assert_eq!(node["pid"], new_pid, "{sup}");
    let uptime = node["uptime_ms"].as_u64().unwrap();
    assert!(
        uptime <= since_kill,
        "uptime {uptime} ms, but the server was killed {since_kill} ms ago: {sup}"
    );
    let status = ok_in(&d, w, "lsp", json!({"op": "status"}));
    let server = &status["servers"][0];
    assert_eq!(server["restarts"], 1, "{status}");
    assert_eq!(server["state"], "ready", "{status}");
    assert!(
        server["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("signal 9"),
        "{status}"
    );

    // `reload` restarts the root's server on purpose: a new process, the same answers.
    let v = ok_in(&d, w, "lsp", json!({"op": "reload", "file": "m.py"}));
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .starts_with("restarted: python:"),
        "{v}"
    );
    wait_for(
        "the reloaded server's old process to exit",
        Duration::from_secs(10),
        || (!alive(new_pid)).then_some(()),
    );
    let third = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "m.py", "line": 5, "symbol": "target"}),
    );
    assert_eq!(third["text"], first["text"]);
    assert_ne!(third["server"]["pid"].as_u64().unwrap() as u32, new_pid);
}

#[test]
fn a_server_that_crashes_on_start_ends_failed_not_in_a_loop() {
    let p = project(&[("fake.toml", ""), ("a.fake", "hello\n")]);
    let w = p.path();
    let script = w.join("crashing-server");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'fatal: no license for this server' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "[restart]\nbackoff_ms = 10\nbackoff_max_ms = 50\n{}",
        lsp_config(&format!(
            "[lsp.languages.fake]\nextensions = [\"fake\"]\nmarkers = [\"fake.toml\"]\nservers = [[{:?}]]\n",
            script.display().to_string()
        ))
    );
    let d = TestDaemon::start(&config);
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "a.fake", "line": 1, "symbol": "hello"}),
    );
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    assert!(e.message.contains("gave up after 5 restarts"), "{e}");
    assert!(
        e.message.contains("fatal: no license for this server"),
        "{e}"
    );
    assert!(e.hint.contains("reload"), "{e}");

    // A second call answers at once with the same failure: no new start.
    let again = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "a.fake", "line": 1, "symbol": "hello"}),
    );
    assert_eq!(again.kind, ErrorKind::ResourceFailed);

    let status = ok_in(&d, w, "lsp", json!({"op": "status"}));
    let server = &status["servers"][0];
    assert_eq!(server["state"], "failed", "{status}");
    assert_eq!(server["restarts"], 5, "{status}");

    let sup = language_servers_in_tree(&d);
    let node = &sup["children"][0];
    assert_eq!(node["kind"], "language_server", "{sup}");
    assert_eq!(node["state"], "failed", "{sup}");
    assert_eq!(node["restarts"], 5, "{sup}");
    assert!(
        node["last_error"].as_str().unwrap().contains("gave up"),
        "{sup}"
    );
    // Still failed a moment later: nothing restarts it behind the caller's back.
    let restarts_in_log = d.log_text().matches("restarting resource").count();
    assert_eq!(restarts_in_log, 5, "exactly 5 restarts were logged");

    // After the cause is fixed, `lsp reload` starts a fresh server, and the tree
    // no longer shows the old record's restarts and last error.
    let fake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake_lsp.py");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh
exec python3 {:?} quiet
",
            fake.display().to_string()
        ),
    )
    .unwrap();
    ok_in(&d, w, "lsp", json!({"op": "reload", "file": "a.fake"}));
    let sup = language_servers_in_tree(&d);
    let node = &sup["children"][0];
    assert_ne!(node["state"], "failed", "{sup}");
    assert_eq!(
        node["restarts"], 0,
        "the reloaded server kept the old restarts: {sup}"
    );
    assert_eq!(
        node["last_error"],
        Value::Null,
        "the reloaded server kept the old error: {sup}"
    );
}

/// The `language_servers` supervisor node of `toolvisor tree --json`.
fn language_servers_in_tree(d: &TestDaemon) -> Value {
    let out = Command::new(bin())
        .args([
            "tree",
            "--json",
            "--socket",
            &d.socket.display().to_string(),
        ])
        .output()
        .unwrap();
    let tree: Value = serde_json::from_slice(&out.stdout).unwrap();
    tree["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "language_servers")
        .expect("a language_servers supervisor in the tree")
        .clone()
}
