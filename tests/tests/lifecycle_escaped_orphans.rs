//! A shim SIGKILLed from outside (the OOM killer, a stray `kill -9`) left its
//! `setsid` grandchildren running under pid 1 forever. The daemon is a child subreaper now:
//! they come back to it and are killed within a second.

use std::time::Duration;

use serde_json::json;
use toolvisor_tests::{TestDaemon, alive, wait_for};

/// Pids of live processes whose command line is exactly `sleep <arg>`.
fn sleeps(arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let words: Vec<&[u8]> = cmdline
            .split(|b| *b == 0)
            .filter(|w| !w.is_empty())
            .collect();
        if words.len() == 2 && words[0].ends_with(b"sleep") && words[1] == arg.as_bytes() {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            if !zombie {
                found.push(pid);
            }
        }
    }
    found
}

fn ppid(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn setsid_grandchildren_of_a_shim_killed_from_outside_die_with_it() {
    let d = TestDaemon::start("");
    // Distinct arguments, so concurrent tests' sleeps are never counted.
    let (escapee, grandchild) = ("30017.25", "30027.25");
    let started = d.ok(
        "c",
        "process",
        json!({
            "op": "start",
            "command": format!("setsid -f sleep {escapee}; bash -c 'sleep {grandchild} & wait'"),
            "restart": "on_failure",
        }),
    );
    let program = started["pid"].as_u64().unwrap() as u32;
    let before = wait_for("both sleeps to run", Duration::from_secs(10), || {
        let (a, b) = (sleeps(escapee), sleeps(grandchild));
        (a.len() == 1 && b.len() == 1).then(|| (a[0], b[0]))
    });
    let shim = ppid(program);
    assert_ne!(shim, d.pid(), "the program should run under its shim");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Both of the old tree's sleeps die (the restart policy may start new ones: those have
    // other pids).
    wait_for(
        "the killed shim's escapee and grandchild to die",
        Duration::from_secs(10),
        || (!alive(before.0) && !alive(before.1)).then_some(()),
    );
    assert!(alive(d.pid()), "the daemon died");
    // The line is written as the kill is made, and may reach the log file just after.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !d.log_text().contains("escaped its shim") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = d.log_text();
    assert!(
        log.contains("escaped its shim"),
        "the kill of an escapee is not logged within 10 s:\n{log}"
    );
}
