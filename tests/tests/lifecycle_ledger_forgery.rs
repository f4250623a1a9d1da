//! The spawn ledger is honoured only for processes provably ours: a forged record naming an
//! unrelated live process (with its true start time) kills nothing, while a real leftover of
//! a SIGKILLed daemon (its shim stopped, so it could not clean up) is still swept.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use toolvisor_tests::{TestDaemon, alive, wait_for};

/// Field 22 (start time) and field 4 (parent pid) of `/proc/<pid>/stat`.
fn stat(pid: u32) -> (u64, u32, char) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest: Vec<&str> = text
        .rsplit_once(')')
        .expect("comm")
        .1
        .split_ascii_whitespace()
        .collect();
    let state = rest[0].chars().next().expect("state");
    (
        rest[19].parse().expect("start time"),
        rest[1].parse().expect("ppid"),
        state,
    )
}

/// A `sleep` of ours that no daemon started, killed on drop.
struct Bystander(Child);

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_forged_ledger_record_kills_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let victim = Bystander(
        Command::new("sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let pid = victim.0.id();
    let (start, _, _) = stat(pid);
    let ledger = dir.path().join("toolvisor.sock.ledger");
    std::fs::create_dir(&ledger).unwrap();
    std::fs::set_permissions(&ledger, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Exactly what the old sweep trusted: the pid, its true start time, a dead owner, and a
    // token the process does not carry.
    std::fs::write(
        ledger.join(pid.to_string()),
        format!("{pid} {start} 999999 1 00112233445566778899aabbccddeeff\n"),
    )
    .unwrap();
    let d = TestDaemon::start_in(dir, "");
    assert!(
        alive(pid),
        "the daemon killed an unrelated process named by a forged record"
    );
    assert!(
        !ledger.join(pid.to_string()).exists(),
        "the forged record is removed"
    );
    let log = d.log_text();
    assert!(log.contains("spawn ledger record not honoured"), "{log}");
    assert!(log.contains("does not carry the record's token"), "{log}");
}

#[test]
fn a_real_leftover_of_a_killed_daemon_is_still_swept() {
    // Adopt the daemon's orphans: otherwise the kernel sends SIGHUP and SIGCONT to the stopped
    // shim's group as soon as it is orphaned, and the shim cleans up by itself. Adopted by a
    // process of the same session, the group stays stopped: a leftover only the ledger finds.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let mut d = TestDaemon::start("");
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300"}),
    );
    let program = started["pid"].as_u64().unwrap() as u32;
    let (_, shim, _) = stat(program);
    // A stopped shim cannot act on its death signal: the program outlives the daemon.
    kill(Pid::from_raw(shim as i32), Signal::SIGSTOP).unwrap();
    wait_for("the shim to stop", Duration::from_secs(10), || {
        (stat(shim).2 == 'T').then_some(())
    });
    d.kill_hard();
    assert!(
        alive(program),
        "the stopped shim's program outlives the daemon"
    );
    d.spawn("");
    wait_for(
        "the next daemon's sweep to kill the leftover program",
        Duration::from_secs(10),
        || (!alive(program)).then_some(()),
    );
    wait_for("the swept shim to die", Duration::from_secs(10), || {
        (!alive(shim)).then_some(())
    });
    assert!(
        d.log_text()
            .contains("killed a process group left by a previous daemon"),
        "{}",
        d.log_text()
    );
}
