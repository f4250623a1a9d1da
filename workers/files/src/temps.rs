//! Temp files left in the user's tree by a daemon killed mid-write, removed by the next one.
//! An atomic write makes `.{name}.toolvisor-{pid}-{seq}.tmp` beside its target and renames it
//! over the target; a SIGKILL between the two leaves the temp file. Before a daemon makes its
//! first temp file in a directory, it appends that directory to its own record
//! `<state_dir>/temps/<pid>.dirs` (0600, fsynced): one write per directory per daemon run, not
//! per write. At start a daemon reads the records of daemons that are no longer alive (a
//! record of a live process is left alone: a concurrent daemon sharing the state directory)
//! and removes, in each recorded directory, exactly the regular files of our uid named
//! `.*.toolvisor-<that pid>-<digits>.tmp`; then the record. Nothing else is ever removed.
//!
//! This covers the user's tree, where `write::write_atomic` notes every directory it writes in (so
//! `write`, `edit`, `apply_patch`, `lsp_rename`, `lsp_edit`, `resolve accept` and the rollbacks at
//! start are all covered; a noted directory costs one set lookup afterwards). The daemon's private
//! directories are swept by each store at open (`kit::private::remove_stale_temps`). The sweep
//! checks each candidate without following a link, and runs before anything writes.

use std::collections::HashSet;
use std::io::Write as _;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

struct TempLog {
    dir: PathBuf,
    /// This daemon's record, opened at the first write, and the directories already in it.
    own: Mutex<(Option<std::fs::File>, HashSet<PathBuf>)>,
}

static LOG: OnceLock<TempLog> = OnceLock::new();

/// The name of a new temp file for the file `name`, unique in this process:
/// `.{name}.toolvisor-{pid}-{seq}.tmp` (`toolvisor_kit::private::temp_name`, the one form of
/// every temp file the daemon makes), the form [`open`]'s sweep recognizes.
pub fn temp_name(name: &std::ffi::OsStr) -> String {
    toolvisor_kit::private::temp_name(name)
}

/// Open the temp log in `dir` (`<state_dir>/temps`, created 0700), remove the leftovers of
/// every dead daemon recorded there, and record this daemon's directories from now on.
/// Returns how many leftovers were removed. Call at start, before any write.
pub fn open(dir: &Path) -> std::io::Result<usize> {
    crate::private_dir(dir, "the temp-file log directory")?;
    let uid = std::fs::metadata(dir)?.uid();
    let removed = sweep(dir, uid);
    let _ = LOG.set(TempLog {
        dir: dir.to_path_buf(),
        own: Mutex::new((None, HashSet::new())),
    });
    Ok(removed)
}

/// Record `dir` (a real path) as holding this daemon's temp files, once per run. Without an
/// open log (unit tests, tools outside the daemon) this does nothing. A failure is logged
/// and the write goes on: a leftover is a smaller harm than a refused write.
pub fn note(dir: &Path) {
    let Some(log) = LOG.get() else {
        return;
    };
    let mut own = log.own.lock().unwrap_or_else(|p| p.into_inner());
    if own.1.contains(dir) {
        return;
    }
    let result = (|| -> std::io::Result<()> {
        if own.0.is_none() {
            let path = log.dir.join(format!("{}.dirs", std::process::id()));
            let f = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .custom_flags(OFlags::NOFOLLOW.bits() as i32)
                .mode(0o600)
                .open(&path)?;
            std::fs::File::open(&log.dir)?.sync_all()?;
            own.0 = Some(f);
        }
        let f = own.0.as_mut().expect("opened above");
        let mut line = hex(dir.as_os_str().as_bytes());
        line.push('\n');
        f.write_all(line.as_bytes())?;
        f.sync_data()
    })();
    match result {
        Ok(()) => {
            own.1.insert(dir.to_path_buf());
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot record a directory of temp files; should the daemon be killed mid-write there, its temp file stays")
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn sweep(dir: &Path, uid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".dirs"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        // Our own pid here is a dead daemon's (ours has written nothing yet); another live
        // process may be a daemon sharing this state directory.
        if pid != me && toolvisor_kit::process::alive(pid) {
            continue;
        }
        let record = entry.path();
        let text = std::fs::read_to_string(&record).unwrap_or_default();
        for line in text.lines() {
            let Some(bytes) = unhex(line.trim()) else {
                continue;
            };
            let d = PathBuf::from(std::ffi::OsString::from_vec(bytes));
            removed += sweep_dir(&d, pid, uid);
        }
        if let Err(e) = std::fs::remove_file(&record) {
            tracing::error!(record = %record.display(), error = %e, "cannot remove a swept temp record");
        }
    }
    removed
}

/// Whether `name` is a temp file of daemon `pid`: `.*.toolvisor-<pid>-<digits>.tmp`.
fn ours(name: &[u8], pid: u32) -> bool {
    toolvisor_kit::private::temp_pid(name) == Some(pid)
}

fn sweep_dir(dir: &Path, pid: u32, uid: u32) -> usize {
    // The directory was a real path when recorded; one swapped for a link since is not ours
    // to clean.
    let Ok(fd) = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return 0;
    };
    let Ok(listing) = rustix::fs::Dir::read_from(&fd) else {
        return 0;
    };
    let names: Vec<Vec<u8>> = listing
        .flatten()
        .map(|e| e.file_name().to_bytes().to_vec())
        .filter(|n| ours(n, pid))
        .collect();
    let mut removed = 0;
    for name in names {
        let os = std::ffi::OsStr::from_bytes(&name);
        let Ok(st) = rustix::fs::statat(&fd, os, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_uid != uid {
            continue;
        }
        match rustix::fs::unlinkat(&fd, os, AtFlags::empty()) {
            Ok(()) => {
                removed += 1;
                tracing::warn!(dir = %dir.display(), file = %os.to_string_lossy(), pid, "removed a temp file left by a daemon killed mid-write");
            }
            Err(e) => {
                tracing::error!(dir = %dir.display(), file = %os.to_string_lossy(), error = %e, "cannot remove a temp file left by a killed daemon")
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_one_daemon_only() {
        assert!(ours(b".a.txt.toolvisor-42-0.tmp", 42));
        assert!(ours(b"..x.toolvisor-42-17.tmp", 42));
        assert!(!ours(b".a.txt.toolvisor-142-0.tmp", 42));
        assert!(!ours(b".a.txt.toolvisor-42-0.tmp", 4));
        assert!(!ours(b"a.txt.toolvisor-42-0.tmp", 42));
        assert!(!ours(b".a.txt.toolvisor-42-.tmp", 42));
        assert!(!ours(b".a.txt.toolvisor-42-0.tmpx", 42));
        assert!(!ours(b".a.txt.toolvisor-42-x0.tmp", 42));
        assert_eq!(unhex(&hex(b"/a/b\n")).unwrap(), b"/a/b\n");
        let made = temp_name(std::ffi::OsStr::new("a.rs"));
        assert!(ours(made.as_bytes(), std::process::id()), "{made}");
    }
}
