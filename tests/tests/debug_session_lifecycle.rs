//! How debug sessions end and begin: a second `launch` is refused naming the running session;
//! a session past its hard TTL is terminated and the next call says it expired; a SIGKILLed
//! adapter ends the session with a clear error (its program dies with it) and a new launch
//! works; fake adapters that die or hang during the handshake give clear errors, not hangs.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::debug::{dbg, dbg_err, debug_config, require_debugpy, stopped_at, wait_state};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, alive, wait_for};

const PROG: &str = "x = 1\ny = x + 1\nprint('y', y)\n";

fn pids(v: &serde_json::Value) -> (u32, u32) {
    (
        v["session"]["adapter_pid"].as_u64().unwrap() as u32,
        v["session"]["debuggee_pid"].as_u64().unwrap() as u32,
    )
}

#[test]
fn a_second_launch_is_refused_naming_the_running_session() {
    require_debugpy();
    let p = project(&[("prog.py", PROG), ("other.py", PROG)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));
    let first = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let id = first["session"]["id"].as_str().unwrap().to_string();
    let e = dbg_err(&d, w, json!({"op": "launch", "program": "other.py"}));
    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
    assert!(
        e.message.contains(&id) && e.message.contains("prog.py"),
        "{e}"
    );
    assert!(e.hint.contains("terminate"), "{e}");
    // The first session is untouched.
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["id"], id.as_str());
    assert_eq!(status["session"]["state"], "stopped", "{status}");
    dbg(&d, w, json!({"op": "terminate"}));
    let second = dbg(&d, w, json!({"op": "launch", "program": "other.py"}));
    assert_ne!(second["session"]["id"], id.as_str());
}

#[test]
fn a_session_past_its_hard_ttl_is_terminated_and_the_next_call_says_it_expired() {
    require_debugpy();
    let p = project(&[("prog.py", PROG)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config("session_ttl_s = 2"));
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let (adapter, debuggee) = pids(&launched);
    let status = wait_state(&d, w, "expired");
    assert!(
        status["session"]["ended"]["message"]
            .as_str()
            .unwrap()
            .contains("hard TTL of 2 s"),
        "{status}"
    );
    let e = dbg_err(&d, w, json!({"op": "stack"}));
    assert_eq!(e.kind, ErrorKind::Expired, "{e}");
    assert!(e.message.contains("expired"), "{e}");
    wait_for(
        "the expired session's processes to be gone",
        Duration::from_secs(15),
        || (!alive(adapter) && !alive(debuggee)).then_some(()),
    );
    assert!(d.log_text().contains("debug session TTL expired"));
    // A new session starts as usual.
    let again = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(again["state"], "stopped", "{again}");
}

#[test]
fn a_sigkilled_adapter_ends_the_session_clearly_and_a_new_launch_works() {
    require_debugpy();
    let p = project(&[("prog.py", PROG)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [2]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let (adapter, debuggee) = pids(&launched);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(adapter as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let e = dbg_err(&d, w, json!({"op": "stack"}));
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    assert!(e.message.contains("debug adapter debugpy"), "{e}");
    assert!(e.message.contains("killed by signal 9"), "{e}");
    assert!(e.hint.contains("launch again"), "{e}");
    wait_for(
        "the debuggee to die with its adapter",
        Duration::from_secs(15),
        || (!alive(debuggee)).then_some(()),
    );
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["state"], "crashed", "{status}");
    let again = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(stopped_at(&again), ("prog.py".into(), 2), "{again}");
    let (adapter2, _) = pids(&again);
    assert_ne!(adapter2, adapter);
}

fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn fake_adapters_that_die_or_hang_in_the_handshake_give_clear_errors() {
    let p = project(&[("prog.fake", "")]);
    let w = p.path();
    let dying = script(
        w,
        "dying-adapter",
        "#!/bin/sh\necho 'fatal: ptrace is not permitted here' >&2\nexit 3\n",
    );
    let hanging = script(w, "hanging-adapter", "#!/bin/sh\nexec sleep 600\n");
    let config = debug_config(&format!(
        "start_timeout_s = 2\nrequest_timeout_s = 2\n\
         [debug.adapters.dying]\ncommands = [[{dying:?}]]\nmarkers = []\nextensions = [\"fake\"]\n\
         [debug.adapters.hanging]\ncommands = [[{hanging:?}]]\nmarkers = []\n"
    ));
    let d = TestDaemon::start(&config);
    let e = dbg_err(&d, w, json!({"op": "launch", "program": "prog.fake"}));
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    assert!(e.message.contains("exit code 3"), "{e}");
    assert!(
        e.message.contains("fatal: ptrace is not permitted here"),
        "{e}"
    );

    let e = dbg_err(
        &d,
        w,
        json!({"op": "launch", "program": "prog.fake", "adapter": "hanging"}),
    );
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert!(e.message.contains("`initialize`"), "{e}");
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["state"], "failed", "{status}");
    // Nothing of the hung adapter is left.
    let out = std::process::Command::new("pgrep")
        .args(["-f", &hanging])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).trim().is_empty(),
        "hanging adapter left behind"
    );
}

#[test]
fn a_killed_daemon_leaves_no_adapter_and_no_program_behind() {
    require_debugpy();
    let p = project(&[("prog.py", PROG)]);
    let w = p.path();
    let mut d = TestDaemon::start(&debug_config(""));
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let (adapter, debuggee) = pids(&launched);
    d.kill_hard();
    wait_for(
        "the adapter and the program to die with the daemon",
        Duration::from_secs(15),
        || (!alive(adapter) && !alive(debuggee)).then_some(()),
    );
}
