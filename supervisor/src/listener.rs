//! The Unix socket: bound under a lock so a second daemon never evicts a live one, stale
//! sockets of killed daemons recovered (only `ECONNREFUSED` proves a socket stale), mode
//! 0600 in a private directory (ours, not writable by others: a directory someone else made
//! is refused), and every peer's uid checked against ours (SO_PEERCRED).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use toolvisor_kit::private::{PrivateError, ensure_private_dir, open_private_file};

/// A bound socket and the lock that proves we own it.
pub struct Bound {
    pub listener: std::os::unix::net::UnixListener,
    pub path: PathBuf,
    _lock: Flock<File>,
    lock_path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another toolvisor daemon{pid} is already serving {socket}")]
    AlreadyRunning { socket: String, pid: String },
    /// The socket's directory or lock file is not ours alone.
    #[error(transparent)]
    Private(#[from] PrivateError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BindError + 'a {
    move |source| BindError::Io {
        what,
        path: path.display().to_string(),
        source,
    }
}

/// Bind `path`, recovering a stale socket left by a killed daemon.
///
/// The socket's directory must be private (created 0700 when missing; an existing one must be
/// ours, a real directory, not writable by group or others, see
/// [`toolvisor_kit::private::check_private_dir`]), and the lock file is opened without
/// following a symbolic link: whoever else could write there could otherwise redirect the
/// lock, plant ledger records, or stand in for the socket.
pub fn bind(path: &Path) -> Result<Bound, BindError> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir,
        None => Path::new("."),
    };
    ensure_private_dir(dir, "the socket directory")?;
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let file = open_private_file(&lock_path, "the lock file")?;
    let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => lock,
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            return Err(BindError::AlreadyRunning {
                socket: path.display().to_string(),
                pid: if pid.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {pid})")
                },
            });
        }
    };
    if std::fs::symlink_metadata(path).is_ok() {
        match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => {
                return Err(BindError::AlreadyRunning {
                    socket: path.display().to_string(),
                    pid: String::new(),
                });
            }
            // Only a refused connection proves nobody serves it any more.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tracing::warn!(socket = %path.display(), probe = %e, "recovering a stale socket left by a daemon that died");
                std::fs::remove_file(path).map_err(io("cannot remove the stale socket", path))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot probe the existing socket", path)(e)),
        }
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(io("cannot bind", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("cannot set the socket's mode", path))?;
    listener
        .set_nonblocking(true)
        .map_err(io("cannot make the socket non-blocking", path))?;
    let _ = lock.set_len(0);
    let _ = lock.rewind();
    let _ = write!(lock, "{}", std::process::id());
    let _ = lock.flush();
    Ok(Bound {
        listener,
        path: path.to_path_buf(),
        _lock: lock,
        lock_path,
    })
}

impl Bound {
    /// Remove the socket and lock files (on clean shutdown).
    pub fn cleanup(&self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}
