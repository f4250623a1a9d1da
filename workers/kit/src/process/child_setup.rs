//! Async-signal-safe steps run between `fork` and `exec` (`pre_exec`), shared by the daemon and the shim.
//!
//! Everything here runs in a forked copy of a possibly multi-threaded process: no allocation,
//! no locks, raw syscalls only, and errors are plain errno values.

use std::io;
use std::os::fd::RawFd;

use nix::libc;

/// The fd on which the shim reports `OK <pid>` / `ERR <message>` to the daemon.
pub(crate) const REPORT_FD: RawFd = 3;

/// Signals a child gets back at their default disposition and unblocked: an inherited
/// "ignore" (e.g. a daemon started under `nohup`) would otherwise survive `exec`.
const RESET_SIGNALS: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGCHLD,
    libc::SIGPIPE,
];

/// Turns an `-1`/errno return into an `io::Error` without allocating.
fn check(ret: libc::c_long) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sets PR_SET_PDEATHSIG to `signal`, then fails with `ESRCH` if the parent is already gone
/// (the parent died between `fork` and `prctl`, so the death signal will never come).
pub(crate) fn set_death_signal(
    signal: libc::c_int,
    expected_parent: libc::pid_t,
) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes integers only; it is a plain syscall, safe after fork.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) }.into())?;
    // SAFETY: getppid has no arguments and cannot fail.
    if unsafe { libc::getppid() } != expected_parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Empties the signal mask and restores the default disposition of [`RESET_SIGNALS`].
pub(crate) fn reset_signals() -> io::Result<()> {
    // SAFETY: sigset_t is plain data; sigemptyset/sigprocmask/signal are async-signal-safe and
    // only touch the stack-local set and this (forked, single-threaded) process.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        check(libc::sigemptyset(&mut set).into())?;
        check(libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()).into())?;
        for signal in RESET_SIGNALS {
            if libc::signal(signal, libc::SIG_DFL) == libc::SIG_ERR {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Puts `fd` at [`REPORT_FD`] without close-on-exec, so it survives into the shim.
pub(crate) fn install_report_fd(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl/dup2 on integer fds owned by this forked process; no memory is touched.
    unsafe {
        if fd == REPORT_FD {
            // dup2 onto itself would keep FD_CLOEXEC: clear it by hand.
            check(libc::fcntl(REPORT_FD, libc::F_SETFD, 0).into())
        } else {
            check(libc::dup2(fd, REPORT_FD).into())
        }
    }
}

/// Marks every fd from `first` upwards close-on-exec, so a child inherits only what it is given.
pub(crate) fn mark_cloexec_from(first: RawFd) -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes fd flags of this process.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if ret == 0 {
        return Ok(());
    }
    // Kernels before 5.11 lack close_range or CLOSE_RANGE_CLOEXEC: walk the fd table.
    // SAFETY: rlimit is plain data written by getrlimit; fcntl only touches fd flags.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 16) as RawFd
        } else {
            1024
        };
        for fd in first..max {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                check(libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC).into())?;
            }
        }
    }
    Ok(())
}
