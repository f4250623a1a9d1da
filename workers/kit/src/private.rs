//! Directories and files only this user may touch: the socket's directory, the spawn ledger, the state directory (a directory someone else created is never trusted).
//!
//! The rule is OpenSSH's and tmux's: a directory the daemon keeps its socket, lock, ledger or
//! state in must be a real directory (not a symbolic link), owned by the daemon's effective
//! uid, and writable by nobody else (mode & 0o022 == 0). Every ancestor must be owned by root
//! or by us and, when others may write to it, carry the sticky bit (like `/tmp`), so nobody
//! else can rename the directory away and put their own in its place. What we create we
//! create 0700 (directories) and 0600 (files), whatever the umask.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::libc;
use nix::unistd::{Uid, User, geteuid};

/// Why a directory or file may not be used.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    /// The path exists but someone other than us could have made or changed it.
    #[error(
        "refusing to use {what} {}: {problem} (owner {owner_text}, mode {mode:04o}); {HINT}",
        .path.display(),
        owner_text = owner_name(*.owner)
    )]
    Unsafe {
        what: &'static str,
        path: PathBuf,
        problem: String,
        owner: u32,
        mode: u32,
    },
    #[error("cannot {action} {what} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// What to do about an unsafe path, in every [`PrivateError::Unsafe`].
const HINT: &str = "use a directory that is yours and that group and others cannot write, such as \
$XDG_RUNTIME_DIR (a directory that does not exist yet is created with mode 0700)";

/// `name (uid N)` for a uid, or just `uid N` when it has no name.
fn owner_name(uid: u32) -> String {
    match User::from_uid(Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("{} (uid {uid})", user.name),
        _ => format!("uid {uid}"),
    }
}

fn io_error<'a>(
    action: &'static str,
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> PrivateError + 'a {
    move |source| PrivateError::Io {
        action,
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn unsafe_path(
    what: &'static str,
    path: &Path,
    meta: &fs::Metadata,
    problem: String,
) -> PrivateError {
    PrivateError::Unsafe {
        what,
        path: path.to_path_buf(),
        problem,
        owner: meta.uid(),
        mode: meta.mode() & 0o7777,
    }
}

/// Ensures `dir` is a private directory: creates it (and missing parents) with mode 0700 if it
/// does not exist, otherwise checks it with [`check_private_dir`]. `what` names it in errors
/// ("the socket directory").
pub fn ensure_private_dir(dir: &Path, what: &'static str) -> Result<(), PrivateError> {
    match fs::symlink_metadata(dir) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_error("create", what, dir))?;
            // The umask may have taken bits from 0700 but never added any; set it exactly.
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io_error(
                "set the mode of",
                what,
                dir,
            ))?;
        }
        Err(error) => return Err(io_error("inspect", what, dir)(error)),
        Ok(_) => {}
    }
    check_private_dir(dir, what)
}

/// Checks that `dir` is a real directory (not a symlink), owned by our effective uid, not
/// writable by group or others, and that no ancestor lets another user replace it.
pub fn check_private_dir(dir: &Path, what: &'static str) -> Result<(), PrivateError> {
    let me = geteuid().as_raw();
    let meta = fs::symlink_metadata(dir).map_err(io_error("inspect", what, dir))?;
    if meta.file_type().is_symlink() {
        return Err(unsafe_path(
            what,
            dir,
            &meta,
            "it is a symbolic link, which whoever made it can point anywhere".into(),
        ));
    }
    if !meta.is_dir() {
        return Err(unsafe_path(
            what,
            dir,
            &meta,
            "it is not a directory".into(),
        ));
    }
    if meta.uid() != me {
        return Err(unsafe_path(
            what,
            dir,
            &meta,
            format!("it belongs to another user, not to {}", owner_name(me)),
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_path(
            what,
            dir,
            &meta,
            "group or others may write to it".into(),
        ));
    }
    check_ancestors(dir, what, me)
}

/// Every ancestor of `dir` must be owned by root or `me`, and one others may write to must be
/// sticky: otherwise another user could rename `dir` away and put their own in its place.
fn check_ancestors(dir: &Path, what: &'static str, me: u32) -> Result<(), PrivateError> {
    let real = fs::canonicalize(dir).map_err(io_error("resolve", what, dir))?;
    for ancestor in real.ancestors().skip(1) {
        let meta = fs::metadata(ancestor).map_err(io_error("inspect", what, ancestor))?;
        let problem = if meta.uid() != 0 && meta.uid() != me {
            Some(format!(
                "its parent {} belongs to another user, who could replace it",
                ancestor.display()
            ))
        } else if meta.mode() & 0o022 != 0 && meta.mode() & libc::S_ISVTX == 0 {
            Some(format!(
                "its parent {} may be written by group or others and is not sticky, so they could replace it",
                ancestor.display()
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(unsafe_path(what, dir, &meta, problem));
        }
    }
    Ok(())
}

/// Opens (creating it with mode 0600 if missing) a file we own for reading and writing, never
/// following a symbolic link (`O_NOFOLLOW`) and never inherited by a child (`O_CLOEXEC`).
/// An existing file must be a regular file owned by us.
pub fn open_private_file(path: &Path, what: &'static str) -> Result<File, PrivateError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|error| {
            if error.raw_os_error() == Some(libc::ELOOP)
                && let Ok(meta) = fs::symlink_metadata(path)
            {
                return unsafe_path(
                    what,
                    path,
                    &meta,
                    "it is a symbolic link, which whoever made it can point anywhere".into(),
                );
            }
            io_error("open", what, path)(error)
        })?;
    let meta = file.metadata().map_err(io_error("inspect", what, path))?;
    if !meta.is_file() {
        return Err(unsafe_path(
            what,
            path,
            &meta,
            "it is not a regular file".into(),
        ));
    }
    if meta.uid() != geteuid().as_raw() {
        return Err(unsafe_path(
            what,
            path,
            &meta,
            "it belongs to another user".into(),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(io_error("set the mode of", what, path))?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_a_missing_directory_0700() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a").join("b");
        ensure_private_dir(&dir, "the test directory").unwrap();
        let mode = fs::metadata(&dir).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o700);
    }

    #[test]
    fn refuses_a_group_writable_directory_naming_it() {
        let base = tempfile::tempdir().unwrap();
        fs::set_permissions(base.path(), fs::Permissions::from_mode(0o770)).unwrap();
        let error = check_private_dir(base.path(), "the test directory").unwrap_err();
        let text = error.to_string();
        assert!(text.contains(&base.path().display().to_string()), "{text}");
        assert!(text.contains("mode 0770"), "{text}");
        assert!(text.contains("group or others may write"), "{text}");
    }

    #[test]
    fn refuses_a_symlinked_directory() {
        let base = tempfile::tempdir().unwrap();
        let real = base.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let text = ensure_private_dir(&link, "the test directory")
            .unwrap_err()
            .to_string();
        assert!(text.contains("symbolic link"), "{text}");
    }

    #[test]
    fn refuses_a_directory_in_a_non_sticky_world_writable_parent() {
        let base = tempfile::tempdir().unwrap();
        fs::set_permissions(base.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let dir = base.path().join("d");
        let text = ensure_private_dir(&dir, "the test directory")
            .unwrap_err()
            .to_string();
        assert!(text.contains("not sticky"), "{text}");
        fs::set_permissions(base.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        ensure_private_dir(&dir, "the test directory").unwrap();
    }

    #[test]
    fn a_symlinked_file_is_not_followed() {
        let base = tempfile::tempdir().unwrap();
        let target = base.path().join("target");
        fs::write(&target, "precious").unwrap();
        let link = base.path().join("lock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let text = open_private_file(&link, "the lock file")
            .unwrap_err()
            .to_string();
        assert!(text.contains("symbolic link"), "{text}");
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
    }

    #[test]
    fn a_new_file_is_0600() {
        let base = tempfile::tempdir().unwrap();
        let path = base.path().join("f");
        open_private_file(&path, "the test file").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    }
}
