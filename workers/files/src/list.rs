//! `ls`: one directory's entries, sorted by name, hidden ones included, with type and size.

use std::os::unix::fs::PermissionsExt;

use crate::error::{Error, Result};
use crate::paths::{Access, Scope};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The name; directories end in `/`.
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    pub kind: &'static str,
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
}

/// List `path` (default: the workdir), at most `max_entries` entries.
pub fn ls(scope: &Scope, path: Option<&str>, max_entries: usize) -> Result<Listing> {
    let resolved = scope.resolve(path.unwrap_or("."), Access::Read)?;
    let display = resolved.display;
    let meta = std::fs::metadata(&resolved.real).map_err(|e| Error::io(&display, "stat", e))?;
    if !meta.is_dir() {
        let name = resolved
            .real
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = entry_of(name, &resolved.real);
        return Ok(Listing {
            path: display,
            entries: vec![entry],
            total: 1,
            truncated: false,
        });
    }
    let mut entries = Vec::new();
    let read = std::fs::read_dir(&resolved.real).map_err(|e| Error::io(&display, "list", e))?;
    for item in read {
        let item = item.map_err(|e| Error::io(&display, "list", e))?;
        let name = item.file_name().to_string_lossy().into_owned();
        entries.push(entry_of(name, &item.path()));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let total = entries.len();
    let truncated = total > max_entries;
    entries.truncate(max_entries);
    Ok(Listing {
        path: display,
        entries,
        total,
        truncated,
    })
}

fn entry_of(mut name: String, path: &std::path::Path) -> Entry {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Entry {
            name,
            kind: "other",
            size: None,
            target: None,
            executable: false,
        };
    };
    let ft = meta.file_type();
    let (kind, size, target) = if ft.is_symlink() {
        let target = std::fs::read_link(path)
            .ok()
            .map(|t| t.display().to_string());
        ("symlink", None, target)
    } else if ft.is_dir() {
        name.push('/');
        ("dir", None, None)
    } else if ft.is_file() {
        ("file", Some(meta.len()), None)
    } else {
        ("other", None, None)
    };
    Entry {
        name,
        kind,
        size,
        target,
        executable: ft.is_file() && meta.permissions().mode() & 0o111 != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
