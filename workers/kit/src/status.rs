//! Live facts about one tree node, shared between the actor that owns the resource and the
//! supervisor that reports it, so a snapshot of the tree never waits on a busy mailbox.
//!
//! Also the `TreeNotifier` that tells watchers the tree changed, and the per-kind lifecycle
//! counters (`count_event`: restarts, TTL expiries) the metrics endpoint reads. Live facts are
//! written by the owning actor and read by the supervisor; a node's `owned` conversation decides
//! who sees it whole.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use toolvisor_protocol::tree::{NodeState, TreeNode};

/// Wakes tree watchers: every change to any node bumps the generation.
#[derive(Clone, Debug)]
pub struct TreeNotifier {
    generation: Arc<AtomicU64>,
    tx: Arc<watch::Sender<u64>>,
}

impl Default for TreeNotifier {
    fn default() -> Self {
        let (tx, _rx) = watch::channel(0);
        TreeNotifier {
            generation: Arc::new(AtomicU64::new(0)),
            tx: Arc::new(tx),
        }
    }
}

impl TreeNotifier {
    /// Record that something in the tree changed.
    pub fn bump(&self) {
        let g = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.tx.send_replace(g);
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }
}

/// The mutable facts of a node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    pub pid: Option<u32>,
    pub state: NodeState,
    pub detail: String,
    pub started: Instant,
    /// When the idle or hard TTL runs out, whichever is sooner.
    pub ttl_deadline: Option<Instant>,
    pub last_error: Option<String>,
    pub restarts: u32,
}

/// One node's status, shared by `Arc`. Survives restarts of the actor it describes.
#[derive(Debug)]
pub struct NodeStatus {
    kind: String,
    id: String,
    /// The conversation that owns the resource, if one does.
    conversation: Option<String>,
    info: Mutex<NodeInfo>,
    in_flight: AtomicU32,
    notifier: TreeNotifier,
}

impl NodeStatus {
    pub fn new(kind: &str, id: &str, detail: String, notifier: TreeNotifier) -> Arc<Self> {
        Self::build(kind, id, None, detail, notifier)
    }

    /// The status of a resource that belongs to `conversation`: the tree shows its detail
    /// (a command line, say) to that conversation's clients and to ops clients only.
    pub fn owned(
        kind: &str,
        id: &str,
        conversation: &str,
        detail: String,
        notifier: TreeNotifier,
    ) -> Arc<Self> {
        Self::build(kind, id, Some(conversation.to_string()), detail, notifier)
    }

    fn build(
        kind: &str,
        id: &str,
        conversation: Option<String>,
        detail: String,
        notifier: TreeNotifier,
    ) -> Arc<Self> {
        notifier.bump();
        Arc::new(NodeStatus {
            kind: kind.to_string(),
            id: id.to_string(),
            conversation,
            info: Mutex::new(NodeInfo {
                pid: None,
                state: NodeState::Starting,
                detail,
                started: Instant::now(),
                ttl_deadline: None,
                last_error: None,
                restarts: 0,
            }),
            in_flight: AtomicU32::new(0),
            notifier,
        })
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn notifier(&self) -> &TreeNotifier {
        &self.notifier
    }

    fn lock(&self) -> MutexGuard<'_, NodeInfo> {
        self.info.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the current facts.
    pub fn get(&self) -> NodeInfo {
        self.lock().clone()
    }

    /// Change the facts and wake watchers.
    pub fn update(&self, f: impl FnOnce(&mut NodeInfo)) {
        f(&mut self.lock());
        self.notifier.bump();
    }

    pub fn set_state(&self, state: NodeState) {
        self.update(|i| i.state = state);
    }

    pub fn state(&self) -> NodeState {
        self.lock().state
    }

    /// Count a message or call addressed to the node until the returned guard drops; the
    /// count is shown as the node's mailbox depth.
    pub fn enqueue(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// The node as it appears in a snapshot (without children).
    pub fn to_node(&self, rss: impl Fn(u32) -> Option<u64>) -> TreeNode {
        let info = self.get();
        let now = Instant::now();
        TreeNode {
            kind: self.kind.clone(),
            id: self.id.clone(),
            pid: info.pid,
            state: info.state,
            uptime_ms: duration_ms(now.saturating_duration_since(info.started)),
            ttl_left_ms: info
                .ttl_deadline
                .map(|d| duration_ms(d.saturating_duration_since(now))),
            restarts: info.restarts,
            mailbox: self.in_flight.load(Ordering::Relaxed),
            rss_bytes: info.pid.and_then(rss),
            detail: info.detail,
            conversation: self.conversation.clone(),
            last_error: info.last_error,
            children: Vec::new(),
        }
    }
}

/// Holds one unit of a node's mailbox depth.
pub struct InFlight(Arc<NodeStatus>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

pub fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Lifecycle events of resources (`restart`, `ttl_expiry`), counted per kind for the whole
/// process since it started: the metrics endpoint's counters. Kinds and events are a small
/// fixed set, so the map stays small.
static EVENTS: std::sync::Mutex<std::collections::BTreeMap<(String, &'static str), u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Count one `event` of a resource of `kind`.
pub fn count_event(kind: &str, event: &'static str) {
    let mut events = EVENTS.lock().unwrap_or_else(|p| p.into_inner());
    *events.entry((kind.to_string(), event)).or_default() += 1;
}

/// Every counted event: `(kind, event, count)`.
pub fn events() -> Vec<(String, &'static str, u64)> {
    EVENTS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|((kind, event), n)| (kind.clone(), *event, *n))
        .collect()
}
