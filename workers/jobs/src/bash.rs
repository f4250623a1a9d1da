//! `bash`: run one command line to completion in the run's workdir, with a wall-clock limit,
//! output streamed as it comes and captured head-and-tail within a bound.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{self, SpawnError};
use toolvisor_protocol::results::BashResult;
use toolvisor_protocol::wire::Stream;

use crate::output::{HeadTail, Utf8Stream};

/// One `bash` invocation.
#[derive(Clone, Debug)]
pub struct BashRequest {
    pub command: String,
    pub cwd: PathBuf,
    pub timeout: Duration,
    /// Bytes kept per stream (head and tail halves).
    pub max_output: usize,
}

/// The shell used for command lines: bash where installed, else POSIX sh.
pub fn shell() -> &'static str {
    if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    }
}

/// Run the command. Output chunks are also sent to `events` as they arrive. Dropping the
/// future kills the command's whole process tree (the guard's `Drop`).
///
/// # Cancel safety
/// Cancelling loses the output but leaves nothing running.
pub async fn run(
    launcher: &Launcher,
    req: BashRequest,
    events: Option<mpsc::Sender<(Stream, String)>>,
) -> Result<BashResult, SpawnError> {
    let started = Instant::now();
    let spec = launcher.spec(
        shell(),
        &["-c".to_string(), req.command.clone()],
        &req.cwd,
        false,
        "bash",
    );
    let spawned = process::spawn(spec).await?;
    let guard = spawned.guard;
    let mut exit = spawned.exit;
    let out_task = tokio::spawn(pump(
        spawned.stdout,
        Stream::Stdout,
        req.max_output,
        events.clone(),
    ));
    let err_task = tokio::spawn(pump(spawned.stderr, Stream::Stderr, req.max_output, events));

    let timed_out = tokio::time::timeout(req.timeout, async {
        let _ = exit.wait_for(|s| s.is_some()).await;
    })
    .await
    .is_err();
    if timed_out {
        tracing::info!(
            pid = guard.pid(),
            timeout_s = req.timeout.as_secs(),
            "bash command timed out; killing its process tree"
        );
        guard.terminate();
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            let _ = exit.wait_for(|s| s.is_some()).await;
        })
        .await;
    }
    let mut status = *exit.borrow();
    // The shim answers our SIGTERM by SIGKILLing the command's whole tree and exiting 143;
    // a timed-out command did not exit 143 by itself: it was killed (signal 9), say so.
    if timed_out && status.is_some_and(|s| s.code == Some(process::SHIM_TERMINATED)) {
        status = Some(process::ExitStatus {
            code: None,
            signal: Some(9), // SIGKILL
        });
    }
    // The pipes close once the whole tree is gone; bound the wait in case something that
    // escaped still holds them.
    let collect = |task: tokio::task::JoinHandle<HeadTail>| async move {
        match tokio::time::timeout(Duration::from_secs(2), task).await {
            Ok(Ok(capture)) => capture,
            _ => HeadTail::new(0),
        }
    };
    let (stdout, stderr) = (collect(out_task).await, collect(err_task).await);
    drop(guard);
    Ok(BashResult {
        stdout: stdout.text(),
        stderr: stderr.text(),
        exit_code: status.and_then(|s| s.code),
        signal: status.and_then(|s| s.signal),
        wall_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        timed_out,
        truncated: stdout.truncated() || stderr.truncated(),
        stdout_bytes: stdout.total(),
        stderr_bytes: stderr.total(),
        note: None,
    })
}

async fn pump(
    mut rx: tokio::net::unix::pipe::Receiver,
    stream: Stream,
    cap: usize,
    events: Option<mpsc::Sender<(Stream, String)>>,
) -> HeadTail {
    let mut capture = HeadTail::new(cap);
    let mut text = Utf8Stream::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                capture.push(&buf[..n]);
                if let Some(tx) = &events {
                    let chunk = text.push(&buf[..n]);
                    if !chunk.is_empty() {
                        let _ = tx.send((stream, chunk)).await;
                    }
                }
            }
        }
    }
    if let Some(tx) = &events {
        let rest = text.finish();
        if !rest.is_empty() {
            let _ = tx.send((stream, rest)).await;
        }
    }
    capture
}
