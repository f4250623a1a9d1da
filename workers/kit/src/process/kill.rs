//! Signal sending that can never reach pid 0, 1 or -1 (the caller's group, init, or everything).

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Converts a pid from `/proc`, a record or a guard into one that is safe to signal.
fn checked(pid: u32) -> nix::Result<Pid> {
    match i32::try_from(pid) {
        Ok(raw) if raw > 1 => Ok(Pid::from_raw(raw)),
        _ => Err(Errno::EINVAL),
    }
}

/// `kill(pid, signal)`, refusing pid 0 and 1 (and anything that would wrap negative).
pub(crate) fn signal_pid(pid: u32, signal: Signal) -> nix::Result<()> {
    kill(checked(pid)?, signal)
}

/// `killpg(pgid, signal)`, refusing pgid 0 and 1 (and anything that would wrap negative).
pub(crate) fn signal_group(pgid: u32, signal: Signal) -> nix::Result<()> {
    killpg(checked(pgid)?, signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_dangerous_pids() {
        for pid in [0, 1, u32::MAX, i32::MAX as u32 + 1] {
            assert_eq!(signal_pid(pid, Signal::SIGKILL), Err(Errno::EINVAL));
            assert_eq!(signal_group(pid, Signal::SIGKILL), Err(Errno::EINVAL));
        }
    }
}
