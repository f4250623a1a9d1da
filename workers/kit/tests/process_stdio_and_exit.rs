//! A spawned child hands back stdout, stderr and stdin, and an exit status that tells codes from signals, with and without the shim.

#[path = "support/kit.rs"]
mod kit;

use kit::{read_to_string, spec, wait_exit};
use tokio::io::AsyncWriteExt;
use toolvisor_kit::process::{ExitStatus, Spawned, spawn};

async fn echo_and_exit_3(shimmed: bool) {
    let Spawned {
        guard,
        stdin,
        stdout,
        stderr,
        mut exit,
    } = spawn(spec(
        "sh",
        &["-c", "echo hi; echo err >&2; exit 3"],
        shimmed,
    ))
    .await
    .expect("spawn sh");
    assert!(stdin.is_none(), "stdin is /dev/null unless asked for");
    assert_eq!(
        guard.pgid(),
        guard.pid(),
        "the direct child leads its group"
    );
    if shimmed {
        assert_ne!(
            guard.main_pid(),
            guard.pid(),
            "main_pid is the program, pid the shim"
        );
    } else {
        assert_eq!(guard.main_pid(), guard.pid());
    }
    let (out, err) = tokio::join!(
        read_to_string(stdout, "stdout of sh"),
        read_to_string(stderr, "stderr of sh")
    );
    assert_eq!(out, "hi\n");
    assert_eq!(err, "err\n");
    let status = wait_exit(&mut exit, "sh").await;
    assert_eq!(
        status,
        ExitStatus {
            code: Some(3),
            signal: None
        }
    );
    assert_eq!(status.to_string(), "exit code 3");
    assert!(guard.has_exited());
    assert_eq!(guard.exit_status(), Some(status));
}

#[tokio::test]
async fn direct_child_reports_output_and_exit_code() {
    echo_and_exit_3(false).await;
}

#[tokio::test]
async fn shimmed_child_reports_output_and_exit_code() {
    echo_and_exit_3(true).await;
}

async fn killed_by(signal: &str, number: i32, shimmed: bool) {
    let script = format!("kill -{signal} $$");
    let mut spawned = spawn(spec("sh", &["-c", &script], shimmed))
        .await
        .expect("spawn sh");
    let status = wait_exit(&mut spawned.exit, "self-killing sh").await;
    assert_eq!(
        status,
        ExitStatus {
            code: None,
            signal: Some(number)
        },
        "{signal}, shimmed: {shimmed}"
    );
    assert_eq!(
        status.to_string(),
        format!("killed by signal {number} (SIG{signal})")
    );
    assert!(!status.success());
}

#[tokio::test]
async fn death_by_signal_is_reported_as_such() {
    for shimmed in [false, true] {
        killed_by("KILL", 9, shimmed).await;
        // The shim blocks SIGTERM for itself; it must still re-raise it faithfully.
        killed_by("TERM", 15, shimmed).await;
        killed_by("INT", 2, shimmed).await;
    }
}

#[tokio::test]
async fn piped_stdin_reaches_the_program() {
    for shimmed in [false, true] {
        let mut with_stdin = spec("cat", &[], shimmed);
        with_stdin.stdin = true;
        let Spawned {
            stdin,
            stdout,
            mut exit,
            guard: _guard,
            ..
        } = spawn(with_stdin).await.expect("spawn cat");
        let mut stdin = stdin.expect("stdin was asked for");
        stdin.write_all(b"ping\n").await.expect("write to cat");
        drop(stdin);
        assert_eq!(read_to_string(stdout, "stdout of cat").await, "ping\n");
        assert!(wait_exit(&mut exit, "cat").await.success());
    }
}
