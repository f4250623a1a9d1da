//! Spawning and owning child processes so that none outlives the daemon and none is left a zombie.
//!
//! Every child leads its own process group, has PR_SET_PDEATHSIG set and inherits no fd but
//! 0/1/2. All forks happen on one process-lifetime spawner thread ([`spawn`] hands it the
//! request), because the death signal fires when the *thread* that forked exits. Each child
//! is reaped by its own waiter thread doing `waitpid` on that pid only; the daemon never calls
//! `waitpid(-1)`.
//!
//! With a shim ([`SpawnSpec::shim`]) the direct child is the toolvisor binary in shim mode
//! ([`shim_main`]): it leads the group, runs the program in it, is a child subreaper, and kills
//! the whole tree (found through `/proc` parentage and group membership) when the program
//! exits, when it gets SIGTERM, and when the daemon dies, even by SIGKILL. What even the shim
//! cannot clean up (e.g. the shim was stopped when the daemon died) is in the [`Ledger`],
//! which the next daemon sweeps.
//!
//! No `tokio::process` and no `kill_on_drop`: they reach only the direct child and race this
//! reaper. No cgroups either (not available to the project on its machines): the shim and the
//! ledger cover cleanup.

mod child_setup;
mod guard;
mod kill;
mod ledger;
mod orphans;
mod procfs;
pub mod pty;
pub mod scratch;
mod shim;
mod sockdiag;
mod spawner;

use std::fmt;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::wait::WaitStatus;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::sync::watch;

pub use guard::ProcessGuard;
pub use ledger::{LEDGER_MARK_ENV, LEDGER_TOKEN_ENV, Ledger};
pub use orphans::{adopt_orphans, reap_orphans, wait_owned_reaped};
pub use procfs::{alive, descendants, rss_bytes, tree_listens_on};
pub use shim::{
    EXIT_TERMINATED as SHIM_TERMINATED, SHIM_ARG, SHIM_PARENT_ENV, SHIM_REPORT_ENV, shim_main,
};

/// How long [`spawn`] waits for the shim to report the program's pid.
const REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Upper bound on the shim's report line.
const REPORT_MAX: usize = 4096;

/// What to run and how.
#[derive(Clone, Debug)]
pub struct SpawnSpec {
    /// Program to run; without a `/` it is looked up in the `PATH` of [`SpawnSpec::env`],
    /// with one it is taken relative to [`SpawnSpec::cwd`].
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The child's complete environment: nothing is inherited from the daemon.
    pub env: Vec<(String, String)>,
    /// `true`: stdin is a pipe ([`Spawned::stdin`]); `false`: `/dev/null`.
    pub stdin: bool,
    /// Executable that understands `<shim> __shim <program> <args..>` (the toolvisor binary);
    /// `None` spawns the program directly.
    pub shim: Option<PathBuf>,
    pub ledger: Option<Ledger>,
    /// Names the child in logs, e.g. `process/p3`.
    pub label: String,
    /// Give the child a private `TMPDIR`, removed once it is reaped ([`scratch`]): for
    /// children whose temporary files are their own (language servers), not for commands
    /// whose files a later command may read.
    pub scratch: bool,
}

/// A running child and its pipes.
#[derive(Debug)]
pub struct Spawned {
    pub guard: ProcessGuard,
    pub stdin: Option<pipe::Sender>,
    pub stdout: pipe::Receiver,
    pub stderr: pipe::Receiver,
    /// Becomes `Some` once the direct child (the shim, or the program when unshimmed) has
    /// been reaped.
    pub exit: watch::Receiver<Option<ExitStatus>>,
}

/// How a child ended: an exit code or a killing signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExitStatus {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitStatus {
    /// Reported if the child was reaped by someone else (which this crate never does).
    pub(crate) const UNKNOWN: ExitStatus = ExitStatus {
        code: None,
        signal: None,
    };

    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// `None` for statuses that are not an end (stopped, continued, ...).
    pub(crate) fn from_wait(status: WaitStatus) -> Option<ExitStatus> {
        match status {
            WaitStatus::Exited(_, code) => Some(ExitStatus {
                code: Some(code),
                signal: None,
            }),
            WaitStatus::Signaled(_, signal, _) => Some(ExitStatus {
                code: None,
                signal: Some(signal as i32),
            }),
            _ => None,
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(number)) => match Signal::try_from(number) {
                Ok(signal) => write!(f, "killed by signal {number} ({})", signal.as_str()),
                Err(_) => write!(f, "killed by signal {number}"),
            },
            (None, None) => f.write_str("unknown exit status"),
        }
    }
}

/// Why a child could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("command not found: {program:?} (searched {searched})")]
    NotFound { program: String, searched: String },
    #[error("cannot execute {program:?}: {message}")]
    Exec { program: String, message: String },
    #[error("working directory {} is not usable: {message}", cwd.display())]
    Cwd { cwd: PathBuf, message: String },
    #[error("cannot start the process shim {}: {message}", shim.display())]
    Shim { shim: PathBuf, message: String },
    #[error("spawn failed: {0}")]
    Io(#[from] io::Error),
}

/// Spawns `spec` and returns its guard, pipes and exit watch.
///
/// A program that cannot be found or executed is an error here, also when shimmed: the shim
/// reports the program's pid (or why it failed to start it) before this returns.
///
/// # Cancel safety
///
/// Dropping the future at any point leaves no process behind: a child already forked is
/// owned by a [`ProcessGuard`] that is dropped with it.
pub async fn spawn(spec: SpawnSpec) -> Result<Spawned, SpawnError> {
    check_cwd(&spec.cwd)?;
    let program = resolve_program(&spec.program, &spec.env, &spec.cwd)?;
    let mut spec = spec;
    if let Some(shim) = &spec.shim {
        spec.shim = Some(absolute(shim).map_err(|error| SpawnError::Shim {
            shim: shim.clone(),
            message: error.to_string(),
        })?);
    }
    let scratch = match spec.scratch {
        true => match scratch::make(&spec.label) {
            Ok(dir) => {
                spec.env.retain(|(k, _)| k != "TMPDIR");
                spec.env.push(("TMPDIR".into(), dir.display().to_string()));
                Some(dir)
            }
            Err(error) => {
                tracing::warn!(label = %spec.label, %error, "no scratch directory: the child uses the daemon's temp directory");
                None
            }
        },
        false => None,
    };
    let kept = scratch.clone();
    let forked = spawner::run_on_spawner(move || {
        spawner::fork_child(&spec, &program, scratch).map(|forked| (forked, spec))
    })
    .await
    .map_err(SpawnError::from)
    .and_then(|r| r);
    let forked = match forked {
        Ok(forked) => forked,
        Err(e) => {
            // Forked or not, the guard (when there was one) removes it again; no fork, no guard.
            if let Some(dir) = kept {
                scratch::remove(&dir, "a child that did not start");
            }
            return Err(e);
        }
    };
    let (forked, spec) = forked;
    let spawner::Forked {
        mut guard,
        stdin,
        stdout,
        stderr,
        report,
        exit,
    } = forked;
    let stdin = stdin.map(pipe::Sender::from_owned_fd).transpose()?;
    let stdout = pipe::Receiver::from_owned_fd(stdout)?;
    let stderr = pipe::Receiver::from_owned_fd(stderr)?;
    if let Some(report) = report {
        let shim_error = |message: String| SpawnError::Shim {
            shim: spec.shim.clone().unwrap_or_default(),
            message,
        };
        match read_report(report).await.map_err(shim_error)? {
            Report::Started(pid) => guard.set_main_pid(pid),
            Report::Failed(message) => {
                return Err(SpawnError::Exec {
                    program: spec.program,
                    message,
                });
            }
        }
    }
    tracing::debug!(label = %spec.label, pid = guard.pid(), main_pid = guard.main_pid(), program = %spec.program, "spawned");
    Ok(Spawned {
        guard,
        stdin,
        stdout,
        stderr,
        exit,
    })
}

/// The `PATH` a child with environment `env` searches (like its own `execvp`, the last
/// `PATH` entry wins); `None` when it has none.
pub fn env_path(env: &[(String, String)]) -> Option<&str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
}

fn check_cwd(cwd: &Path) -> Result<(), SpawnError> {
    let problem = match std::fs::metadata(cwd) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => "not a directory".to_owned(),
        Err(error) => error.to_string(),
    };
    Err(SpawnError::Cwd {
        cwd: cwd.to_path_buf(),
        message: problem,
    })
}

/// Makes `path` absolute against the daemon's working directory (the child changes its own).
fn absolute(path: &Path) -> io::Result<PathBuf> {
    if path.is_absolute() {
        Ok(path.to_path_buf())
    } else {
        Ok(std::env::current_dir()?.join(path))
    }
}

/// What `execvp` would run: `program` itself if it has a `/`, else the first executable file
/// named `program` in the child's `PATH`. The result is absolute.
fn resolve_program(
    program: &str,
    env: &[(String, String)],
    cwd: &Path,
) -> Result<PathBuf, SpawnError> {
    let not_executable = |path: &Path| SpawnError::Exec {
        program: program.to_owned(),
        message: format!(
            "permission denied: {} is not an executable file",
            path.display()
        ),
    };
    if program.is_empty() {
        return Err(SpawnError::Exec {
            program: String::new(),
            message: "empty program name".to_owned(),
        });
    }
    if program.contains('/') {
        let path = absolute(&cwd.join(program))?;
        return match is_executable(&path) {
            Some(true) => Ok(path),
            Some(false) => Err(not_executable(&path)),
            None => Err(SpawnError::NotFound {
                program: program.to_owned(),
                searched: path.display().to_string(),
            }),
        };
    }
    // Like the child's own execvp: the last PATH entry of its environment wins.
    let Some(search) = env_path(env) else {
        return Err(SpawnError::NotFound {
            program: program.to_owned(),
            searched: "nothing: PATH is not set in the child's environment".to_owned(),
        });
    };
    let mut denied = None;
    for dir in search.split(':') {
        // An empty entry means the current directory, which for the child is `cwd`.
        let candidate = absolute(&cwd.join(dir).join(program))?;
        match is_executable(&candidate) {
            Some(true) => return Ok(candidate),
            Some(false) => {
                denied.get_or_insert(candidate);
            }
            None => {}
        }
    }
    match denied {
        Some(path) => Err(not_executable(&path)),
        None => Err(SpawnError::NotFound {
            program: program.to_owned(),
            searched: format!("PATH={search}"),
        }),
    }
}

/// `None`: nothing there; `Some(false)`: there but not an executable file.
fn is_executable(path: &Path) -> Option<bool> {
    let meta = std::fs::metadata(path).ok()?;
    Some(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

enum Report {
    Started(u32),
    Failed(String),
}

/// Reads the shim's one-line report from the read end of its fd 3.
async fn read_report(fd: std::os::fd::OwnedFd) -> Result<Report, String> {
    let mut pipe =
        pipe::Receiver::from_owned_fd(fd).map_err(|error| format!("report pipe: {error}"))?;
    let mut line = Vec::new();
    let outcome = tokio::time::timeout(REPORT_TIMEOUT, async {
        let mut chunk = [0u8; 256];
        loop {
            let read = pipe.read(&mut chunk).await?;
            line.extend_from_slice(&chunk[..read]);
            if read == 0 || line.contains(&b'\n') || line.len() > REPORT_MAX {
                return io::Result::Ok(());
            }
        }
    })
    .await;
    match outcome {
        Err(_) => return Err(format!("it did not report within {REPORT_TIMEOUT:?}")),
        Ok(Err(error)) => return Err(format!("reading its report failed: {error}")),
        Ok(Ok(())) => {}
    }
    let text = String::from_utf8_lossy(&line);
    let first = text.lines().next().unwrap_or_default();
    if let Some(pid) = first.strip_prefix("OK ") {
        match pid.trim().parse() {
            Ok(pid) if pid > 1 => Ok(Report::Started(pid)),
            _ => Err(format!("it reported an invalid pid: {first:?}")),
        }
    } else if let Some(message) = first.strip_prefix("ERR ") {
        Ok(Report::Failed(message.to_owned()))
    } else if first.is_empty() {
        Err("it exited before reporting the program's pid".to_owned())
    } else {
        Err(format!("it sent an unreadable report: {first:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_reads_like_a_shell() {
        let code = ExitStatus {
            code: Some(3),
            signal: None,
        };
        let killed = ExitStatus {
            code: None,
            signal: Some(9),
        };
        assert_eq!(code.to_string(), "exit code 3");
        assert_eq!(killed.to_string(), "killed by signal 9 (SIGKILL)");
        assert!(!code.success() && !killed.success());
        assert!(
            ExitStatus {
                code: Some(0),
                signal: None
            }
            .success()
        );
    }

    #[test]
    fn guard_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ProcessGuard>();
        assert_send_sync::<Spawned>();
        assert_send_sync::<Ledger>();
    }

    #[test]
    fn not_found_names_program_and_path() {
        let env = vec![("PATH".to_owned(), "/usr/bin:/bin".to_owned())];
        let error = resolve_program("no-such-tool-xyz", &env, Path::new("/")).unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"command not found: "no-such-tool-xyz" (searched PATH=/usr/bin:/bin)"#
        );
    }

    #[test]
    fn resolves_through_path_and_relative_to_cwd() {
        let env = vec![("PATH".to_owned(), "/nonexistent:/bin:/usr/bin".to_owned())];
        let sh = resolve_program("sh", &env, Path::new("/")).expect("sh resolves");
        assert!(sh.is_absolute() && sh.ends_with("sh"));
        let relative = resolve_program("./sh", &env, Path::new("/bin")).expect("./sh resolves");
        assert_eq!(relative, Path::new("/bin/./sh"));
        assert!(matches!(
            resolve_program("sh", &[], Path::new("/")),
            Err(SpawnError::NotFound { .. })
        ));
    }
}
