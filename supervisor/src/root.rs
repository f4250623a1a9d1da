//! The root actor: owns one supervisor per resource kind and answers tree snapshots.
//!
//! Kind supervisors have no fallible paths of their own; should one die anyway (a bug), the
//! root logs it, and its node stays in the tree as `failed` with the error, so every tool that
//! needs that kind answers `resource_failed` instead of hanging.
//!
//! The root spawns one `KindSupervisor` per kind (`KINDS`). When the root stops (daemon shutdown,
//! after `Started::shutdown` stopped each kind in order), ractor stops every descendant actor,
//! whose guards kill and reap their process trees.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{KindSupervisor, SupervisorArgs, SupervisorMsg};
use toolvisor_protocol::tree::{NodeState, TreeNode};

/// The resource kinds this build supervises.
pub const KINDS: &[&str] = &[
    "processes",
    "vibe",
    "language_servers",
    "kernels",
    "debug_adapters",
    "data",
    "downloads",
    "inference",
];

/// The reason given to every actor stopped by a clean daemon shutdown.
pub const SHUTDOWN_REASON: &str = "daemon shutdown";

pub struct Root;

pub struct RootArgs {
    pub notifier: TreeNotifier,
    pub keep_ended: Duration,
}

pub enum RootMsg {
    /// The supervisor of one kind.
    Supervisor {
        kind: String,
        reply: RpcReplyPort<Option<ActorRef<SupervisorMsg>>>,
    },
    /// Snapshots of every kind supervisor and its children.
    Snapshot { reply: RpcReplyPort<Vec<TreeNode>> },
}

struct Kind {
    name: &'static str,
    actor: ActorRef<SupervisorMsg>,
    status: Arc<NodeStatus>,
}

pub struct RootState {
    kinds: Vec<Kind>,
}

impl Actor for Root {
    type Msg = RootMsg;
    type State = RootState;
    type Arguments = RootArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<RootMsg>,
        args: RootArgs,
    ) -> Result<RootState, ActorProcessingErr> {
        let mut kinds = Vec::new();
        for &name in KINDS {
            let status = NodeStatus::new("supervisor", name, String::new(), args.notifier.clone());
            let (actor, _) = Actor::spawn_linked(
                Some(format!("supervisor/{name}")),
                KindSupervisor,
                SupervisorArgs {
                    kind: name.to_string(),
                    notifier: args.notifier.clone(),
                    keep_ended: args.keep_ended,
                    status: status.clone(),
                },
                myself.get_cell(),
            )
            .await?;
            tracing::info!(kind = name, "kind supervisor started");
            kinds.push(Kind {
                name,
                actor,
                status,
            });
        }
        Ok(RootState { kinds })
    }

    async fn handle(
        &self,
        _myself: ActorRef<RootMsg>,
        msg: RootMsg,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            RootMsg::Supervisor { kind, reply } => {
                let found = state
                    .kinds
                    .iter()
                    .find(|k| k.name == kind)
                    .map(|k| k.actor.clone());
                let _ = reply.send(found);
            }
            RootMsg::Snapshot { reply } => {
                // Ask each supervisor from a task so a slow one never blocks this mailbox.
                let kinds: Vec<_> = state
                    .kinds
                    .iter()
                    .map(|k| (k.actor.clone(), k.status.clone()))
                    .collect();
                tokio::spawn(async move {
                    let mut nodes = Vec::new();
                    for (actor, status) in kinds {
                        let node = match actor
                            .call(
                                |r| SupervisorMsg::Snapshot { reply: r },
                                Some(Duration::from_secs(2)),
                            )
                            .await
                        {
                            Ok(ractor::rpc::CallResult::Success(node)) => node,
                            _ => {
                                let mut node = status.to_node(|_| None);
                                if node.state != NodeState::Failed {
                                    node.state = NodeState::Busy;
                                    node.detail = "did not answer the snapshot within 2 s".into();
                                }
                                node
                            }
                        };
                        nodes.push(node);
                    }
                    let _ = reply.send(nodes);
                });
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<RootMsg>,
        evt: SupervisionEvent,
        state: &mut RootState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, error) = match evt {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            // The daemon is stopping its supervisors itself: nothing failed.
            SupervisionEvent::ActorTerminated(_, _, Some(reason)) if reason == SHUTDOWN_REASON => {
                return Ok(());
            }
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".into()))
            }
            _ => return Ok(()),
        };
        if let Some(kind) = state
            .kinds
            .iter()
            .find(|k| k.actor.get_id() == cell.get_id())
        {
            tracing::error!(
                kind = kind.name,
                error,
                "kind supervisor ended; its tools now fail with resource_failed"
            );
            kind.status.update(|i| {
                i.state = NodeState::Failed;
                i.last_error = Some(error);
            });
        }
        Ok(())
    }
}
