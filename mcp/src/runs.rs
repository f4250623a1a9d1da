//! What outlives one MCP request in `toolvisor mcp`. A 2026-07-28 client has no session (no
//! `initialize`; every request stands alone, and over HTTP each is served by a fresh handler),
//! so its run and conversation are named by a handle the server mints and the client passes
//! back in each request's `_meta` (`toolvisor/conversation`): the run's daemon connection is
//! kept here under it. Behind a listener each run takes a place under the same caps as MCP
//! sessions (per client and in all, [`Ledger`]), and one nobody used for `--run-idle-secs`
//! gives its daemon connection and its place back (a sweeper looks, so a client that never
//! comes back does not hold them). A run's daemon connection and names are a [`Shared`], made
//! on first use and again after the daemon went away. Also here: the calls waiting for a client's answer to an approval
//! asked as a multi round-trip request (MRTR: `inputRequests` + `requestState`), and tasks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use toolvisor_protocol::wire::{ApprovalRequest, ClientFrame};

use rmcp::RoleServer;
use toolvisor_protocol::wire::Surface;

use crate::client::{answer_questions, question_port};
use crate::daemon::{CallMsg, DaemonConn, HelloParts};
use crate::gate::{CapsFull, Ledger, RunPlace};
use crate::peer::Peer;
use crate::tasks::Tasks;
use crate::{Approvals, BridgeError, Options};

/// One run's daemon connection and names, shared by the handler, its tool-list watcher and
/// (for 2026 clients) every request naming the run's handle.
pub(crate) struct Shared {
    pub(crate) opts: Arc<Options>,
    pub(crate) run_id: String,
    pub(crate) conversation: String,
    /// A 2026-07-28 run: no session, so no server-to-client requests (elicitation, list
    /// changes) and no question port.
    pub(crate) stateless: bool,
    /// The live connection; replaced when the daemon went away (a restart, a new policy)
    /// and a later request or the watcher connects again.
    pub(crate) conn: tokio::sync::Mutex<Option<Arc<DaemonConn>>>,
}

impl Shared {
    /// The run of a 2026 client's handle: the handle names both run and conversation unless
    /// `--run` / `--conversation` fixed them.
    pub(crate) fn for_handle(opts: Arc<Options>, handle: &str) -> Shared {
        Shared {
            run_id: opts.run_id.clone().unwrap_or_else(|| handle.to_string()),
            conversation: opts
                .conversation
                .clone()
                .unwrap_or_else(|| handle.to_string()),
            opts,
            stateless: true,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether its daemon connection is in use beyond this run (a call's task, a call
    /// waiting for an MRTR answer, a request connecting now).
    pub(crate) fn busy(&self) -> bool {
        match self.conn.try_lock() {
            Ok(conn) => conn.as_ref().is_some_and(|c| Arc::strong_count(c) > 1),
            Err(_) => true,
        }
    }

    /// Close the daemon connection; the conversation stays (a 2026 handle can come back).
    pub(crate) async fn close(&self) {
        self.close_ending(None).await;
    }

    /// Close the daemon connection, ending `end`'s conversation first if this connection
    /// made calls in it.
    pub(crate) async fn close_ending(&self, end: Option<&str>) {
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn {
            conn.close(end).await;
        }
    }

    pub(crate) async fn connect(
        &self,
        peer: &rmcp::Peer<RoleServer>,
    ) -> Result<Arc<DaemonConn>, BridgeError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref()
            && conn.closed().is_none()
        {
            return Ok(conn.clone());
        }
        // A 2026 client cannot be asked a question from outside a request: no question port.
        let elicits = !self.stateless && question_port(self.opts.questions, peer);
        let (qtx, qrx) = mpsc::unbounded_channel();
        // `deny`: nothing above the read tier is offered or callable.
        let max_tier = match self.opts.approvals {
            Approvals::Deny => self.opts.surface.min(toolvisor_protocol::wire::Tier::Read),
            _ => self.opts.surface,
        };
        let conn = DaemonConn::connect(
            HelloParts {
                run_id: self.run_id.clone(),
                workdir: self.opts.workdir.clone(),
                surface: Surface {
                    max_tier,
                    // Approval requests always reach us: we ask through elicitation or
                    // deny, saying why.
                    approvals: true,
                    questions: elicits,
                    bridge_tools: Vec::new(),
                },
                socket: &self.opts.socket,
                run_token: self.opts.run_token.clone(),
            },
            qtx,
        )
        .await?;
        let conn = Arc::new(conn);
        if elicits {
            tokio::spawn(answer_questions(conn.clone(), peer.clone(), qrx));
        }
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

/// Over stdio, a run nobody used this long gives its daemon connection back (the
/// conversation's state stays the daemon's: the next request with its handle connects
/// again). A listener's runs use `SessionCaps::run_idle` instead.
const IDLE: Duration = Duration::from_secs(600);
/// Over stdio (one client), runs kept at once; past it the least recently used goes. A
/// listener's runs are capped by its [`Ledger`] instead.
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
    /// When the approval form went out.
    pub since: Instant,
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

/// One 2026-07-28 run.
struct Run {
    shared: Arc<Shared>,
    used: Instant,
    /// Its place under the listener's caps (none over stdio).
    _place: Option<RunPlace>,
}

/// The process-wide state of one `toolvisor mcp`.
pub struct Runs {
    opts: Arc<Options>,
    by_handle: Mutex<HashMap<String, Run>>,
    pending: Mutex<HashMap<String, Pending>>,
    pub tasks: Tasks,
    /// A listener's caps, which runs share with sessions; `None` over stdio.
    ledger: Option<Arc<Ledger>>,
    idle: Duration,
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
    /// Over stdio: one client, no caps.
    pub fn new(opts: Arc<Options>) -> Arc<Runs> {
        Arc::new(Runs {
            opts,
            by_handle: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            tasks: Tasks::default(),
            ledger: None,
            idle: IDLE,
        })
    }

    /// Behind a listener: each run takes a place in `ledger`; a sweeper gives idle runs'
    /// connections and places back until `stop`.
    pub fn for_listener(
        opts: Arc<Options>,
        ledger: Arc<Ledger>,
        stop: tokio_util::sync::CancellationToken,
    ) -> Arc<Runs> {
        let idle = ledger.caps().run_idle;
        let runs = Arc::new(Runs {
            opts,
            by_handle: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            tasks: Tasks::default(),
            ledger: Some(ledger),
            idle,
        });
        let weak = Arc::downgrade(&runs);
        let every = (idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
                let Some(runs) = weak.upgrade() else { break };
                let idle = runs.take_idle(None);
                drop(runs);
                for s in idle {
                    s.close().await;
                }
            }
        });
        runs
    }

    /// The runs idle past their time, taken out (all but `keep`). A run in use (a request,
    /// a task or a call waiting for an answer holds it or its connection) is not idle: its
    /// idle time starts again.
    fn take_idle(&self, keep: Option<&str>) -> Vec<Arc<Shared>> {
        let mut runs = self.by_handle.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut idle = Vec::new();
        runs.retain(|h, run| {
            if keep == Some(h.as_str()) || now.duration_since(run.used) < self.idle {
                return true;
            }
            if Arc::strong_count(&run.shared) > 1 || run.shared.busy() {
                run.used = now;
                return true;
            }
            idle.push(run.shared.clone());
            false
        });
        idle
    }

    /// The run of `handle`, taken out (its connection is the caller's to close).
    pub(crate) fn take(&self, handle: &str) -> Option<Arc<Shared>> {
        self.by_handle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(handle)
            .map(|run| run.shared)
    }

    pub fn opts(&self) -> &Arc<Options> {
        &self.opts
    }

    /// A fresh handle for a 2026 client that named none.
    pub fn mint() -> String {
        format!("mcp-{}", random_hex(8))
    }

    /// The run of `handle` (made on first use, taking a place of `peer`'s under the
    /// listener's caps, or `Err` saying whose cap is full); idle runs give their connection
    /// back first.
    pub(crate) async fn run(
        &self,
        handle: &str,
        peer: Option<Peer>,
    ) -> Result<Arc<Shared>, CapsFull> {
        for s in self.take_idle(Some(handle)) {
            s.close().await;
        }
        if let Some(run) = self
            .by_handle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(handle)
        {
            run.used = Instant::now();
            return Ok(run.shared.clone());
        }
        let place = match &self.ledger {
            Some(ledger) => Some(ledger.admit_run(peer.unwrap_or(Peer::Unknown)).await?),
            None => None,
        };
        let evicted = {
            let mut runs = self.by_handle.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            // A concurrent request made it meanwhile: that one's place stands, ours goes.
            if let Some(run) = runs.get_mut(handle) {
                run.used = now;
                return Ok(run.shared.clone());
            }
            let mut evicted = None;
            if self.ledger.is_none() && runs.len() >= MAX_RUNS {
                let oldest = runs
                    .iter()
                    .min_by_key(|(_, run)| run.used)
                    .map(|(h, _)| h.clone());
                evicted = oldest.and_then(|h| runs.remove(&h)).map(|run| run.shared);
            }
            let shared = Arc::new(Shared::for_handle(self.opts.clone(), handle));
            runs.insert(
                handle.to_string(),
                Run {
                    shared: shared.clone(),
                    used: now,
                    _place: place,
                },
            );
            (shared, evicted)
        };
        let (found, evicted) = evicted;
        if let Some(s) = evicted {
            s.close().await;
        }
        Ok(found)
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
