//! The database's files are the owner's alone: `hub.sqlite3` is created 0600 before SQLite
//! opens it (SQLite would make it 0644 less the umask), and an existing one, with its `-wal`,
//! `-shm` and `-journal` files, is narrowed to 0600 at every open. SQLite gives the files it
//! creates later (`-wal`, `-shm`) the database file's own mode, so they are 0600 too.

use std::path::{Path, PathBuf};

/// A database file that could not be made private: which one, and why.
#[derive(Debug)]
pub(crate) struct NotPrivate {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The files SQLite keeps beside a database in WAL mode (and the rollback journal an older
/// mode may have left).
const SIDE_FILES: &[&str] = &["-wal", "-shm", "-journal"];

/// Create `db` 0600 if missing and narrow it and its side files to 0600; a symbolic link or
/// a file of another user in their place is refused, naming it.
pub(crate) fn make_private(db: &Path) -> Result<(), NotPrivate> {
    let fail = |path: &Path, e: toolvisor_kit::private::PrivateError| NotPrivate {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    };
    toolvisor_kit::private::open_private_file(db, "the data hub's database")
        .map_err(|e| fail(db, e))?;
    for side in SIDE_FILES {
        let path = side_file(db, side);
        if std::fs::symlink_metadata(&path).is_ok() {
            toolvisor_kit::private::open_private_file(&path, "a file of the data hub's database")
                .map_err(|e| fail(&path, e))?;
        }
    }
    Ok(())
}

/// `hub.sqlite3` + `-wal`: SQLite's name for a side file.
pub(crate) fn side_file(db: &Path, suffix: &str) -> PathBuf {
    let mut name = db.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}
