//! `process` with `pty`: a real interactive program (python's REPL, `bash -i`) on a
//! pseudo-terminal — it sees a terminal, keys (control characters too) reach it, `read`
//! returns the screen as a terminal shows it beside the raw output, `resize` changes the
//! window, Ctrl-D ends it, and `kill` takes the whole session down.

use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::{TestDaemon, alive, wait_for};

fn screen_with(d: &TestDaemon, id: &str, what: &str, wanted: impl Fn(&str) -> bool) -> Json {
    wait_for(what, Duration::from_secs(20), || {
        let v = d.ok("c", "process", json!({"op": "read", "id": id, "offset": 0}));
        wanted(v["screen"]["text"].as_str().unwrap_or_default()).then_some(v)
    })
}

fn keys(d: &TestDaemon, id: &str, data: &str) {
    d.ok(
        "c",
        "process",
        json!({"op": "write", "id": id, "data": data}),
    );
}

#[test]
fn a_python_repl_runs_on_a_terminal_that_can_be_resized_and_interrupted() {
    let d = TestDaemon::start("");
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "python3 -q -i", "pty": true, "cols": 80, "rows": 24}),
    );
    let id = started["id"].as_str().unwrap().to_string();
    screen_with(&d, &id, "the REPL's prompt", |s| s.contains(">>>"));
    keys(&d, &id, "import os, sys; sys.stdin.isatty(), os.getpid()\n");
    // The whole answer, up to its closing parenthesis (it may arrive in pieces).
    let v = screen_with(&d, &id, "the answer", |s| {
        s.split("(True, ")
            .nth(1)
            .is_some_and(|rest| rest.contains(')'))
    });
    let screen = v["screen"]["text"].as_str().unwrap();
    let pid: u32 = screen
        .split("(True, ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid on the screen: {screen}"));
    assert!(alive(pid));
    assert_eq!(v["screen"]["cols"], 80);
    assert_eq!(v["screen"]["rows"], 24);
    // The raw output by offset is there too, with the terminal's own line endings.
    assert!(v["text"].as_str().unwrap().contains("(True, "), "{v}");

    // Ctrl-C reaches the program as the terminal's interrupt.
    keys(&d, &id, "while True: pass\n");
    keys(&d, &id, "\n");
    keys(&d, &id, "\u{3}");
    screen_with(&d, &id, "the KeyboardInterrupt", |s| {
        s.contains("KeyboardInterrupt")
    });

    // A resize is seen by the program (SIGWINCH and the new size).
    let info = d.ok(
        "c",
        "process",
        json!({"op": "resize", "id": id, "cols": 100, "rows": 30}),
    );
    assert_eq!(info["state"], "running");
    keys(&d, &id, "os.get_terminal_size()\n");
    let v = screen_with(&d, &id, "the new size", |s| {
        s.contains("columns=100, lines=30")
    });
    assert_eq!(v["screen"]["cols"], 100);

    // Kill takes the REPL (in the terminal's own session) down with the relay.
    d.ok("c", "process", json!({"op": "kill", "id": id}));
    wait_for(
        "the REPL to be gone after kill",
        Duration::from_secs(10),
        || (!alive(pid)).then_some(()),
    );
}

#[test]
fn bash_on_a_terminal_sees_its_size_and_ends_on_ctrl_d() {
    let d = TestDaemon::start("");
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "PS1='$ ' exec bash --norc --noprofile -i", "pty": true, "cols": 90, "rows": 20}),
    );
    let id = started["id"].as_str().unwrap().to_string();
    screen_with(&d, &id, "bash's prompt", |s| s.contains("$ "));
    keys(&d, &id, "stty size; tty\n");
    // Both answers are waited for: `tty` prints after `stty`, maybe in a later read.
    let v = screen_with(&d, &id, "stty's and tty's answers", |s| {
        s.contains("20 90") && s.contains("/dev/pts/")
    });
    let screen = v["screen"]["text"].as_str().unwrap();
    assert!(
        screen.contains("20 90") && screen.contains("/dev/pts/"),
        "{screen}"
    );
    // Full-screen output is rendered, not shown as escape codes.
    keys(&d, &id, "clear; echo fresh\n");
    let v = screen_with(&d, &id, "the cleared screen", |s| {
        s.trim_start().starts_with("fresh")
    });
    assert!(
        !v["screen"]["text"].as_str().unwrap().contains("stty"),
        "{v}"
    );
    // `eof` on a terminal is Ctrl-D: bash exits 0.
    d.ok(
        "c",
        "process",
        json!({"op": "write", "id": id, "data": "", "eof": true}),
    );
    let v = wait_for("bash to exit", Duration::from_secs(10), || {
        let v = d.ok("c", "process", json!({"op": "read", "id": id}));
        (v["state"] == "exited").then_some(v)
    });
    assert_eq!(v["exit_code"], 0, "{v}");
}

#[test]
fn resize_needs_a_terminal() {
    let d = TestDaemon::start("");
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "sleep 30"}),
    );
    let id = started["id"].as_str().unwrap();
    let e = match d.call(
        "c",
        "process",
        json!({"op": "resize", "id": id, "cols": 100, "rows": 30}),
    ) {
        toolvisor_protocol::wire::Outcome::Err(e) => e,
        other => panic!("resize of a pipe process: {other:?}"),
    };
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("pty"), "{e}");
    // A process without a terminal has no screen.
    let v = d.ok("c", "process", json!({"op": "read", "id": id}));
    assert!(v["screen"].is_null(), "{v}");
}
