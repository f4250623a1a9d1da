//! The two halves of systemd's service protocol a daemon speaks: a listening socket handed
//! over by socket activation (`LISTEN_PID`/`LISTEN_FDS`, as `sd_listen_fds(3)` defines them),
//! and state notifications (`READY=1`, `STATUS=…`, `WATCHDOG=1`, `STOPPING=1`) sent as
//! datagrams to `NOTIFY_SOCKET` (`sd_notify(3)`). Both are no-ops when the variables are
//! absent, so the same binary runs under systemd, under a test that plays systemd, and by hand.
//!
//! `listen_fds` checks that `LISTEN_PID` is ours and that the descriptor is one listening Unix
//! stream socket, takes descriptor 3 once (`from_raw_fd`) and makes it close-on-exec; its `unsafe`
//! blocks are the only ones of the kit outside `memory.rs` and `process`. `Notifier` writes to
//! `NOTIFY_SOCKET`, a path or an abstract socket. No `sd-notify` or `listenfd` crate: these two
//! small, stable protocols are written against std and `nix`.

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// What went wrong taking over an inherited socket.
#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error(
        "LISTEN_FDS={0}: toolvisor listens on exactly one socket; give the .socket unit one ListenStream="
    )]
    Count(String),
    #[error(
        "the inherited descriptor {fd} is not a listening Unix stream socket ({why}); give the .socket unit a ListenStream= path"
    )]
    NotAUnixListener { fd: RawFd, why: String },
    #[error("the inherited socket was already taken")]
    Taken,
}

static TAKEN: AtomicBool = AtomicBool::new(false);

/// The listening socket systemd (or `systemd-socket-activate`) passed to this process, if it
/// passed one: `LISTEN_PID` must be our pid (the variables are otherwise meant for someone
/// else, e.g. a parent that forgot to clear them) and `LISTEN_FDS` exactly 1. The descriptor
/// is checked to be a listening `AF_UNIX` stream socket, marked close-on-exec so no child
/// inherits it, and can be taken once.
pub fn listen_fds() -> Result<Option<UnixListener>, ActivationError> {
    let Ok(pid) = std::env::var("LISTEN_PID") else {
        return Ok(None);
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        return Ok(None);
    }
    let count = std::env::var("LISTEN_FDS").unwrap_or_default();
    match count.trim().parse::<u32>() {
        Ok(0) => return Ok(None),
        Ok(1) => {}
        _ if count.trim().is_empty() => return Ok(None),
        _ => return Err(ActivationError::Count(count)),
    }
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(ActivationError::Taken);
    }
    let fd = LISTEN_FDS_START;
    check_listener(fd).map_err(|why| ActivationError::NotAUnixListener { fd, why })?;
    // SAFETY: systemd's protocol hands descriptor 3 to this process, which owns it from now
    // on; `TAKEN` makes sure it is wrapped once, and `check_listener` proved it is an open
    // listening socket.
    let listener = unsafe { UnixListener::from_raw_fd(fd) };
    set_cloexec(&listener).map_err(|why| ActivationError::NotAUnixListener { fd, why })?;
    Ok(Some(listener))
}

fn check_listener(fd: RawFd) -> Result<(), String> {
    use nix::sys::socket::{AddressFamily, SockType, SockaddrLike, SockaddrStorage, sockopt};
    use std::os::fd::BorrowedFd;
    // SAFETY: only borrowed for the checks below; a closed descriptor makes them fail.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let kind = nix::sys::socket::getsockopt(&borrowed, sockopt::SockType)
        .map_err(|e| format!("not a socket: {e}"))?;
    if kind != SockType::Stream {
        return Err(format!("socket type {kind:?}, not a stream"));
    }
    let listening = nix::sys::socket::getsockopt(&borrowed, sockopt::AcceptConn)
        .map_err(|e| format!("cannot read SO_ACCEPTCONN: {e}"))?;
    if !listening {
        return Err("not listening".into());
    }
    let addr: SockaddrStorage =
        nix::sys::socket::getsockname(fd).map_err(|e| format!("getsockname: {e}"))?;
    if addr.family() != Some(AddressFamily::Unix) {
        return Err(format!("address family {:?}, not AF_UNIX", addr.family()));
    }
    Ok(())
}

fn set_cloexec(listener: &UnixListener) -> Result<(), String> {
    use nix::fcntl::{F_GETFD, F_SETFD, FdFlag, fcntl};
    let flags = fcntl(listener, F_GETFD).map_err(|e| format!("F_GETFD: {e}"))?;
    let flags = FdFlag::from_bits_truncate(flags) | FdFlag::FD_CLOEXEC;
    fcntl(listener, F_SETFD(flags)).map_err(|e| format!("F_SETFD: {e}"))?;
    Ok(())
}

/// State notifications to the service manager. Built from `NOTIFY_SOCKET` (a path, or an
/// abstract name written `@name`); without it every send is a no-op.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, String)>,
}

impl Notifier {
    pub fn from_env() -> Notifier {
        let target = std::env::var("NOTIFY_SOCKET")
            .ok()
            .filter(|s| !s.is_empty())
            .and_then(|path| match UnixDatagram::unbound() {
                Ok(socket) => Some((socket, path)),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot make a socket for NOTIFY_SOCKET");
                    None
                }
            });
        Notifier { target }
    }

    /// Whether a service manager listens.
    pub fn active(&self) -> bool {
        self.target.is_some()
    }

    /// Send `state` (newline-separated `KEY=value` lines). Failures are logged, never fatal:
    /// a daemon must not stop serving because its manager went away.
    pub fn notify(&self, state: &str) {
        let Some((socket, path)) = &self.target else {
            return;
        };
        let sent = match path.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                    .and_then(|addr| socket.send_to_addr(state.as_bytes(), &addr))
            }
            None => socket.send_to(state.as_bytes(), path),
        };
        if let Err(e) = sent {
            tracing::warn!(socket = path, error = %e, "cannot notify the service manager");
        }
    }
}

/// How often the service manager wants `WATCHDOG=1`: half of `WATCHDOG_USEC`, when that is
/// set and `WATCHDOG_PID` (if set) is ours.
pub fn watchdog_interval() -> Option<Duration> {
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.trim().parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notification_arrives_as_one_datagram_at_a_path_or_an_abstract_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier {
            target: Some((UnixDatagram::unbound().unwrap(), path.display().to_string())),
        };
        notifier.notify("READY=1\nSTATUS=serving");
        let mut buf = [0u8; 256];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\nSTATUS=serving");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("toolvisor-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_listener = UnixDatagram::bind_addr(&addr).unwrap();
        let notifier = Notifier {
            target: Some((UnixDatagram::unbound().unwrap(), format!("@{name}"))),
        };
        notifier.notify("WATCHDOG=1");
        let n = abstract_listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn without_a_notify_socket_nothing_is_sent_and_nothing_fails() {
        let notifier = Notifier { target: None };
        assert!(!notifier.active());
        notifier.notify("READY=1");
    }
}
