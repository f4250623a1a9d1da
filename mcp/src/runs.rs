//! What outlives one MCP request in `toolvisor mcp`. A 2026-07-28 client has no session (no
//! `initialize`; every request stands alone, and over HTTP each is served by a fresh handler),
//! so its run and conversation are named by a handle the server mints and the client passes
//! back in each request's `_meta` (`toolvisor/conversation`): the run's daemon connection is
//! kept here under it. Also here: the calls waiting for a client's answer to an approval
//! asked as a multi round-trip request (MRTR: `inputRequests` + `requestState`), and tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use toolvisor_protocol::wire::{ApprovalRequest, ClientFrame};

use crate::Options;
use crate::bridge::Shared;
use crate::daemon::{CallMsg, DaemonConn};
use crate::tasks::Tasks;

/// The `_meta` key of the conversation handle (request and result).
pub const HANDLE_KEY: &str = "toolvisor/conversation";

/// A run nobody used this long gives its daemon connection back (the conversation's state
/// stays the daemon's: the next request with its handle connects again).
const IDLE: Duration = Duration::from_secs(600);
/// Runs kept at once; past it the least recently used goes.
const MAX_RUNS: usize = 256;
/// A call waiting for an MRTR answer this long is cancelled (the daemon's approval timeout,
/// 300 s by default, has ended it by then anyway).
const PENDING_TTL: Duration = Duration::from_secs(600);
/// Calls waiting for an MRTR answer at once.
const MAX_PENDING: usize = 256;

/// A call whose approval was asked back to the client as `inputRequests`.
pub(crate) struct Pending {
    pub conn: Arc<DaemonConn>,
    pub id: u64,
    pub rx: mpsc::Receiver<CallMsg>,
    pub approval: ApprovalRequest,
    pub tool: String,
    pub conversation: String,
    /// The handle the first round gave back (a retry need not name it).
    pub handle: Option<String>,
    since: Instant,
}

impl Pending {
    pub fn new(
        conn: Arc<DaemonConn>,
        id: u64,
        rx: mpsc::Receiver<CallMsg>,
        approval: ApprovalRequest,
        tool: String,
        conversation: String,
        handle: Option<String>,
    ) -> Pending {
        Pending {
            conn,
            id,
            rx,
            approval,
            tool,
            conversation,
            handle,
            since: Instant::now(),
        }
    }
}

/// The process-wide state of one `toolvisor mcp`.
pub struct Runs {
    opts: Arc<Options>,
    by_handle: Mutex<HashMap<String, (Arc<Shared>, Instant)>>,
    pending: Mutex<HashMap<String, Pending>>,
    pub tasks: Tasks,
}

/// Whether `handle` is one we would mint or accept: 1..=64 of `[A-Za-z0-9_.-]`.
pub fn valid_handle(handle: &str) -> bool {
    !handle.is_empty()
        && handle.len() <= 64
        && handle
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_err()
    {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        return format!("{nanos:x}");
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl Runs {
    pub fn new(opts: Arc<Options>) -> Arc<Runs> {
        Arc::new(Runs {
            opts,
            by_handle: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            tasks: Tasks::default(),
        })
    }

    pub fn opts(&self) -> &Arc<Options> {
        &self.opts
    }

    /// A fresh handle for a 2026 client that named none.
    pub fn mint() -> String {
        format!("mcp-{}", random_hex(8))
    }

    /// The run of `handle` (made on first use); runs idle past [`IDLE`] give their connection
    /// back first.
    pub(crate) async fn run(&self, handle: &str) -> Arc<Shared> {
        let (found, idle) = {
            let mut runs = self.by_handle.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let mut idle: Vec<Arc<Shared>> = Vec::new();
            runs.retain(|h, (s, used)| {
                let keep = h == handle || now.duration_since(*used) < IDLE;
                if !keep {
                    idle.push(s.clone());
                }
                keep
            });
            if runs.len() >= MAX_RUNS && !runs.contains_key(handle) {
                let oldest = runs
                    .iter()
                    .min_by_key(|(_, (_, used))| *used)
                    .map(|(h, _)| h.clone());
                if let Some(h) = oldest
                    && let Some((s, _)) = runs.remove(&h)
                {
                    idle.push(s);
                }
            }
            let entry = runs
                .entry(handle.to_string())
                .or_insert_with(|| (Arc::new(Shared::for_handle(self.opts.clone(), handle)), now));
            entry.1 = now;
            (entry.0.clone(), idle)
        };
        for s in idle {
            s.close().await;
        }
        found
    }

    /// Keep a call waiting for the client's answer; the key is the `requestState` the client
    /// echoes back; handed back when too many wait already (the caller denies instead).
    pub(crate) fn park(&self, pending: Pending) -> Result<String, Box<Pending>> {
        let mut map = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let expired: Vec<String> = map
            .iter()
            .filter(|(_, p)| now.duration_since(p.since) > PENDING_TTL)
            .map(|(k, _)| k.clone())
            .collect();
        for k in expired {
            if let Some(p) = map.remove(&k) {
                let _ = p.conn.send(&ClientFrame::Cancel { id: p.id });
            }
        }
        if map.len() >= MAX_PENDING {
            return Err(Box::new(pending));
        }
        let key = format!("tv-{}", random_hex(16));
        map.insert(key.clone(), pending);
        Ok(key)
    }

    /// The call waiting under `state`, taken out (a state is good for one retry).
    pub(crate) fn unpark(&self, state: &str) -> Option<Pending> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_plain_and_bounded() {
        assert!(valid_handle(&Runs::mint()));
        assert!(valid_handle("conv-1.a_b"));
        assert!(!valid_handle(""));
        assert!(!valid_handle("../x"));
        assert!(!valid_handle(&"a".repeat(65)));
    }
}
