//! The compilation database clangd would use for a file, and whether it lists any file: what
//! clangd's background index covers. clangd looks for `compile_commands.json` in the file's
//! directory and its parents (and their `build/` directories) and takes the nearest; one it
//! cannot load, or one that lists nothing, gives it nothing to index in the background
//! (measured: `[]` loads and enqueues nothing; a malformed one is "Failed to load").

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Deserialize;
use toolvisor_files::paths::Access;

use crate::lock;

/// What was read of each database, by its path, kept while its size and modification time
/// stay the same: a large project's database is megabytes, and every index-wide answer asks.
#[derive(Debug, Default)]
pub(crate) struct Databases {
    read: Mutex<HashMap<PathBuf, Read>>,
}

/// The most databases remembered per server.
const MAX_DATABASES: usize = 256;

/// A database's modification time and size when it was read, and whether it listed a file.
type Read = (Option<SystemTime>, u64, bool);

/// An entry as clangd requires it; the rest of it is skipped unread.
#[derive(Deserialize)]
struct Entry {
    #[allow(dead_code)]
    directory: String,
    #[allow(dead_code)]
    file: String,
}

impl Databases {
    /// Whether the database clangd would use for `path` (under `root`) lists at least one
    /// file. Reads files: call it where file work runs (the blocking pool).
    pub(crate) fn lists_files(&self, root: &Path, path: &Path) -> bool {
        let Some(db) = nearest(root, path) else {
            return false;
        };
        let Ok(meta) = std::fs::metadata(&db) else {
            return false;
        };
        let stamp = (meta.modified().ok(), meta.len());
        if let Some(&(modified, len, lists)) = lock(&self.read).get(&db)
            && (modified, len) == stamp
        {
            return lists;
        }
        let lists = read_beneath(root, &db)
            .and_then(|bytes| serde_json::from_slice::<Vec<Entry>>(&bytes).ok())
            .is_some_and(|entries| !entries.is_empty());
        let mut read = lock(&self.read);
        // Bounded: a project has a few databases; one that made thousands starts over.
        if read.len() >= MAX_DATABASES {
            read.clear();
        }
        read.insert(db, (stamp.0, stamp.1, lists));
        lists
    }
}

/// `db`'s bytes, read through the root's scope like every document (`root_scope`): a
/// symbolic link is followed only within the root, and a special file (a FIFO, a device)
/// is refused without blocking. `None` when it cannot be read so: a database linked from
/// outside the root counts as none (clangd may use it; the answers then say they may be
/// partial, never the other way round).
fn read_beneath(root: &Path, db: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let scope = super::root_scope(root).ok()?;
    let mut file = scope
        .resolve(db.to_str()?, Access::Read)
        .and_then(|found| found.open())
        .ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The nearest `compile_commands.json` clangd would find for `path`, no higher than `root`.
fn nearest(root: &Path, path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .skip(1)
        .take_while(|d| d.starts_with(root))
        .flat_map(|d| {
            [
                d.join("compile_commands.json"),
                d.join("build/compile_commands.json"),
            ]
        })
        .find(|f| f.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_counts_when_it_lists_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        let file = root.join("src/deep/a.c");
        let dbs = Databases::default();
        assert!(!dbs.lists_files(root, &file), "none");
        let db = root.join("build/compile_commands.json");
        std::fs::create_dir(root.join("build")).unwrap();
        std::fs::write(&db, "[]").unwrap();
        assert!(!dbs.lists_files(root, &file), "an empty list");
        std::fs::write(&db, "[{\"file\": \"a.c\"}]").unwrap();
        assert!(
            !dbs.lists_files(root, &file),
            "an entry clangd fails to load"
        );
        std::fs::write(
            &db,
            "[{\"directory\": \"/p\", \"file\": \"a.c\", \"arguments\": [\"cc\"]}]",
        )
        .unwrap();
        assert!(dbs.lists_files(root, &file), "read anew once it changed");
        // The nearest wins, as in clangd.
        std::fs::write(root.join("src/compile_commands.json"), "[]").unwrap();
        assert!(!dbs.lists_files(root, &file));
        // None above the root.
        assert!(!dbs.lists_files(&root.join("src/deep"), &file));
    }

    #[test]
    fn a_database_is_read_within_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let (root, outside) = (dir.path().join("p"), dir.path().join("elsewhere.json"));
        std::fs::create_dir_all(root.join("build")).unwrap();
        let entry = r#"[{"directory": "/p", "file": "a.c", "arguments": ["cc"]}]"#;
        std::fs::write(root.join("build/compile_commands.json"), entry).unwrap();
        std::fs::write(&outside, entry).unwrap();
        let file = root.join("a.c");
        // CMake's habit: a link in the root to the build directory's database.
        std::os::unix::fs::symlink(
            "build/compile_commands.json",
            root.join("compile_commands.json"),
        )
        .unwrap();
        assert!(Databases::default().lists_files(&root, &file));
        // A link out of the root is not read (it was, by name, before).
        std::fs::remove_file(root.join("compile_commands.json")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("compile_commands.json")).unwrap();
        assert!(!Databases::default().lists_files(&root, &file));
    }
}
