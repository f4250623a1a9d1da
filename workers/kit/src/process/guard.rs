//! `ProcessGuard`: owns one spawned child, reaps it on its own waiter thread and tears its whole tree down on drop.
//!
//! The guard lives in its owner's state: a resource actor's state (one child OS process per actor),
//! or the calling task for a short-lived child. ractor skips `post_stop` when an actor is killed or
//! panics but drops its state either way, so the tree dies with the actor however it ends. The
//! spawner registers each child as owned under the spawn lock before the lock is released, and the
//! waiter reaps and unregisters it under the same lock, so the orphan reaper never takes a child
//! being spawned for an orphan and a reused pid is never confused with an old one. The ledger
//! record is removed only after the child is reaped and, when it died by a signal (a shim that
//! exits tears its own tree down), after the orphans it left are killed and reaped. No signal ever
//! goes to pid 0, 1 or a negative pid (`kill.rs`).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{Id, WaitPidFlag, waitid, waitpid};
use nix::unistd::Pid;
use tokio::sync::watch;

use super::ExitStatus;
use super::kill::{signal_group, signal_pid};
use super::procfs::descendants;

/// How long a shimmed child gets to tear its own tree down after SIGTERM before the group is
/// SIGKILLed; also how long an unshimmed child is waited for before a second SIGKILL round.
const GRACE: Duration = Duration::from_secs(1);

/// Stack size of the waiter and teardown threads: they only make syscalls and log.
const SMALL_STACK: usize = 128 * 1024;

/// What the guard, the waiter thread and the teardown thread share.
struct Shared {
    pid: u32,
    pgid: u32,
    shimmed: bool,
    label: String,
    /// Held while signalling and while reaping: a pid is only signalled while it is known
    /// not to be reaped, so a recycled pid is never hit.
    state: Mutex<State>,
    exited: Condvar,
}

#[derive(Default)]
struct State {
    exit: Option<ExitStatus>,
    terminating: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Owns one child process (the shim when shimmed) and, through it, the child's whole tree.
///
/// Dropping the guard (or calling [`ProcessGuard::terminate`]) tears the tree down; a waiter
/// thread reaps the direct child, so no zombie is left either way. When the direct child
/// exits on its own, whatever is left in its process group is SIGKILLed just before it is
/// reaped (the shim, for its part, kills its whole tree before exiting). Not `Clone`: exactly one
/// owner decides when the tree dies.
pub struct ProcessGuard {
    shared: Arc<Shared>,
    main_pid: u32,
}

impl ProcessGuard {
    /// Takes ownership of the just-forked child `pid` (leader of its own process group) and
    /// starts its waiter thread. `ledger_record` is removed once the child is reaped.
    ///
    /// If the waiter thread cannot start, the child is killed and reaped here and the error
    /// is returned.
    pub(crate) fn adopt(
        pid: u32,
        shimmed: bool,
        label: String,
        ledger_record: Option<PathBuf>,
        scratch: Option<PathBuf>,
    ) -> io::Result<(ProcessGuard, watch::Receiver<Option<ExitStatus>>)> {
        let shared = Arc::new(Shared {
            pid,
            pgid: pid,
            shimmed,
            label,
            state: Mutex::new(State::default()),
            exited: Condvar::new(),
        });
        let (exit_tx, exit_rx) = watch::channel(None);
        super::orphans::register(pid);
        let for_waiter = Arc::clone(&shared);
        let started = thread::Builder::new()
            .name(format!("tv-wait-{pid}"))
            .stack_size(SMALL_STACK)
            .spawn({
                let record = ledger_record.clone();
                let scratch = scratch.clone();
                move || wait_for_exit(&for_waiter, &exit_tx, record.as_ref(), scratch.as_deref())
            });
        if let Err(error) = started {
            let _ = signal_group(pid, Signal::SIGKILL);
            reap(pid);
            super::orphans::unregister(pid);
            if let Some(record) = ledger_record {
                let _ = std::fs::remove_file(record);
            }
            if let Some(dir) = scratch {
                super::scratch::remove(&dir, &shared.label);
            }
            return Err(error);
        }
        Ok((
            ProcessGuard {
                shared,
                main_pid: pid,
            },
            exit_rx,
        ))
    }

    pub(crate) fn set_main_pid(&mut self, pid: u32) {
        self.main_pid = pid;
    }

    /// The direct child: the shim when shimmed, else the program itself.
    pub fn pid(&self) -> u32 {
        self.shared.pid
    }

    /// The real program's pid (equal to [`ProcessGuard::pid`] without a shim).
    pub fn main_pid(&self) -> u32 {
        self.main_pid
    }

    /// The process group the direct child leads (equal to [`ProcessGuard::pid`]).
    pub fn pgid(&self) -> u32 {
        self.shared.pgid
    }

    /// The label given in the spawn spec, for logs.
    pub fn label(&self) -> &str {
        &self.shared.label
    }

    /// Sends `sig` to the real program only (not the shim, not the group), e.g. SIGINT to
    /// interrupt a kernel. Fails with `ESRCH` once the direct child has been reaped.
    pub fn signal_main(&self, sig: Signal) -> io::Result<()> {
        let state = self.shared.lock();
        if state.exit.is_some() {
            return Err(io::Error::from_raw_os_error(Errno::ESRCH as i32));
        }
        signal_pid(self.main_pid, sig).map_err(io::Error::from)
    }

    /// Whether the direct child has exited and been reaped.
    pub fn has_exited(&self) -> bool {
        self.shared.lock().exit.is_some()
    }

    /// The direct child's exit status, once reaped.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.shared.lock().exit
    }

    /// Starts tearing the whole tree down now; what `Drop` does. Idempotent, returns at once.
    ///
    /// Shimmed: SIGTERM to the shim (which kills its tree and exits) and SIGCONT to the group
    /// (a stopped shim cannot act); if the shim has not been reaped within about a second, the
    /// group and every descendant found in `/proc` get SIGKILL. Unshimmed: descendants found
    /// in `/proc` and the group get SIGKILL at once. The slow parts run on a detached thread.
    pub fn terminate(&self) {
        let shared = &self.shared;
        {
            let mut state = shared.lock();
            if state.exit.is_some() || state.terminating {
                return;
            }
            state.terminating = true;
            if shared.shimmed {
                let _ = signal_pid(shared.pid, Signal::SIGTERM);
                let _ = signal_group(shared.pgid, Signal::SIGCONT);
            }
        }
        tracing::debug!(label = %shared.label, pid = shared.pid, "terminating process tree");
        let for_thread = Arc::clone(shared);
        let started = thread::Builder::new()
            .name(format!("tv-kill-{}", shared.pid))
            .stack_size(SMALL_STACK)
            .spawn(move || finish_teardown(&for_thread));
        if started.is_err() {
            kill_tree(shared);
        }
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        self.terminate();
    }
}

impl fmt::Debug for ProcessGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcessGuard")
            .field("label", &self.shared.label)
            .field("pid", &self.shared.pid)
            .field("main_pid", &self.main_pid)
            .field("shimmed", &self.shared.shimmed)
            .finish_non_exhaustive()
    }
}

/// The waiter thread: blocks until `shared.pid` exits, reaps exactly that pid, publishes.
fn wait_for_exit(
    shared: &Shared,
    exit_tx: &watch::Sender<Option<ExitStatus>>,
    ledger_record: Option<&PathBuf>,
    scratch: Option<&std::path::Path>,
) {
    let Ok(raw) = i32::try_from(shared.pid) else {
        return;
    };
    // Wait without reaping first: the pid stays ours (a zombie) until we reap it under the
    // lock, so `terminate` can never signal a recycled pid.
    while waitid(
        Id::Pid(Pid::from_raw(raw)),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
    ) == Err(Errno::EINTR)
    {}
    let status = {
        let mut state = shared.lock();
        // The zombie leader still holds the group id: whatever is left in its group (the
        // program's background jobs, or the program itself if the shim was SIGKILLed) dies now.
        let _ = signal_group(shared.pgid, Signal::SIGKILL);
        // Reaped and forgotten under the spawn lock: no new child can get this pid in between.
        let status = {
            let _spawning = super::orphans::spawn_lock();
            let status = reap(shared.pid);
            super::orphans::unregister(shared.pid);
            status
        };
        state.exit = Some(status);
        status
    };
    shared.exited.notify_all();
    // Escapees of this tree (a `setsid` grandchild of a shim killed from outside) came back
    // to the daemon when the shim died: gone before the record is, and the record gone
    // before the exit is reported. A child that exited (rather than died by a signal) tore
    // its own tree down, so only a signal death is worth the scan on this path; the orphan
    // thread covers everything else.
    if status.signal.is_some() {
        super::orphans::reap_orphans();
    }
    // The tree is gone: its temporary files go with it.
    if let Some(dir) = scratch {
        super::scratch::remove(dir, &shared.label);
    }
    if let Some(record) = ledger_record
        && let Err(error) = std::fs::remove_file(record)
        && error.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(label = %shared.label, record = %record.display(), %error, "cannot remove spawn ledger record");
    }
    // Published before the log line: nothing that can fail stands between a reaped child and
    // the callers waiting for its exit.
    exit_tx.send_replace(Some(status));
    tracing::debug!(label = %shared.label, pid = shared.pid, %status, "child reaped");
}

/// Blocking `waitpid` on exactly `pid`, retried on EINTR.
fn reap(pid: u32) -> ExitStatus {
    let Ok(raw) = i32::try_from(pid) else {
        return ExitStatus::UNKNOWN;
    };
    loop {
        match waitpid(Pid::from_raw(raw), None) {
            Ok(status) => {
                if let Some(status) = ExitStatus::from_wait(status) {
                    return status;
                }
            }
            Err(Errno::EINTR) => {}
            Err(_) => return ExitStatus::UNKNOWN,
        }
    }
}

/// The detached part of `terminate`.
fn finish_teardown(shared: &Shared) {
    if !shared.shimmed {
        kill_tree(shared);
    }
    let deadline = Instant::now() + GRACE;
    let mut state = shared.lock();
    while state.exit.is_none() {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            break;
        };
        state = match shared.exited.wait_timeout(state, left) {
            Ok((state, _)) => state,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
    let reaped = state.exit.is_some();
    drop(state);
    if !reaped {
        tracing::warn!(label = %shared.label, pid = shared.pid, "process tree still alive after {GRACE:?}; sending SIGKILL");
        kill_tree(shared);
    }
}

/// SIGKILL to the group and to every live descendant (some may have left the group).
fn kill_tree(shared: &Shared) {
    if shared.lock().exit.is_some() {
        return;
    }
    // Found before the kill: once their parents die they are reparented and untraceable.
    let strays = descendants(shared.pid);
    let state = shared.lock();
    if state.exit.is_some() {
        return;
    }
    let _ = signal_group(shared.pgid, Signal::SIGKILL);
    drop(state);
    for pid in strays {
        let _ = signal_pid(pid, Signal::SIGKILL);
    }
}
