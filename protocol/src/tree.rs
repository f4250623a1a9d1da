//! The supervisor tree as operators see it: one node per supervisor, resource and session.
//!
//! A node holds its children, so a tree is a recursive type: decoding counts its depth and
//! refuses one deeper than [`crate::value::MAX_DEPTH`] before recursing further, as
//! [`crate::value::Value`] does, so no frame can exhaust a client's stack.

use std::cell::Cell;

use serde::{Deserialize, Deserializer, Serialize};

/// Life-cycle state of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    Starting,
    Ready,
    Busy,
    /// Waiting out the restart backoff.
    Backoff,
    /// Gave up after its restart intensity; calls get its last error.
    Failed,
    Stopping,
    /// A resource whose process ended and that is not restarted (kept until collected).
    Exited,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Starting => "starting",
            NodeState::Ready => "ready",
            NodeState::Busy => "busy",
            NodeState::Backoff => "backoff",
            NodeState::Failed => "failed",
            NodeState::Stopping => "stopping",
            NodeState::Exited => "exited",
        }
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One node of the tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeNode {
    /// `root`, `supervisor`, `process`, `session`, `lsp`, `kernel`, ...
    pub kind: String,
    pub id: String,
    pub pid: Option<u32>,
    pub state: NodeState,
    pub uptime_ms: u64,
    /// Time left before the idle or hard TTL expires, whichever is sooner.
    pub ttl_left_ms: Option<u64>,
    pub restarts: u32,
    /// Calls in flight on the node: a session's calls; a resource's calls using it now (a
    /// kernel's cell, a debug session's operation, a language server's requests). Named
    /// `mailbox` on the wire for compatibility.
    pub mailbox: u32,
    pub rss_bytes: Option<u64>,
    /// A short free-form note (command line, conversation, peer). Known secrets are masked;
    /// a node of another conversation shows no detail except to an `ops` client.
    pub detail: String,
    /// The conversation that owns this resource (a process, kernel, debug session, worker);
    /// `None` for shared resources and supervisors, and for another conversation's
    /// resources except to an `ops` client.
    #[serde(default)]
    pub conversation: Option<String>,
    pub last_error: Option<String>,
    pub children: Vec<TreeNode>,
}

/// The wire form of [`TreeNode`], read by a derived deserializer under a depth guard.
#[derive(Deserialize)]
#[serde(rename = "TreeNode")]
struct TreeNodeWire {
    kind: String,
    id: String,
    pid: Option<u32>,
    state: NodeState,
    uptime_ms: u64,
    ttl_left_ms: Option<u64>,
    restarts: u32,
    mailbox: u32,
    rss_bytes: Option<u64>,
    detail: String,
    #[serde(default)]
    conversation: Option<String>,
    last_error: Option<String>,
    children: Vec<TreeNode>,
}

thread_local! {
    /// Tree nodes being decoded on this thread, one inside the other. Decoding is
    /// synchronous, so the nesting of calls on one thread is the nesting of the nodes.
    static NODES_OPEN: Cell<usize> = const { Cell::new(0) };
}

/// One open node; closing it (also on an error or a panic) gives its level back.
struct Open;

impl Open {
    fn node<E: serde::de::Error>() -> Result<Open, E> {
        NODES_OPEN.with(|open| {
            let depth = open.get() + 1;
            if depth > crate::value::MAX_DEPTH {
                return Err(E::custom(format!(
                    "tree nests deeper than {} levels",
                    crate::value::MAX_DEPTH
                )));
            }
            open.set(depth);
            Ok(Open)
        })
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        NODES_OPEN.with(|open| open.set(open.get().saturating_sub(1)));
    }
}

impl<'de> Deserialize<'de> for TreeNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let _open = Open::node::<D::Error>()?;
        let w = TreeNodeWire::deserialize(d)?;
        Ok(TreeNode {
            kind: w.kind,
            id: w.id,
            pid: w.pid,
            state: w.state,
            uptime_ms: w.uptime_ms,
            ttl_left_ms: w.ttl_left_ms,
            restarts: w.restarts,
            mailbox: w.mailbox,
            rss_bytes: w.rss_bytes,
            detail: w.detail,
            conversation: w.conversation,
            last_error: w.last_error,
            children: w.children,
        })
    }
}

/// The whole tree at one instant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeSnapshot {
    /// Increases with every change; a watcher redraws when it moves.
    pub generation: u64,
    /// Milliseconds since the Unix epoch.
    pub taken_at_ms: u64,
    pub root: TreeNode,
}

impl TreeNode {
    /// Every node of the subtree, depth first, with its depth.
    pub fn walk(&self) -> Vec<(usize, &TreeNode)> {
        let mut out = Vec::new();
        let mut stack = vec![(0usize, self)];
        while let Some((depth, node)) = stack.pop() {
            out.push((depth, node));
            for child in node.children.iter().rev() {
                stack.push((depth + 1, child));
            }
        }
        out
    }
}
