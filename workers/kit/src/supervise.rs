//! A supervisor actor for one kind of resource: it starts children from child specs,
//! watches them through ractor's supervision events, and restarts them per their policy.
//!
//! ractor does not restart anything by itself, so this actor holds, per child, the spec
//! (factory + policy), a [`RestartTracker`] and the child's shared [`NodeStatus`]. Starting a
//! child runs its factory in a task, never inside `handle`, so the mailbox stays live while a
//! slow child starts. A child that exhausts its restart intensity stays `failed` with its last
//! error, and [`Lookup`] hands that error to callers at once.
//!
//! An incarnation fails when its actor returns an error or panics, or when its start (the factory:
//! spawning the child) fails; it ends normally when it stops itself or is stopped. On an end the
//! tracker decides: `Restart { after }` puts the node in `backoff` and schedules the restart;
//! `GiveUp` leaves it `failed` with its last error and "(gave up after N restarts within P s)";
//! `Done` leaves it `exited`. A `Stop` (`process kill`, a drain) or a TTL expiry (`Expire`) marks
//! the child as stopping first, so its end is never restarted. Ended and failed children stay in
//! the tree, their output readable, for `keep_ended` (`limits.process_keep_s`), then they are
//! collected. A caller looking a child up gets `Lookup::Running`, `Starting`, `Backoff`, `Failed`,
//! `Ended` or `Missing` at once, never a hang. A failed start is reported as its own error, without
//! ractor's "Actor panicked during startup" wrapper.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};
use toolvisor_protocol::tree::{NodeState, TreeNode};

use crate::restart::{Decision, Exit, RestartPolicy, RestartTracker};
use crate::status::{NodeStatus, TreeNotifier};

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What a factory gets to start one incarnation of a child.
pub struct StartCtx {
    /// Spawn the child actor linked to this cell (`Actor::spawn_linked(.., supervisor)`).
    pub supervisor: ActorCell,
    pub status: Arc<NodeStatus>,
    /// 0 for the first start, then the restart count.
    pub attempt: u32,
}

/// Starts one incarnation of a child and returns its actor.
pub type Factory = Arc<dyn Fn(StartCtx) -> BoxFuture<Result<ActorCell, String>> + Send + Sync>;

/// Everything the supervisor needs to (re)start a child.
pub struct ChildSpec {
    pub id: String,
    pub factory: Factory,
    pub policy: RestartPolicy,
    pub status: Arc<NodeStatus>,
}

/// Where a child stands, for a caller about to use it.
#[derive(Clone, Debug)]
pub enum Lookup {
    Running(ActorCell),
    /// Starting for the first time or again after a crash.
    Starting,
    Backoff {
        last_error: String,
        retry_in: Duration,
    },
    /// Gave up after its restart intensity.
    Failed {
        last_error: String,
    },
    /// Ended and not restarted (stopped, or its policy says so).
    Ended {
        last_error: Option<String>,
    },
    Missing,
}

pub enum SupervisorMsg {
    /// Add a child and start it; the reply comes once its first start succeeded or failed.
    Start {
        spec: ChildSpec,
        reply: RpcReplyPort<Result<(), String>>,
    },
    Lookup {
        id: String,
        reply: RpcReplyPort<Lookup>,
    },
    /// Stop a child for good (no restart); the record stays until collected.
    Stop {
        id: String,
        reason: String,
        reply: RpcReplyPort<bool>,
    },
    Snapshot {
        reply: RpcReplyPort<TreeNode>,
    },
    /// Internal: an incarnation finished starting.
    Started {
        id: String,
        epoch: u64,
        result: Result<ActorCell, String>,
    },
    /// Internal: the backoff of a restart ran out.
    RestartNow {
        id: String,
        epoch: u64,
    },
    /// A resource asks to be ended for good (its TTL ran out); like `Stop` without a reply.
    Expire {
        id: String,
        reason: String,
    },
    /// Internal: drop ended records older than the retention.
    Collect,
}

/// Why a child's first start did not succeed ([`start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartFailed {
    /// Its start failed: the child's own error.
    Child(String),
    /// The supervisor did not answer within the wait (or is gone): what happened, in words.
    NoAnswer(String),
}

/// Adds `spec` to `supervisor` and starts it; waits at most `wait` for the first start's
/// outcome. Every kind's worker starts its children through this, each saying its own words
/// for the two failures.
pub async fn start(
    supervisor: &ActorRef<SupervisorMsg>,
    spec: ChildSpec,
    wait: Duration,
) -> Result<(), StartFailed> {
    match supervisor
        .call(|reply| SupervisorMsg::Start { spec, reply }, Some(wait))
        .await
    {
        Ok(ractor::rpc::CallResult::Success(Ok(()))) => Ok(()),
        Ok(ractor::rpc::CallResult::Success(Err(error))) => Err(StartFailed::Child(error)),
        Ok(ractor::rpc::CallResult::Timeout) => {
            Err(StartFailed::NoAnswer(format!("no answer within {wait:?}")))
        }
        Ok(ractor::rpc::CallResult::SenderError) => Err(StartFailed::NoAnswer(
            "the supervisor dropped the request".into(),
        )),
        Err(e) => Err(StartFailed::NoAnswer(e.to_string())),
    }
}

/// Arguments of a kind supervisor.
pub struct SupervisorArgs {
    pub kind: String,
    pub notifier: TreeNotifier,
    /// Ended children stay visible (and their output readable) this long.
    pub keep_ended: Duration,
    pub status: Arc<NodeStatus>,
}

pub struct KindSupervisor;

struct Child {
    spec: ChildSpec,
    tracker: RestartTracker,
    cell: Option<ActorCell>,
    /// Bumped on every (re)start so stale timer and start messages are ignored.
    epoch: u64,
    stopping: Option<String>,
    ended_at: Option<Instant>,
    backoff_until: Option<Instant>,
    first_reply: Option<RpcReplyPort<Result<(), String>>>,
}

pub struct SupervisorState {
    kind: String,
    keep_ended: Duration,
    status: Arc<NodeStatus>,
    children: BTreeMap<String, Child>,
    by_actor: HashMap<ActorId, String>,
    /// Ends of actors not (yet) registered: an incarnation can end before its `Started`
    /// message is handled, because supervision events overtake ordinary messages. `Started`
    /// looks here first. Bounded; oldest forgotten first.
    early_ends: VecDeque<(ActorId, Exit, Option<String>)>,
}

impl SupervisorState {
    fn remember_early_end(&mut self, actor: ActorId, exit: Exit, error: Option<String>) {
        if self.early_ends.len() >= 256 {
            self.early_ends.pop_front();
        }
        self.early_ends.push_back((actor, exit, error));
    }
}

/// A factory's error as its reader should see it: ractor reports a child whose `pre_start`
/// returned an error as "Actor panicked during startup '<error>'" (nothing panicked), which
/// becomes the error itself.
fn startup_message(message: String) -> String {
    match message
        .strip_prefix("Actor panicked during startup '")
        .and_then(|m| m.strip_suffix('\''))
    {
        Some(error) => error.to_owned(),
        None => message,
    }
}

impl KindSupervisor {
    fn launch(myself: &ActorRef<SupervisorMsg>, id: &str, child: &mut Child) {
        child.epoch += 1;
        child.backoff_until = None;
        child.spec.status.set_state(NodeState::Starting);
        let ctx = StartCtx {
            supervisor: myself.get_cell(),
            status: child.spec.status.clone(),
            attempt: child.tracker.total(),
        };
        let factory = child.spec.factory.clone();
        let me = myself.clone();
        let id = id.to_string();
        let epoch = child.epoch;
        tokio::spawn(async move {
            let result = factory(ctx).await.map_err(startup_message);
            let _ = me.cast(SupervisorMsg::Started { id, epoch, result });
        });
    }

    /// End a child for good; false when there is no such child.
    fn stop(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        id: &str,
        reason: String,
    ) -> bool {
        let Some(child) = state.children.get_mut(id) else {
            return false;
        };
        if child.ended_at.is_some() {
            return true;
        }
        child.stopping = Some(reason.clone());
        child.spec.status.set_state(NodeState::Stopping);
        match child.cell.clone() {
            // The termination event finishes the stop.
            Some(cell) => cell.stop(Some(reason)),
            // Waiting out a backoff: nothing runs, so it ends here.
            None if child.backoff_until.is_some() => {
                Self::ended(myself, state, id, Exit::Normal, None)
            }
            // A start is in flight: `Started` sees `stopping` and finishes the stop.
            None => {}
        }
        true
    }

    /// A child's incarnation ended (or failed to start): apply its policy.
    fn ended(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        id: &str,
        exit: Exit,
        error: Option<String>,
    ) {
        let kind = state.kind.clone();
        let Some(child) = state.children.get_mut(id) else {
            return;
        };
        if let Some(cell) = child.cell.take() {
            state.by_actor.remove(&cell.get_id());
        }
        let status = child.spec.status.clone();
        // A normal end's reason ("exit code 0") is not an error.
        if let Some(err) = error.as_ref().filter(|_| exit == Exit::Failed) {
            status.update(|i| i.last_error = Some(err.clone()));
        }
        if let Some(reason) = child.stopping.clone() {
            tracing::info!(kind, id, reason, "resource stopped");
            child.ended_at = Some(Instant::now());
            status.update(|i| {
                i.state = NodeState::Exited;
                i.pid = None;
                i.ttl_deadline = None;
            });
            return;
        }
        let decision = child.tracker.decide(exit, Instant::now());
        let restarts = child.tracker.total();
        match decision {
            Decision::Restart { after, attempt } => {
                crate::status::count_event(&kind, "restart");
                tracing::warn!(
                    kind,
                    id,
                    ?exit,
                    error = error.as_deref().unwrap_or(""),
                    backoff_ms = after.as_millis() as u64,
                    attempt,
                    "resource ended; restarting after backoff"
                );
                child.backoff_until = Some(Instant::now() + after);
                status.update(|i| {
                    i.state = NodeState::Backoff;
                    i.pid = None;
                    i.restarts = restarts;
                });
                let epoch = child.epoch;
                let id = id.to_string();
                myself.send_after(after, move || SupervisorMsg::RestartNow { id, epoch });
            }
            Decision::GiveUp => {
                let policy = child.tracker.policy();
                tracing::error!(
                    kind,
                    id,
                    error = error.as_deref().unwrap_or(""),
                    intensity = policy.intensity,
                    period_s = policy.period.as_secs(),
                    "resource exceeded its restart intensity; leaving it failed"
                );
                let msg = format!(
                    "{} (gave up after {} restarts within {} s)",
                    error.unwrap_or_else(|| "ended".into()),
                    policy.intensity,
                    policy.period.as_secs()
                );
                child.ended_at = Some(Instant::now());
                status.update(|i| {
                    i.state = NodeState::Failed;
                    i.pid = None;
                    i.ttl_deadline = None;
                    i.last_error = Some(msg);
                });
                if let Some(reply) = child.first_reply.take() {
                    let _ = reply.send(Err(status.get().last_error.unwrap_or_default()));
                }
            }
            Decision::Done => {
                tracing::info!(
                    kind,
                    id,
                    ?exit,
                    error = error.as_deref().unwrap_or(""),
                    "resource ended"
                );
                child.ended_at = Some(Instant::now());
                // A child that never came up is failed; one that ran and ended has exited.
                let never_started = child.first_reply.is_some();
                status.update(|i| {
                    i.state = if never_started {
                        NodeState::Failed
                    } else {
                        NodeState::Exited
                    };
                    i.pid = None;
                    i.ttl_deadline = None;
                });
                if let Some(reply) = child.first_reply.take() {
                    let _ = reply.send(Err(error.unwrap_or_else(|| "ended during start".into())));
                }
            }
        }
    }

    /// Adds a child and starts it, unless one of that id is still running.
    fn add(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        spec: ChildSpec,
        reply: RpcReplyPort<Result<(), String>>,
    ) {
        let id = spec.id.clone();
        if state
            .children
            .get(&id)
            .is_some_and(|c| c.ended_at.is_none())
        {
            let _ = reply.send(Err(format!(
                "a {} named {id:?} is already running",
                state.kind
            )));
            return;
        }
        // A fresh record: the restarts and last error of an earlier one (a server
        // before `lsp reload`, a kernel before it died) are not this one's.
        spec.status.update(|i| {
            i.restarts = 0;
            i.last_error = None;
        });
        let mut child = Child {
            tracker: RestartTracker::new(spec.policy),
            spec,
            cell: None,
            epoch: 0,
            stopping: None,
            ended_at: None,
            backoff_until: None,
            first_reply: Some(reply),
        };
        Self::launch(myself, &id, &mut child);
        state.children.insert(id, child);
        state.status.notifier().bump();
    }

    /// An incarnation's start finished: register it, or apply its policy when it failed,
    /// already ended, or is no longer wanted (stale or stopping).
    fn started(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        id: String,
        epoch: u64,
        result: Result<ActorCell, String>,
    ) {
        let Some(child) = state.children.get_mut(&id) else {
            if let Ok(cell) = result {
                cell.stop(Some("removed".into()));
            }
            return;
        };
        if child.epoch != epoch || child.stopping.is_some() {
            if let Ok(cell) = result {
                cell.stop(child.stopping.clone());
            }
            if child.stopping.is_some() && child.cell.is_none() && child.ended_at.is_none() {
                Self::ended(myself, state, &id, Exit::Normal, None);
            }
            return;
        }
        // It may already have ended: then this is its end, not its start.
        let early = result.as_ref().ok().and_then(|cell| {
            let pos = state
                .early_ends
                .iter()
                .position(|(a, _, _)| *a == cell.get_id())?;
            state.early_ends.remove(pos)
        });
        if let Some((_, exit, error)) = early {
            if let Some(reply) = child.first_reply.take() {
                let _ = reply.send(Ok(()));
            }
            tracing::info!(kind = state.kind, id, "resource started and ended at once");
            Self::ended(myself, state, &id, exit, error);
            return;
        }
        match result {
            Ok(cell) => {
                state.by_actor.insert(cell.get_id(), id.clone());
                child.cell = Some(cell);
                // Uptime counts from this incarnation, not the record's first one.
                child.spec.status.update(|i| {
                    i.started = Instant::now();
                    if i.state == NodeState::Starting {
                        i.state = NodeState::Ready;
                    }
                });
                if let Some(reply) = child.first_reply.take() {
                    let _ = reply.send(Ok(()));
                }
                tracing::info!(
                    kind = state.kind,
                    id,
                    attempt = child.tracker.total(),
                    "resource started"
                );
            }
            Err(err) => {
                tracing::warn!(
                    kind = state.kind,
                    id,
                    error = err,
                    "resource failed to start"
                );
                Self::ended(myself, state, &id, Exit::Failed, Some(err));
            }
        }
    }

    /// Where the child `id` stands, for a caller about to use it.
    fn lookup(state: &SupervisorState, id: &str) -> Lookup {
        match state.children.get(id) {
            None => Lookup::Missing,
            Some(child) => {
                let info = child.spec.status.get();
                let last_error = info.last_error.clone().unwrap_or_default();
                match (&child.cell, info.state) {
                    (_, NodeState::Failed) => Lookup::Failed { last_error },
                    (Some(cell), _) => Lookup::Running(cell.clone()),
                    (None, _) if child.ended_at.is_some() => Lookup::Ended {
                        last_error: info.last_error,
                    },
                    (None, NodeState::Backoff) => Lookup::Backoff {
                        last_error,
                        retry_in: child
                            .backoff_until
                            .map(|t| t.saturating_duration_since(Instant::now()))
                            .unwrap_or_default(),
                    },
                    (None, _) => Lookup::Starting,
                }
            }
        }
    }

    /// Drops the records of children ended longer ago than `keep_ended`.
    fn collect(state: &mut SupervisorState) {
        let keep = state.keep_ended;
        let before = state.children.len();
        state.children.retain(|id, c| {
            let keep_it = c.ended_at.is_none_or(|t| t.elapsed() < keep);
            if !keep_it {
                tracing::info!(kind = state.kind, id, "collected ended resource");
            }
            keep_it
        });
        if state.children.len() != before {
            state.status.notifier().bump();
        }
    }
}

impl Actor for KindSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: SupervisorArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        args.status.update(|i| {
            i.state = NodeState::Ready;
            i.pid = Some(std::process::id());
        });
        let period =
            (args.keep_ended / 4).clamp(Duration::from_millis(200), Duration::from_secs(60));
        myself.send_interval(period, || SupervisorMsg::Collect);
        Ok(SupervisorState {
            kind: args.kind,
            keep_ended: args.keep_ended,
            status: args.status,
            children: BTreeMap::new(),
            by_actor: HashMap::new(),
            early_ends: VecDeque::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Start { spec, reply } => Self::add(&myself, state, spec, reply),
            SupervisorMsg::Started { id, epoch, result } => {
                Self::started(&myself, state, id, epoch, result)
            }
            SupervisorMsg::RestartNow { id, epoch } => {
                if let Some(child) = state.children.get_mut(&id)
                    && child.epoch == epoch
                    && child.stopping.is_none()
                    && child.cell.is_none()
                    && child.ended_at.is_none()
                {
                    tracing::info!(kind = state.kind, id, "restarting resource");
                    Self::launch(&myself, &id, child);
                }
            }
            SupervisorMsg::Lookup { id, reply } => {
                let _ = reply.send(Self::lookup(state, &id));
            }
            SupervisorMsg::Expire { id, reason } => {
                crate::status::count_event(&state.kind, "ttl_expiry");
                tracing::info!(
                    kind = state.kind,
                    id,
                    reason,
                    "resource TTL expired; stopping it"
                );
                Self::stop(&myself, state, &id, reason);
            }
            SupervisorMsg::Stop { id, reason, reply } => {
                let _ = reply.send(Self::stop(&myself, state, &id, reason));
            }
            SupervisorMsg::Snapshot { reply } => {
                let mut node = state.status.to_node(crate::process::rss_bytes);
                node.children = state
                    .children
                    .values()
                    .map(|c| c.spec.status.to_node(crate::process::rss_bytes))
                    .collect();
                let _ = reply.send(node);
            }
            SupervisorMsg::Collect => Self::collect(state),
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        evt: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match evt {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let reason = reason.filter(|r| !r.is_empty());
                match state.by_actor.get(&cell.get_id()).cloned() {
                    Some(id) => Self::ended(&myself, state, &id, Exit::Normal, reason),
                    None => state.remember_early_end(cell.get_id(), Exit::Normal, reason),
                }
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                match state.by_actor.get(&cell.get_id()).cloned() {
                    Some(id) => {
                        Self::ended(&myself, state, &id, Exit::Failed, Some(err.to_string()))
                    }
                    None => {
                        state.remember_early_end(cell.get_id(), Exit::Failed, Some(err.to_string()))
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restart::Restart;

    /// An actor that ends as soon as it has started.
    struct Brief;

    impl Actor for Brief {
        type Msg = ();
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
            Ok(())
        }

        async fn post_start(
            &self,
            myself: ActorRef<()>,
            _: &mut (),
        ) -> Result<(), ActorProcessingErr> {
            myself.stop(Some("done at once".into()));
            Ok(())
        }
    }

    /// A kind supervisor of the test's own.
    async fn test_supervisor(notifier: &TreeNotifier) -> ActorRef<SupervisorMsg> {
        let status = NodeStatus::new("supervisor", "test", String::new(), notifier.clone());
        let (sup, _) = Actor::spawn(
            None,
            KindSupervisor,
            SupervisorArgs {
                kind: "test".into(),
                notifier: notifier.clone(),
                keep_ended: Duration::from_secs(60),
                status,
            },
        )
        .await
        .unwrap();
        sup
    }

    /// Start a temporary (never restarted) child `id` made by `factory`: the start's answer.
    async fn start_temporary(
        sup: &ActorRef<SupervisorMsg>,
        id: &str,
        factory: Factory,
        status: Arc<NodeStatus>,
    ) -> Result<(), StartFailed> {
        let spec = ChildSpec {
            id: id.into(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status,
        };
        start(sup, spec, Duration::from_secs(10)).await
    }

    /// An actor whose start fails.
    struct Refuses;

    impl Actor for Refuses {
        type Msg = ();
        type State = ();
        type Arguments = ();

        async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
            Err("the port is taken by another process".into())
        }
    }

    /// ractor words a failed `pre_start` as "Actor panicked during startup '…'"; whoever asked
    /// for the start reads the error itself (a chaos run showed the wrapper in a tool's error).
    #[tokio::test]
    async fn a_failed_start_is_reported_as_its_own_error() {
        let notifier = TreeNotifier::default();
        let sup = test_supervisor(&notifier).await;
        let factory: Factory = Arc::new(|ctx: StartCtx| {
            Box::pin(async move {
                let (actor, _) = Actor::spawn_linked(None, Refuses, (), ctx.supervisor)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(actor.get_cell())
            })
        });
        let status = NodeStatus::new("refuses", "r1", String::new(), notifier);
        let started = start_temporary(&sup, "r1", factory, status).await;
        assert_eq!(
            started,
            Err(StartFailed::Child(
                "the port is taken by another process".into()
            ))
        );
    }

    /// A start the supervisor does not answer in time, or a supervisor gone, is no answer:
    /// the caller is told so at the wait's end, never left waiting.
    #[tokio::test]
    async fn a_start_without_an_answer_is_told_apart_from_a_failed_one() {
        let notifier = TreeNotifier::default();
        let sup = test_supervisor(&notifier).await;
        let never: Factory = Arc::new(|_: StartCtx| Box::pin(std::future::pending()));
        let spec = |id: &str, factory: Factory| ChildSpec {
            id: id.into(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status: NodeStatus::new("slow", id, String::new(), notifier.clone()),
        };
        let started = start(&sup, spec("s1", never.clone()), Duration::from_millis(50)).await;
        assert_eq!(
            started,
            Err(StartFailed::NoAnswer("no answer within 50ms".into()))
        );
        sup.stop(None);
        while sup.get_status() != ractor::ActorStatus::Stopped {
            tokio::task::yield_now().await;
        }
        let gone = start(&sup, spec("s2", never), Duration::from_secs(10)).await;
        assert!(matches!(gone, Err(StartFailed::NoAnswer(_))), "{gone:?}");
    }

    /// Regression (found by the chaos runner): when an incarnation ended before the supervisor
    /// handled its `Started` message, the end was ignored and the child stayed "running".
    #[tokio::test]
    async fn a_child_that_ends_before_its_start_is_registered_is_seen_ending() {
        let notifier = TreeNotifier::default();
        let sup = test_supervisor(&notifier).await;
        let factory: Factory = Arc::new(|ctx: StartCtx| {
            Box::pin(async move {
                let (actor, _) = Actor::spawn_linked(None, Brief, (), ctx.supervisor)
                    .await
                    .map_err(|e| e.to_string())?;
                // Make the race certain: return only once the actor is gone, so its end
                // reaches the supervisor before `Started` does.
                while actor.get_status() != ractor::ActorStatus::Stopped {
                    tokio::task::yield_now().await;
                }
                Ok(actor.get_cell())
            })
        });
        let child_status = NodeStatus::new("brief", "b1", String::new(), notifier);
        let started = start_temporary(&sup, "b1", factory, child_status.clone()).await;
        assert_eq!(started, Ok(()));
        let lookup = sup
            .call(
                |reply| SupervisorMsg::Lookup {
                    id: "b1".into(),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        match lookup {
            ractor::rpc::CallResult::Success(Lookup::Ended { .. }) => {}
            other => panic!("expected the child to have ended, got {other:?}"),
        }
        assert_eq!(child_status.state(), NodeState::Exited);
        sup.stop(None);
    }
}
