//! `write`, and the atomic write every write-tier tool uses: a temp file in the target's
//! directory, fsynced, given the old file's mode, then renamed over the target; all of it
//! relative to a handle of that directory opened beneath the workdir.
//!
//! The file tools write only through `write_atomic`: missing parents created beneath the root, a
//! temp file (`O_CREAT | O_EXCL | O_NOFOLLOW`, named by `kit::private::temp_name`) in the target's
//! directory, fsynced, given the old file's mode, then `renameat` over the target, all relative to
//! the parent's handle; the directory is not fsynced. A read-only target is refused, as an open for
//! writing would be; a FIFO, socket or device is refused (`Error::NotRegular`), never opened. The target's directory is noted in the temp log (`crate::temps`) before the
//! temp file exists, so every write to the user's tree is covered by the start-up sweep.
//!
//! The one multi-file writer, built on `write_atomic`, is `journal::write_all`. The daemon's own
//! state files are a different contract, written by `kit::private::write_private_file`; the two
//! share only the temp-file form.
//! `[testing] pause_after_writes` is the crash tests' hook.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use crate::error::{Error, Result};
use crate::paths::{Access, Resolved, Scope};
use crate::{ChangeStatus, Changed};

/// Test hook (`[testing] pause_after_writes`): the write that follows this many atomic writes
/// of the daemon stops for good after its temp file is written and before the rename, so a
/// test can SIGKILL the daemon at that exact point. `u64::MAX`: off (always, outside tests).
static PAUSE_AFTER_WRITES: AtomicU64 = AtomicU64::new(u64::MAX);
static WRITES: AtomicU64 = AtomicU64::new(0);

/// Arm the test hook above: after `n` writes, the next one hangs before its rename.
pub fn pause_after_writes(n: u64) {
    tracing::warn!(
        writes = n,
        "test hook [testing] pause_after_writes is set: a write will hang; never use this outside tests"
    );
    PAUSE_AFTER_WRITES.store(n, Ordering::Relaxed);
}

fn test_pause(target: &Resolved) {
    if WRITES.fetch_add(1, Ordering::Relaxed) >= PAUSE_AFTER_WRITES.load(Ordering::Relaxed) {
        tracing::warn!(path = %target.real.display(), "test hook: pausing this write before its rename, until the daemon is killed");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// Replace (or create) `target` with `bytes` atomically: readers see the old content or the
/// new, never a mix. Missing parent directories are created. An existing file keeps its
/// permission bits; a new one gets 0666 less the umask. Every step (stat, temp file, rename,
/// cleanup) is relative to a handle of the parent directory, opened beneath the root the
/// path lies in, so a directory swapped for a symlink mid-write cannot lead it outside.
pub fn write_atomic(target: &Resolved, bytes: &[u8]) -> Result<()> {
    let display = target.display.as_str();
    let (dir, name) = target.parent(true)?;
    let old_mode = match rustix::fs::statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
            return Err(Error::IsDir {
                path: display.to_string(),
            });
        }
        Ok(st) => {
            // Neither opened nor replaced: a FIFO, socket or device is not a file to write.
            if let Some(kind) = toolvisor_kit::special::kind_of_mode(st.st_mode) {
                return Err(Error::NotRegular {
                    path: display.to_string(),
                    kind,
                });
            }
            Some(st.st_mode & 0o7777)
        }
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => return Err(target.error("stat", e.into())),
    };
    if old_mode.is_some() {
        // Renaming over a read-only file would bypass its permissions: refuse as open would.
        // The real path has no symlink, so one here appeared mid-call: not followed.
        rustix::fs::openat(
            &dir,
            name.as_os_str(),
            OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| target.error("open for writing", e.into()))?;
    }
    // The directory is on record before the temp file exists, so a daemon killed before the
    // rename has its leftover removed by the next one (`temps`).
    if let Some(parent) = target.real.parent() {
        crate::temps::note(parent);
    }
    let tmp = crate::temps::temp_name(name.as_os_str());
    let result = (|| -> std::io::Result<()> {
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        )?;
        let mut f = std::fs::File::from(fd);
        if let Some(mode) = old_mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        test_pause(target);
        // The directory is not fsynced: on ext4 that more than doubled a write's time (5.8
        // to 15 ms), and a crash then leaves the old file or the new, never a torn one.
        Ok(rustix::fs::renameat(
            &dir,
            tmp.as_str(),
            &dir,
            name.as_os_str(),
        )?)
    })();
    if let Err(e) = result {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        return Err(target.error("write", e));
    }
    Ok(())
}

#[derive(Clone, Debug)]
pub struct WriteResult {
    pub changed: Changed,
    pub bytes: u64,
    pub lines: u64,
    /// Bytes of the file before, when it existed.
    pub previous_bytes: Option<u64>,
}

/// `write {path, content}`: creates missing parent directories inside the workdir.
pub fn write(scope: &Scope, path: &str, content: &str) -> Result<WriteResult> {
    let resolved = scope.resolve(path, Access::Write)?;
    let display = resolved.display.clone();
    let previous_bytes = match resolved.metadata() {
        Ok(m) if m.is_dir() => return Err(Error::IsDir { path: display }),
        Ok(m) => Some(m.len()),
        Err(e @ Error::Moved { .. }) => return Err(e),
        Err(_) => None,
    };
    write_atomic(&resolved, content.as_bytes())?;
    let lines = memchr::memchr_iter(b'\n', content.as_bytes()).count() as u64
        + u64::from(!content.is_empty() && !content.ends_with('\n'));
    Ok(WriteResult {
        changed: Changed {
            path: resolved.real.clone(),
            display,
            status: if previous_bytes.is_some() {
                ChangeStatus::Modified
            } else {
                ChangeStatus::Created
            },
        },
        bytes: content.len() as u64,
        lines,
        previous_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_atomically_keeping_mode_and_creating_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let s = Scope::new(dir.path(), &[], false).unwrap();
        let script = dir.path().join("run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o751)).unwrap();
        let r = write(&s, "run.sh", "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(r.changed.status, ChangeStatus::Modified);
        assert_eq!((r.bytes, r.lines, r.previous_bytes), (18, 2, Some(3)));
        let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o751);
        let r = write(&s, "a/b/c.txt", "x").unwrap();
        assert_eq!(r.changed.status, ChangeStatus::Created);
        assert_eq!(r.changed.display, "a/b/c.txt");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "x"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".toolvisor-"))
            .collect();
        assert!(leftovers.is_empty());
        assert!(matches!(
            write(&s, "../escape.txt", "x"),
            Err(Error::Outside { .. })
        ));
        assert!(matches!(write(&s, "a", "x"), Err(Error::IsDir { .. })));
    }

    #[test]
    fn symlinked_files_are_written_through() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("real.txt"), "old").unwrap();
        std::os::unix::fs::symlink("real.txt", dir.path().join("link.txt")).unwrap();
        let s = Scope::new(dir.path(), &[], false).unwrap();
        write(&s, "link.txt", "new").unwrap();
        assert!(
            std::fs::symlink_metadata(dir.path().join("link.txt"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("real.txt")).unwrap(),
            "new"
        );
    }
}
