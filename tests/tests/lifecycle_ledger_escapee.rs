//! The ledger-sweep window, closed: a process that left its shim's group and tree when that
//! shim was killed from outside, in the instant before the daemon itself was SIGKILLed (before
//! the orphan reaper could see it), is killed by the next daemon by the mark of the
//! incarnation that started it.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use toolvisor_tests::{TestDaemon, alive, wait_for};

/// The parent pid (field 4 of `/proc/<pid>/stat`).
fn ppid(pid: u32) -> u32 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    text.rsplit_once(')')
        .expect("comm")
        .1
        .split_ascii_whitespace()
        .nth(1)
        .expect("ppid")
        .parse()
        .expect("numeric ppid")
}

/// The state letter and the process group (fields 3 and 5 of `/proc/<pid>/stat`).
fn state_and_group(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = text.rsplit_once(')')?.1.split_ascii_whitespace().collect();
    Some((rest[0].chars().next()?, rest[2].parse().ok()?))
}

/// Every thread of `pid` is stopped (`T`): SIGSTOP has taken effect, not merely been sent.
fn all_threads_stopped(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks.flatten().all(|t| {
            std::fs::read_to_string(t.path().join("stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
            })
        })
    })
}

/// The executable name (`/proc/<pid>/comm`).
fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn an_escapee_of_a_shim_killed_just_before_the_daemon_dies_with_the_next_sweep() {
    // The escapees come to this test instead of pid 1, so it can tell them from strangers.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let mut d = TestDaemon::start("");
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "(setsid sleep 300 & echo $!); exec sleep 301"}),
    );
    let id = started["id"].clone();
    let program = started["pid"].as_u64().unwrap() as u32;
    let escapee: u32 = wait_for(
        "the escapee's pid in the output",
        Duration::from_secs(10),
        || {
            let v = d.ok("c", "process", json!({"op": "read", "id": id, "offset": 0}));
            v["text"].as_str().and_then(|t| t.trim().parse().ok())
        },
    );
    let shim = ppid(program);
    // The subshell that started it exits just after its `echo`: then the shim subreaps it.
    wait_for(
        "the escapee to be the shim's (subreaped) child",
        Duration::from_secs(10),
        || (ppid(escapee) == shim).then_some(()),
    );
    let daemon = d.pid();
    // The escapee has left the shim's group (setsid ran) and runs `sleep` (exec done), and the
    // program has exec'd too: a loaded machine can be slower than the output.
    wait_for(
        "setsid and both execs to be done",
        Duration::from_secs(10),
        || {
            let left = state_and_group(escapee).is_some_and(|(_, g)| g != shim);
            (left && comm(escapee) == "sleep" && comm(program) == "sleep").then_some(())
        },
    );

    // Stopped, the daemon runs none of its code: neither the waiter that kills the shim's
    // group nor the orphan reaper sees the shim die before the daemon does. (SIGSTOP is
    // asynchronous: wait until every thread of it is stopped.)
    kill(Pid::from_raw(daemon as i32), Signal::SIGSTOP).unwrap();
    wait_for(
        "every thread of the daemon to stop",
        Duration::from_secs(10),
        || all_threads_stopped(daemon).then_some(()),
    );
    kill(Pid::from_raw(shim as i32), Signal::SIGKILL).unwrap();
    wait_for(
        "the shim's children to go to the daemon",
        Duration::from_secs(10),
        || (ppid(escapee) == daemon).then_some(()),
    );
    d.kill_hard();
    wait_for(
        "the daemon's orphans to come to the test",
        Duration::from_secs(10),
        || (ppid(escapee) != daemon).then_some(()),
    );
    // The program died with its shim (its death signal); the escapee, in a session of its
    // own and no longer below any shim, outlived them and the daemon.
    wait_for(
        "the program to die with its shim",
        Duration::from_secs(10),
        || (!alive(program)).then_some(()),
    );
    assert!(alive(escapee), "the escapee outlived the daemon");

    d.spawn("");
    wait_for(
        "the next daemon's sweep to kill the escapee",
        Duration::from_secs(10),
        || (!alive(escapee)).then_some(()),
    );
    let log = d.log_text();
    assert!(
        log.contains("killed a process left by a previous daemon"),
        "{log}"
    );
}
