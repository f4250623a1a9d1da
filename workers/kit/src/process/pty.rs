//! The pty relay: `toolvisor __pty COLS ROWS PROGRAM ARGS..` runs PROGRAM as a session leader
//! on a new pseudo-terminal (its stdin, stdout and stderr; its controlling terminal) and
//! relays between that terminal and its own pipes, so a tracked process can run a REPL or a
//! prompt that checks `isatty` while the daemon keeps plain pipes and the shim keeps
//! ownership of the whole tree (the relay is the shim's program; the terminal's session is
//! its descendant).
//!
//! Its stdin carries frames from the daemon: `[kind: u8][length: u32 BE][payload]`, kind
//! [`FRAME_DATA`] (bytes typed at the terminal) or [`FRAME_RESIZE`] (cols u16 BE, rows u16
//! BE). Its stdout is everything the terminal showed, raw. It exits like its program (code,
//! or 128 + the signal), after the terminal's last output has been relayed.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::pty::{Winsize, openpty};

/// The first argument that switches the toolvisor binary into the relay.
pub const PTY_ARG: &str = "__pty";
/// A frame of bytes typed at the terminal.
pub const FRAME_DATA: u8 = 0;
/// A frame that resizes the terminal: cols and rows, u16 big-endian each.
pub const FRAME_RESIZE: u8 = 1;
/// The largest frame payload the relay accepts.
const FRAME_MAX: usize = 1 << 20;

/// A frame of `bytes` typed at the terminal.
pub fn data_frame(bytes: &[u8]) -> Vec<u8> {
    frame(FRAME_DATA, bytes)
}

/// A frame resizing the terminal to `cols` x `rows`.
pub fn resize_frame(cols: u16, rows: u16) -> Vec<u8> {
    let mut size = cols.to_be_bytes().to_vec();
    size.extend_from_slice(&rows.to_be_bytes());
    frame(FRAME_RESIZE, &size)
}

fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Runs the relay; `args` is what follows `__pty`: `[cols, rows, program, args...]`.
/// Never returns.
pub fn pty_main(args: Vec<OsString>) -> ! {
    match relay(args) {
        Ok(code) => std::process::exit(code),
        Err(error) => {
            let _ = writeln!(io::stderr(), "toolvisor __pty: {error}");
            std::process::exit(126)
        }
    }
}

fn size_arg(arg: Option<&OsString>, what: &str) -> io::Result<u16> {
    arg.and_then(|a| a.to_str())
        .and_then(|a| a.parse::<u16>().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            io::Error::other(format!(
                "usage: __pty COLS ROWS PROGRAM [ARGS..]: bad {what}"
            ))
        })
}

fn winsize(cols: u16, rows: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

fn set_size(master: &OwnedFd, cols: u16, rows: u16) {
    let size = winsize(cols, rows);
    // SAFETY: TIOCSWINSZ reads one `winsize` from the pointer, which outlives the call; the
    // fd is the pty master this process owns. The kernel signals SIGWINCH to the terminal's
    // foreground group itself.
    unsafe {
        libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size);
    }
}

fn relay(args: Vec<OsString>) -> io::Result<i32> {
    let (mut child, master) = spawn_on_pty(&args)?;
    let stdin = io::stdin();
    let mut stdout = io::stdout();
    let mut relay = Relay {
        master,
        from_daemon: Vec::new(),
        to_terminal: Vec::new(),
        daemon_open: true,
        terminal_open: true,
        buf: vec![0u8; 64 * 1024],
    };
    let mut exited: Option<(i32, Instant)> = None;
    loop {
        if exited.is_none()
            && let Some(status) = child.try_wait()?
        {
            use std::os::unix::process::ExitStatusExt;
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            exited = Some((code, Instant::now()));
        }
        // After the program's end, relay what the terminal still holds (a background job
        // may keep it open: give it a moment, not forever).
        if let Some((code, at)) = exited
            && (!relay.terminal_open || at.elapsed() > Duration::from_millis(200))
        {
            let _ = stdout.flush();
            return Ok(code);
        }
        let stdin_fd = stdin.as_fd();
        let Some((master_ready, stdin_ready)) = relay.poll(stdin_fd)? else {
            continue;
        };
        if master_ready.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
            relay.read_terminal(&mut stdout)?;
        }
        if master_ready.contains(PollFlags::POLLOUT) && !relay.to_terminal.is_empty() {
            relay.write_terminal();
        }
        if stdin_ready.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
            relay.read_daemon(stdin_fd)?;
        }
    }
}

/// Starts `args`' program (after COLS and ROWS) as a session leader on a new terminal of that
/// size; the child and the terminal's master, non-blocking.
fn spawn_on_pty(args: &[OsString]) -> io::Result<(Child, OwnedFd)> {
    let cols = size_arg(args.first(), "COLS")?;
    let rows = size_arg(args.get(1), "ROWS")?;
    let Some(program) = args.get(2) else {
        return Err(io::Error::other("usage: __pty COLS ROWS PROGRAM [ARGS..]"));
    };
    let pty = openpty(Some(&winsize(cols, rows)), None).map_err(io::Error::from)?;
    let (master, slave) = (pty.master, pty.slave);
    let mut command = Command::new(program);
    command
        .args(&args[3..])
        .stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    // SAFETY: setsid and ioctl are async-signal-safe syscalls on integers; no allocation or
    // lock happens between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    // Only the program's session holds the terminal now: EOF (EIO) on the master means all
    // of it has gone.
    drop(slave);
    fcntl(&master, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(io::Error::from)?;
    Ok((child, master))
}

/// The relay's two sides: the terminal's master and the daemon's frames, with what is on its
/// way between them.
struct Relay {
    master: OwnedFd,
    /// Bytes from the daemon not yet taken as whole frames.
    from_daemon: Vec<u8>,
    /// Bytes typed at the terminal not yet written to it.
    to_terminal: Vec<u8>,
    daemon_open: bool,
    terminal_open: bool,
    buf: Vec<u8>,
}

impl Relay {
    /// Waits (up to 50 ms) for the open sides; what each is ready for, or `None` when a
    /// signal interrupted the wait.
    fn poll(&self, stdin_fd: BorrowedFd<'_>) -> io::Result<Option<(PollFlags, PollFlags)>> {
        let mut fds = Vec::with_capacity(2);
        let master_events = if self.to_terminal.is_empty() {
            PollFlags::POLLIN
        } else {
            PollFlags::POLLIN | PollFlags::POLLOUT
        };
        if self.terminal_open {
            fds.push(PollFd::new(self.master.as_fd(), master_events));
        }
        if self.daemon_open {
            fds.push(PollFd::new(stdin_fd, PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::from(50u8)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let revents = |i: usize| fds[i].revents().unwrap_or(PollFlags::empty());
        let master_ready = if self.terminal_open {
            revents(0)
        } else {
            PollFlags::empty()
        };
        let stdin_ready = if self.daemon_open {
            revents(usize::from(self.terminal_open))
        } else {
            PollFlags::empty()
        };
        Ok(Some((master_ready, stdin_ready)))
    }

    /// Relays what the terminal showed to stdout; its end closes the terminal side.
    fn read_terminal(&mut self, stdout: &mut io::Stdout) -> io::Result<()> {
        match nix::unistd::read(&self.master, &mut self.buf) {
            Ok(0) | Err(nix::errno::Errno::EIO) => self.terminal_open = false,
            Ok(n) => stdout
                .write_all(&self.buf[..n])
                .and_then(|()| stdout.flush())?,
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    /// Writes what it can of the bytes typed at the terminal; a terminal that refuses them
    /// drops them.
    fn write_terminal(&mut self) {
        match nix::unistd::write(&self.master, &self.to_terminal) {
            Ok(n) => {
                self.to_terminal.drain(..n);
            }
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
            Err(_) => self.to_terminal.clear(),
        }
    }

    /// Reads the daemon's frames and acts on the whole ones: typed bytes are queued for the
    /// terminal, a resize applied.
    fn read_daemon(&mut self, stdin_fd: BorrowedFd<'_>) -> io::Result<()> {
        // The raw fd, not `Stdin`'s buffer: poll must see everything not yet read.
        match nix::unistd::read(stdin_fd, &mut self.buf) {
            Ok(0) => self.daemon_open = false,
            Ok(n) => self.from_daemon.extend_from_slice(&self.buf[..n]),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => {}
            Err(_) => self.daemon_open = false,
        }
        let from_daemon = &mut self.from_daemon;
        while from_daemon.len() >= 5 {
            let len = u32::from_be_bytes([
                from_daemon[1],
                from_daemon[2],
                from_daemon[3],
                from_daemon[4],
            ]) as usize;
            if len > FRAME_MAX {
                return Err(io::Error::other(format!("a frame of {len} bytes")));
            }
            if from_daemon.len() < 5 + len {
                break;
            }
            let payload = from_daemon[5..5 + len].to_vec();
            match from_daemon[0] {
                FRAME_DATA => self.to_terminal.extend_from_slice(&payload),
                FRAME_RESIZE if payload.len() == 4 => set_size(
                    &self.master,
                    u16::from_be_bytes([payload[0], payload[1]]).max(1),
                    u16::from_be_bytes([payload[2], payload[3]]).max(1),
                ),
                kind => return Err(io::Error::other(format!("an unknown frame kind {kind}"))),
            }
            from_daemon.drain(..5 + len);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn frames_carry_their_kind_and_length() {
        assert_eq!(super::data_frame(b"ab"), vec![0, 0, 0, 0, 2, b'a', b'b']);
        assert_eq!(
            super::resize_frame(80, 24),
            vec![1, 0, 0, 0, 4, 0, 80, 0, 24]
        );
    }
}
