//! The shim: the daemon's direct child, which leads the process group, runs the real program in it and kills the whole tree when the program ends or the daemon dies.
//!
//! Single-threaded, synchronous code: PR_SET_PDEATHSIG and the program's own death signal
//! are tied to the *thread* that forked, and a lone thread never exits early.
//!
//! In order: it sets PDEATHSIG (SIGTERM) on itself, exits at once if its parent is no longer the
//! daemon (`TOOLVISOR_SHIM_PARENT`), becomes a child subreaper, starts the program in its group
//! (the ledger token stripped from its environment, the incarnation mark kept), and reports
//! `OK <pid>` or `ERR <message>` on fd 3 when `TOOLVISOR_SHIM_REPORT_FD=3`. It forwards SIGINT and
//! SIGQUIT to the program. On the program's exit, on SIGTERM or SIGHUP, or at its parent's death it
//! kills every descendant it finds by `/proc` parentage and every other member of its group
//! (SIGCONT, then SIGKILL), then exits like the program (143 after SIGTERM or SIGHUP). A SIGKILLed
//! daemon therefore leaves no child: PDEATHSIG reaches the shim, and the shim reaches the rest. A
//! `pty` process's program leads its own session (its terminal's) but is still a descendant of the
//! shim, through the relay, so the same teardown reaches it.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, FromRawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::prctl;
use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, raise, signal, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getpid, getppid, setpgid};

use super::child_setup::{REPORT_FD, mark_cloexec_from, reset_signals, set_death_signal};
use super::kill::signal_pid;
use super::ledger::LEDGER_TOKEN_ENV;
use super::procfs::{all_stats, descendants_in, group_members_in};

/// The first argument that switches the toolvisor binary into shim mode:
/// `<binary> __shim <program> <args..>`.
pub const SHIM_ARG: &str = "__shim";

/// Environment variable holding the pid of the shim's expected parent (the daemon). If the
/// shim's parent differs at start, the daemon is already gone and the shim exits at once.
pub const SHIM_PARENT_ENV: &str = "TOOLVISOR_SHIM_PARENT";

/// Environment variable telling the shim that fd 3 is the daemon's report pipe (value `3`).
/// Without it the shim leaves fd 3 alone, so it can also be started by hand.
pub const SHIM_REPORT_ENV: &str = "TOOLVISOR_SHIM_REPORT_FD";

/// Upper bound on one teardown; in practice it takes a few milliseconds.
const TEARDOWN_LIMIT: Duration = Duration::from_secs(2);

/// Exit code after SIGTERM/SIGHUP (128 + SIGTERM), as a shell would report it.
pub const EXIT_TERMINATED: i32 = 143;

/// Signals the shim handles through its signalfd (blocked for normal delivery).
const HANDLED: [Signal; 5] = [
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGCHLD,
];

/// Runs the shim; `args` is what follows `__shim`: `[program, args...]`. Never returns.
///
/// Exit status: the program's exit code; if the program was killed by a signal, the shim
/// re-raises that signal on itself (falling back to exit code 128 + N should it survive);
/// 143 after SIGTERM/SIGHUP (including the death signal sent when the daemon dies); 127 when
/// the program does not exist, 126 when it cannot be executed, 2 on a usage error.
pub fn shim_main(args: Vec<OsString>) -> ! {
    let mut report = take_report_fd();
    let signals = match listen_for_signals() {
        Ok(signals) => signals,
        Err(error) => fail(
            report,
            &format!("the shim cannot set up signal handling: {error}"),
            126,
        ),
    };
    let _ = prctl::set_pdeathsig(Signal::SIGTERM);
    if getpgrp() != getpid() {
        // Started by hand (not by the daemon): lead a group of our own rather than kill the
        // caller's group on teardown.
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    }
    let mut shim = Shim {
        signals,
        program: None,
        program_status: None,
    };
    let expected_parent = std::env::var(SHIM_PARENT_ENV)
        .ok()
        .and_then(|value| value.parse::<i32>().ok());
    if expected_parent.is_some_and(|parent| getppid().as_raw() != parent) {
        send_report(
            &mut report,
            "ERR the daemon exited before the program started",
        );
        shim.teardown();
        std::process::exit(EXIT_TERMINATED);
    }
    let _ = prctl::set_child_subreaper(true);
    let Some((program, program_args)) = args.split_first() else {
        fail(report, "usage: __shim <program> [args..]", 2);
    };
    match spawn_program(program, program_args) {
        Ok(pid) => {
            shim.program = Some(pid);
            send_report(&mut report, &format!("OK {pid}"));
            drop(report);
        }
        Err(error) => {
            let code = if error.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            fail(report, &describe_exec_error(&error), code);
        }
    }
    shim.run()
}

/// Adopts fd 3 as the report pipe if the daemon said it put one there, marking it
/// close-on-exec so the program never inherits it.
fn take_report_fd() -> Option<File> {
    if std::env::var_os(SHIM_REPORT_ENV).as_deref() != Some(OsStr::new("3")) {
        return None;
    }
    // SAFETY: fcntl on an integer fd touches no memory; success proves fd 3 is open.
    if unsafe { libc::fcntl(REPORT_FD, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        return None;
    }
    // SAFETY: fd 3 is open (checked above) and, per SHIM_REPORT_ENV, is the report pipe the
    // daemon installed for the shim alone; nothing else in this process owns it.
    Some(unsafe { File::from_raw_fd(REPORT_FD) })
}

/// Writes one report line; a daemon that stopped listening is not the shim's problem.
fn send_report(report: &mut Option<File>, line: &str) {
    if let Some(pipe) = report.as_mut() {
        let _ = pipe.write_all(format!("{line}\n").as_bytes());
    }
}

/// Reports `message` as the reason the program did not start, and exits with `code`.
fn fail(mut report: Option<File>, message: &str, code: i32) -> ! {
    let one_line = message.replace('\n', " ");
    send_report(&mut report, &format!("ERR {one_line}"));
    if report.is_none() {
        eprintln!("toolvisor shim: {one_line}");
    }
    std::process::exit(code)
}

/// Why exec failed, for a user: the program itself was found before exec, so "not found"
/// at exec time almost always means a missing `#!` interpreter.
pub(crate) fn describe_exec_error(error: &io::Error) -> String {
    if error.kind() == io::ErrorKind::NotFound {
        format!("{error} (is the interpreter on its #! line missing?)")
    } else {
        error.to_string()
    }
}

/// Blocks the handled signals and returns a signalfd that receives them instead.
fn listen_for_signals() -> nix::Result<SignalFd> {
    let mut mask = SigSet::empty();
    for sig in HANDLED {
        mask.add(sig);
        // An inherited SIG_IGN for SIGCHLD would auto-reap children and hide their status.
        // SAFETY: SIG_DFL installs no handler code.
        unsafe { signal(sig, SigHandler::SigDfl) }?;
    }
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
}

/// Starts the program in the shim's process group with the shim's stdio, and returns its pid.
fn spawn_program(program: &OsStr, args: &[OsString]) -> io::Result<u32> {
    let shim_pid = getpid().as_raw();
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove(SHIM_PARENT_ENV)
        .env_remove(SHIM_REPORT_ENV)
        // The token proves to a later ledger sweep that the shim is ours; the program needs
        // none of it (and a model's `env` need not show it).
        .env_remove(LEDGER_TOKEN_ENV);
    // SAFETY: the closure only calls child_setup's async-signal-safe helpers (raw syscalls,
    // no allocation, no locks), as required between fork and exec.
    unsafe {
        command.pre_exec(move || {
            set_death_signal(libc::SIGKILL, shim_pid)?;
            reset_signals()?;
            mark_cloexec_from(REPORT_FD)
        });
    }
    let child = command.spawn()?;
    // Dropping `Child` neither kills nor waits: the shim reaps through SIGCHLD.
    Ok(child.id())
}

struct Shim {
    signals: SignalFd,
    program: Option<u32>,
    program_status: Option<WaitStatus>,
}

impl Shim {
    /// The event loop: one signal at a time from the signalfd.
    fn run(mut self) -> ! {
        loop {
            let signo = match self.next_signal(PollTimeout::NONE) {
                Ok(Some(signo)) => signo,
                Ok(None) => continue,
                Err(_) => {
                    self.teardown();
                    std::process::exit(EXIT_TERMINATED);
                }
            };
            match Signal::try_from(signo) {
                Ok(Signal::SIGCHLD) => {
                    self.reap();
                    if let Some(status) = self.program_status {
                        self.teardown();
                        exit_like(status);
                    }
                }
                Ok(sig @ (Signal::SIGINT | Signal::SIGQUIT)) => {
                    if let (Some(pid), None) = (self.program, self.program_status) {
                        let _ = signal_pid(pid, sig);
                    }
                }
                Ok(Signal::SIGTERM | Signal::SIGHUP) => {
                    self.teardown();
                    std::process::exit(EXIT_TERMINATED);
                }
                _ => {}
            }
        }
    }

    /// Waits up to `timeout` for a handled signal and returns its number.
    fn next_signal(&self, timeout: PollTimeout) -> nix::Result<Option<i32>> {
        let mut fds = [PollFd::new(self.signals.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(Errno::EINTR) => return Ok(None),
            Ok(_) => {}
            Err(error) => return Err(error),
        }
        match self.signals.read_signal() {
            Ok(Some(info)) => Ok(i32::try_from(info.ssi_signo).ok()),
            Ok(None) | Err(Errno::EINTR) => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Reaps every exited child without blocking, noting the program's own status.
    fn reap(&mut self) {
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return,
                Ok(status) => {
                    let is_program = status
                        .pid()
                        .is_some_and(|pid| Some(pid.as_raw() as u32) == self.program);
                    let is_exit =
                        matches!(status, WaitStatus::Exited(..) | WaitStatus::Signaled(..));
                    if is_program && is_exit {
                        self.program_status = Some(status);
                    }
                }
                Err(Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    }

    /// Kills every live descendant and every other member of the shim's group (SIGCONT, then
    /// SIGKILL), reaping as it goes, until none is left or [`TEARDOWN_LIMIT`] has passed.
    fn teardown(&mut self) {
        let me = std::process::id();
        let own_group = getpgrp() == getpid();
        let deadline = Instant::now() + TEARDOWN_LIMIT;
        loop {
            self.reap();
            let stats = all_stats();
            let mut targets = descendants_in(&stats, me);
            if own_group {
                for pid in group_members_in(&stats, me) {
                    if pid != me && !targets.contains(&pid) {
                        targets.push(pid);
                    }
                }
            }
            if targets.is_empty() || Instant::now() >= deadline {
                break;
            }
            for &pid in &targets {
                let _ = signal_pid(pid, Signal::SIGCONT);
                let _ = signal_pid(pid, Signal::SIGKILL);
            }
            // Wake on the next SIGCHLD (or after 10 ms) and look again.
            let _ = self.next_signal(PollTimeout::from(10u8));
        }
        self.reap();
    }
}

/// Ends the shim the way the program ended.
fn exit_like(status: WaitStatus) -> ! {
    match status {
        WaitStatus::Exited(_, code) => std::process::exit(code),
        WaitStatus::Signaled(_, sig, _) => die_by(sig),
        _ => std::process::exit(1),
    }
}

/// Dies by `sig` so the daemon sees "killed by signal N"; exits 128 + N if that fails.
fn die_by(sig: Signal) -> ! {
    // The program already dumped core if it was going to; the shim must not add its own.
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit reads the rlimit struct above; SIG_DFL installs no handler code.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        let _ = signal(sig, SigHandler::SigDfl);
    }
    let mut only = SigSet::empty();
    only.add(sig);
    let _ = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
    let _ = raise(sig);
    std::process::exit(128 + sig as i32)
}
