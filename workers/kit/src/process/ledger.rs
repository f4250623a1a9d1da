//! On-disk ledger of spawned process groups, so the next daemon can kill what one killed too hard to clean up left behind.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::sys::signal::Signal;

use super::kill::{signal_group, signal_pid};
use super::procfs::{descendants, read_stat, start_time};

/// A directory holding one record file per live spawned process group.
///
/// Record `<dir>/<pgid>` holds `<pid> <start time> <owner pid> <owner start time>`: the group
/// leader (the shim), its start time (field 22 of `/proc/<pid>/stat`) and the same pair for
/// the daemon that wrote it. The waiter thread removes the record once the leader is reaped.
///
/// Use one ledger directory per daemon instance (e.g. next to its socket) and sweep it only
/// after taking the daemon's single-instance lock.
#[derive(Clone, Debug)]
pub struct Ledger {
    dir: PathBuf,
}

/// A parsed record file.
#[derive(Debug, PartialEq, Eq)]
struct Record {
    pid: u32,
    start_time: u64,
    owner: Option<(u32, u64)>,
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
        Some(Record {
            pid,
            start_time,
            owner,
        })
    }
}

/// This process's pid and start time, which identify it as a record's owner.
fn this_process() -> (u32, u64) {
    static START: OnceLock<u64> = OnceLock::new();
    let pid = std::process::id();
    (pid, *START.get_or_init(|| start_time(pid).unwrap_or(0)))
}

impl Ledger {
    /// Opens (creating it with mode 0700 if needed) the ledger directory `dir`.
    pub fn open(dir: &Path) -> io::Result<Ledger> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        Ok(Ledger {
            dir: dir.to_path_buf(),
        })
    }

    /// The ledger directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The record file for process group `pgid`.
    pub fn record_path(&self, pgid: u32) -> PathBuf {
        self.dir.join(pgid.to_string())
    }

    /// Writes the record for group `pgid` led by `pid` (atomically: temp file + rename).
    pub(crate) fn record(&self, pgid: u32, pid: u32) -> io::Result<PathBuf> {
        let start = start_time(pid).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("process {pid} vanished before it was recorded"),
            )
        })?;
        let (owner, owner_start) = this_process();
        let path = self.record_path(pgid);
        let temp = self.dir.join(format!(".{pgid}.tmp"));
        fs::write(&temp, format!("{pid} {start} {owner} {owner_start}\n"))?;
        fs::rename(&temp, &path)?;
        Ok(path)
    }

    /// Kills (SIGCONT, then SIGKILL) every recorded group whose leader is still alive with the
    /// recorded start time, plus the leader's descendants that left the group; removes every
    /// record; returns how many groups were killed.
    ///
    /// Records written by another daemon that is still running are left alone. Records whose
    /// leader is gone, or whose pid now belongs to another process (start time differs), are
    /// just removed.
    pub fn sweep(&self) -> usize {
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
            let record = fs::read_to_string(&path)
                .ok()
                .and_then(|text| Record::parse(&text));
            if let Some(record) = &record {
                if let Some((owner, owner_start)) = record.owner
                    && owner != me
                    && start_time(owner) == Some(owner_start)
                {
                    continue;
                }
                if sweep_group(pgid, record) {
                    killed += 1;
                    tracing::info!(
                        pgid,
                        pid = record.pid,
                        "killed a process group left by a previous daemon"
                    );
                }
            }
            if let Err(error) = fs::remove_file(&path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(record = %path.display(), %error, "cannot remove spawn ledger record");
            }
        }
        killed
    }
}

/// Kills group `pgid` if its recorded leader is still the recorded process.
fn sweep_group(pgid: u32, record: &Record) -> bool {
    let Some(stat) = read_stat(record.pid) else {
        return false;
    };
    if stat.start_time != record.start_time {
        return false;
    }
    let strays = descendants(record.pid);
    let _ = signal_group(pgid, Signal::SIGCONT);
    let killed = signal_group(pgid, Signal::SIGKILL).is_ok();
    for pid in strays {
        let _ = signal_pid(pid, Signal::SIGCONT);
        let _ = signal_pid(pid, Signal::SIGKILL);
    }
    killed
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
                owner: Some((6, 78))
            })
        );
        assert_eq!(
            Record::parse("12 345"),
            Some(Record {
                pid: 12,
                start_time: 345,
                owner: None
            })
        );
        assert_eq!(Record::parse("12"), None);
        assert_eq!(Record::parse("x 1"), None);
    }
}
