//! Directories and files only this user may touch: the socket's directory, the spawn ledger, the state directory (a directory someone else created is never trusted).
//!
//! The rule is OpenSSH's and tmux's: a directory the daemon keeps its socket, lock, ledger or
//! state in must be a real directory (not a symbolic link), owned by the daemon's effective
//! uid, and writable by nobody else (mode & 0o022 == 0). Every ancestor must be owned by root
//! or by us and, when others may write to it, carry the sticky bit (like `/tmp`), so nobody
//! else can rename the directory away and put their own in its place. What we create we
//! create 0700 (directories) and 0600 (files), whatever the umask.
//!
//! A secret file the operator names (the MCP listener's `--token-file`) is read by
//! [`read_secret_file`]: once, beneath its directory's checked descriptor, never through a
//! link, checked and read on its own descriptor.
//!
//! [`write_private_file`] is the one atomic writer of the daemon's own state files (id
//! counters, spawn-ledger records, staged edits, stored results, the write journal); files in
//! the user's tree are written by `toolvisor_files::write`, a different contract (beneath the
//! call's scope, the old mode kept, a read-only file refused). Both name their temp files with
//! [`temp_name`], the one form the start-up sweeps recognize.
//!
//! A directory under the state directory that an older version or a umask left wider than 0700 is
//! narrowed (`ensure_own_dir`); the state directory itself is resolved first (symbolic links
//! followed, `supervisor/src/daemon/open.rs`) and then checked. A directory that fails the check
//! stops the daemon with an error naming the directory, its owner and its mode. Durability:
//! `Synced` for what a loss would break a promise of (ids, staged edits, journals, download job
//! records, model manifests), `Unsynced` for what dies with the machine's processes or is detected
//! when lost (ledger records, stored results); a daemon's crash leaves the old content or the new
//! either way. Each store removes the temp files of dead processes in its directory when it opens
//! (`remove_stale_temps`).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
    /// A file or directory read on the operator's word that another user could have made,
    /// changed or swapped ([`read_secret_file`]); `hint` says what to do.
    #[error("refusing to use {what} {}: {problem}; {hint}", .path.display())]
    Refused {
        what: &'static str,
        path: PathBuf,
        problem: String,
        hint: String,
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

/// What is wrong with a directory holding a secret file, from its `fstat` (`uid`, `mode`
/// with the type bits): it must be a directory owned by `me` or root that group and others
/// cannot write (sticky or not: in a sticky `/tmp` another user still plants a link under a
/// name we have not made yet, or one they own). `None`: fine.
pub fn secret_dir_problem(uid: u32, mode: u32, me: u32) -> Option<String> {
    if mode & libc::S_IFMT != libc::S_IFDIR {
        return Some("it is not a directory".into());
    }
    if uid != me && uid != 0 {
        return Some(format!(
            "it belongs to {}, who can put any file or link in it",
            owner_name(uid)
        ));
    }
    if mode & 0o022 != 0 {
        return Some(format!(
            "group or others may write to it (mode {:04o}{}), so another user can put a link or a file of their own under the name",
            mode & 0o7777,
            if mode & libc::S_ISVTX != 0 {
                ", sticky"
            } else {
                ""
            }
        ));
    }
    None
}

/// What is wrong with a secret file, from the `fstat` of its open descriptor: it must be a
/// regular file owned by `me` or root that group and others can neither read nor write.
/// `None`: fine.
pub fn secret_file_problem(uid: u32, mode: u32, me: u32) -> Option<String> {
    if mode & libc::S_IFMT != libc::S_IFREG {
        return Some("it is not a regular file".into());
    }
    if uid != me && uid != 0 {
        return Some(format!("it belongs to {}, not to us", owner_name(uid)));
    }
    if mode & 0o077 != 0 {
        return Some(format!(
            "group or others may read or write it (mode {:04o})",
            mode & 0o7777
        ));
    }
    None
}

/// Reads the secret file `path` (a bearer token) the one safe way: its directory is opened
/// and checked on that descriptor ([`secret_dir_problem`]), the file is opened once beneath
/// it (`openat`, `O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK`: never through a symbolic link, never
/// inherited, never stuck on a FIFO), checked on its descriptor ([`secret_file_problem`]),
/// and read from that same descriptor. Nothing is looked up by path twice, so a link
/// flipped between a check and the read cannot change what is read. `Ok(None)`: no such
/// file (the directory passed). At most `max` bytes.
pub fn read_secret_file(
    path: &Path,
    what: &'static str,
    max: usize,
) -> Result<Option<Vec<u8>>, PrivateError> {
    use nix::fcntl::{OFlag, openat};
    use nix::sys::stat::Mode;
    use std::io::Read as _;
    let me = geteuid().as_raw();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| PrivateError::Io {
        action: "read",
        what,
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"),
    })?;
    let dir_file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map_err(io_error("open the directory of", what, path))?;
    let dir_meta = dir_file
        .metadata()
        .map_err(io_error("inspect the directory of", what, path))?;
    if let Some(problem) = secret_dir_problem(dir_meta.uid(), dir_meta.mode(), me) {
        return Err(PrivateError::Refused {
            what,
            path: path.to_path_buf(),
            problem: format!("its directory {} {problem}", dir.display()),
            hint: format!(
                "keep it in a directory only you (or root) can write, such as $XDG_RUNTIME_DIR or ~/.config/toolvisor (`chmod go-w {}` if that directory is yours)",
                dir.display()
            ),
        });
    }
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY;
    let fd = match openat(&dir_file, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Ok(None),
        Err(nix::errno::Errno::ELOOP) => {
            return Err(PrivateError::Refused {
                what,
                path: path.to_path_buf(),
                problem: "it is a symbolic link, which is never followed".into(),
                hint: format!(
                    "give the path of the file itself (`realpath {}`)",
                    path.display()
                ),
            });
        }
        Err(e) => return Err(io_error("open", what, path)(io::Error::from(e))),
    };
    let mut file = File::from(fd);
    let meta = file.metadata().map_err(io_error("inspect", what, path))?;
    if let Some(problem) = secret_file_problem(meta.uid(), meta.mode(), me) {
        let hint = if meta.is_file() && (meta.uid() == me || meta.uid() == 0) {
            format!("`chmod 600 {}`", path.display())
        } else {
            "use a regular file of your own, mode 0600".to_string()
        };
        return Err(PrivateError::Refused {
            what,
            path: path.to_path_buf(),
            problem,
            hint,
        });
    }
    let mut bytes = Vec::new();
    (&mut file)
        .take(max as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io_error("read", what, path))?;
    if bytes.len() > max {
        return Err(PrivateError::Refused {
            what,
            path: path.to_path_buf(),
            problem: format!("it holds more than {max} bytes"),
            hint: "it must hold the token alone".into(),
        });
    }
    Ok(Some(bytes))
}

/// Like [`ensure_private_dir`], for a directory only the daemon makes (under its state
/// directory): one that exists with wider permissions than 0700 but is otherwise ours (a
/// real directory of our uid; an older version or a umask made it) is narrowed to 0700 first.
pub fn ensure_own_dir(dir: &Path, what: &'static str) -> Result<(), PrivateError> {
    if let Ok(meta) = fs::symlink_metadata(dir)
        && meta.is_dir()
        && meta.uid() == geteuid().as_raw()
        && meta.mode() & 0o077 != 0
    {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(io_error(
            "set the mode of",
            what,
            dir,
        ))?;
    }
    ensure_private_dir(dir, what)
}

/// How much of a crash a file written by [`write_private_file`] survives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The temp file is fsynced before the rename and the directory after it: once the call
    /// returns the new content survives a power loss. For state whose loss breaks a promise:
    /// id counters (ids never repeat), staged edits, the write journal.
    Synced,
    /// Nothing is fsynced: the rename is atomic, so a crash of the daemon leaves the old
    /// content or the new, never a torn file, but a power loss may lose the write. For state
    /// that dies with the machine anyway (spawn-ledger records: their processes die too) or
    /// whose loss is detected (stored results answer `not_available`), where a sync per write
    /// costs more than it saves.
    Unsynced,
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// The name of a new temp file for the file `name`, unique in this process:
/// `.{name}.toolvisor-{pid}-{seq}.tmp`, the one form [`temp_pid`] recognizes.
pub fn temp_name(name: &std::ffi::OsStr) -> String {
    format!(
        ".{}.toolvisor-{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// The pid in a name of [`temp_name`]'s form (`.*.toolvisor-<pid>-<digits>.tmp`), else `None`.
pub fn temp_pid(name: &[u8]) -> Option<u32> {
    let stem = name.strip_suffix(b".tmp")?;
    let dash = stem.iter().rposition(|&b| b == b'-')?;
    let (head, seq) = (&stem[..dash], &stem[dash + 1..]);
    if name.first() != Some(&b'.') || seq.is_empty() || !seq.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let marker = b".toolvisor-";
    let at = head.windows(marker.len()).rposition(|w| w == marker)?;
    let pid = &head[at + marker.len()..];
    if pid.is_empty() || !pid.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(pid).ok()?.parse().ok()
}

/// Replace (or create) the private file `path` with `bytes` atomically: a 0600 temp file
/// ([`temp_name`], `O_EXCL | O_NOFOLLOW`) in the same directory, written, fsynced as
/// `durability` says, renamed over `path` (a symbolic link at `path` is replaced, never
/// followed). Readers see the old content or the new, never a mix; a failed write leaves no
/// temp file. `what` names the file in errors ("the id counter").
pub fn write_private_file(
    path: &Path,
    bytes: &[u8],
    what: &'static str,
    durability: Durability,
) -> Result<(), PrivateError> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| PrivateError::Io {
        action: "write",
        what,
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"),
    })?;
    let tmp = dir.join(temp_name(name));
    let result = (|| -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        // The umask may have taken bits from 0600; set it exactly.
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)?;
        if durability == Durability::Synced {
            file.sync_all()?;
        }
        drop(file);
        fs::rename(&tmp, path)?;
        if durability == Durability::Synced {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if let Err(error) = result {
        let _ = fs::remove_file(&tmp);
        return Err(io_error("write", what, path)(error));
    }
    Ok(())
}

/// Remove from the private directory `dir` the temp files ([`temp_name`]'s form) of
/// processes that are gone: a daemon killed between a temp file and its rename leaves one.
/// A live pid's (ours included) may be mid-write and is left alone, as is anything that is
/// not a regular file. Returns how many were removed.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        use std::os::unix::ffi::OsStrExt as _;
        let name = entry.file_name();
        let Some(pid) = temp_pid(name.as_bytes()) else {
            continue;
        };
        if pid == me || crate::process::alive(pid) {
            continue;
        }
        if entry.file_type().is_ok_and(|t| t.is_file()) && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
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
    fn secret_checks_read_the_descriptors_owner_type_and_mode() {
        let (me, other) = (1000, 1001);
        let reg = libc::S_IFREG;
        let dir = libc::S_IFDIR;
        assert_eq!(secret_file_problem(me, reg | 0o600, me), None);
        assert_eq!(secret_file_problem(0, reg | 0o400, me), None, "root's");
        let p = secret_file_problem(other, reg | 0o600, me).unwrap();
        assert!(p.contains("uid 1001") && p.contains("not to us"), "{p}");
        let p = secret_file_problem(me, reg | 0o640, me).unwrap();
        assert!(p.contains("0640"), "{p}");
        assert!(secret_file_problem(me, reg | 0o602, me).is_some());
        let fifo = secret_file_problem(me, libc::S_IFIFO | 0o600, me).unwrap();
        assert!(fifo.contains("not a regular file"), "{fifo}");
        assert!(secret_file_problem(me, libc::S_IFLNK | 0o777, me).is_some());

        assert_eq!(secret_dir_problem(me, dir | 0o700, me), None);
        assert_eq!(secret_dir_problem(0, dir | 0o755, me), None, "/etc");
        let tmp = secret_dir_problem(0, dir | libc::S_ISVTX | 0o777, me).unwrap();
        assert!(tmp.contains("sticky") && tmp.contains("link"), "{tmp}");
        assert!(secret_dir_problem(me, dir | 0o770, me).is_some(), "group");
        let theirs = secret_dir_problem(other, dir | 0o755, me).unwrap();
        assert!(theirs.contains("uid 1001"), "{theirs}");
        assert!(secret_dir_problem(me, reg | 0o700, me).is_some());
    }

    #[test]
    fn a_secret_file_is_read_from_the_descriptor_that_was_checked() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let file = dir.path().join("token");
        fs::write(&file, "s3cret\n").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        let got = read_secret_file(&file, "the token file", 64).unwrap();
        assert_eq!(got.as_deref(), Some(&b"s3cret\n"[..]));
        assert!(
            read_secret_file(&dir.path().join("none"), "the token file", 64)
                .unwrap()
                .is_none()
        );
        let err = read_secret_file(&file, "the token file", 3)
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 3 bytes"), "{err}");

        // A link to it is refused, never followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = read_secret_file(&link, "the token file", 64)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("symbolic link") && err.contains("realpath"),
            "{err}"
        );

        // Readable by others: refused saying how to fix it.
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_secret_file(&file, "the token file", 64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("chmod 600"), "{err}");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();

        // A FIFO is refused without blocking on its open.
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_secret_file(&dir.path().join("fifo"), "the token file", 64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");

        // A directory others may write (sticky or not) is refused naming it.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        let err = read_secret_file(&file, "the token file", 64)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&dir.path().display().to_string())
                && err.contains("group or others may write")
                && err.contains("chmod go-w"),
            "{err}"
        );
    }

    #[test]
    fn temp_names_carry_their_pid() {
        assert_eq!(temp_pid(b".a.txt.toolvisor-42-0.tmp"), Some(42));
        assert_eq!(temp_pid(b"..x.toolvisor-42-17.tmp"), Some(42));
        assert_eq!(temp_pid(b"a.txt.toolvisor-42-0.tmp"), None);
        assert_eq!(temp_pid(b".a.txt.toolvisor-42-.tmp"), None);
        assert_eq!(temp_pid(b".a.txt.toolvisor-42-0.tmpx"), None);
        assert_eq!(temp_pid(b".a.txt.toolvisor-42-x0.tmp"), None);
        assert_eq!(temp_pid(b".a.txt.toolvisor--0.tmp"), None);
        let made = temp_name(std::ffi::OsStr::new("a.rs"));
        assert_eq!(
            temp_pid(made.as_bytes()),
            Some(std::process::id()),
            "{made}"
        );
    }

    #[test]
    fn a_private_file_is_replaced_atomically_0600_whatever_was_there() {
        let base = tempfile::tempdir().unwrap();
        let path = base.path().join("state");
        for durability in [Durability::Synced, Durability::Unsynced] {
            write_private_file(&path, b"one", "the test file", durability).unwrap();
            assert_eq!(fs::read(&path).unwrap(), b"one");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
            write_private_file(&path, b"two", "the test file", durability).unwrap();
            assert_eq!(fs::read(&path).unwrap(), b"two");
            assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        }
        // A link at the path is replaced, never written through.
        let target = base.path().join("target");
        fs::write(&target, "precious").unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_private_file(&link, b"new", "the test file", Durability::Synced).unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "precious");
        assert!(
            !fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // No temp file is left, and a failed write names the file.
        let names: Vec<_> = fs::read_dir(base.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 3, "{names:?}");
        let missing = base.path().join("no/such/dir/f");
        let text = write_private_file(&missing, b"x", "the test file", Durability::Synced)
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("the test file") && text.contains("no/such/dir/f"),
            "{text}"
        );
    }

    #[test]
    fn stale_temps_of_dead_processes_are_removed_live_ones_kept() {
        let base = tempfile::tempdir().unwrap();
        // A pid above the kernel's maximum is never alive.
        let dead = base.path().join(".f.toolvisor-4194305-0.tmp");
        let mine = base.path().join(temp_name(std::ffi::OsStr::new("f")));
        let other = base.path().join("f.tmp");
        for p in [&dead, &mine, &other] {
            fs::write(p, "x").unwrap();
        }
        assert_eq!(remove_stale_temps(base.path()), 1);
        assert!(!dead.exists() && mine.exists() && other.exists());
    }

    #[test]
    fn an_own_dir_left_wide_is_narrowed_a_foreign_one_refused() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("d");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o775)).unwrap();
        ensure_own_dir(&dir, "the test directory").unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o7777, 0o700);
        let link = base.path().join("l");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let text = ensure_own_dir(&link, "the test directory")
            .unwrap_err()
            .to_string();
        assert!(text.contains("symbolic link"), "{text}");
    }

    #[test]
    fn a_new_file_is_0600() {
        let base = tempfile::tempdir().unwrap();
        let path = base.path().join("f");
        open_private_file(&path, "the test file").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    }
}
