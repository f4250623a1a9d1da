//! The one process-lifetime thread that forks every child: PR_SET_PDEATHSIG fires when the *thread* that forked exits, so no short-lived thread may fork.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::thread;

use nix::fcntl::OFlag;
use nix::libc;
use nix::unistd::{getpid, pipe2};
use tokio::sync::{oneshot, watch};

use super::child_setup::{
    REPORT_FD, install_report_fd, mark_cloexec_from, reset_signals, set_death_signal,
};
use super::guard::ProcessGuard;
use super::ledger::{LEDGER_MARK_ENV, LEDGER_TOKEN_ENV};
use super::shim::{SHIM_ARG, SHIM_PARENT_ENV, SHIM_REPORT_ENV, describe_exec_error};
use super::{ExitStatus, SpawnError, SpawnSpec};

type Job = Box<dyn FnOnce() + Send>;

/// The spawner thread's queue; the sender lives for the whole process, so the thread does too.
static QUEUE: Mutex<Option<mpsc::Sender<Job>>> = Mutex::new(None);

/// Returns the queue of the spawner thread, starting the thread on first use.
fn queue() -> io::Result<mpsc::Sender<Job>> {
    let mut slot = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(sender) = slot.as_ref() {
        return Ok(sender.clone());
    }
    reserve_report_fd();
    let (sender, jobs) = mpsc::channel::<Job>();
    thread::Builder::new()
        .name("toolvisor-spawner".to_owned())
        .spawn(move || {
            for job in jobs {
                // A panicking job must not end this thread: every child it forked would get
                // its death signal.
                let _ = catch_unwind(AssertUnwindSafe(job));
            }
        })?;
    *slot = Some(sender.clone());
    Ok(sender)
}

/// Keeps fd [`REPORT_FD`] occupied in the daemon (with `/dev/null`) if it is free, so no
/// pipe of a spawn can be created there and then be clobbered when the report pipe is moved
/// to fd 3 in the child.
fn reserve_report_fd() {
    // SAFETY: fcntl on an integer fd touches no memory.
    if unsafe { libc::fcntl(REPORT_FD, libc::F_GETFD) } >= 0 {
        return;
    }
    if let Ok(null) = std::fs::File::open("/dev/null") {
        let fd = OwnedFd::from(null);
        if fd.as_raw_fd() == REPORT_FD {
            // Held for the life of the process on purpose.
            std::mem::forget(fd);
        }
    }
}

/// Runs `job` on the spawner thread and returns its result.
///
/// # Cancel safety
///
/// If this future is dropped, `job` still runs; its result is dropped on the spawner thread
/// (for a fork, that drops the new [`ProcessGuard`], which tears the child down).
pub(crate) async fn run_on_spawner<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let (done, result) = oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = done.send(job());
    });
    queue()?
        .send(job)
        .map_err(|_| io::Error::other("the process spawner thread has stopped"))?;
    result
        .await
        .map_err(|_| io::Error::other("the process spawner thread dropped a spawn request"))
}

/// A forked child, its stdio pipes and (when shimmed) the read end of the shim's report pipe.
pub(crate) struct Forked {
    pub(crate) guard: ProcessGuard,
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: OwnedFd,
    pub(crate) stderr: OwnedFd,
    pub(crate) report: Option<OwnedFd>,
    pub(crate) exit: watch::Receiver<Option<ExitStatus>>,
}

/// Forks and execs the child of `spec` (the shim, or `program` directly). Runs on the spawner
/// thread only.
pub(crate) fn fork_child(
    spec: &SpawnSpec,
    program: &Path,
    scratch: Option<PathBuf>,
) -> Result<Forked, SpawnError> {
    let daemon = getpid().as_raw();
    let report = match spec.shim {
        Some(_) => Some(pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?),
        None => None,
    };
    let mut command = match &spec.shim {
        Some(shim) => {
            let mut command = Command::new(shim);
            command.arg(SHIM_ARG).arg(program);
            command
        }
        None => Command::new(program),
    };
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(key, value)| (key, value)))
        .stdin(if spec.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(ledger) = &spec.ledger {
        // Proof for a later sweep that this process is ours (the shim strips it again), and
        // the incarnation's mark, which the program and its descendants keep.
        command
            .env(LEDGER_TOKEN_ENV, ledger.token())
            .env(LEDGER_MARK_ENV, ledger.mark());
    }
    if spec.shim.is_some() {
        command
            .env(SHIM_PARENT_ENV, daemon.to_string())
            .env(SHIM_REPORT_ENV, REPORT_FD.to_string());
    }
    // The shim turns SIGTERM into a teardown of its tree; a bare program just dies.
    let death_signal = if spec.shim.is_some() {
        libc::SIGTERM
    } else {
        libc::SIGKILL
    };
    let report_writer = report.as_ref().map(|(_, writer)| writer.as_raw_fd());
    // SAFETY: the closure only calls child_setup's async-signal-safe helpers (raw syscalls,
    // no allocation, no locks), as required between fork and exec in a threaded process.
    unsafe {
        command.pre_exec(move || {
            set_death_signal(death_signal, daemon)?;
            reset_signals()?;
            match report_writer {
                Some(fd) => {
                    install_report_fd(fd)?;
                    mark_cloexec_from(REPORT_FD + 1)
                }
                None => mark_cloexec_from(REPORT_FD),
            }
        });
    }
    // Until the guard has registered the child, the orphan reaper must not look.
    let spawning = super::orphans::spawn_lock();
    let mut child = command.spawn().map_err(|error| match &spec.shim {
        Some(shim) => SpawnError::Shim {
            shim: shim.clone(),
            message: error.to_string(),
        },
        None => SpawnError::Exec {
            program: spec.program.clone(),
            message: describe_exec_error(&error),
        },
    })?;
    // Our copy of the write end must go, or a shim that dies unreported would never give EOF.
    let report = report.map(|(reader, _writer)| reader);
    let pid = child.id();

    // Record before the waiter starts: it removes the record after reaping, never before.
    let record = spec
        .ledger
        .as_ref()
        .and_then(|ledger| match ledger.record(pid, pid) {
            Ok(path) => Some(path),
            Err(error) => {
                tracing::warn!(label = %spec.label, pid, %error, "cannot write spawn ledger record");
                None
            }
        });
    let (guard, exit) = ProcessGuard::adopt(
        pid,
        spec.shim.is_some(),
        spec.label.clone(),
        record,
        scratch,
    )?;
    drop(spawning);
    let stdin = child.stdin.take().map(OwnedFd::from);
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(SpawnError::Io(io::Error::other(
            "stdout/stderr pipes missing",
        )));
    };
    // Dropping `Child` neither kills nor waits: the guard's waiter thread reaps.
    drop(child);
    Ok(Forked {
        guard,
        stdin,
        stdout: stdout.into(),
        stderr: stderr.into(),
        report,
        exit,
    })
}
