//! `vibe_*`: background workers. Each worker runs a configured command (per tier) on a
//! brief, as an actor under the `vibe` kind supervisor that owns the worker's process group
//! through a process guard. Attempts are never restarted by the supervisor (temporary
//! policy): a crash leaves the worker `failed` with its exit status and stderr tail. At most
//! `max_running` attempts run at once; later ones wait in a queue. Finished workers stay
//! readable for an idle TTL, then are collected. A worker belongs to the conversation that
//! spawned it.
//!
//! Each attempt gets the daemon's socket (`TOOLVISOR_SOCKET`) and the worker's random credential
//! (`TOOLVISOR_RUN_TOKEN`; its `Debug` never shows it): a Hello carrying it is pinned by the daemon
//! to the tier's surface and to the run `vibe:<id>` (`session::pin_by_token`), so a worker calling
//! the daemon passes the same gates as the model. A rerun (`vibe_send`) starts a new attempt under
//! the same id only after the supervisor recorded the old one's end.
//!
//! An attempt's actor is `vibe/actor.rs`; the roster's queue, launches, stops and end records
//! are `vibe/roster.rs`; the tools' surface ([`Vibes`]) and the workers' state stay here.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard};
use toolvisor_kit::status::{NodeStatus, TreeNotifier, duration_ms};
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::{VibeInfo, VibeState, VibeTier};
use toolvisor_protocol::tree::NodeState;

use crate::output::{HeadTail, OutputLog};

mod actor;
mod roster;
pub use actor::{VibeActor, VibeActorState, VibeMsg, VibeStart};

/// The placeholder of a command template replaced by the whole brief.
pub const BRIEF_PLACEHOLDER: &str = "{brief}";

/// Characters of the last result shown by `vibe_list`.
const LIST_PREVIEW_CHARS: usize = 400;

/// Bytes of stderr kept per attempt (the tail).
const STDERR_TAIL_BYTES: usize = 4096;

/// How long a stop, a kill or a start may take before the caller hears why not.
const STEP_LIMIT: Duration = Duration::from_secs(10);

/// Limits and commands of the vibe roster.
#[derive(Clone, Debug)]
pub struct VibeLimits {
    /// Command template per configured tier: program and arguments, `{brief}` replaced.
    pub tiers: BTreeMap<VibeTier, Vec<String>>,
    /// Attempts running at once, across the daemon; more wait in the queue.
    pub max_running: usize,
    /// Workers waiting for a slot; a spawn beyond is refused with `busy`.
    pub max_queued: usize,
    /// A finished worker nobody asked about for this long is collected.
    pub keep_idle: Duration,
    /// One attempt may run this long, then it is killed and the worker fails. `None`: no limit.
    pub attempt_timeout: Option<Duration>,
    /// Bytes of a worker's stdout kept as its result (head and tail halves).
    pub result_bytes: usize,
    /// The daemon's socket, given to every attempt as `TOOLVISOR_SOCKET` together with the
    /// worker's credential `TOOLVISOR_RUN_TOKEN`: a worker that says Hello with that token
    /// gets the surface its tier's config sets, whatever it claims. `None`: neither is set.
    pub socket: Option<PathBuf>,
}

/// The environment variable carrying the daemon's socket path to a worker.
pub const SOCKET_ENV: &str = "TOOLVISOR_SOCKET";
/// The environment variable carrying a worker's credential.
pub const TOKEN_ENV: &str = "TOOLVISOR_RUN_TOKEN";

/// Who a credential belongs to: a worker with a live attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerCredential {
    pub id: String,
    pub tier: VibeTier,
    pub conversation: String,
    /// The directory the worker runs in: its sessions' workdir is pinned inside it.
    pub workdir: PathBuf,
}

/// 32 random bytes from the kernel, hex: a worker's credential.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A credential; its `Debug` never shows it.
struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Equal, in time independent of where the first difference is.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl Default for VibeLimits {
    fn default() -> Self {
        VibeLimits {
            tiers: BTreeMap::new(),
            max_running: 4,
            max_queued: 32,
            keep_idle: Duration::from_secs(30 * 60),
            attempt_timeout: Some(Duration::from_secs(60 * 60)),
            result_bytes: 256 * 1024,
            socket: None,
        }
    }
}

/// Why a tier's command cannot run here, if it cannot. A bare program name is looked up in
/// the `PATH` of `env` (the children's environment); an absolute path must be an executable
/// file; a relative path with a `/` is resolved against the run's workdir at spawn time and
/// is accepted here.
pub fn check_command(command: &[String], env: &[(String, String)]) -> Result<(), String> {
    let Some(program) = command.first().filter(|p| !p.is_empty()) else {
        return Err("its command is empty".into());
    };
    let executable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.starts_with('/') {
        return if executable(Path::new(program)) {
            Ok(())
        } else {
            Err(format!("{program} is not an executable file"))
        };
    }
    if program.contains('/') {
        return Ok(());
    }
    let path = toolvisor_kit::process::env_path(env).unwrap_or("");
    if path
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|d| executable(&Path::new(d).join(program)))
    {
        Ok(())
    } else {
        Err(format!("{program:?} is not on PATH ({path})"))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How one attempt ended, as its waiter saw it.
struct AttemptEnd {
    exit: Option<ExitStatus>,
    /// Could not start, or another reason the exit status does not tell.
    error: Option<String>,
    stdout: Option<HeadTail>,
    stderr_tail: String,
}

/// The mutable facts of a worker.
#[derive(Debug)]
struct Run {
    brief: String,
    messages: u32,
    state: VibeState,
    /// Attempts started so far; the current or last attempt is number `attempts`.
    attempts: u32,
    /// The attempt that holds a slot and has not recorded its end.
    live: Option<u32>,
    /// The live attempt's start request has not been answered yet.
    launching: bool,
    /// The supervisor has (or had) a record of this worker: a new attempt waits for it to end.
    in_supervisor: bool,
    /// Set by `vibe_kill`.
    killed: bool,
    /// Set when the live attempt ran past its limit.
    timed_out: bool,
    /// Set by `vibe_send` while an attempt runs: queue a new attempt when it ends.
    rerun: bool,
    /// When the current attempt started, or the worker entered the queue.
    since: Instant,
    ended_at: Option<Instant>,
    last_touch: Instant,
    pid: Option<u32>,
    exit: Option<ExitStatus>,
    error: Option<String>,
    stderr_tail: Option<String>,
    result: Option<String>,
    result_cut: bool,
}

/// One worker, shared by the roster, its actor and its waiter.
#[derive(Debug)]
struct Worker {
    id: String,
    num: u64,
    conversation: String,
    label: String,
    tier: VibeTier,
    cwd: PathBuf,
    /// The credential its attempts get (`TOOLVISOR_RUN_TOKEN`); valid while one runs.
    token: Token,
    status: Arc<NodeStatus>,
    run: Mutex<Run>,
    /// Bumped after every change of `run` that a waiter may care about.
    changed: watch::Sender<u64>,
}

impl Worker {
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn touch(&self) {
        lock(&self.run).last_touch = Instant::now();
    }

    fn info(&self, preview: bool) -> VibeInfo {
        let run = lock(&self.run);
        let now = Instant::now();
        let elapsed = match run.ended_at {
            Some(end) if run.state.is_final() => end.saturating_duration_since(run.since),
            _ => now.saturating_duration_since(run.since),
        };
        let mut exit = run.exit;
        // Ended by kill, the shim exits 143 after SIGTERM tore the tree down: that is the
        // SIGTERM it was, not the program's own exit code.
        if let Some(e) = exit
            .as_mut()
            .filter(|e| run.state == VibeState::Killed && e.code == Some(143))
        {
            e.code = None;
            e.signal = Some(15);
        }
        let full = run.result.clone();
        let result_chars = full.as_ref().map_or(0, |r| r.chars().count() as u64);
        let (result, cut_here) = match full {
            Some(r) if preview && r.chars().count() > LIST_PREVIEW_CHARS => {
                let head: String = r.chars().take(LIST_PREVIEW_CHARS).collect();
                (Some(format!("{head}…")), true)
            }
            other => (other, false),
        };
        let note = match run.state {
            VibeState::Queued => Some(
                "queued: the cap on concurrent workers is reached; it starts when a slot frees"
                    .to_string(),
            ),
            _ if cut_here => Some(format!(
                "result preview only: vibe_wait {{\"worker_id\": \"{}\", \"timeout_seconds\": 0}} returns the whole result",
                self.id
            )),
            _ if run.result_cut => Some(
                "the worker printed more than the daemon keeps: the result shows its head and tail"
                    .to_string(),
            ),
            _ => None,
        };
        VibeInfo {
            worker_id: self.id.clone(),
            label: self.label.clone(),
            tier: self.tier,
            state: run.state,
            elapsed_ms: duration_ms(elapsed),
            attempts: run.attempts,
            messages: run.messages,
            pid: run.pid.filter(|_| run.state == VibeState::Running),
            exit_code: exit.and_then(|e| e.code),
            signal: exit.and_then(|e| e.signal),
            error: run.error.clone(),
            stderr_tail: run.stderr_tail.clone(),
            result,
            result_chars,
            result_truncated: cut_here || run.result_cut,
            timed_out: false,
            note,
        }
    }
}

#[derive(Debug, Default)]
struct Table {
    workers: BTreeMap<u64, Arc<Worker>>,
    queue: VecDeque<Arc<Worker>>,
    /// Attempts holding a slot.
    active: usize,
}

/// What the roster's tasks and actors share.
struct Roster {
    supervisor: ActorRef<SupervisorMsg>,
    launcher: Launcher,
    limits: VibeLimits,
    notifier: TreeNotifier,
    table: Mutex<Table>,
    /// Persisted: `w1` never names a different worker after a daemon restart.
    ids: IdCounter,
}

/// The `vibe_*` tools' state: every worker by id, the queue, and the supervisor they run
/// under.
pub struct Vibes {
    roster: Arc<Roster>,
}

fn not_found(id: &str, conversation: &str) -> ToolError {
    ToolError::new(
        ErrorKind::NotFound,
        format!("no vibe worker {id:?} in conversation {conversation:?}"),
        "vibe_list shows this conversation's workers; ids are not shared between conversations, and finished workers are collected after an idle while",
    )
}

/// The command line of one attempt: the template with `{brief}` replaced.
fn command_line(template: &[String], brief: &str) -> Vec<String> {
    template
        .iter()
        .map(|a| a.replace(BRIEF_PLACEHOLDER, brief))
        .collect()
}

impl Vibes {
    pub fn new(
        supervisor: ActorRef<SupervisorMsg>,
        launcher: Launcher,
        limits: VibeLimits,
        notifier: TreeNotifier,
        ids: IdCounter,
    ) -> Self {
        Vibes {
            roster: Arc::new(Roster {
                supervisor,
                launcher,
                limits,
                notifier,
                table: Mutex::new(Table::default()),
                ids,
            }),
        }
    }

    /// Tiers with a configured command.
    /// The worker `token` belongs to, while one of its attempts runs; `None` for an unknown
    /// token or a worker that is not running.
    pub fn credential(&self, token: &str) -> Option<WorkerCredential> {
        let table = lock(&self.roster.table);
        table.workers.values().find_map(|w| {
            if !same_secret(&w.token.0, token) {
                return None;
            }
            let run = lock(&w.run);
            (run.state == VibeState::Running && run.live.is_some()).then(|| WorkerCredential {
                id: w.id.clone(),
                tier: w.tier,
                conversation: w.conversation.clone(),
                workdir: w.cwd.clone(),
            })
        })
    }

    pub fn tiers(&self) -> Vec<VibeTier> {
        self.roster.limits.tiers.keys().copied().collect()
    }

    fn get(&self, conversation: &str, id: &str) -> Result<Arc<Worker>, ToolError> {
        self.roster.collect();
        let num = id
            .strip_prefix('w')
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| not_found(id, conversation))?;
        let worker = lock(&self.roster.table)
            .workers
            .get(&num)
            .filter(|w| w.conversation == conversation)
            .cloned()
            .ok_or_else(|| not_found(id, conversation))?;
        worker.touch();
        Ok(worker)
    }

    /// Start a worker on `brief` (or queue it when the cap is reached). Returns once its
    /// first attempt is running, queued, or failed to start.
    pub async fn spawn(
        &self,
        conversation: &str,
        cwd: PathBuf,
        brief: String,
        label: String,
        tier: VibeTier,
    ) -> Result<VibeInfo, ToolError> {
        let r = &self.roster;
        r.collect();
        self.check_spawn(&brief, &label, tier)?;
        let worker = self.new_worker(conversation, cwd, brief, label, tier)?;
        let (id, num) = (worker.id.clone(), worker.num);
        {
            let mut table = lock(&r.table);
            table.workers.insert(num, worker.clone());
            table.queue.push_back(worker.clone());
        }
        tracing::info!(
            id,
            conversation,
            tier = %tier,
            label = worker.label,
            "vibe worker spawned"
        );
        r.pump();
        let info = r.settled(&worker).await;
        if info.state == VibeState::Failed
            && info.attempts == 1
            && let Some(error) = info
                .error
                .as_deref()
                .filter(|e| e.starts_with("could not start"))
        {
            return Err(ToolError::new(
                ErrorKind::Io,
                format!("vibe worker {id} ({tier}) {error}"),
                format!(
                    "check [vibe.tiers.{tier}] command in the daemon's config; vibe_list shows the worker as failed"
                ),
            ));
        }
        Ok(info)
    }

    /// Refuses a spawn without a brief or a label, of a tier with no command, or past the
    /// running and queued limits.
    fn check_spawn(&self, brief: &str, label: &str, tier: VibeTier) -> Result<(), ToolError> {
        let r = &self.roster;
        if brief.trim().is_empty() {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                "vibe_spawn: `brief` is empty",
                "say what the worker should do, with the files and the done-criterion",
            ));
        }
        if label.trim().is_empty() {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                "vibe_spawn: `label` is empty",
                "give the worker a short name, e.g. \"rename-config\"",
            ));
        }
        if !r.limits.tiers.contains_key(&tier) {
            let configured: Vec<_> = self.tiers().iter().map(|t| t.as_str()).collect();
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!("vibe tier `{tier}` has no worker command configured here"),
                format!(
                    "use a configured tier ({}), or ask the operator to set [vibe.tiers.{tier}] command",
                    configured.join(", ")
                ),
            ));
        }
        let table = lock(&r.table);
        if table.active >= r.limits.max_running && table.queue.len() >= r.limits.max_queued {
            return Err(ToolError::new(
                ErrorKind::Busy,
                format!(
                    "{} vibe workers run and {} wait in the queue (the limits)",
                    table.active,
                    table.queue.len()
                ),
                "wait for a worker to finish (vibe_wait) or stop one (vibe_kill), then spawn again",
            ));
        }
        Ok(())
    }

    /// A new queued worker under the next id, with its own credential.
    fn new_worker(
        &self,
        conversation: &str,
        cwd: PathBuf,
        brief: String,
        label: String,
        tier: VibeTier,
    ) -> Result<Arc<Worker>, ToolError> {
        let r = &self.roster;
        let num = r.ids.next().map_err(|e| {
            ToolError::new(
                ErrorKind::Io,
                format!("cannot reserve an id for the new worker: {e}"),
                "check that the daemon's state dir is writable (disk full?); nothing was started",
            )
        })?;
        let id = format!("w{num}");
        let status = NodeStatus::owned(
            "vibe",
            &id,
            conversation,
            format!("{conversation}: {label} [{tier}] queued"),
            r.notifier.clone(),
        );
        let now = Instant::now();
        let (changed, _) = watch::channel(0);
        let token = new_token().map_err(|e| {
            ToolError::new(
                ErrorKind::Io,
                format!("cannot make the worker's credential: {e}"),
                "the daemon could not read /dev/urandom; check the machine",
            )
        })?;
        Ok(Arc::new(Worker {
            id,
            num,
            conversation: conversation.to_string(),
            label,
            tier,
            cwd,
            token: Token(token),
            status,
            run: Mutex::new(Run {
                brief,
                messages: 0,
                state: VibeState::Queued,
                attempts: 0,
                live: None,
                launching: false,
                in_supervisor: false,
                killed: false,
                timed_out: false,
                rerun: false,
                since: now,
                ended_at: None,
                last_touch: now,
                pid: None,
                exit: None,
                error: None,
                stderr_tail: None,
                result: None,
                result_cut: false,
            }),
            changed,
        }))
    }

    /// Append `message` to the worker's brief and run it again: a running attempt is stopped
    /// first; a queued worker keeps its place; a finished one is queued again.
    pub async fn send(
        &self,
        conversation: &str,
        id: &str,
        message: String,
    ) -> Result<VibeInfo, ToolError> {
        if message.trim().is_empty() {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                "vibe_send: `message` is empty",
                "say what the worker should change or add",
            ));
        }
        let r = &self.roster;
        let worker = self.get(conversation, id)?;
        let stop = {
            let mut table = lock(&r.table);
            let mut run = lock(&worker.run);
            run.messages += 1;
            let n = run.messages;
            run.brief
                .push_str(&format!("\n\n[follow-up message {n}]\n{message}"));
            match run.state {
                VibeState::Queued => false,
                VibeState::Running => {
                    run.rerun = true;
                    true
                }
                VibeState::Done | VibeState::Failed | VibeState::Killed => {
                    run.state = VibeState::Queued;
                    run.killed = false;
                    run.since = Instant::now();
                    run.ended_at = None;
                    table.queue.push_front(worker.clone());
                    false
                }
            }
        };
        tracing::info!(
            id,
            conversation,
            stop_running = stop,
            "vibe worker got a message; rerunning"
        );
        worker.bump();
        if stop {
            r.stop_live(
                &worker,
                "stopped by vibe_send to rerun with the new message",
            )
            .await;
        }
        r.pump();
        Ok(r.settled(&worker).await)
    }

    /// Wait until the worker is done, failed or killed, or `timeout` passes.
    pub async fn wait(
        &self,
        conversation: &str,
        id: &str,
        timeout: Duration,
    ) -> Result<VibeInfo, ToolError> {
        let worker = self.get(conversation, id)?;
        let mut rx = worker.changed.subscribe();
        let finished = tokio::time::timeout(timeout, async {
            loop {
                rx.borrow_and_update();
                if lock(&worker.run).state.is_final() {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await
        .is_ok();
        worker.touch();
        let mut info = worker.info(false);
        if !finished {
            info.timed_out = true;
            info.note = Some(format!(
                "still {} after {} s; call vibe_wait again, or vibe_kill to stop it",
                info.state.as_str(),
                timeout.as_secs()
            ));
        }
        Ok(info)
    }

    /// Stop the worker and its whole process group (or take it out of the queue).
    pub async fn kill(&self, conversation: &str, id: &str) -> Result<VibeInfo, ToolError> {
        let r = &self.roster;
        let worker = self.get(conversation, id)?;
        let running = {
            let mut table = lock(&r.table);
            let mut run = lock(&worker.run);
            match run.state {
                s if s.is_final() => None,
                VibeState::Queued => {
                    table.queue.retain(|w| w.num != worker.num);
                    run.state = VibeState::Killed;
                    run.killed = true;
                    run.ended_at = Some(Instant::now());
                    Some(false)
                }
                _ => {
                    run.killed = true;
                    run.rerun = false;
                    Some(true)
                }
            }
        };
        // Already over: nothing to stop. (Answered outside the locks: `info` takes them.)
        let Some(running) = running else {
            return Ok(worker.info(false));
        };
        tracing::info!(id, conversation, "vibe worker killed by request");
        worker.bump();
        if running {
            r.stop_live(&worker, "killed by vibe_kill").await;
        }
        Ok(worker.info(false))
    }

    /// This conversation's workers, oldest first, with a bounded preview of each result.
    pub fn list(&self, conversation: &str) -> Vec<VibeInfo> {
        self.roster.collect();
        let workers: Vec<_> = lock(&self.roster.table)
            .workers
            .values()
            .filter(|w| w.conversation == conversation)
            .cloned()
            .collect();
        workers
            .iter()
            .map(|w| {
                w.touch();
                w.info(true)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
