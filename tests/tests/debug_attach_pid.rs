//! `attach {pid}` to programs already running in the workdir: a Python loop through debugpy
//! (its adapter injects itself with gdb) and a C loop through lldb-dap. Breakpoints set
//! before the attach stop the program, evaluate reads its state, and `terminate` detaches:
//! the program keeps running. A host where gdb cannot call into a process (some virtual
//! machines) gets a fast refusal naming why and the way that works instead; a target that
//! exits during the attach is reported as such. A process outside the workdir, the daemon
//! itself, a pid and a port at once, and a kernel that forbids ptrace (`[testing]
//! ptrace_scope` = 3) are refused, each naming why.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::ErrorKind;
use toolvisor_tests::debug::{
    Started, dbg, dbg_err, debug_config, gcc, require_debugpy, require_lldb_dap, stopped_at,
};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, wait_for};

const PY: &str = "import time\n\ndef tick(i):\n    doubled = i * 2\n    return doubled\n\ni = 0\nwhile True:\n    i += 1\n    tick(i)\n    with open('ticks', 'w') as f:\n        f.write(str(i))\n    time.sleep(0.05)\n";

/// The test's own answer to "can gdb call into a process here?", independent of the
/// daemon's probe: gdb attaches to a throwaway `sleep` and calls `getpid()` in it.
fn gdb_can_call_here() -> bool {
    let mut target = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = target.id();
    let out = Command::new("timeout")
        .args(["60", "gdb", "-nx", "-batch", "-p", &pid.to_string()])
        .args(["-ex", "call (int)getpid()"])
        .output()
        .expect("gdb runs (scripts/install-test-deps installs it)");
    let _ = target.kill();
    let _ = target.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().any(|l| l.trim() == format!("$1 = {pid}"))
}

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
    if !gdb_can_call_here() {
        // This host cannot inject: the refusal comes at once, names why and the way that
        // works, starts no session, and leaves the program alone.
        let e = dbg_err(&d, w, json!({"op": "attach", "pid": pid}));
        assert_eq!(e.kind, ErrorKind::NotAvailable, "{e:?}");
        assert!(
            e.message
                .contains("gdb cannot call into a process on this host"),
            "{e:?}"
        );
        assert!(e.hint.contains("debugpy.listen(5678)"), "{e:?}");
        assert!(e.hint.contains("`port: 5678`"), "{e:?}");
        let status = dbg(&d, w, json!({"op": "status"}));
        assert!(status["session"].is_null(), "{status}");
        // Asked again, the same answer (the probe is kept, not run per call).
        let again = dbg_err(&d, w, json!({"op": "attach", "pid": pid}));
        assert_eq!(again.message, e.message);
        ticks_advance(w);
        assert!(prog.running(), "the refused program must keep running");
        return;
    }
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
    ticks_advance(w);
    assert!(prog.running(), "the detached program must keep running");
}

/// Waits until the Python loop writes a higher count to `ticks` than it holds now: it runs.
fn ticks_advance(w: &std::path::Path) {
    let read = || {
        std::fs::read_to_string(w.join("ticks"))
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
    };
    let first = wait_for("the loop's first tick", Duration::from_secs(30), read);
    wait_for("the loop to tick on", Duration::from_secs(30), || {
        read().filter(|n| *n > first)
    });
}

#[test]
fn a_target_that_exits_during_the_attach_is_reported_as_exited() {
    // An adapter that stands for lldb-dap and never answers, but first kills the target
    // (whose pid the test wrote into the workdir): the attach must not wait out the start
    // timeout, and must say that the process exited.
    let p = project(&[]);
    let w = p.path();
    let mut target = Started::spawn(Command::new("sleep").arg("600"), w);
    std::fs::write(w.join("target.pid"), target.0.id().to_string()).unwrap();
    let d = TestDaemon::start(&debug_config(
        "[debug.adapters.lldb]\ncommands = [[\"sh\", \"-c\", \"kill $(cat target.pid); exec sleep 600\"]]\nmarkers = []\nnative = true\n",
    ));
    let e = dbg_err(&d, w, json!({"op": "attach", "pid": target.0.id()}));
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e:?}");
    assert!(
        e.message.contains(&format!(
            "process {} exited during the attach",
            target.0.id()
        )),
        "{e:?}"
    );
    assert!(!target.running());
    // The adapter was stopped with the failed attach: the conversation can start again.
    let status = dbg(&d, w, json!({"op": "status"}));
    assert!(
        status["session"].is_null() || status["session"]["ended"].is_object(),
        "{status}"
    );
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
    // Running again, not left stopped: its state leaves `t` (traced) for sleeping or running.
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let state = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .next()?
            .to_string();
        (state == "S" || state == "R").then_some(state)
    };
    wait_for(
        "the detached program to run",
        Duration::from_secs(30),
        state,
    );
    assert!(prog.running(), "the detached program must keep running");
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
