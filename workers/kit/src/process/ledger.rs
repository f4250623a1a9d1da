//! On-disk ledger of spawned process groups, so the next daemon can kill what one killed too hard to clean up left behind.
//!
//! The ledger is `<socket>.ledger/`: one 0600 record per live process group (its leader's start
//! time, the owning daemon and its random token) and one `incarnation-<mark>` record per daemon.
//! The next daemon on the same socket sweeps it once it holds the socket lock; the records of
//! another daemon that still runs are left alone. A record is honoured only if its file is a
//! regular file of ours (opened `O_NOFOLLOW`) and the process it names leads its group, has the
//! recorded start time, runs as our uid and carries the record's token (`TOOLVISOR_LEDGER_TOKEN`,
//! put in every recorded child's environment by the spawner, stripped by the shim before the
//! program runs) in `/proc/<pid>/environ`; never on a pid and a start time alone. Only that group
//! and its descendants are killed.
//!
//! What left its group and its tree before the daemon died (reparented to pid 1 when its shim was
//! SIGKILLed in the instant before the daemon, before the orphan reaper saw it) is found by the
//! mark of the incarnation that started it: every daemon writes `incarnation-<mark>` (pid, start
//! time, a random 128-bit mark) at open, every process it starts carries `TOOLVISOR_LEDGER_MARK`
//! (kept by the shim, so descendants inherit it), and the sweep kills every live process of our uid
//! whose environment holds a dead incarnation's mark, with its descendants, then removes that
//! record. A mark proves only "started below that daemon"; the token stays the proof that a
//! record's leader is ours. Reading a shim's environment works because the daemon is non-dumpable
//! but its children are not (`supervisor/src/main.rs`).

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use nix::libc;
use nix::sys::signal::Signal;
use nix::unistd::geteuid;

use super::kill::{signal_group, signal_pid};
use super::procfs::{
    all_stats, descendants_in, environ_has, environ_holds, group_members_in, read_stat, start_time,
    uids,
};
use crate::private::{PrivateError, ensure_private_dir};

/// Environment variable carrying the daemon's ledger token to every recorded child (the shim
/// strips it before it runs the program). The sweep honours a record only if the process it
/// names carries the record's token in `/proc/<pid>/environ`.
pub const LEDGER_TOKEN_ENV: &str = "TOOLVISOR_LEDGER_TOKEN";

/// Environment variable carrying the daemon incarnation's *mark* to every process it starts,
/// program included (the shim keeps it), and so to their descendants unless one clears its
/// environment. A later sweep kills every live process of ours that carries the mark of a
/// dead incarnation: the one proof that survives a process leaving its group and its tree
/// (reparented to pid 1 when its shim and then the daemon died before the daemon's orphan
/// reaper saw it). It grants nothing but that: a process carrying it can only make itself a
/// target of the next sweep.
pub const LEDGER_MARK_ENV: &str = "TOOLVISOR_LEDGER_MARK";

/// Prefix of the file naming one daemon incarnation and its mark:
/// `<dir>/incarnation-<mark>` holds `<pid> <start time> <mark>`.
const INCARNATION_PREFIX: &str = "incarnation-";

/// A directory holding one record file per live spawned process group.
///
/// Record `<dir>/<pgid>` holds `<pid> <start time> <owner pid> <owner start time> <token>`:
/// the group leader (the shim), its start time (field 22 of `/proc/<pid>/stat`), the same pair
/// for the daemon that wrote it, and that daemon's random token, which the leader also carries
/// in its environment ([`LEDGER_TOKEN_ENV`]). The waiter thread removes the record once the
/// leader is reaped.
///
/// Use one ledger directory per daemon instance (e.g. next to its socket) and sweep it only
/// after taking the daemon's single-instance lock.
#[derive(Clone, Debug)]
pub struct Ledger {
    dir: PathBuf,
    token: Arc<str>,
    mark: Arc<str>,
}

/// A parsed record file.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    pid: u32,
    start_time: u64,
    owner: Option<(u32, u64)>,
    token: Option<String>,
}

impl Record {
    fn parse(text: &str) -> Option<Record> {
        let mut words = text.split_ascii_whitespace();
        let pid = words.next()?.parse().ok()?;
        let start_time = words.next()?.parse().ok()?;
        let owner = match (words.next(), words.next()) {
            (Some(owner), Some(start)) => Some((owner.parse().ok()?, start.parse().ok()?)),
            _ => None,
        };
        let token = words.next().map(str::to_owned);
        Some(Record {
            pid,
            start_time,
            owner,
            token,
        })
    }
}

/// This process's pid and start time, which identify it as a record's owner.
pub(super) fn this_process() -> (u32, u64) {
    static START: OnceLock<u64> = OnceLock::new();
    let pid = std::process::id();
    (pid, *START.get_or_init(|| start_time(pid).unwrap_or(0)))
}

/// 128 random bits from the kernel, in hex: not guessable by another user.
fn new_token() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Ledger {
    /// Opens the ledger directory `dir`, creating it with mode 0700 if needed; an existing
    /// one must be private (ours, a real directory, not writable by others). Makes this
    /// ledger's random token and mark, and records the mark (`incarnation-<mark>`) before any
    /// process can carry it.
    pub fn open(dir: &Path) -> Result<Ledger, PrivateError> {
        ensure_private_dir(dir, "the spawn ledger")?;
        let random = |what: &'static str| {
            new_token().map_err(|source| PrivateError::Io {
                action: "read",
                what,
                path: PathBuf::from("/dev/urandom"),
                source,
            })
        };
        let token = random("the random source for the ledger token")?;
        let mark = random("the random source for the ledger mark")?;
        let (pid, start) = this_process();
        let path = dir.join(format!("{INCARNATION_PREFIX}{mark}"));
        // Not fsynced, like the records: it only has to outlive this daemon.
        crate::private::write_private_file(
            &path,
            format!("{pid} {start} {mark}\n").as_bytes(),
            "the spawn ledger's incarnation record",
            crate::private::Durability::Unsynced,
        )?;
        Ok(Ledger {
            dir: dir.to_path_buf(),
            token: token.into(),
            mark: mark.into(),
        })
    }

    /// The ledger directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This ledger's token, which every recorded child carries in [`LEDGER_TOKEN_ENV`].
    pub fn token(&self) -> &str {
        &self.token
    }

    /// This daemon incarnation's mark, which every process it starts carries in
    /// [`LEDGER_MARK_ENV`] (see there).
    pub fn mark(&self) -> &str {
        &self.mark
    }

    /// The record file for process group `pgid`.
    pub fn record_path(&self, pgid: u32) -> PathBuf {
        self.dir.join(pgid.to_string())
    }

    /// Writes the record for group `pgid` led by `pid` (atomically, through
    /// [`crate::private::write_private_file`]).
    pub(crate) fn record(&self, pgid: u32, pid: u32) -> io::Result<PathBuf> {
        let start = start_time(pid).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {pid} vanished before it was recorded"),
            )
        })?;
        let (owner, owner_start) = this_process();
        let path = self.record_path(pgid);
        // Not fsynced: the record only has to outlive this daemon, not the machine (a power
        // loss ends its processes too).
        crate::private::write_private_file(
            &path,
            format!("{pid} {start} {owner} {owner_start} {}\n", self.token).as_bytes(),
            "a spawn ledger record",
            crate::private::Durability::Unsynced,
        )
        .map_err(io::Error::other)?;
        Ok(path)
    }

    /// Kills (SIGCONT, then SIGKILL) every recorded group whose leader provably is the process
    /// a daemon of ours started, plus the leader's descendants that left the group, then every
    /// other live process of ours carrying the mark of a dead incarnation (and its
    /// descendants); removes every record; returns how many groups, plus how many processes
    /// the mark led to (each counted once, its descendants included), were killed.
    ///
    /// A record is honoured only if its file is a regular file owned by us (not a symlink), it
    /// names its group's leader, and that leader still has the recorded start time, runs as
    /// our uid, and carries the record's token in its environment. Anything else is logged and
    /// removed, never acted on: a pid and a start time alone prove nothing. Records written by
    /// another daemon that is still running are left alone.
    pub fn sweep(&self) -> usize {
        crate::private::remove_stale_temps(&self.dir);
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let (me, _) = this_process();
        let mut killed = 0;
        for entry in entries.flatten() {
            let Some(pgid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
            else {
                continue;
            };
            let path = entry.path();
            match read_record(&path)
                .and_then(|text| Record::parse(&text).ok_or_else(|| "it is not a record".into()))
            {
                Ok(record) => {
                    if let Some((owner, owner_start)) = record.owner
                        && owner != me
                        && start_time(owner) == Some(owner_start)
                    {
                        continue;
                    }
                    match verify(pgid, &record) {
                        Ok(true) => {
                            if kill_group(pgid, record.pid) {
                                killed += 1;
                                tracing::info!(
                                    pgid,
                                    pid = record.pid,
                                    "killed a process group left by a previous daemon"
                                );
                            }
                        }
                        Ok(false) => {}
                        Err(why) => tracing::warn!(
                            record = %path.display(), pid = record.pid, why,
                            "spawn ledger record not honoured: it does not prove its process is ours"
                        ),
                    }
                }
                Err(why) => tracing::warn!(
                    record = %path.display(), why,
                    "spawn ledger record not honoured"
                ),
            }
            if let Err(error) = fs::remove_file(&path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(record = %path.display(), %error, "cannot remove spawn ledger record");
            }
        }
        killed + self.sweep_marked()
    }

    /// The second half of [`Ledger::sweep`]: reads the incarnation records of dead daemons
    /// (removing them), then kills every live process of our uid whose environment carries
    /// one of their marks, with its descendants. Returns how many marked processes it killed.
    fn sweep_marked(&self) -> usize {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return 0;
        };
        let (me, _) = this_process();
        let mut marks = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(mark) = name
                .to_str()
                .and_then(|name| name.strip_prefix(INCARNATION_PREFIX))
            else {
                continue;
            };
            if mark == &*self.mark {
                continue;
            }
            let path = entry.path();
            match read_record(&path).and_then(|text| Incarnation::parse(&text, mark)) {
                Ok(incarnation) => {
                    if incarnation.pid != me
                        && start_time(incarnation.pid) == Some(incarnation.start_time)
                    {
                        // A daemon of ours that is still running keeps its mark.
                        continue;
                    }
                    marks.push(format!("{LEDGER_MARK_ENV}={mark}"));
                }
                Err(why) => tracing::warn!(
                    record = %path.display(), why,
                    "spawn ledger incarnation record not honoured"
                ),
            }
            if let Err(error) = fs::remove_file(&path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(record = %path.display(), %error, "cannot remove spawn ledger incarnation record");
            }
        }
        if marks.is_empty() {
            return 0;
        }
        let uid = geteuid().as_raw();
        // Every process signalled, descendants included, counted once.
        let mut killed = std::collections::HashSet::new();
        // Twice: a process caught mid-`execve` shows an empty environment for a moment, and
        // one a marked process forked during the first pass is found by the second.
        for pass in 0..2 {
            if pass > 0 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let stats = all_stats();
            for stat in &stats {
                if stat.is_dead() || stat.pid == me || killed.contains(&stat.pid) {
                    continue;
                }
                if uids(stat.pid) != Some((uid, uid)) {
                    continue;
                }
                let Some(entry) = marks.iter().find(|entry| environ_holds(stat.pid, entry)) else {
                    continue;
                };
                for pid in descendants_in(&stats, stat.pid) {
                    let _ = signal_pid(pid, Signal::SIGCONT);
                    let _ = signal_pid(pid, Signal::SIGKILL);
                    killed.insert(pid);
                }
                let _ = signal_pid(stat.pid, Signal::SIGCONT);
                let _ = signal_pid(stat.pid, Signal::SIGKILL);
                killed.insert(stat.pid);
                tracing::info!(
                    pid = stat.pid,
                    mark = entry.rsplit('=').next().unwrap_or_default(),
                    "killed a process left by a previous daemon (it carries that daemon's mark and outlived its tree)"
                );
            }
        }
        killed.len()
    }
}

/// A parsed incarnation record.
struct Incarnation {
    pid: u32,
    start_time: u64,
}

impl Incarnation {
    /// Parses `<pid> <start time> <mark>`, whose mark must be the one its file is named by.
    fn parse(text: &str, mark: &str) -> Result<Incarnation, String> {
        let mut words = text.split_ascii_whitespace();
        let (Some(pid), Some(start), Some(named)) = (words.next(), words.next(), words.next())
        else {
            return Err("it is not an incarnation record".into());
        };
        if named != mark || mark.len() != 32 || !mark.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err("its mark is not the 128-bit one its name gives".into());
        }
        match (pid.parse(), start.parse()) {
            (Ok(pid), Ok(start_time)) => Ok(Incarnation { pid, start_time }),
            _ => Err("it is not an incarnation record".into()),
        }
    }
}

/// Reads a record file that must be a regular file owned by us, without following a symlink.
fn read_record(path: &Path) -> Result<String, String> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|error| format!("cannot open it without following links: {error}"))?;
    let meta = file
        .metadata()
        .map_err(|error| format!("cannot inspect it: {error}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.uid() != geteuid().as_raw() {
        return Err(format!("it belongs to uid {}, not to us", meta.uid()));
    }
    let mut text = String::new();
    file.take(4096)
        .read_to_string(&mut text)
        .map_err(|error| format!("cannot read it: {error}"))?;
    Ok(text)
}

/// Whether `record` names a live leader of group `pgid` that one of our daemons started:
/// `Ok(false)` when that process is simply gone (or its pid was reused), `Err(why)` when the
/// record claims a process it cannot prove is ours.
fn verify(pgid: u32, record: &Record) -> Result<bool, String> {
    let Some(token) = record.token.as_deref() else {
        return Err("it carries no daemon token".into());
    };
    if record.pid != pgid {
        return Err(format!(
            "it names pid {} as the leader of group {pgid}",
            record.pid
        ));
    }
    let Some(stat) = read_stat(record.pid) else {
        return Ok(false);
    };
    if stat.start_time != record.start_time || stat.is_dead() {
        // Gone, or a zombie waiting for pid 1 (its environment reads empty): what it left
        // alive carries its incarnation's mark and is found by that.
        return Ok(false);
    }
    if stat.pgrp != record.pid {
        return Err(format!(
            "process {} no longer leads its group (group {})",
            record.pid, stat.pgrp
        ));
    }
    let me = geteuid().as_raw();
    match uids(record.pid) {
        Some((real, effective)) if real == me && effective == me => {}
        Some((real, effective)) => {
            return Err(format!(
                "process {} runs as uid {real} (effective {effective}), not as uid {me}",
                record.pid
            ));
        }
        None => return Ok(false),
    }
    if !environ_has(record.pid, LEDGER_TOKEN_ENV, token) {
        return Err(format!(
            "process {} does not carry the record's token in its environment",
            record.pid
        ));
    }
    Ok(true)
}

/// Kills the verified leader `pid`'s group and its descendants that left the group; `true`
/// only when one of them was alive (a group of zombies waiting for pid 1 was not "killed").
fn kill_group(pgid: u32, pid: u32) -> bool {
    let stats = all_stats();
    let strays = descendants_in(&stats, pid);
    let alive = !strays.is_empty() || !group_members_in(&stats, pgid).is_empty();
    let _ = signal_group(pgid, Signal::SIGCONT);
    let _ = signal_group(pgid, Signal::SIGKILL);
    for pid in strays {
        let _ = signal_pid(pid, Signal::SIGCONT);
        let _ = signal_pid(pid, Signal::SIGKILL);
    }
    alive
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records_with_and_without_owner() {
        assert_eq!(
            Record::parse("12 345 6 78\n"),
            Some(Record {
                pid: 12,
                start_time: 345,
                owner: Some((6, 78)),
                token: None,
            })
        );
        assert_eq!(
            Record::parse("12 345 6 78 abc\n"),
            Some(Record {
                pid: 12,
                start_time: 345,
                owner: Some((6, 78)),
                token: Some("abc".into()),
            })
        );
        assert_eq!(
            Record::parse("12 345"),
            Some(Record {
                pid: 12,
                start_time: 345,
                owner: None,
                token: None,
            })
        );
        assert_eq!(Record::parse("12"), None);
        assert_eq!(Record::parse("x 1"), None);
    }
}
