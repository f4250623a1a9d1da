//! `toolvisor mcp` with no daemon answering on its socket: start one (`toolvisor serve`,
//! detached, with the same socket and config file), wait until it answers a `Hello` (its
//! socket is bound before the rest of its start, which may still fail), and go on.
//! Concurrent starters (a harness starting several MCP servers at once) serialise on a lock
//! file beside the socket and probe again under it, so exactly one daemon starts.

use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolvisor_kit::private::{ensure_private_dir, open_private_file};

/// How long a started daemon may take to accept connections.
pub const READY_WAIT: Duration = Duration::from_secs(30);

/// How long a started daemon that accepts a connection may take to answer its `Hello`.
const WELCOME_WAIT: Duration = Duration::from_secs(5);

/// Whether a daemon on `socket` answers a `Hello` with its `Welcome` within `wait` (the probe
/// is an operator's connection that ends at once).
fn welcomes(socket: &Path, wait: Duration) -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    let socket = socket.to_path_buf();
    std::thread::spawn(move || {
        let ok = toolvisor_protocol::client::Client::connect(&socket, Default::default()).is_ok();
        let _ = tx.send(ok);
    });
    rx.recv_timeout(wait).unwrap_or(false)
}

/// What [`ensure_daemon`] found or did.
#[derive(Debug, PartialEq, Eq)]
pub enum Daemon {
    /// A daemon already answered.
    Running,
    /// We started this one (its pid).
    Started(u32),
}

fn with_suffix(socket: &Path, suffix: &str) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `Ok(true)`: a daemon answers; `Ok(false)`: nothing listens (no socket file, or a stale one
/// that refuses connections); `Err`: something else is wrong with the socket.
fn answers(socket: &Path) -> Result<bool, String> {
    match UnixStream::connect(socket) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {
            Ok(false)
        }
        Err(e) => Err(format!(
            "cannot connect to the daemon's socket {}: {e}; fix the socket's permissions or pass the right --socket",
            socket.display()
        )),
    }
}

/// Make sure a daemon answers on `socket`, starting `toolvisor serve --socket SOCKET
/// [--config CONFIG]` (this executable) when none does. The error says what went wrong and
/// what to do; the daemon's own start-up errors are in `<socket>.serve.log`.
pub fn ensure_daemon(socket: &Path, config: Option<&Path>) -> Result<Daemon, String> {
    if answers(socket)? {
        return Ok(Daemon::Running);
    }
    let dir = socket.parent().unwrap_or(Path::new("/"));
    ensure_private_dir(dir, "the socket directory").map_err(|e| e.to_string())?;
    let lock_path = with_suffix(socket, ".start-lock");
    let lock = open_private_file(&lock_path, "the daemon start lock").map_err(|e| e.to_string())?;
    lock.lock().map_err(|e| {
        format!(
            "cannot lock {} to start the daemon: {e}; remove it if no toolvisor mcp is starting one",
            lock_path.display()
        )
    })?;
    // Another starter may have won the race while we waited for the lock.
    if answers(socket)? {
        return Ok(Daemon::Running);
    }
    let log_path = with_suffix(socket, ".serve.log");
    let mut log =
        open_private_file(&log_path, "the started daemon's log").map_err(|e| e.to_string())?;
    let from = log.seek(SeekFrom::End(0)).unwrap_or(0);
    let exe = std::env::current_exe().map_err(|e| {
        format!(
            "cannot find this executable to start the daemon: {e}; start it with `toolvisor serve`"
        )
    })?;
    let mut cmd = Command::new(&exe);
    cmd.arg("serve").arg("--socket").arg(socket);
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    let stderr = log
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        // Its own process group: a harness that kills its MCP server's group leaves it be.
        .process_group(0)
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start `{} serve`: {e}; start the daemon yourself with `toolvisor serve`",
                exe.display()
            )
        })?;
    let pid = child.id();
    let started = Instant::now();
    loop {
        // Its socket is bound before the rest of its start (the state directory, the
        // workers), which may still fail: only a `Welcome` says it is up. A daemon that exits
        // meanwhile closes the connection, and its exit is read below.
        if answers(socket)? && welcomes(socket, WELCOME_WAIT) {
            // Reap it should it ever exit while we live; it outlives us otherwise.
            std::thread::spawn(move || child.wait());
            return Ok(Daemon::Started(pid));
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut tail = String::new();
            let _ = log.seek(SeekFrom::Start(from));
            let _ = log.read_to_string(&mut tail);
            let tail: String = tail
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join(" | ");
            return Err(format!(
                "the daemon it started (`toolvisor serve --socket {}`) exited ({status}) before accepting connections: {tail}; fix that and start it with `toolvisor serve`",
                socket.display()
            ));
        }
        if started.elapsed() > READY_WAIT {
            return Err(format!(
                "the daemon it started (pid {pid}) did not accept connections on {} within {} s; see {}",
                socket.display(),
                READY_WAIT.as_secs(),
                log_path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
