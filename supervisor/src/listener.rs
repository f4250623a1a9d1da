//! The Unix socket: bound under a lock so a second daemon never evicts a live one, stale
//! sockets of killed daemons recovered (only `ECONNREFUSED` proves a socket stale), mode
//! 0600 in a 0700 directory, and every peer's uid checked against ours (SO_PEERCRED).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

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
pub fn bind(path: &Path) -> Result<Bound, BindError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && !dir.exists()
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io("cannot create the socket directory", dir))?;
    }
    let lock_path = PathBuf::from(format!("{}.lock", path.display()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io("cannot open the lock file", &lock_path))?;
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
