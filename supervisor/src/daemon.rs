//! The daemon: the state every session shares (the gates' parts, the services tool handlers
//! use, the roster of sessions), how it starts (`Daemon::start`) and stops
//! (`Started::shutdown`). The accept loop that hands connections to sessions is
//! `server.rs`; this module imports neither `session` nor `server`.
//!
//! Clients get the tree only through `Daemon::tree_for(viewer)`: known secrets masked in every
//! detail and last error, and a conversation's resources (`NodeStatus::owned`) shown whole only to
//! that conversation's clients and to ops clients. `start` sweeps what a killed daemon left before
//! anything is accepted: temp files first, then the spawn ledger (the socket lock is held by then;
//! the daemon then becomes a child subreaper), then the journals of cut multi-file writes and the
//! structural accepts cut short. `STOP_ORDER` stops what holds a person's or a program's state
//! mid-flight first (debug sessions, kernels, vibe workers), then language servers, the data hub,
//! inference servers, download jobs and processes. Memory is given back after a burst of sessions
//! and after an idle spell (`trim_task`, see `kit::memory`).

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorRef};
use toolvisor_jobs::tracked::{ProcessLimits, Processes};
use toolvisor_jobs::vibe::Vibes;
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::Ledger;
use toolvisor_kit::status::{TreeNotifier, duration_ms};
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::tree::{NodeState, TreeNode, TreeSnapshot};
use toolvisor_protocol::wire::{ClientKind, StatusReport, Tier};

use crate::audit::AuditLog;
use crate::config::Config;
use crate::lanes::Lanes;
use crate::listener::Bound;
use crate::registry::Registry;
use crate::root::{Root, RootArgs, RootMsg};
use crate::tools::Services;

mod open;
mod start;
use open::kind_supervisor;
pub use start::start;

/// Who is looking at the tree. An `ops` client sees every node whole; any other client sees
/// the details of its own conversations' resources only (another conversation's command
/// lines can carry what that conversation was told in confidence). Known secrets are masked
/// for everyone.
#[derive(Clone, Debug, Default)]
pub struct TreeViewer {
    pub ops: bool,
    /// Conversations this client has made calls for.
    pub conversations: Arc<Mutex<HashSet<String>>>,
}

impl TreeViewer {
    pub fn new(kind: ClientKind) -> TreeViewer {
        TreeViewer {
            ops: kind == ClientKind::Ops,
            conversations: Arc::default(),
        }
    }

    pub fn saw(&self, conversation: &str) {
        let mut set = self.conversations.lock().unwrap_or_else(|p| p.into_inner());
        if !set.contains(conversation) {
            set.insert(conversation.to_string());
        }
    }

    fn may_see(&self, conversation: &str) -> bool {
        self.ops
            || self
                .conversations
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(conversation)
    }
}

/// What the tree shows of one connected client.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    pub kind: ClientKind,
    pub run_id: String,
    pub tier: Tier,
    pub connected: Instant,
    pub in_flight: Arc<AtomicU64>,
    pub pid: Option<u32>,
    /// Bytes queued for the client and not yet read by it.
    pub queued: crate::outbox::QueueMeter,
}

/// State shared by every session: the gates' parts (configuration, registry, lanes, audit),
/// the services tool handlers use ([`Services`], lent to them family by family through
/// `tools::run`), and the roster of sessions behind the tree and `status`. Nothing outside
/// reaches a field directly.
pub struct Daemon {
    config: Arc<Config>,
    registry: Registry,
    lanes: Lanes,
    audit: AuditLog,
    notifier: TreeNotifier,
    services: Services,
    root: ActorRef<RootMsg>,
    started: Instant,
    socket: PathBuf,
    state_dir: PathBuf,
    /// Where large frames wait for a slow client's room (`<state_dir>/spool`, 0700), so
    /// unread output costs the budget in memory, not every waiting result; `None` when the
    /// directory cannot be made (they wait in memory then).
    spool: Option<PathBuf>,
    sessions: Mutex<BTreeMap<u64, SessionInfo>>,
    /// Most sessions at once since memory was last given back (see [`Daemon::trim_task`]).
    peak_sessions: AtomicUsize,
    /// Bytes held by frames started and not finished, over every connection
    /// (`limits.max_partial_frame_bytes`).
    partial_frames: Arc<AtomicUsize>,
    /// Wakes the trim task after a burst of sessions ended.
    trim_wanted: tokio::sync::Notify,
    /// Wakes the trim task when the last call in flight ended (see [`Daemon::trim_task`]).
    went_idle: tokio::sync::Notify,
    /// Conversations that made a call recently (pruned: see `conversations.rs`).
    conversations: crate::conversations::Conversations,
    next_session: AtomicU64,
    next_request: AtomicU64,
    calls_total: AtomicU64,
    calls_failed: AtomicU64,
    /// Calls admitted and not yet answered, over every session (drain waits for 0).
    calls_in_flight: AtomicU64,
    /// Wakes a drain waiting for the calls in flight when one ends.
    call_ended: tokio::sync::Notify,
    /// Set once a drain began: new calls are refused with `shutting_down`.
    draining: std::sync::atomic::AtomicBool,
    metrics: crate::metrics::calls::Metrics,
}

/// Bursts of fewer sessions than this leave too little behind to be worth a trim.
const TRIM_AFTER_SESSIONS: usize = 64;

/// How `serve` runs children: through this binary as the shim, when known.
#[derive(Clone, Debug, Default)]
pub struct ServeOptions {
    pub shim: Option<PathBuf>,
}

impl Daemon {
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Every tool with its tier, approval rule and schema; the first gate.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The per-conversation lanes of the tools that are not parallel-safe.
    pub fn lanes(&self) -> &Lanes {
        &self.lanes
    }

    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// What tool handlers use.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Where large frames for slow clients wait (`None`: in memory).
    pub fn spool(&self) -> Option<PathBuf> {
        self.spool.clone()
    }

    /// Ticks whenever the tree changed.
    pub fn tree_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.notifier.subscribe()
    }

    /// A call was started (for `status`).
    pub fn count_call(&self) {
        self.calls_total.fetch_add(1, Ordering::Relaxed);
    }

    /// A call ended in an error (for `status`).
    pub fn count_failure(&self) {
        self.calls_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A call was admitted: it counts as in flight until [`Daemon::call_finished`].
    pub fn call_began(&self) {
        self.calls_in_flight.fetch_add(1, Ordering::SeqCst);
    }

    /// A call's result was queued: count it for the metrics, and wake a drain.
    pub fn call_finished(&self, tool: &str, outcome: &str, elapsed: Duration) {
        let tool = if self.registry.get(tool).is_some() {
            tool
        } else {
            "unknown"
        };
        self.metrics.call_ended(tool, outcome, elapsed);
        if self.calls_in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.went_idle.notify_one();
        }
        self.call_ended.notify_waiters();
    }

    pub fn calls_in_flight(&self) -> u64 {
        self.calls_in_flight.load(Ordering::SeqCst)
    }

    pub fn metrics(&self) -> &crate::metrics::calls::Metrics {
        &self.metrics
    }

    /// Wait until every session's queued answers were written (or `deadline` passed).
    pub async fn outboxes_flushed(&self, deadline: Instant) {
        let mut changes = self.notifier.subscribe();
        while Instant::now() < deadline {
            let queued: usize = self
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .map(|s| s.queued.queued())
                .sum();
            if queued == 0 {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(20), changes.changed()).await;
        }
    }

    /// Whether a drain began (new calls get `shutting_down`).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Begin draining: from now on new calls are refused.
    pub fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.notifier.bump();
    }

    /// Wait until no call is in flight, or `deadline` passed; the calls still running then.
    pub async fn calls_done(&self, deadline: Instant) -> u64 {
        loop {
            let ended = self.call_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let running = self.calls_in_flight();
            if running == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline.into(), ended)
                .await
                .is_err()
            {
                return self.calls_in_flight();
            }
        }
    }

    /// The daemon-wide count of bytes held by unfinished frames, which every connection's
    /// read buffer charges as it grows.
    pub(crate) fn partial_frames(&self) -> Arc<AtomicUsize> {
        self.partial_frames.clone()
    }

    pub fn add_session(&self, info: SessionInfo) -> u64 {
        let id = self.next_session.fetch_add(1, Ordering::Relaxed) + 1;
        let now = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.insert(id, info);
            sessions.len()
        };
        self.peak_sessions.fetch_max(now, Ordering::Relaxed);
        self.notifier.bump();
        id
    }

    pub fn remove_session(&self, id: u64) {
        let (now, gone) = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            let gone = sessions.remove(&id);
            (sessions.len(), gone)
        };
        // A burst is over when at most half its sessions remain, or a client that let its
        // output queue fill has gone: give the memory back.
        let peak = self.peak_sessions.load(Ordering::Relaxed);
        let filled = gone.is_some_and(|s| s.queued.was_full());
        if filled || (peak >= TRIM_AFTER_SESSIONS && now * 2 <= peak) {
            self.trim_wanted.notify_one();
        }
        self.notifier.bump();
    }

    /// Give freed memory back to the system, which glibc otherwise keeps in its arenas: after
    /// a burst of sessions (10,000 sessions opened and closed left ~50 MB resident), and once
    /// the daemon has run no call for `[limits] trim_after_idle_s` after some did (one
    /// `ast_grep` over 13,000 files left ~200 MiB resident: the parse trees and buffers of
    /// its walker threads, freed but kept in their arenas). Runs for the daemon's life; wakes
    /// only after a burst ended or the last call in flight ended, and coalesces what follows.
    async fn trim_task(self: Arc<Self>) {
        let idle_after = Duration::from_secs(self.config.limits.trim_after_idle_s);
        // Calls started when memory was last given back: an idle spell with none since (a
        // wake-up left over from calls the last spell already covered) needs no trim.
        let mut trimmed_at = None;
        loop {
            let why = tokio::select! {
                _ = self.trim_wanted.notified() => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    "a burst of sessions"
                }
                _ = self.went_idle.notified(), if !idle_after.is_zero() => {
                    if !self.stayed_idle(idle_after).await
                        || trimmed_at == Some(self.calls_total.load(Ordering::Relaxed))
                    {
                        continue;
                    }
                    "an idle spell"
                }
            };
            trimmed_at = Some(self.calls_total.load(Ordering::Relaxed));
            let now = self
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len();
            self.peak_sessions.store(now, Ordering::Relaxed);
            let before = toolvisor_kit::process::rss_bytes(std::process::id());
            let _ = tokio::task::spawn_blocking(toolvisor_kit::memory::trim).await;
            let after = toolvisor_kit::process::rss_bytes(std::process::id());
            tracing::debug!(
                sessions = now,
                ?before,
                ?after,
                "gave freed memory back after {why}"
            );
        }
    }

    /// True when no call ran for `idle_after` from now; false as soon as a call is in flight
    /// at the end of a spell (its end wakes the trim task again).
    async fn stayed_idle(&self, idle_after: Duration) -> bool {
        loop {
            let started = self.calls_total.load(Ordering::Relaxed);
            tokio::time::sleep(idle_after).await;
            if self.calls_in_flight() > 0 {
                return false;
            }
            if self.calls_total.load(Ordering::Relaxed) == started {
                return true;
            }
            // Calls came and went during the spell: wait a whole spell after them.
        }
    }

    /// End `conversation` and what it holds: its kernels, debug session, processes and vibe
    /// workers are stopped and its staged edits discarded (its MCP session ended and no one
    /// named it to keep). Results it stored stay until their own TTL. A call of it still
    /// running may start something after this; that ends by its own TTL.
    pub async fn end_conversation(&self, conversation: &str) {
        let s = &self.services;
        let why = "its conversation ended (the MCP session that made it closed)";
        let kernels = s.kernels.end(conversation, why).await;
        let debug_session = s.debug.end(conversation).await;
        let mut processes = 0;
        for p in s.processes.list(conversation) {
            if matches!(
                p.state.as_str(),
                "starting" | "running" | "backoff" | "stopping"
            ) && s.processes.kill(conversation, &p.id).await.is_ok()
            {
                processes += 1;
            }
        }
        let mut vibes = 0;
        for w in s.vibes.list(conversation) {
            use toolvisor_protocol::tools::VibeState;
            if matches!(w.state, VibeState::Queued | VibeState::Running)
                && s.vibes.kill(conversation, &w.worker_id).await.is_ok()
            {
                vibes += 1;
            }
        }
        let mut edits = 0;
        for e in s.edits.list(conversation) {
            if e.state == toolvisor_structural::store::EditState::Staged
                && s.edits.discard(conversation, &e.id).is_ok()
            {
                edits += 1;
            }
        }
        tracing::info!(
            conversation,
            kernels,
            debug_session,
            processes,
            vibes,
            edits,
            "conversation ended with its session"
        );
        self.notifier.bump();
    }

    pub fn touch_conversation(&self, conversation: &str) {
        self.conversations.touch(conversation);
    }

    pub fn next_request_id(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The tree as `viewer` may see it: secrets masked in every detail and error, another
    /// conversation's resources without detail unless the viewer is an ops client.
    pub async fn tree_for(&self, viewer: &TreeViewer) -> TreeSnapshot {
        let mut snapshot = self.snapshot().await;
        let mut stack = vec![&mut snapshot.root];
        while let Some(node) = stack.pop() {
            let hidden = node
                .conversation
                .as_deref()
                .is_some_and(|c| !viewer.may_see(c));
            if hidden {
                node.detail = "(a resource of another conversation)".into();
                node.conversation = None;
                if node.last_error.is_some() {
                    node.last_error = Some("(hidden: another conversation's resource)".into());
                }
            } else {
                use crate::tools::files::mask_stream;
                let secrets = self.services.secrets();
                node.detail = mask_stream(secrets, std::mem::take(&mut node.detail));
                node.last_error = node.last_error.take().map(|e| mask_stream(secrets, e));
            }
            stack.extend(node.children.iter_mut());
        }
        snapshot
    }

    /// The whole supervisor tree now, unmasked: only for the daemon's own use (status
    /// counts, tests); clients get [`Daemon::tree_for`].
    pub async fn snapshot(&self) -> TreeSnapshot {
        let generation = self.notifier.generation();
        let supervisors = match self
            .root
            .call(
                |reply| RootMsg::Snapshot { reply },
                Some(Duration::from_secs(3)),
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(nodes)) => nodes,
            _ => Vec::new(),
        };
        let now = Instant::now();
        let sessions: Vec<TreeNode> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, s)| {
                let in_flight = s.in_flight.load(Ordering::Relaxed);
                TreeNode {
                    kind: "session".into(),
                    id: format!("s{id}"),
                    pid: s.pid,
                    state: if in_flight > 0 {
                        NodeState::Busy
                    } else {
                        NodeState::Ready
                    },
                    uptime_ms: duration_ms(now - s.connected),
                    ttl_left_ms: None,
                    restarts: 0,
                    mailbox: u32::try_from(in_flight).unwrap_or(u32::MAX),
                    rss_bytes: None,
                    detail: format!(
                        "{} queued={}{}",
                        format!(
                            "{:?} surface={} run={}",
                            s.kind,
                            s.tier,
                            if s.run_id.is_empty() { "-" } else { &s.run_id }
                        )
                        .to_lowercase(),
                        s.queued.queued(),
                        // At the budget the client's frames are not read until it reads.
                        match s.queued.waiting() {
                            0 => String::new(),
                            n => format!(" (output full, {n} waiting: client not reading)"),
                        }
                    ),
                    conversation: None,
                    last_error: None,
                    children: Vec::new(),
                }
            })
            .collect();
        let sessions_node = TreeNode {
            kind: "sessions".into(),
            id: "sessions".into(),
            pid: None,
            state: NodeState::Ready,
            uptime_ms: duration_ms(now - self.started),
            ttl_left_ms: None,
            restarts: 0,
            mailbox: 0,
            rss_bytes: None,
            detail: format!("{} connected", sessions.len()),
            conversation: None,
            last_error: None,
            children: sessions,
        };
        let mut children = supervisors;
        children.push(sessions_node);
        let pid = std::process::id();
        TreeSnapshot {
            generation,
            taken_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            root: TreeNode {
                kind: "root".into(),
                id: "toolvisor".into(),
                pid: Some(pid),
                state: NodeState::Ready,
                uptime_ms: duration_ms(now - self.started),
                ttl_left_ms: None,
                restarts: 0,
                mailbox: 0,
                rss_bytes: toolvisor_kit::process::rss_bytes(pid),
                detail: format!("socket {}", self.socket.display()),
                conversation: None,
                last_error: None,
                children,
            },
        }
    }

    pub async fn status(&self) -> StatusReport {
        let pid = std::process::id();
        // Resources: every node under a kind supervisor.
        let snapshot = self.snapshot().await;
        let resources = snapshot
            .root
            .children
            .iter()
            .filter(|n| n.kind == "supervisor")
            .map(|n| n.children.len())
            .sum::<usize>();
        StatusReport {
            daemon_version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: toolvisor_protocol::PROTOCOL_VERSION,
            pid,
            uptime_ms: duration_ms(self.started.elapsed()),
            socket: self.socket.display().to_string(),
            state_dir: self.state_dir.display().to_string(),
            config: self.config.source.clone(),
            sessions: self
                .sessions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .len() as u32,
            conversations: u32::try_from(self.conversations.active()).unwrap_or(u32::MAX),
            lanes: u32::try_from(self.lanes.len()).unwrap_or(u32::MAX),
            resources: u32::try_from(resources).unwrap_or(u32::MAX),
            rss_bytes: toolvisor_kit::process::rss_bytes(pid).unwrap_or(0),
            calls_total: self.calls_total.load(Ordering::Relaxed),
            calls_failed: self.calls_failed.load(Ordering::Relaxed),
        }
    }
}

/// A started daemon: its state, and what [`Started::shutdown`] stops.
pub struct Started {
    pub daemon: Arc<Daemon>,
    root_handle: tokio::task::JoinHandle<()>,
    trimmer: tokio::task::JoinHandle<()>,
}

/// The order a shutdown stops resources in: what holds a person's or a program's state
/// mid-flight first (debug sessions, kernels, workers), then the servers they may have been
/// using, the data hub's store, the inference servers, download jobs (their records resume at the next start), then
/// the processes.
pub const STOP_ORDER: &[&str] = &[
    "debug_adapters",
    "kernels",
    "vibe",
    "language_servers",
    "data",
    "inference",
    "downloads",
    "processes",
];

/// How long one kind's resources get to stop before the next kind's turn.
const STOP_KIND_WAIT: Duration = Duration::from_secs(5);

impl Started {
    /// Stop every resource, kind by kind in [`STOP_ORDER`] (their guards kill and reap their
    /// process trees), then the root with anything left.
    pub async fn shutdown(self) {
        self.trimmer.abort();
        tracing::info!("shutting down: stopping every resource");
        for &kind in STOP_ORDER {
            self.stop_kind(kind).await;
        }
        let root = &self.daemon.root;
        root.stop_children_and_wait(
            Some(crate::root::SHUTDOWN_REASON.into()),
            Some(Duration::from_secs(5)),
        )
        .await;
        root.stop(Some(crate::root::SHUTDOWN_REASON.into()));
        let _ = tokio::time::timeout(Duration::from_secs(5), self.root_handle).await;
        if let Some(inference) = &self.daemon.services().inference {
            inference.close_endpoint();
        }
        // The actors are gone; the trees their guards tore down may still be dying (a shim
        // kills its program, reaps it, then exits). Exit only once they are reaped.
        let left = tokio::task::spawn_blocking(|| {
            toolvisor_kit::process::wait_owned_reaped(Duration::from_secs(5))
        })
        .await
        .unwrap_or(0);
        if left > 0 {
            tracing::warn!(
                children = left,
                "children still not reaped 5 s after their resources stopped; exiting anyway (they die with the daemon: their death signal)"
            );
        }
        // Each child's scratch directory goes with it; this daemon's, empty then, goes too.
        let _ = tokio::task::spawn_blocking(|| {
            toolvisor_kit::process::scratch::finish(Duration::from_secs(2))
        })
        .await;
    }

    /// Stop every live resource of `kind` and wait (up to [`STOP_KIND_WAIT`]) until none is
    /// left running.
    async fn stop_kind(&self, kind: &str) {
        let Ok(sup) = kind_supervisor(&self.daemon.root, kind).await else {
            return;
        };
        let live = |node: &TreeNode| {
            node.children
                .iter()
                .filter(|c| !matches!(c.state, NodeState::Exited | NodeState::Failed))
                .map(|c| c.id.clone())
                .collect::<Vec<_>>()
        };
        let snapshot = |sup: &ActorRef<SupervisorMsg>| {
            let sup = sup.clone();
            async move {
                match sup
                    .call(
                        |reply| SupervisorMsg::Snapshot { reply },
                        Some(Duration::from_secs(2)),
                    )
                    .await
                {
                    Ok(ractor::rpc::CallResult::Success(node)) => Some(node),
                    _ => None,
                }
            }
        };
        let Some(node) = snapshot(&sup).await else {
            return;
        };
        let ids = live(&node);
        if ids.is_empty() {
            return;
        }
        tracing::info!(kind, resources = ids.len(), "stopping resources");
        for id in ids {
            let _ = sup
                .call(
                    |reply| SupervisorMsg::Stop {
                        id,
                        reason: crate::root::SHUTDOWN_REASON.into(),
                        reply,
                    },
                    Some(Duration::from_secs(2)),
                )
                .await;
        }
        let deadline = Instant::now() + STOP_KIND_WAIT;
        let mut changes = self.daemon.notifier.subscribe();
        while Instant::now() < deadline {
            match snapshot(&sup).await {
                Some(node) if !live(&node).is_empty() => {}
                _ => return,
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
        }
        tracing::warn!(
            kind,
            "resources still running after {} s; the root stops them",
            STOP_KIND_WAIT.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `start` asks the root for each kind supervisor through one fallible helper (it once
    /// unwrapped five `CallResult`s): a kind the root lacks, and a root that is gone, are
    /// errors naming the kind, never a panic.
    #[tokio::test]
    async fn a_missing_kind_supervisor_or_a_gone_root_is_an_error_naming_the_kind() {
        let args = RootArgs {
            notifier: TreeNotifier::default(),
            keep_ended: Duration::from_secs(60),
        };
        let (root, handle) = Actor::spawn(None, Root, args).await.expect("start a root");
        assert!(kind_supervisor(&root, "processes").await.is_ok());
        let missing = kind_supervisor(&root, "no_such_kind").await.unwrap_err();
        assert!(missing.to_string().contains("no_such_kind"), "{missing}");
        root.stop(None);
        handle.await.expect("the root stops");
        let gone = kind_supervisor(&root, "processes").await.unwrap_err();
        assert!(gone.to_string().contains("processes"), "{gone}");
    }
}
