//! The supervisor tree as operators see it: one node per supervisor, resource and session.

use serde::{Deserialize, Serialize};

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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Messages queued in the actor's mailbox.
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
