//! The pool: one [`ServerActor`] per loaded model under the `inference` kind supervisor,
//! owning its server process through a process guard. An incarnation gets a fresh loopback
//! port, is `loading` until the server answers `GET /v1/models`, then `ready`; the server's
//! end is the incarnation's failure (restarted within the policy, `failed` with its last stderr
//! lines past it); an idle TTL unloads it. What outlives incarnations is the [`Served`].
//!
//! Every model server is the child of exactly one `ServerActor`, spawned through the launcher
//! (shim, spawn ledger, allowlisted environment), so it dies with its actor, a drain or the daemon
//! (SIGKILL included). It listens on a loopback port the daemon chose for that incarnation
//! (`{port}` is required in every configured command), and clients reach it only through the
//! endpoint (`crate::endpoint`). It is `ready` only once `GET /v1/models` is answered from a socket
//! of the server's own process tree (`kit::process::tree_listens_on`: the port's listening sockets
//! from the kernel's `sock_diag` dump, matched against the tree's descriptors), so an impostor on
//! the port is never `ready`. A server's end is always its incarnation's failure (restart policy
//! `Permanent`): it restarts within `[restart]` and stays `failed` past it, with how it ended and
//! its last 40 lines of output. An unload (SIGTERM, the grace, the guard's kill) and an idle-TTL
//! expiry are stops, never restarted. `Served` holds the port, pid, readiness, tail, last use and
//! requests in flight.
//!
//! Split by concern: the server's actor is `pool/actor.rs`, loading a model (fit, command,
//! eviction, start) `pool/load.rs`, the status the pool reports `pool/report.rs`; the shared
//! state, routing, readiness waits and unloading stay here.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use toolvisor_downloads::fit;
use toolvisor_downloads::store::Store;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{ExitStatus, ProcessGuard, Spawned};
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{Lookup, SupervisorMsg};
use toolvisor_protocol::results::{InferenceEndpoint, LoadState, ModelState, UnloadModelResult};

use crate::config::InferenceConfig;
use crate::error::InferenceError;
use crate::usage::UsageBook;

mod actor;
mod load;
mod report;

pub use actor::{ServerActor, ServerArgs, ServerMsg, ServerState};

/// Lines of a server's output kept for its `failed` error and the status.
const TAIL_LINES: usize = 40;
/// Characters kept of one output line.
const LINE_MAX: usize = 400;
/// How often a loading server's model list is asked for: every [`READY_POLL_FAST`] in its
/// first [`READY_FAST_FOR`] (llama-server is ready in about 20 ms: a 50 ms step would more
/// than double its load time), then every [`READY_POLL`]. A refused connect costs microseconds.
const READY_POLL: Duration = Duration::from_millis(50);
const READY_POLL_FAST: Duration = Duration::from_millis(2);
const READY_FAST_FOR: Duration = Duration::from_millis(500);
/// How long one readiness probe may take: a server that has bound its port but never answers
/// (the kernel accepts into the backlog for it) must not hold the probe, and the model in
/// `loading`, past `ready_timeout_s`.
const PROBE_LIMIT: Duration = Duration::from_secs(2);
const TICK: Duration = Duration::from_secs(1);
const SUPERVISOR_WAIT: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The facts of the current incarnation.
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// 0 while no server runs.
    pub port: u16,
    pub pid: Option<u32>,
    pub ready: bool,
    pub incarnation: u32,
    /// Spawn to ready, of the latest incarnation that became ready.
    pub load_ms: Option<u64>,
    /// When the current incarnation was spawned.
    pub spawned: Option<Instant>,
}

/// One loaded model: what outlives its server's incarnations.
pub struct Served {
    pub alias: String,
    /// The model as `load_model` named it (`owner/name[@revision][:variant]`).
    pub model: String,
    pub repo: String,
    pub revision: String,
    pub variant: String,
    pub path: PathBuf,
    /// The variant's multimodal projector, and whether the server command was given it.
    pub projector: Option<(PathBuf, bool)>,
    pub dir: PathBuf,
    pub context: u32,
    pub size: u64,
    pub format: String,
    /// The command with every placeholder but `{port}` filled.
    command: Vec<String>,
    /// Started for embeddings only (the data hub's `[data] embedding_model`).
    pub embeddings: bool,
    /// Where the fit placed it when it was loaded (label, need, the accelerators and layers
    /// it was given).
    placement: toolvisor_protocol::results::Placement,
    pub status: Arc<NodeStatus>,
    live: Mutex<Live>,
    changed: watch::Sender<u64>,
    tail: Mutex<VecDeque<String>>,
    last_used: Mutex<Instant>,
    in_flight: AtomicUsize,
    /// Never unloaded to make room for another model (`load_model {pin: true}`).
    pinned: bool,
    /// The endpoint's slots for this model's server (`[inference] parallel`).
    slots: Arc<tokio::sync::Semaphore>,
    /// Requests waiting for a slot now.
    waiting: AtomicUsize,
    /// Why the pool itself ended it (the idle TTL), for the status.
    ended_by: Mutex<Option<String>>,
}

impl Served {
    pub fn live(&self) -> Live {
        lock(&self.live).clone()
    }

    fn set_live(&self, f: impl FnOnce(&mut Live)) {
        f(&mut lock(&self.live));
        self.changed.send_modify(|n| *n += 1);
    }

    /// The server's last output lines.
    pub fn tail(&self) -> Vec<String> {
        lock(&self.tail).iter().cloned().collect()
    }

    fn tail_text(&self, lines: usize) -> String {
        let tail = lock(&self.tail);
        let skip = tail.len().saturating_sub(lines);
        tail.iter()
            .skip(skip)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn push_line(&self, line: &str) {
        let line: String = line.chars().take(LINE_MAX).collect();
        let mut tail = lock(&self.tail);
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }

    pub fn touch(&self) {
        *lock(&self.last_used) = Instant::now();
    }

    pub fn idle_for(&self) -> Duration {
        lock(&self.last_used).elapsed()
    }

    /// A slot of this model's server for one request: at once when one is free; else, when
    /// fewer than `queue` wait, after those before it (a fair queue); else `None` (the caller
    /// answers 429).
    pub async fn slot(&self, queue: usize) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if let Ok(permit) = self.slots.clone().try_acquire_owned() {
            return Some(permit);
        }
        let before = self.waiting.fetch_add(1, Ordering::SeqCst);
        struct Left<'a>(&'a AtomicUsize);
        impl Drop for Left<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _left = Left(&self.waiting);
        if before >= queue {
            return None;
        }
        self.slots.clone().acquire_owned().await.ok()
    }

    /// Counts a request in flight until the returned guard drops (the idle TTL waits for it).
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.touch();
        InFlight(self.clone())
    }
}

/// A request in flight on a model.
pub struct InFlight(Arc<Served>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Where a model stands, for status and routing.
#[derive(Clone, Debug)]
pub enum State {
    Loading,
    Ready(u16),
    Restarting { last_error: String },
    Failed { last_error: String },
    Unloaded { reason: Option<String> },
}

impl State {
    pub fn word(&self) -> &'static str {
        match self {
            State::Loading => "loading",
            State::Ready(_) => "ready",
            State::Restarting { .. } => "restarting",
            State::Failed { .. } => "failed",
            State::Unloaded { .. } => "unloaded",
        }
    }

    /// As the pool's results show it.
    pub fn model_state(&self) -> ModelState {
        match self {
            State::Loading => ModelState::Loading,
            State::Ready(_) => ModelState::Ready,
            State::Restarting { .. } => ModelState::Restarting,
            State::Failed { .. } => ModelState::Failed,
            State::Unloaded { .. } => ModelState::Unloaded,
        }
    }

    /// As `list_models` shows a stored model the pool serves.
    pub fn load_state(&self) -> LoadState {
        match self {
            State::Loading => LoadState::Loading,
            State::Ready(_) => LoadState::Ready,
            State::Restarting { .. } => LoadState::Restarting,
            State::Failed { .. } => LoadState::Failed,
            State::Unloaded { .. } => LoadState::Unloaded,
        }
    }
}

/// The request bodies the endpoint reads and holds at once, over all connections: a body
/// claims its `content-length` (a chunked one, `endpoint::MAX_REQUEST`) before it is read, and a
/// request past the budget is answered 503 at once instead of adding to the daemon's memory.
pub(crate) const BODY_BUDGET: usize = 256 << 20;

/// The pool of model servers.
pub struct Inference {
    config: InferenceConfig,
    store: Store,
    meminfo: PathBuf,
    accelerators: Arc<toolvisor_downloads::accel::Probe>,
    supervisor: ActorRef<SupervisorMsg>,
    launcher: Launcher,
    notifier: TreeNotifier,
    policy: RestartPolicy,
    models: Mutex<BTreeMap<String, Arc<Served>>>,
    /// Aliases `unload_model` or an eviction took out of `models`: how each was loaded and
    /// why it went, so a request naming one loads it again on demand (as an idle-unloaded
    /// alias is) and otherwise hears why it is gone. At most [`GONE_MAX`], the oldest
    /// forgotten first.
    gone: Mutex<BTreeMap<String, Gone>>,
    /// Serializes loads, so two loads of one alias or past `max_loaded` cannot race.
    loading: tokio::sync::Mutex<()>,
    pub usage: Arc<UsageBook>,
    /// Where the routing endpoint listens, for the status.
    pub endpoint: Mutex<Option<InferenceEndpoint>>,
    /// The endpoint's budget for request bodies being read at once, in KiB
    /// ([`BODY_BUDGET`]).
    pub(crate) bodies: Arc<tokio::sync::Semaphore>,
}

/// An alias unloaded by `unload_model` or evicted: what loads it again, and why it went.
#[derive(Clone, Debug)]
struct Gone {
    model: String,
    context: u32,
    pinned: bool,
    embeddings: bool,
    why: String,
    /// When it went: past [`GONE_MAX`] the oldest is forgotten.
    at: Instant,
}

/// Unloaded aliases remembered at most: a client loading and unloading new aliases without
/// end cannot grow the map.
const GONE_MAX: usize = 256;

/// Remember `alias` as gone, forgetting the oldest past [`GONE_MAX`].
fn remember(gone: &mut BTreeMap<String, Gone>, alias: &str, g: Gone) {
    gone.insert(alias.to_string(), g);
    if gone.len() > GONE_MAX
        && let Some(oldest) = gone
            .iter()
            .min_by_key(|(_, g)| g.at)
            .map(|(a, _)| a.clone())
    {
        gone.remove(&oldest);
    }
}

/// What the pool needs from the daemon.
pub struct InferenceArgs {
    pub config: InferenceConfig,
    pub store: PathBuf,
    pub meminfo: PathBuf,
    /// The accelerators the fit label and the offload flags are decided on.
    pub accelerators: Arc<toolvisor_downloads::accel::Probe>,
    pub supervisor: ActorRef<SupervisorMsg>,
    pub launcher: Launcher,
    pub notifier: TreeNotifier,
    pub policy: RestartPolicy,
    /// `<state_dir>/inference`: the usage book.
    pub state_dir: PathBuf,
}

/// The layers offloaded to the accelerators: all of them (llama.cpp caps the count at the
/// model's) when the model fits them whole, those that fit on a partial offload, else none.
pub fn gpu_layers(placement: &fit::Placement) -> u32 {
    placement.gpu_layers_flag()
}

impl Inference {
    pub fn new(args: InferenceArgs) -> Result<Inference, String> {
        let store = Store::open(&args.store).map_err(|e| e.to_string())?;
        toolvisor_kit::private::ensure_private_dir(&args.state_dir, "the inference state")
            .map_err(|e| e.to_string())?;
        let mut policy = args.policy;
        // A server that exits cleanly on its own did not do what it is for either.
        policy.restart = Restart::Permanent;
        Ok(Inference {
            usage: Arc::new(UsageBook::open(&args.state_dir.join("usage.json"))),
            config: args.config,
            store,
            meminfo: args.meminfo,
            accelerators: args.accelerators,
            supervisor: args.supervisor,
            launcher: args.launcher,
            notifier: args.notifier,
            policy,
            models: Mutex::new(BTreeMap::new()),
            gone: Mutex::new(BTreeMap::new()),
            loading: tokio::sync::Mutex::new(()),
            endpoint: Mutex::new(None),
            bodies: Arc::new(tokio::sync::Semaphore::new(BODY_BUDGET >> 10)),
        })
    }

    pub fn config(&self) -> &InferenceConfig {
        &self.config
    }

    pub fn get(&self, alias: &str) -> Option<Arc<Served>> {
        lock(&self.models).get(alias).cloned()
    }

    async fn lookup(&self, alias: &str) -> Result<Lookup, InferenceError> {
        let id = alias.to_string();
        match self
            .supervisor
            .call(
                |reply| SupervisorMsg::Lookup { id, reply },
                Some(SUPERVISOR_WAIT),
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(l)) => Ok(l),
            Ok(_) => Err(InferenceError::Supervisor("lookup timed out".into())),
            Err(e) => Err(InferenceError::Supervisor(e.to_string())),
        }
    }

    /// Where `served` stands now.
    pub async fn state(&self, served: &Served) -> State {
        let lookup = match self.lookup(&served.alias).await {
            Ok(l) => l,
            Err(e) => {
                return State::Failed {
                    last_error: e.to_string(),
                };
            }
        };
        match lookup {
            Lookup::Running(_) => {
                let live = served.live();
                if live.ready && live.port != 0 {
                    State::Ready(live.port)
                } else {
                    State::Loading
                }
            }
            Lookup::Starting => State::Loading,
            Lookup::Backoff { last_error, .. } => State::Restarting { last_error },
            Lookup::Failed { last_error } => State::Failed { last_error },
            Lookup::Ended { last_error } => State::Unloaded {
                reason: last_error.or_else(|| lock(&served.ended_by).clone()),
            },
            Lookup::Missing => State::Unloaded { reason: None },
        }
    }

    /// `unload_model`: stop the server (SIGTERM, then the guard's kill after the grace) and
    /// wait until its port is free.
    pub async fn unload(&self, alias: &str) -> Result<UnloadModelResult, InferenceError> {
        self.unload_because(alias, "unloaded by unload_model".into())
            .await
    }

    /// [`Inference::unload`], remembering `why` for a later request naming the alias.
    async fn unload_because(
        &self,
        alias: &str,
        why: String,
    ) -> Result<UnloadModelResult, InferenceError> {
        let served = self.get(alias).ok_or_else(|| InferenceError::NotLoaded {
            alias: alias.to_string(),
        })?;
        let before = self.state(&served).await;
        let port = served.live().port;
        let id = alias.to_string();
        let _ = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id,
                    reason: "unloaded by unload_model".into(),
                    reply,
                },
                Some(SUPERVISOR_WAIT),
            )
            .await
            .map_err(|e| InferenceError::Supervisor(e.to_string()))?;
        let mut changes = served.changed.subscribe();
        let deadline =
            tokio::time::Instant::now() + Duration::from_secs(self.config.stop_grace_s + 5);
        loop {
            let live = served.live();
            if live.pid.is_none() && live.port == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                break;
            }
        }
        lock(&self.models).remove(alias);
        remember(
            &mut lock(&self.gone),
            alias,
            Gone {
                model: served.model.clone(),
                context: served.context,
                pinned: served.pinned,
                embeddings: served.embeddings,
                why,
                at: Instant::now(),
            },
        );
        tracing::info!(alias, "model unloaded");
        Ok(UnloadModelResult {
            alias: alias.to_string(),
            model: served.model.clone(),
            unloaded: true,
            was: before.model_state(),
            port_freed: (port != 0).then_some(port),
        })
    }

    /// The port of `alias` once ready, loading it first where `[inference] on_demand` allows:
    /// an unloaded alias is started again, an unknown name that is a model of the store is
    /// loaded under that name.
    pub async fn route(&self, alias: &str) -> Result<(Arc<Served>, u16), InferenceError> {
        let served = match self.get(alias) {
            Some(s) => {
                if let State::Unloaded { .. } = self.state(&s).await {
                    if !self.config.on_demand {
                        return Err(InferenceError::NotLoaded {
                            alias: alias.to_string(),
                        });
                    }
                    self.load_with(
                        &s.model,
                        Some(alias),
                        Some(s.context),
                        s.pinned,
                        s.embeddings,
                    )
                    .await?;
                }
                self.get(alias).ok_or_else(|| InferenceError::NotLoaded {
                    alias: alias.to_string(),
                })?
            }
            None => {
                let gone = lock(&self.gone).get(alias).cloned();
                match gone {
                    // Unloaded or evicted: loaded again as it was, under its own alias.
                    Some(g) if self.config.on_demand => {
                        self.load_with(
                            &g.model,
                            Some(alias),
                            Some(g.context),
                            g.pinned,
                            g.embeddings,
                        )
                        .await?;
                    }
                    Some(g) => {
                        return Err(InferenceError::Gone {
                            alias: alias.to_string(),
                            model: g.model,
                            why: g.why,
                        });
                    }
                    None if self.config.on_demand => {
                        crate::resolve::check_alias(alias)?;
                        self.load(alias, Some(alias), None, false).await?;
                    }
                    None => {
                        return Err(InferenceError::NotLoaded {
                            alias: alias.to_string(),
                        });
                    }
                }
                self.get(alias).ok_or_else(|| InferenceError::NotLoaded {
                    alias: alias.to_string(),
                })?
            }
        };
        let port = self.wait_ready(&served).await?;
        Ok((served, port))
    }

    pub(crate) async fn wait_ready(&self, served: &Served) -> Result<u16, InferenceError> {
        let secs = self.config.ready_timeout_s;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        let mut changes = served.changed.subscribe();
        loop {
            match self.state(served).await {
                State::Ready(port) => return Ok(port),
                State::Failed { last_error } => {
                    return Err(InferenceError::Failed {
                        alias: served.alias.clone(),
                        error: last_error,
                    });
                }
                State::Unloaded { .. } => {
                    return Err(InferenceError::NotLoaded {
                        alias: served.alias.clone(),
                    });
                }
                State::Loading | State::Restarting { .. } => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(InferenceError::Timeout {
                    alias: served.alias.clone(),
                    secs,
                });
            }
            // A restart's backoff ends without a change of ours: look again now and then.
            let _ = tokio::time::timeout(Duration::from_millis(200), changes.changed()).await;
        }
    }

    /// Every alias and its state, for the endpoint's `GET /v1/models`.
    pub async fn listing(&self) -> Vec<(String, String, &'static str)> {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut out = Vec::new();
        for s in models {
            out.push((
                s.alias.clone(),
                s.model.clone(),
                self.state(&s).await.word(),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unloaded_aliases_are_remembered_up_to_the_cap_the_oldest_forgotten_first() {
        let start = Instant::now();
        let gone = |i: u64| Gone {
            model: format!("o/m{i}"),
            context: 2048,
            pinned: false,
            embeddings: false,
            why: "unloaded by unload_model".into(),
            at: start + Duration::from_millis(i),
        };
        let mut map = BTreeMap::new();
        for i in 0..GONE_MAX as u64 + 10 {
            remember(&mut map, &format!("a{i}"), gone(i));
        }
        assert_eq!(map.len(), GONE_MAX);
        assert!((0..10).all(|i| !map.contains_key(&format!("a{i}"))));
        assert!(map.contains_key(&format!("a{}", GONE_MAX + 9)));
        // Unloading an alias again replaces its entry, it does not add one.
        remember(&mut map, "a100", gone(1_000));
        assert_eq!(map.len(), GONE_MAX);
        assert_eq!(map["a100"].model, "o/m1000");
    }
}
