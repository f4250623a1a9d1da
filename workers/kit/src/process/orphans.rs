//! The daemon as a child subreaper: a process that escaped its shim's tree (a `setsid`
//! grandchild whose shim was SIGKILLed from outside — the OOM killer, a stray `kill -9`) comes
//! back to the daemon instead of pid 1, and is killed and reaped here within a second.
//!
//! Who is an orphan: a child of the daemon that no [`super::ProcessGuard`] owns and that is not
//! in the daemon's own process group. Every child the spawner forks leads its own group and is
//! registered ([`register`]) under [`SPAWN_LOCK`] before the lock is released, and the scan
//! holds the same lock, so a child being spawned is never mistaken for an orphan. Children of
//! `std::process::Command` outside the spawner (short probes) stay in the daemon's group and are
//! left to the code that waits for them.
//!
//! The orphan thread looks every 250 ms (`PERIOD`); it kills an orphan and its tree, then reaps
//! exactly its pid.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::{Pid, getpgrp, getpid};

use super::kill::{signal_group, signal_pid};
use super::procfs::{ProcStat, all_stats, descendants_in, read_stat};

/// Held while the spawner forks and registers a child, and while a scan decides who is an
/// orphan.
pub(crate) static SPAWN_LOCK: Mutex<()> = Mutex::new(());

/// Direct children owned by a guard, by pid.
static OWNED: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// How often the reaper looks for adopted orphans.
const PERIOD: Duration = Duration::from_millis(250);

pub(crate) fn spawn_lock() -> MutexGuard<'static, ()> {
    SPAWN_LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn owned() -> MutexGuard<'static, Option<HashSet<u32>>> {
    OWNED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `pid` is a direct child a guard owns (call under [`SPAWN_LOCK`] when it was just forked).
pub(crate) fn register(pid: u32) {
    owned().get_or_insert_with(HashSet::new).insert(pid);
}

/// Waits (polling, up to `timeout`) until every child a guard owns has been reaped; returns
/// how many are left. A daemon that stops calls it last, so it exits only after the process
/// trees it tore down are gone (a shim's teardown outlives the actor that dropped its guard).
pub fn wait_owned_reaped(timeout: std::time::Duration) -> usize {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = owned().as_ref().map_or(0, HashSet::len);
        if left == 0 || std::time::Instant::now() >= deadline {
            return left;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// `pid` has been reaped by its guard.
pub(crate) fn unregister(pid: u32) {
    if let Some(set) = owned().as_mut() {
        set.remove(&pid);
    }
}

/// Make this process a child subreaper and start the thread that kills and reaps the orphans
/// it adopts. Idempotent; the daemon calls it once at start. Without it, escapees of a dead
/// shim end up under pid 1 (or the nearest other subreaper) and live on.
pub fn adopt_orphans() -> std::io::Result<()> {
    static STARTED: OnceLock<()> = OnceLock::new();
    if STARTED.get().is_some() {
        return Ok(());
    }
    nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)?;
    ADOPTING.store(true, Ordering::Release);
    thread::Builder::new()
        .name("toolvisor-orphans".to_owned())
        .stack_size(128 * 1024)
        .spawn(|| {
            loop {
                thread::sleep(PERIOD);
                reap_orphans();
            }
        })?;
    let _ = STARTED.set(());
    Ok(())
}

/// Set once this process is a subreaper: before that (a library user, a unit test) no child
/// of ours is an orphan of ours to kill.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Kill and reap every adopted orphan now; returns how many were alive when found. Does
/// nothing unless [`adopt_orphans`] was called.
pub fn reap_orphans() -> usize {
    if !ADOPTING.load(Ordering::Acquire) {
        return 0;
    }
    let me = getpid().as_raw() as u32;
    let my_group = getpgrp().as_raw() as u32;
    // Decided under the lock; acted on after it. A pid found here cannot be handed to a new
    // child before we reap it (it is our child or our zombie until then).
    let orphans = {
        let _spawning = spawn_lock();
        let owned = owned();
        children(me)
            .into_iter()
            .filter(|s| s.ppid == me && s.pgrp != my_group)
            .filter(|s| owned.as_ref().is_none_or(|set| !set.contains(&s.pid)))
            .collect::<Vec<ProcStat>>()
    };
    if orphans.is_empty() {
        return 0;
    }
    let stats = all_stats();
    let mut alive = 0;
    for orphan in &orphans {
        if !orphan.is_dead() {
            alive += 1;
            // Its own tree first (they come back to us as it dies, and die too), then it.
            for pid in descendants_in(&stats, orphan.pid) {
                let _ = signal_pid(pid, Signal::SIGKILL);
            }
            if orphan.pgrp == orphan.pid {
                let _ = signal_group(orphan.pid, Signal::SIGKILL);
            }
            let _ = signal_pid(orphan.pid, Signal::SIGKILL);
            tracing::warn!(
                pid = orphan.pid,
                "killed a process that escaped its shim's tree (its shim died without tearing it down)"
            );
        }
        reap(orphan.pid);
    }
    alive
}

/// The children of this process: from `/proc/self/task/*/children` (a few small reads), or
/// from a scan of every process where the kernel lacks those files.
fn children(me: u32) -> Vec<ProcStat> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return all_stats().into_iter().filter(|s| s.ppid == me).collect();
    };
    let mut pids = Vec::new();
    for task in tasks.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => pids.extend(
                text.split_ascii_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // A task that just ended, or a kernel without CONFIG_PROC_CHILDREN.
                if std::path::Path::new(&task.path()).exists() {
                    return all_stats().into_iter().filter(|s| s.ppid == me).collect();
                }
            }
            Err(_) => {}
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids.into_iter().filter_map(read_stat).collect()
}

/// Reap `pid`, a child of ours that was SIGKILLed or is a zombie; gives up after a second
/// (a process in uninterruptible sleep dies later and is reaped by a later scan).
fn reap(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    for _ in 0..100 {
        match waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) => {
                thread::sleep(Duration::from_millis(10));
            }
            Err(Errno::EINTR) => {}
            _ => return,
        }
        if read_stat(pid).is_none() {
            return;
        }
    }
}
