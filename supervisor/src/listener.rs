//! The Unix socket: bound under a lock so a second daemon never evicts a live one, stale
//! sockets of killed daemons recovered (only `ECONNREFUSED` proves a socket stale), mode
//! 0600 in a private directory (ours, not writable by others: a directory someone else made
//! is refused), and every peer's uid checked against ours (SO_PEERCRED). Under socket
//! activation the service manager's socket is adopted under the same lock and checks.
//!
//! The socket is bound under an exclusive `flock` on `<socket>.lock` (opened `O_NOFOLLOW`), held
//! for the daemon's life; only `ECONNREFUSED` on a probe proves an existing socket stale. A socket
//! passed by the service manager (`adopt`) is taken only when `LISTEN_PID` is the daemon's own pid
//! and it is one listening Unix stream socket (`kit::systemd::listen_fds`), under the same
//! private-directory check and lock; it is made close-on-exec, so no child can accept on it, and
//! its file is the manager's, left in place at exit. There is no `interprocess` crate: tokio's
//! `UnixListener` gives non-blocking accept and `peer_cred()` directly, and std's the bind.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use toolvisor_kit::private::{PrivateError, ensure_private_dir, open_private_file};

/// A bound socket and the lock that proves we own it.
pub struct Bound {
    /// Taken by the accept loop ([`Bound::take_listener`]); the lock stays with `Bound`.
    listener: Option<std::os::unix::net::UnixListener>,
    pub path: PathBuf,
    _lock: Flock<File>,
    lock_path: PathBuf,
    /// The socket was handed over by the service manager (socket activation): it made the
    /// file and keeps listening after we exit, so shutdown leaves the file alone.
    pub inherited: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another toolvisor daemon{pid} is already serving {socket}")]
    AlreadyRunning { socket: String, pid: String },
    /// The socket's directory or lock file is not ours alone.
    #[error(transparent)]
    Private(#[from] PrivateError),
    #[error(
        "the socket the service manager passed has no path (toolvisor serves a Unix socket file; give the .socket unit a ListenStream= path)"
    )]
    Unnamed,
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
    let (mut lock, lock_path) = lock(path)?;
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
    write_pid(&mut lock);
    Ok(Bound {
        listener: Some(listener),
        path: path.to_path_buf(),
        _lock: lock,
        lock_path,
        inherited: false,
    })
}

/// Serve the listening socket the service manager handed over (socket activation). The same
/// rules as [`bind`] hold: its directory must be private, and the lock next to it proves no
/// other daemon serves the same path.
pub fn adopt(listener: std::os::unix::net::UnixListener) -> Result<Bound, BindError> {
    let path = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(Path::to_path_buf))
        .ok_or(BindError::Unnamed)?;
    let (mut lock, lock_path) = lock(&path)?;
    listener
        .set_nonblocking(true)
        .map_err(io("cannot make the socket non-blocking", &path))?;
    write_pid(&mut lock);
    Ok(Bound {
        listener: Some(listener),
        path,
        _lock: lock,
        lock_path,
        inherited: true,
    })
}

/// Check the socket's directory is private and take the lock beside the socket.
fn lock(path: &Path) -> Result<(Flock<File>, PathBuf), BindError> {
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir,
        None => Path::new("."),
    };
    ensure_private_dir(dir, "the socket directory")?;
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let file = open_private_file(&lock_path, "the lock file")?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok((lock, lock_path)),
        Err((mut file, _)) => {
            let mut pid = String::new();
            let _ = file.read_to_string(&mut pid);
            let pid = pid.trim();
            Err(BindError::AlreadyRunning {
                socket: path.display().to_string(),
                pid: if pid.is_empty() {
                    String::new()
                } else {
                    format!(" (pid {pid})")
                },
            })
        }
    }
}

fn write_pid(lock: &mut Flock<File>) {
    let _ = lock.set_len(0);
    let _ = lock.rewind();
    let _ = write!(lock, "{}", std::process::id());
    let _ = lock.flush();
}

impl Bound {
    /// The listening socket, for the accept loop (once). Dropping it stops new connections
    /// while the lock keeps another daemon off the path.
    pub fn take_listener(&mut self) -> Option<std::os::unix::net::UnixListener> {
        self.listener.take()
    }

    /// Remove the socket and lock files (on clean shutdown); an inherited socket stays, for
    /// the service manager keeps listening on it.
    pub fn cleanup(&self) {
        if !self.inherited {
            let _ = std::fs::remove_file(&self.path);
        }
        let _ = std::fs::remove_file(&self.lock_path);
    }
}
