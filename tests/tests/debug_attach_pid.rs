//! `attach {pid}` to programs already running in the workdir: a Python loop through debugpy
//! (its adapter injects itself with gdb) and a C loop through lldb-dap. Breakpoints set
//! before the attach stop the program, evaluate reads its state, and `terminate` detaches:
//! the program keeps running. A process outside the workdir, the daemon itself, a pid and a
//! port at once, and a kernel that forbids ptrace (`[testing] ptrace_scope` = 3) are refused,
//! each naming why.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::debug::{
    Started, dbg, dbg_err, debug_config, gcc, require_debugpy, require_lldb_dap, stopped_at,
};
use toolvisor_tests::lsp::project;

const PY: &str = "import time\n\ndef tick(i):\n    doubled = i * 2\n    return doubled\n\ni = 0\nwhile True:\n    i += 1\n    tick(i)\n    time.sleep(0.05)\n";

#[test]
fn a_running_python_program_is_attached_by_pid_stops_at_a_breakpoint_and_keeps_running_after() {
    let python = require_debugpy();
    let p = project(&[("loop.py", PY)]);
    let w = p.path();
    let mut prog = Started::spawn(Command::new(&python).arg("loop.py"), w);
    let pid = prog.0.id();
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "loop.py", "lines": [5]}),
    );
    let attached = dbg(&d, w, json!({"op": "attach", "pid": pid}));
    assert_eq!(attached["state"], "stopped", "{attached}");
    assert_eq!(stopped_at(&attached), ("loop.py".into(), 5), "{attached}");
    assert_eq!(attached["session"]["adapter"], "debugpy", "{attached}");
    assert_eq!(attached["session"]["pid"], pid, "{attached}");
    let i: i64 = dbg(&d, w, json!({"op": "evaluate", "expression": "i"}))["result"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let doubled = dbg(&d, w, json!({"op": "evaluate", "expression": "doubled"}));
    assert_eq!(doubled["result"], (i * 2).to_string(), "{doubled}");
    let again = dbg_err(&d, w, json!({"op": "attach", "pid": pid}));
    assert_eq!(again.kind, ErrorKind::Busy, "{again:?}");
    let ended = dbg(&d, w, json!({"op": "terminate"}));
    assert_eq!(ended["terminated"], true, "{ended}");
    assert!(
        ended["session"]["ended"]["message"]
            .as_str()
            .unwrap()
            .contains("keeps running"),
        "{ended}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(prog.running(), "the detached program must keep running");
}

const C: &str = r#"#include <unistd.h>

volatile long counter = 0;

void step(long n) {
    counter = n * 3;
}

int main(void) {
    for (long n = 1;; n++) {
        step(n);
        usleep(20000);
    }
}
"#;

#[test]
fn a_running_native_program_is_attached_by_pid_through_lldb_and_detached_alive() {
    require_lldb_dap();
    let p = project(&[]);
    let w = p.path();
    let exe = gcc(w, "spin", C);
    let mut prog = Started::spawn(&mut Command::new(&exe), w);
    let pid = prog.0.id();
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "spin.c", "lines": [6]}),
    );
    let attached = dbg(&d, w, json!({"op": "attach", "pid": pid}));
    assert_eq!(attached["session"]["adapter"], "lldb", "{attached}");
    assert_eq!(attached["state"], "stopped", "{attached}");
    assert_eq!(stopped_at(&attached), ("spin.c".into(), 6), "{attached}");
    let n: i64 = dbg(&d, w, json!({"op": "evaluate", "expression": "n"}))["result"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n >= 1, "n = {n}");
    let ended = dbg(&d, w, json!({"op": "terminate"}));
    assert_eq!(ended["terminated"], true, "{ended}");
    std::thread::sleep(Duration::from_millis(500));
    assert!(prog.running(), "the detached program must keep running");
    // Still counting, so not left stopped either.
    let before = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = before
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert!(state == "S" || state == "R", "state {state}: {before}");
}

#[test]
fn attach_by_pid_is_refused_outside_the_boundary_naming_why() {
    let p = project(&[]);
    let w = p.path();
    let elsewhere = tempfile::tempdir().unwrap();
    let mut outside = Started::spawn(Command::new("sleep").arg("60"), elsewhere.path());
    let scope = tempfile::tempdir().unwrap();
    let scope_file = scope.path().join("ptrace_scope");
    std::fs::write(&scope_file, "3\n").unwrap();
    let d = TestDaemon::start(&format!(
        "{}\n[testing]\nptrace_scope = {:?}\n",
        debug_config(""),
        scope_file.display().to_string()
    ));
    let e = dbg_err(&d, w, json!({"op": "attach", "pid": outside.0.id()}));
    assert_eq!(e.kind, ErrorKind::OutOfScope, "{e:?}");
    assert!(e.message.contains("outside the workdir"), "{e:?}");
    let e = dbg_err(&d, w, json!({"op": "attach", "pid": d.pid()}));
    assert_eq!(e.kind, ErrorKind::PolicyDenied, "{e:?}");
    let e = dbg_err(&d, w, json!({"op": "attach", "pid": 1, "port": 5678}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e:?}");
    assert!(e.message.contains("not both"), "{e:?}");
    let mut inside = Started::spawn(Command::new("sleep").arg("60"), w);
    let e = dbg_err(&d, w, json!({"op": "attach", "pid": inside.0.id()}));
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e:?}");
    assert!(e.message.contains("ptrace_scope is 3"), "{e:?}");
    // Nothing was started, and both processes run on.
    let status = dbg(&d, w, json!({"op": "status"}));
    assert!(status["session"].is_null(), "{status}");
    assert!(outside.running() && inside.running());
}
