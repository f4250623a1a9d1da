//! `ls`: one directory's entries, sorted by name, hidden ones included, with type and size.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use rustix::fs::{AtFlags, FileType};

use toolvisor_protocol::results::EntryType;

use crate::error::Result;
use crate::paths::{Access, Scope};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name; directories end in `/`.
    pub name: String,
    /// A file, a directory, a symlink (not followed) or other.
    pub kind: EntryType,
    /// Bytes, for files.
    pub size: Option<u64>,
    /// Where a symlink points.
    pub target: Option<String>,
    pub executable: bool,
}

#[derive(Clone, Debug)]
pub struct Listing {
    pub path: String,
    pub entries: Vec<Entry>,
    /// Entries in the directory (`entries` may hold fewer).
    pub total: usize,
    pub truncated: bool,
    /// Entries left out because they are protected (see `protect`); never named, and not
    /// in `total`.
    pub skipped_protected: usize,
}

/// List `path` (default: the workdir), at most `max_entries` entries. The directory is
/// opened beneath the root it lies in, and its entries are looked at relative to that
/// handle. Protected entries (a sensitive collection's folder) are left out, counted.
pub fn ls(scope: &Scope, path: Option<&str>, max_entries: usize) -> Result<Listing> {
    let resolved = scope.resolve(path.unwrap_or("."), Access::Read)?;
    let meta = resolved.metadata()?;
    if !meta.is_dir() {
        let name = resolved
            .real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = entry_of(name, (meta.mode(), meta.len()), None);
        return Ok(Listing {
            path: resolved.display,
            entries: vec![entry],
            total: 1,
            truncated: false,
            skipped_protected: 0,
        });
    }
    let dir = resolved.open()?;
    let list = |e: rustix::io::Errno| resolved.error("list", e.into());
    let mut entries = Vec::new();
    let mut skipped_protected = 0;
    for item in rustix::fs::Dir::read_from(&dir).map_err(list)? {
        let item = item.map_err(list)?;
        let name = item.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let name = std::ffi::OsStr::from_bytes(name);
        if scope.protected().covers(&resolved.real.join(name)) {
            skipped_protected += 1;
            continue;
        }
        let entry = match rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let target = (FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
                    .then(|| rustix::fs::readlinkat(&dir, name, Vec::new()).ok())
                    .flatten()
                    .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned());
                entry_of(
                    name.to_string_lossy().into_owned(),
                    (st.st_mode, st.st_size as u64),
                    target,
                )
            }
            // Gone since it was listed.
            Err(_) => Entry {
                name: name.to_string_lossy().into_owned(),
                kind: EntryType::Other,
                size: None,
                target: None,
                executable: false,
            },
        };
        entries.push(entry);
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let total = entries.len();
    let truncated = total > max_entries;
    entries.truncate(max_entries);
    Ok(Listing {
        path: resolved.display,
        entries,
        total,
        truncated,
        skipped_protected,
    })
}

/// One entry from its `(st_mode, st_size)` (of the entry itself, not what it points to).
fn entry_of(mut name: String, (mode, len): (u32, u64), target: Option<String>) -> Entry {
    let ft = FileType::from_raw_mode(mode);
    let (kind, size, target) = match ft {
        FileType::Symlink => (EntryType::Symlink, None, target),
        FileType::Directory => {
            name.push('/');
            (EntryType::Dir, None, None)
        }
        FileType::RegularFile => (EntryType::File, Some(len), None),
        _ => (EntryType::Other, None, None),
    };
    Entry {
        name,
        kind,
        size,
        target,
        executable: ft == FileType::RegularFile && mode & 0o111 != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    #[test]
    fn lists_sorted_with_hidden_and_kinds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join(".hidden"), "h").unwrap();
        std::fs::write(dir.path().join("b.txt"), "bb").unwrap();
        std::os::unix::fs::symlink("b.txt", dir.path().join("link")).unwrap();
        let s = Scope::new(dir.path(), &[], false).unwrap();
        let l = ls(&s, None, 100).unwrap();
        let names: Vec<_> = l.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, [".hidden", "b.txt", "link", "sub/"]);
        assert_eq!(l.entries[1].size, Some(2));
        assert_eq!(l.entries[2].target.as_deref(), Some("b.txt"));
        let l = ls(&s, Some("."), 2).unwrap();
        assert!(l.truncated && l.total == 4 && l.entries.len() == 2);
        assert!(matches!(
            ls(&s, Some("nope"), 10),
            Err(Error::NotFound { .. })
        ));
    }
}
