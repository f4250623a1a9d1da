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

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::watch;
use toolvisor_downloads::fit;
use toolvisor_downloads::gguf_header::Shape;
use toolvisor_downloads::store::{Manifest, Store};
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard, Spawned};
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{ChildSpec, Factory, Lookup, StartCtx, SupervisorMsg};
use toolvisor_protocol::results::{
    Evicted, Fit, GoneAlias, InferenceEndpoint, InferenceStatusResult, LoadModelResult, LoadState,
    LoadedModel, MemoryFacts, ModelState, UnloadModelResult,
};

use crate::config::{InferenceConfig, ModelParams, render};
use crate::error::InferenceError;
use crate::resolve::ModelFiles;
use crate::usage::UsageBook;

mod actor;
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

/// Where the model runs (from its header's shape when there is one, else its weights);
/// an error when it is too large for this machine's memory.
fn placement_of(
    manifest: &Manifest,
    shape: Option<&Shape>,
    weights: u64,
    context: u32,
    memory: Option<fit::Memory>,
    accelerators: &[toolvisor_downloads::accel::Accelerator],
) -> Result<fit::Placement, InferenceError> {
    let placement = match shape {
        Some(shape) => fit::placement_for(shape, weights, context as u64, memory, accelerators),
        None => fit::placement(weights, memory, accelerators),
    };
    if placement.fit() == Fit::TooLarge
        && let Some(m) = memory
    {
        return Err(InferenceError::TooLarge {
            model: format!("{}:{}", manifest.repo, manifest.variant),
            weights,
            need: placement.need,
            total: m.total,
            available: m.available,
        });
    }
    Ok(placement)
}

/// A GGUF's shape from its header: its layers and KV cache, so the fit counts the context
/// asked for and can offload part of the layers; `None` (the weights alone decide) for
/// another format or a header that cannot be read.
async fn model_shape(files: &ModelFiles) -> Option<Shape> {
    let path = &files.path;
    match files.format == "gguf" {
        true => {
            let p = path.clone();
            tokio::task::spawn_blocking(move || toolvisor_downloads::gguf_header::read(&p))
                .await
                .ok()
                .and_then(|r| {
                    r.map_err(|e| tracing::info!(path = %path.display(), error = %e, "no model shape from its header"))
                        .ok()
                })
        }
        false => None,
    }
}

/// The layers offloaded to the accelerators: all of them (llama.cpp caps the count at the
/// model's) when the model fits them whole, those that fit on a partial offload, else none.
pub fn gpu_layers(placement: &fit::Placement) -> u32 {
    placement.gpu_layers_flag()
}

/// A loopback port nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port())
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

    /// Room for one more model than the live ones (other than `alias`): below `max_loaded`
    /// nothing happens; at it, the least recently used model that is not pinned and has no
    /// request in flight is unloaded and described (what was evicted, idle how long), or the
    /// load is refused `busy` saying why none could be.
    async fn make_room(&self, alias: &str) -> Result<Option<Evicted>, InferenceError> {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut live = Vec::new();
        for m in models {
            if m.alias != alias && !matches!(self.state(&m).await, State::Unloaded { .. }) {
                live.push(m);
            }
        }
        let max = self.config.max_loaded;
        if live.len() < max {
            return Ok(None);
        }
        if !self.config.evict {
            return Err(InferenceError::TooMany {
                max,
                why: "[inference] evict is off".into(),
            });
        }
        let victim = live
            .iter()
            .filter(|m| !m.pinned && m.in_flight.load(Ordering::SeqCst) == 0)
            .max_by_key(|m| m.idle_for());
        let Some(victim) = victim else {
            let pinned: Vec<&str> = live
                .iter()
                .filter(|m| m.pinned)
                .map(|m| m.alias.as_str())
                .collect();
            let busy: Vec<&str> = live
                .iter()
                .filter(|m| !m.pinned)
                .map(|m| m.alias.as_str())
                .collect();
            let mut why = Vec::new();
            if !pinned.is_empty() {
                why.push(format!("pinned: {}", pinned.join(", ")));
            }
            if !busy.is_empty() {
                why.push(format!("serving requests: {}", busy.join(", ")));
            }
            return Err(InferenceError::TooMany {
                max,
                why: format!("none can be unloaded to make room ({})", why.join("; ")),
            });
        };
        let idle_s = victim.idle_for().as_secs();
        let (victim_alias, victim_model) = (victim.alias.clone(), victim.model.clone());
        tracing::info!(
            evicted = victim_alias,
            for_alias = alias,
            idle_s,
            "unloading the least recently used model to make room"
        );
        self.unload_because(
            &victim_alias,
            format!("evicted to make room for {alias:?} (inference.max_loaded {max})"),
        )
        .await?;
        Ok(Some(Evicted {
            alias: victim_alias,
            model: victim_model,
            idle_s,
            why: format!(
                "max_loaded ({max}) reached; it was the least recently used model not pinned and not serving"
            ),
        }))
    }

    /// `load_model`: check, then start the server and answer at once with `loading`. At
    /// `max_loaded` the least recently used model that is not pinned and serves no request
    /// is unloaded first (`[inference] evict`), and the answer says which (`evicted`).
    pub async fn load(
        &self,
        model: &str,
        alias: Option<&str>,
        context: Option<u32>,
        pin: bool,
    ) -> Result<LoadModelResult, InferenceError> {
        self.load_with(model, alias, context, pin, false).await
    }

    /// [`Inference::load`], the server started for embeddings only when `embeddings` is set
    /// (its command given `[inference] embedding_args`, or the flags of llama-server and
    /// llama-cpp-python that turn embeddings on).
    pub async fn load_with(
        &self,
        model: &str,
        alias: Option<&str>,
        context: Option<u32>,
        pin: bool,
        embeddings: bool,
    ) -> Result<LoadModelResult, InferenceError> {
        let (manifest, dir) = crate::resolve::resolve(&self.store, model)?;
        let alias = match alias {
            Some(a) => a.to_string(),
            None => manifest
                .repo
                .rsplit('/')
                .next()
                .unwrap_or(&manifest.repo)
                .to_string(),
        };
        crate::resolve::check_alias(&alias)?;
        let _serial = self.loading.lock().await;
        if let Some(answer) = self
            .loaded_already(&alias, &dir, &manifest, embeddings)
            .await?
        {
            return Ok(answer);
        }
        let evicted = self.make_room(&alias).await?;
        let weights: u64 = manifest.files.iter().map(|f| f.size).sum();
        let memory = fit::read_memory(&self.meminfo);
        let accelerators = self.accelerators.detect().await;
        let files = crate::resolve::model_files(&dir, &manifest, model)?;
        let shape = model_shape(&files).await;
        let params = self
            .config
            .params(&manifest.repo, &manifest.variant)
            .cloned()
            .unwrap_or_default();
        let context = self.context_for(context, &params, embeddings, shape.as_ref());
        let placement = placement_of(
            &manifest,
            shape.as_ref(),
            weights,
            context,
            memory,
            &accelerators,
        )?;
        let label = placement.fit();
        let (command, projector_passed) = self.command_for(
            model,
            &files,
            embeddings,
            shape.as_ref(),
            &params,
            &[
                ("path", files.path.display().to_string()),
                ("dir", dir.display().to_string()),
                ("context", context.to_string()),
                ("alias", alias.clone()),
                // Every layer on the accelerator when the model fits one whole, else none.
                ("gpu_layers", gpu_layers(&placement).to_string()),
            ],
        )?;
        let status = NodeStatus::new(
            "model",
            &alias,
            format!("{} ({label})", manifest.repo),
            self.notifier.clone(),
        );
        let (changed, _) = watch::channel(0);
        let served = Arc::new(Served {
            alias: alias.clone(),
            model: model.to_string(),
            repo: manifest.repo.clone(),
            revision: manifest.revision.clone(),
            variant: manifest.variant.clone(),
            path: files.path,
            projector: files.projector.map(|p| (p, projector_passed)),
            dir,
            context,
            size: weights,
            format: files.format,
            command,
            embeddings,
            placement: placement.shown(&accelerators),
            status: status.clone(),
            live: Mutex::new(Live::default()),
            changed,
            tail: Mutex::new(VecDeque::new()),
            last_used: Mutex::new(Instant::now()),
            in_flight: AtomicUsize::new(0),
            pinned: pin,
            slots: Arc::new(tokio::sync::Semaphore::new(self.config.parallel.max(1))),
            waiting: AtomicUsize::new(0),
            ended_by: Mutex::new(None),
        });
        self.start_served(&served, status).await?;
        tracing::info!(alias, model, context, "model server started; loading");
        Ok(self.loading_answer(&served, label, evicted).await)
    }

    /// The answer to a load just started: the model's state, its fit, what was evicted.
    async fn loading_answer(
        &self,
        served: &Served,
        fit: Fit,
        evicted: Option<Evicted>,
    ) -> LoadModelResult {
        let state = self.state(served).await;
        LoadModelResult {
            model: self.describe(served, &state),
            fit: Some(fit),
            evicted,
            hint: Some(
                "get_inference_status shows when it is ready; requests go to the endpoint with \"model\": the alias".into(),
            ),
            note: None,
        }
    }

    /// The answer when `alias` already serves this model (nothing to start); an error when
    /// it serves another one; `None` when it is free or unloaded.
    async fn loaded_already(
        &self,
        alias: &str,
        dir: &Path,
        manifest: &Manifest,
        embeddings: bool,
    ) -> Result<Option<LoadModelResult>, InferenceError> {
        let Some(existing) = self.get(alias) else {
            return Ok(None);
        };
        let state = self.state(&existing).await;
        let same = existing.dir == dir
            && existing.variant == manifest.variant
            && existing.embeddings == embeddings;
        match state {
            State::Unloaded { .. } => Ok(None),
            _ if same => Ok(Some(LoadModelResult {
                model: self.describe(&existing, &state),
                fit: None,
                evicted: None,
                hint: None,
                note: Some("already loaded; nothing started".into()),
            })),
            _ => Err(InferenceError::AliasTaken {
                alias: alias.to_string(),
                model: existing.model.clone(),
            }),
        }
    }

    /// The context the server gets: the one asked for, else the model's configured one,
    /// else (for embeddings) the model's own, else `[inference] context`.
    fn context_for(
        &self,
        asked: Option<u32>,
        params: &ModelParams,
        embeddings: bool,
        shape: Option<&Shape>,
    ) -> u32 {
        // An embeddings server gets the model's own context (its batch is set to it), so a
        // text the model can take is never refused for the server's defaults.
        match (asked.or(params.context), embeddings) {
            (Some(c), _) => c,
            (None, true) => crate::embedding_server::embedding_context(
                shape.and_then(|s| s.context_trained),
                self.config.context,
            ),
            (None, false) => self.config.context,
        }
    }

    /// The server's command for `files`, its placeholders filled from `vars`, and whether
    /// it was given the model's projector.
    fn command_for(
        &self,
        model: &str,
        files: &ModelFiles,
        embeddings: bool,
        shape: Option<&Shape>,
        params: &ModelParams,
        vars: &[(&str, String)],
    ) -> Result<(Vec<String>, bool), InferenceError> {
        let path_has = |p: &str| self.launcher.finds(p);
        let mut template = self
            .config
            .command(&files.format, path_has)
            .ok_or_else(|| InferenceError::NoCommand {
                model: model.to_string(),
                format: files.format.clone(),
            })?;
        let projector_passed = crate::resolve::give_projector(&mut template, &files.projector);
        if embeddings {
            let pooling = shape.and_then(|s| s.pooling);
            let declared = crate::embedding_server::pooling_usable(pooling);
            let args = crate::embedding_server::embedding_args(&template, &self.config, declared)
                .ok_or_else(|| InferenceError::NoEmbeddingArgs {
                model: model.to_string(),
                program: template[0].clone(),
            })?;
            template.extend(args);
        }
        // The model's own arguments last: where a flag is given twice, the servers take the
        // last one, so they override the fit's `-ngl` or the embedding defaults.
        template.extend(params.args.iter().cloned());
        Ok((render(&template, vars), projector_passed))
    }

    /// Registers `served` and has the kind supervisor start its server actor.
    async fn start_served(
        &self,
        served: &Arc<Served>,
        status: Arc<NodeStatus>,
    ) -> Result<(), InferenceError> {
        let alias = served.alias.clone();
        lock(&self.models).insert(alias.clone(), served.clone());
        lock(&self.gone).remove(&alias);
        let factory = self.factory(served.clone());
        let spec = ChildSpec {
            id: alias.clone(),
            factory,
            policy: self.policy,
            status,
        };
        let started = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Start { spec, reply },
                Some(Duration::from_secs(60)),
            )
            .await;
        match started {
            Ok(ractor::rpc::CallResult::Success(Ok(()))) => Ok(()),
            Ok(ractor::rpc::CallResult::Success(Err(error))) => {
                Err(InferenceError::Start { alias, error })
            }
            Ok(_) => Err(InferenceError::Supervisor("start timed out".into())),
            Err(e) => Err(InferenceError::Supervisor(e.to_string())),
        }
    }

    fn factory(&self, served: Arc<Served>) -> Factory {
        let launcher = self.launcher.clone();
        let supervisor = self.supervisor.clone();
        let ready_timeout = Duration::from_secs(self.config.ready_timeout_s);
        let check_owner = self.config.check_port_owner;
        let idle_ttl =
            (self.config.idle_ttl_s > 0).then(|| Duration::from_secs(self.config.idle_ttl_s));
        let grace = Duration::from_secs(self.config.stop_grace_s);
        Arc::new(move |ctx: StartCtx| {
            let served = served.clone();
            let launcher = launcher.clone();
            let supervisor = supervisor.clone();
            Box::pin(async move {
                let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
                let argv = render(&served.command, &[("port", port.to_string())]);
                let spec = launcher.spec(
                    &argv[0],
                    &argv[1..],
                    &served.dir,
                    false,
                    &format!("inference/{}", served.alias),
                );
                let spawned = process::spawn(spec)
                    .await
                    .map_err(|e| format!("cannot start {:?}: {e}", argv[0]))?;
                let (actor, _) = Actor::spawn_linked(
                    None,
                    ServerActor,
                    ServerArgs {
                        served,
                        spawned,
                        port,
                        supervisor,
                        ready_timeout,
                        check_owner,
                        idle_ttl,
                        grace,
                        attempt: ctx.attempt,
                    },
                    ctx.supervisor,
                )
                .await
                .map_err(|e| e.to_string())?;
                Ok(actor.get_cell())
            })
        })
    }

    /// One model's status entry.
    pub fn describe(&self, s: &Served, state: &State) -> LoadedModel {
        let live = s.live();
        let info = s.status.get();
        let pid = live.pid;
        let port = (live.port != 0).then_some(live.port);
        // How far a load is: the time since its spawn against the readiness timeout (a
        // model server reports no progress of its own while it loads).
        let loading = live.spawned.filter(|_| matches!(state, State::Loading));
        let troubled = matches!(state, State::Failed { .. } | State::Restarting { .. });
        LoadedModel {
            alias: s.alias.clone(),
            model: s.model.clone(),
            repo: s.repo.clone(),
            revision: s.revision.clone(),
            variant: s.variant.clone(),
            path: s.path.display().to_string(),
            format: s.format.clone(),
            context: s.context,
            size_bytes: s.size,
            state: state.model_state(),
            restarts: info.restarts,
            idle_s: s.idle_for().as_secs(),
            requests_in_flight: s.in_flight.load(Ordering::SeqCst) as u64,
            pinned: s.pinned,
            queue_depth: s.waiting.load(Ordering::SeqCst) as u64,
            slots_free: s.slots.available_permits() as u64,
            placement: s.placement.clone(),
            projector: s.projector.as_ref().map(|(p, _)| p.display().to_string()),
            projector_passed: s.projector.as_ref().map(|(_, passed)| *passed),
            port,
            url: port.map(|port| format!("http://127.0.0.1:{port}/v1")),
            pid,
            rss_bytes: pid.and_then(process::rss_bytes),
            load_ms: live.load_ms,
            loading_ms: loading.map(|at| at.elapsed().as_millis() as u64),
            ready_timeout_s: loading.map(|_| self.config.ready_timeout_s),
            last_error: match state {
                State::Failed { last_error } | State::Restarting { last_error } => {
                    Some(last_error.clone())
                }
                _ => None,
            },
            reason: match state {
                State::Unloaded { reason } => reason.clone(),
                _ => None,
            },
            stderr_tail: troubled.then(|| s.tail()),
        }
    }

    /// `get_inference_status`: every model the pool knows, the endpoint.
    pub async fn status(&self) -> InferenceStatusResult {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut out = Vec::new();
        for s in models {
            let state = self.state(&s).await;
            out.push(self.describe(&s, &state));
        }
        // Aliases unloaded or evicted are not gone without a word: each says why and what
        // a request for it does now.
        let gone = lock(&self.gone)
            .iter()
            .map(|(alias, g)| GoneAlias {
                alias: alias.clone(),
                model: g.model.clone(),
                why: g.why.clone(),
                gone_s: g.at.elapsed().as_secs(),
                reloads_on_request: self.config.on_demand,
            })
            .collect();
        // The memory the fit sees, as it is now: the host's, and each accelerator's in use
        // (what `nvidia-smi` or the kernel's amdgpu files say, whoever holds it).
        let memory = fit::read_memory(&self.meminfo).map(|m| MemoryFacts {
            total_bytes: m.total,
            available_bytes: m.available,
        });
        let accelerators: Vec<_> = self
            .accelerators
            .detect()
            .await
            .iter()
            .map(|a| {
                let mut shown = a.shown();
                if let (Some(total), Some(free)) = (a.memory_total, a.memory_free) {
                    shown.memory_used_bytes = Some(total.saturating_sub(free));
                }
                shown
            })
            .collect();
        InferenceStatusResult {
            models: out,
            memory,
            accelerators,
            gone,
            endpoint: lock(&self.endpoint).clone(),
            idle_ttl_s: self.config.idle_ttl_s,
            on_demand: self.config.on_demand,
            max_loaded: self.config.max_loaded as u64,
        }
    }

    /// The alias and state of the stored model `variant` in the model directory `dir` (its
    /// snapshot) if the pool serves it.
    pub async fn load_state(&self, dir: &Path, variant: &str) -> Option<(String, LoadState)> {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut found = None;
        for s in models {
            if s.dir == dir && s.variant == variant {
                let state = self.state(&s).await.load_state();
                if state != LoadState::Unloaded || found.is_none() {
                    found = Some((s.alias.clone(), state));
                }
            }
        }
        found
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
