//! SIGINT reaches the real program, both through `signal_main` and when sent to the shim, which forwards it.

#[path = "support/kit.rs"]
mod kit;

use kit::{python3, read_line, spec, wait_exit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::BufReader;
use toolvisor_kit::process::{ProcessGuard, Spawned, spawn};

const INTERRUPTIBLE: &str = r#"
import sys, time
try:
    # Inside the try: SIGINT may land while "ready" is still being written.
    print("ready", flush=True)
    # Short naps: a SIGINT landing between print and a long sleep would only be noticed
    # when that sleep ends (CPython checks signals between bytecodes).
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(7)
"#;

async fn interrupt(shimmed: bool, send: impl FnOnce(&ProcessGuard)) {
    let Spawned {
        guard,
        stdout,
        mut exit,
        ..
    } = spawn(spec(&python3(), &["-c", INTERRUPTIBLE], shimmed))
        .await
        .expect("spawn python3");
    let mut stdout = BufReader::new(stdout);
    assert_eq!(read_line(&mut stdout, "python3 to be ready").await, "ready");
    send(&guard);
    assert_eq!(
        read_line(&mut stdout, "python3 to catch KeyboardInterrupt").await,
        "interrupted"
    );
    let status = wait_exit(&mut exit, "interrupted python3").await;
    assert_eq!(status.code, Some(7), "{status}");
    assert!(
        guard.signal_main(Signal::SIGINT).is_err(),
        "no signal after reaping"
    );
}

#[tokio::test]
async fn signal_main_interrupts_a_direct_child() {
    interrupt(false, |guard| {
        guard.signal_main(Signal::SIGINT).expect("SIGINT");
    })
    .await;
}

#[tokio::test]
async fn signal_main_interrupts_a_shimmed_program() {
    interrupt(true, |guard| {
        guard.signal_main(Signal::SIGINT).expect("SIGINT");
    })
    .await;
}

#[tokio::test]
async fn the_shim_forwards_sigint_to_the_program() {
    interrupt(true, |guard| {
        kill(Pid::from_raw(guard.pid() as i32), Signal::SIGINT).expect("SIGINT to the shim");
    })
    .await;
}
