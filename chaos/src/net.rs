//! Talking to the daemon with deadlines: every connect, handshake and answer the runner
//! waits for is bounded, so a stuck daemon shows up as HUNG instead of stalling the run.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use toolvisor_protocol::client::{Client, ClientError, ClientOptions};
use toolvisor_protocol::codec::{Codec, CodecError};
use toolvisor_protocol::wire::{ClientFrame, ClientKind, DaemonFrame, Surface, Tier};

/// Why something did not come back in time or at all.
#[derive(Debug)]
pub enum Miss {
    /// No answer before the deadline.
    Hung(String),
    /// A definite failure (refused, closed, wrong frame).
    Failed(String),
}

/// Run `f` on its own thread and wait at most `limit` for it. A thread that never returns is
/// left behind (the run reports it as hung and ends anyway).
pub fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Miss> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => Ok(v),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            Err(Miss::Hung(format!("no answer within {limit:?}")))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Err(Miss::Failed("the worker thread panicked".into()))
        }
    }
}

/// The `Hello` of every runner connection: a harness with an exec surface that answers
/// approvals, or a read-only ops client for probes.
pub fn options(codec: Codec, exec: bool, workdir: &Path) -> ClientOptions {
    ClientOptions {
        codec,
        client_kind: if exec {
            ClientKind::Harness
        } else {
            ClientKind::Ops
        },
        run_id: "chaos".into(),
        workdir: workdir.display().to_string(),
        surface: Surface {
            max_tier: if exec { Tier::Exec } else { Tier::Read },
            approvals: exec,
            questions: false,
            bridge_tools: Vec::new(),
        },
        ..ClientOptions::default()
    }
}

/// Connect and handshake within `limit`; the client then reads with `read_timeout`.
pub fn connect(
    socket: &Path,
    options: ClientOptions,
    limit: Duration,
    read_timeout: Duration,
) -> Result<Client, Miss> {
    let socket: PathBuf = socket.to_path_buf();
    let client = within(limit, move || Client::connect(&socket, options))?
        .map_err(|e| Miss::Failed(format!("connect: {e}")))?;
    client
        .set_read_timeout(Some(read_timeout))
        .map_err(|e| Miss::Failed(format!("set a read timeout: {e}")))?;
    Ok(client)
}

/// True when a client error is a read that hit its timeout.
pub fn is_timeout(e: &ClientError) -> bool {
    matches!(e, ClientError::Codec(CodecError::Io(io))
        if matches!(io.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut))
}

/// Classify a client error as hung (timeout) or failed.
pub fn miss(what: &str, e: ClientError) -> Miss {
    if is_timeout(&e) {
        Miss::Hung(format!("{what}: no answer before the read timeout"))
    } else {
        Miss::Failed(format!("{what}: {e}"))
    }
}

/// Ping on an existing connection; expects the matching `Pong`.
pub fn ping_on(client: &mut Client, nonce: u64) -> Result<(), Miss> {
    match client.request(&ClientFrame::Ping { nonce }) {
        Ok(DaemonFrame::Pong { nonce: got }) if got == nonce => Ok(()),
        Ok(other) => Err(Miss::Failed(format!(
            "ping {nonce}: expected its Pong, got {other:?}"
        ))),
        Err(e) => Err(miss("ping", e)),
    }
}

/// A fresh connection must answer a `Ping` within `limit`, handshake included.
pub fn fresh_ping(socket: &Path, workdir: &Path, nonce: u64, limit: Duration) -> Result<(), Miss> {
    let socket = socket.to_path_buf();
    let opts = options(Codec::Json, false, workdir);
    within(limit, move || {
        let mut client = Client::connect(&socket, opts).map_err(|e| Miss::Failed(e.to_string()))?;
        ping_on(&mut client, nonce)
    })?
}
