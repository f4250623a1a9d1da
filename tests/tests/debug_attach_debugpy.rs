//! `attach {port}` to a program started as `python -m debugpy --listen PORT
//! --wait-for-client prog.py`: breakpoints set before the attach stop it, evaluate and
//! continue work, the program's output arrives, and its end ends the session.

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::debug::{Started, dbg, debug_config, require_debugpy, stopped_at};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, wait_for};

/// Whether a TCP socket listens on 127.0.0.1:`port` (from /proc/net/tcp, state 0A).
fn listening(port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).any(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        cols.get(1) == Some(&local.as_str()) && cols.get(3) == Some(&"0A")
    })
}

#[test]
fn attach_to_a_waiting_debugpy_server_stops_at_a_breakpoint() {
    let python = require_debugpy();
    let p = project(&[("prog.py", "a = 20\nb = a + 1\nprint('b is', b * 2)\n")]);
    let w = p.path();
    // A free port: bind, read, release (the server binds it again at once).
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Started::spawn(
        Command::new(&python).args([
            "-m",
            "debugpy",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--wait-for-client",
            "prog.py",
        ]),
        w,
    );
    // Not by connecting: the server takes exactly one client.
    wait_for(
        "the debugpy server to listen",
        Duration::from_secs(30),
        || listening(port).then_some(()),
    );
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [2]}),
    );
    let attached = dbg(&d, w, json!({"op": "attach", "port": port}));
    assert_eq!(attached["state"], "stopped", "{attached}");
    assert_eq!(stopped_at(&attached), ("prog.py".into(), 2), "{attached}");
    assert_eq!(attached["session"]["port"], port, "{attached}");
    assert_eq!(
        attached["session"]["debuggee_pid"].as_u64(),
        Some(u64::from(server.0.id())),
        "{attached}"
    );
    assert_eq!(
        dbg(&d, w, json!({"op": "evaluate", "expression": "a * 2"}))["result"],
        "40"
    );
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    let output = dbg(&d, w, json!({"op": "output"}));
    assert!(
        output["text"].as_str().unwrap().contains("b is 42"),
        "{output}"
    );
    let status = wait_for(
        "the attached program to exit",
        Duration::from_secs(30),
        || server.0.try_wait().unwrap(),
    );
    assert!(status.success());
}
