//! A shim whose parent is SIGKILLed (as a daemon would be) kills its program: no child outlives the daemon.

#[path = "support/kit.rs"]
mod kit;

use kit::{Seen, comm, shim, spec, wait_exit, wait_until_async};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use toolvisor_kit::process::{Spawned, descendants, spawn};

/// `sh` stands in for the daemon: it starts the shim as its child (not `exec`: the trailing
/// `echo` keeps sh alive as the parent) and tells it who its parent is.
const FAKE_DAEMON: &str =
    r#"TOOLVISOR_SHIM_PARENT=$$ "$0" __shim sleep 300; echo "shim returned $?""#;

#[tokio::test]
async fn sigkilled_parent_of_the_shim_leaves_no_child_alive() {
    let shim_path = shim();
    let shim_arg = shim_path.to_str().expect("utf-8 shim path");
    let Spawned {
        guard: daemon,
        mut exit,
        ..
    } = spawn(spec("sh", &["-c", FAKE_DAEMON, shim_arg], false))
        .await
        .expect("spawn the fake daemon");
    let daemon_pid = daemon.pid();
    wait_until_async("sleep to run under the shim", || {
        descendants(daemon_pid)
            .iter()
            .any(|&pid| comm(pid).as_deref() == Some("sleep"))
    })
    .await;
    let tree: Vec<Seen> = descendants(daemon_pid).into_iter().map(Seen::now).collect();
    assert!(
        tree.len() >= 2,
        "shim and sleep under the fake daemon: {tree:?}"
    );

    kill(Pid::from_raw(daemon_pid as i32), Signal::SIGKILL).expect("SIGKILL the fake daemon");
    let status = wait_exit(&mut exit, "the SIGKILLed fake daemon").await;
    assert_eq!(status.signal, Some(9));
    // The guard of the fake daemon saw it exit and does nothing more: only the shim's death
    // signal can have killed the sleep.
    wait_until_async("the shim and its sleep to die with their parent", || {
        tree.iter().all(Seen::is_dead)
    })
    .await;
    drop(daemon);
}

/// The parent died before the shim could set its death signal: the shim notices through
/// `TOOLVISOR_SHIM_PARENT` and never starts the program.
#[tokio::test]
async fn shim_whose_parent_is_already_gone_does_not_start_the_program() {
    let mut orphan = spec("sh", &[], false);
    orphan.program = shim().to_str().expect("utf-8").to_owned();
    orphan.args = vec!["__shim".into(), "sleep".into(), "300".into()];
    // Claim a parent that is certainly not the real one (pid 2 is kthreadd or absent).
    orphan
        .env
        .push(("TOOLVISOR_SHIM_PARENT".into(), "2".into()));
    let Spawned {
        guard,
        stderr,
        mut exit,
        ..
    } = spawn(orphan).await.expect("spawn the shim by hand");
    let status = wait_exit(&mut exit, "the orphaned shim").await;
    assert_eq!(status.code, Some(143), "{status}");
    assert_eq!(kit::read_to_string(stderr, "shim stderr").await, "");
    drop(guard);
}
