//! `write`, and the atomic write every write-tier tool uses: a temp file in the same
//! directory, fsynced, given the old file's mode, then renamed over the target.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::paths::{Access, Scope};
use crate::{ChangeKind, Changed};

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Replace (or create) `path` with `bytes` atomically: readers see the old content or the
/// new, never a mix. An existing file keeps its permission bits; a new one gets 0666 less
/// the umask. `display` names the file in errors.
pub fn write_atomic(path: &Path, bytes: &[u8], display: &str) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::bad("path", "has no parent directory"))?;
    let name = path
        .file_name()
        .ok_or_else(|| Error::bad("path", "names no file"))?
        .to_string_lossy();
    let old_mode = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(Error::IsDir {
                path: display.to_string(),
            });
        }
        Ok(m) => Some(m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::io(display, "stat", e)),
    };
    if old_mode.is_some() {
        // Renaming over a read-only file would bypass its permissions: refuse as open would.
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(display, "open for writing", e))?;
    }
    let tmp = dir.join(format!(
        ".{name}.toolvisor-{}-{}.tmp",
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&tmp)?;
        if let Some(mode) = old_mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(display, "write", e));
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
    let display = resolved.display;
    let previous_bytes = match std::fs::metadata(&resolved.real) {
        Ok(m) if m.is_dir() => return Err(Error::IsDir { path: display }),
        Ok(m) => Some(m.len()),
        Err(_) => None,
    };
    if let Some(parent) = resolved.real.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::io(&display, "create the parent directory", e))?;
    }
    write_atomic(&resolved.real, content.as_bytes(), &display)?;
    let lines = memchr::memchr_iter(b'\n', content.as_bytes()).count() as u64
        + u64::from(!content.is_empty() && !content.ends_with('\n'));
    Ok(WriteResult {
        changed: Changed {
            path: resolved.real,
            display,
            status: if previous_bytes.is_some() {
                ChangeKind::Modified
            } else {
                ChangeKind::Created
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
        assert_eq!(r.changed.status, ChangeKind::Modified);
        assert_eq!((r.bytes, r.lines, r.previous_bytes), (18, 2, Some(3)));
        let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o751);
        let r = write(&s, "a/b/c.txt", "x").unwrap();
        assert_eq!(r.changed.status, ChangeKind::Created);
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
