//! `process`: tracked background processes. Each is an actor under the `processes`
//! supervisor, owning its child through a process guard; its output log and run facts live
//! in shared state that outlives restarts. A process belongs to the conversation that
//! started it: no other conversation can see, read, write or kill it.
//!
//! A `pty` process runs under the pty relay (`kit::process::pty`), and its screen is a `vt100`
//! emulator fed with its output; its log is `kit::output::OutputLog`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::pty;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard};
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier, duration_ms};
use toolvisor_kit::supervise::{self, ChildSpec, Factory, StartCtx, StartFailed, SupervisorMsg};
use toolvisor_kit::ttl::Ttl;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{self, ProcessScreen, ProcessSlice, TrackedProcess};
use toolvisor_protocol::tools::RestartMode;
use toolvisor_protocol::tree::NodeState;

use crate::output::OutputLog;

/// Limits of the process tool.
#[derive(Clone, Debug)]
pub struct ProcessLimits {
    /// Output bytes kept per process (oldest dropped first).
    pub buffer_bytes: usize,
    /// Ended processes stay listed and readable this long.
    pub keep_ended: Duration,
    pub max_per_conversation: usize,
    /// A running process nobody has read, written or listed for this long is stopped
    /// (abandoned conversations must not leak servers forever). `None`: never.
    pub idle_ttl: Option<Duration>,
    /// Restart intensity, period and backoff for `restart: on_failure | always`.
    pub restart: RestartPolicy,
}

impl Default for ProcessLimits {
    fn default() -> Self {
        ProcessLimits {
            buffer_bytes: 8 * 1024 * 1024,
            keep_ended: Duration::from_secs(30 * 60),
            max_per_conversation: 64,
            idle_ttl: Some(Duration::from_secs(2 * 60 * 60)),
            restart: RestartPolicy::default(),
        }
    }
}

#[derive(Debug, Default)]
struct RunState {
    exit: Option<ExitStatus>,
    /// Set by `kill`: the end was asked for.
    killed: bool,
    /// Set when a TTL ran out.
    expired: bool,
    /// Output pipes of the current incarnation still open (each incarnation counts its own:
    /// a restarted process's old pumps, still draining, never count down the new one's).
    pumps_open: Arc<std::sync::atomic::AtomicU32>,
    stdin: Option<mpsc::Sender<StdinCmd>>,
    cursor: u64,
    ended_at: Option<Instant>,
}

enum StdinCmd {
    Data(Vec<u8>),
    Close,
}

/// Everything about one tracked process that survives its restarts.
#[derive(Debug)]
pub struct ProcessShared {
    pub id: String,
    pub conversation: String,
    pub command: String,
    pub label: String,
    pub cwd: PathBuf,
    status: Arc<NodeStatus>,
    output: Mutex<OutputLog>,
    run: Mutex<RunState>,
    /// Counts ended incarnations; `kill` waits on it.
    ended: watch::Sender<u64>,
    ttl: Mutex<Ttl>,
    /// A `pty` process: its terminal, as a terminal emulator renders what it wrote.
    terminal: Option<Mutex<Terminal>>,
}

/// The screen of a `pty` process: its size and the emulator fed with its output.
pub struct Terminal {
    cols: u16,
    rows: u16,
    parser: vt100::Parser,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Terminal({}x{})", self.cols, self.rows)
    }
}

impl Terminal {
    fn new(cols: u16, rows: u16) -> Terminal {
        Terminal {
            cols,
            rows,
            parser: vt100::Parser::new(rows, cols, 0),
        }
    }

    fn screen(&self) -> ProcessScreen {
        let screen = self.parser.screen();
        let (row, col) = screen.cursor_position();
        ProcessScreen {
            cols: self.cols,
            rows: self.rows,
            text: screen.contents(),
            cursor: [row, col],
        }
    }
}

/// How to run a process besides its command line.
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// Shown in lists (default: the command).
    pub label: Option<String>,
    pub restart: RestartMode,
    /// Hard time-to-live in seconds.
    pub ttl_s: Option<u64>,
    /// Run on a pseudo-terminal of (cols, rows).
    pub pty: Option<(u16, u16)>,
}

/// The terminal size of a `pty` process when the caller names none.
pub const PTY_DEFAULT_SIZE: (u16, u16) = (120, 40);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ProcessShared {
    fn state(&self) -> results::ProcessState {
        match self.status.state() {
            NodeState::Starting => results::ProcessState::Starting,
            NodeState::Ready | NodeState::Busy => results::ProcessState::Running,
            NodeState::Backoff => results::ProcessState::Backoff,
            NodeState::Failed => results::ProcessState::Failed,
            NodeState::Stopping => results::ProcessState::Stopping,
            NodeState::Exited if lock(&self.run).killed => results::ProcessState::Killed,
            NodeState::Exited if lock(&self.run).expired => results::ProcessState::Expired,
            NodeState::Exited => results::ProcessState::Exited,
        }
    }

    /// How the last incarnation ended, as the caller should see it. Ended by `kill` or a TTL,
    /// the shim exits 143 after SIGTERM tore the tree down: that is the SIGTERM it was, not
    /// the program's own exit code.
    fn reported_exit(&self) -> Option<ExitStatus> {
        let run = lock(&self.run);
        let mut exit = run.exit;
        if let Some(e) = exit
            .as_mut()
            .filter(|e| (run.killed || run.expired) && e.code == Some(143))
        {
            e.code = None;
            e.signal = Some(15);
        }
        exit
    }

    /// Record a use by its conversation: the idle TTL starts again.
    fn touch(&self) {
        let mut ttl = lock(&self.ttl);
        ttl.touch(Instant::now());
        let deadline = ttl.deadline();
        drop(ttl);
        self.status.update(|i| {
            if !matches!(i.state, NodeState::Exited | NodeState::Failed) {
                i.ttl_deadline = deadline;
            }
        });
    }

    fn is_over(&self) -> bool {
        matches!(self.status.state(), NodeState::Exited | NodeState::Failed)
    }

    pub fn info(&self) -> TrackedProcess {
        let node = self.status.get();
        let exit = self.reported_exit();
        TrackedProcess {
            id: self.id.clone(),
            label: self.label.clone(),
            command: self.command.clone(),
            pid: node.pid,
            state: self.state(),
            exit_code: exit.and_then(|e| e.code),
            signal: exit.and_then(|e| e.signal),
            restarts: node.restarts,
            last_error: node.last_error,
            uptime_ms: duration_ms(node.started.elapsed()),
            ttl_left_ms: node
                .ttl_deadline
                .map(|d| duration_ms(d.saturating_duration_since(Instant::now()))),
            output_bytes: lock(&self.output).end(),
        }
    }
}

/// The actor of one incarnation of a tracked process.
pub struct ProcessActor;

pub struct ProcessStart {
    pub shared: Arc<ProcessShared>,
    pub launcher: Launcher,
    pub attempt: u32,
}

pub enum ProcessMsg {
    /// The child was reaped.
    Exited(ExitStatus),
    /// Time to look at the TTL.
    CheckTtl,
}

pub struct ProcessState {
    /// Kills and reaps the whole tree when the actor goes, however it goes.
    _guard: ProcessGuard,
    shared: Arc<ProcessShared>,
    expiring: bool,
}

impl Actor for ProcessActor {
    type Msg = ProcessMsg;
    type State = ProcessState;
    type Arguments = ProcessStart;

    async fn pre_start(
        &self,
        myself: ActorRef<ProcessMsg>,
        args: ProcessStart,
    ) -> Result<ProcessState, ActorProcessingErr> {
        let shared = args.shared;
        if args.attempt > 0 {
            lock(&shared.output).append(
                format!("\n[toolvisor: restart {} of {}]\n", args.attempt, shared.id).as_bytes(),
            );
        }
        let shell_args = vec!["-c".to_string(), shared.command.clone()];
        let label = format!("process/{}", shared.id);
        let spec = match &shared.terminal {
            None => {
                args.launcher
                    .spec(crate::bash::shell(), &shell_args, &shared.cwd, true, &label)
            }
            Some(terminal) => {
                // The relay (the toolvisor binary, run by the shim) owns the terminal; each
                // incarnation gets a fresh one, and a fresh screen.
                let mut t = lock(terminal);
                *t = Terminal::new(t.cols, t.rows);
                let relay = args
                    .launcher
                    .shim
                    .clone()
                    .ok_or("a pty needs the toolvisor binary to relay the terminal")?;
                let mut relay_args = vec![
                    pty::PTY_ARG.to_string(),
                    t.cols.to_string(),
                    t.rows.to_string(),
                    crate::bash::shell().to_string(),
                ];
                relay_args.extend(shell_args);
                let mut spec = args.launcher.spec(
                    &relay.display().to_string(),
                    &relay_args,
                    &shared.cwd,
                    true,
                    &label,
                );
                spec.env.retain(|(k, _)| k != "TERM");
                spec.env.push(("TERM".into(), "xterm-256color".into()));
                spec
            }
        };
        let spawned = process::spawn(spec).await.map_err(|e| e.to_string())?;
        let guard = spawned.guard;
        tracing::info!(
            id = shared.id,
            pid = guard.main_pid(),
            conversation = shared.conversation,
            "process started"
        );
        let (stdin_tx, stdin_rx) = mpsc::channel(64);
        {
            let mut run = lock(&shared.run);
            run.exit = None;
            run.ended_at = None;
            run.pumps_open = Arc::new(std::sync::atomic::AtomicU32::new(2));
            run.stdin = spawned.stdin.map(|s| {
                tokio::spawn(feed_stdin(s, stdin_rx));
                stdin_tx
            });
        }
        shared.status.update(|i| {
            i.pid = Some(guard.main_pid());
            i.state = NodeState::Ready;
        });
        let open = lock(&shared.run).pumps_open.clone();
        tokio::spawn(pump(spawned.stdout, shared.clone(), open.clone()));
        tokio::spawn(pump(spawned.stderr, shared.clone(), open));
        let mut exit = spawned.exit;
        let myself_ttl = myself.clone();
        let waiter_shared = shared.clone();
        tokio::spawn(async move {
            if let Ok(status) = exit.wait_for(|s| s.is_some()).await {
                let status = status.expect("waited for Some");
                {
                    let mut run = lock(&waiter_shared.run);
                    run.exit = Some(status);
                    run.stdin = None;
                    run.ended_at = Some(Instant::now());
                }
                let _ = myself.cast(ProcessMsg::Exited(status));
                waiter_shared.ended.send_modify(|n| *n += 1);
            }
        });
        shared
            .status
            .update(|i| i.ttl_deadline = lock(&shared.ttl).deadline());
        myself_ttl.send_interval(Duration::from_secs(1), || ProcessMsg::CheckTtl);
        Ok(ProcessState {
            _guard: guard,
            shared,
            expiring: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ProcessMsg>,
        msg: ProcessMsg,
        state: &mut ProcessState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ProcessMsg::CheckTtl => {
                let expired = lock(&state.shared.ttl).expired(Instant::now());
                if let (Some(why), false) = (expired, state.expiring) {
                    state.expiring = true;
                    lock(&state.shared.run).expired = true;
                    tracing::info!(id = state.shared.id, conversation = state.shared.conversation, reason = %why, "process TTL expired");
                    lock(&state.shared.output)
                        .append(format!("\n[toolvisor: stopped, {why}]\n").as_bytes());
                    if let Some(sup) = myself.try_get_supervisor() {
                        let _ = sup.send_message(SupervisorMsg::Expire {
                            id: state.shared.id.clone(),
                            reason: why.to_string(),
                        });
                    }
                }
                Ok(())
            }
            ProcessMsg::Exited(status) if status.success() => {
                myself.stop(Some(status.to_string()));
                Ok(())
            }
            ProcessMsg::Exited(status) => Err(status.to_string().into()),
        }
    }
}

async fn pump(
    mut rx: tokio::net::unix::pipe::Receiver,
    shared: Arc<ProcessShared>,
    open: Arc<std::sync::atomic::AtomicU32>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match rx.read(&mut buf).await {
            Ok(0) => break,
            Err(error) => {
                // Never silent: what was lost is said where the output is read.
                tracing::warn!(id = %shared.id, %error, "reading the process output failed");
                lock(&shared.output).append(
                    format!("\n[toolvisor: reading the output failed: {error}]\n").as_bytes(),
                );
                break;
            }
            Ok(n) => {
                lock(&shared.output).append(&buf[..n]);
                if let Some(terminal) = &shared.terminal {
                    lock(terminal).parser.process(&buf[..n]);
                }
            }
        }
    }
    // After its last append: a reader that sees 0 sees every byte.
    let _ = open.fetch_update(
        std::sync::atomic::Ordering::AcqRel,
        std::sync::atomic::Ordering::Acquire,
        |n| n.checked_sub(1),
    );
}

async fn feed_stdin(mut tx: tokio::net::unix::pipe::Sender, mut rx: mpsc::Receiver<StdinCmd>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            StdinCmd::Data(bytes) => {
                if tx.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            StdinCmd::Close => break,
        }
    }
}

/// The `process` tool's state: every tracked process by id, and the supervisor they run under.
pub struct Processes {
    supervisor: ActorRef<SupervisorMsg>,
    launcher: Launcher,
    limits: ProcessLimits,
    notifier: TreeNotifier,
    table: Mutex<HashMap<String, Arc<ProcessShared>>>,
    /// Persisted: `p1` never names a different process after a daemon restart.
    ids: IdCounter,
}

const READ_DEFAULT: u64 = 64 * 1024;
const READ_MAX: u64 = 1024 * 1024;

fn not_found(id: &str, conversation: &str) -> ToolError {
    ToolError::new(
        ErrorKind::NotFound,
        format!("no process {id:?} in conversation {conversation:?}"),
        "`process {\"op\":\"list\"}` shows this conversation's processes; ids are not shared between conversations",
    )
}

impl Processes {
    pub fn new(
        supervisor: ActorRef<SupervisorMsg>,
        launcher: Launcher,
        limits: ProcessLimits,
        notifier: TreeNotifier,
        ids: IdCounter,
    ) -> Self {
        Processes {
            supervisor,
            launcher,
            limits,
            notifier,
            table: Mutex::new(HashMap::new()),
            ids,
        }
    }

    /// Drop processes that ended longer ago than the retention.
    fn collect(&self) {
        let keep = self.limits.keep_ended;
        lock(&self.table).retain(|_, p| {
            let ended_at = lock(&p.run).ended_at;
            !(p.is_over() && ended_at.is_some_and(|t| t.elapsed() > keep))
        });
    }

    fn get(&self, conversation: &str, id: &str) -> Result<Arc<ProcessShared>, ToolError> {
        self.collect();
        lock(&self.table)
            .get(id)
            .filter(|p| p.conversation == conversation)
            .cloned()
            .ok_or_else(|| not_found(id, conversation))
    }

    pub async fn start(
        &self,
        conversation: &str,
        cwd: PathBuf,
        command: String,
        options: StartOptions,
    ) -> Result<TrackedProcess, ToolError> {
        let StartOptions {
            label,
            restart,
            ttl_s,
            pty,
        } = options;
        self.collect();
        if pty.is_some() && self.launcher.shim.is_none() {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                "process: `pty` needs the daemon's shim (the toolvisor binary relays the terminal), and this daemon runs children without it",
                "start the process without `pty`",
            ));
        }
        let running = lock(&self.table)
            .values()
            .filter(|p| p.conversation == conversation && !p.is_over())
            .count();
        if running >= self.limits.max_per_conversation {
            return Err(ToolError::new(
                ErrorKind::Busy,
                format!(
                    "conversation {conversation:?} already runs {running} processes (the limit)"
                ),
                "kill processes you no longer need (`process {\"op\":\"kill\",\"id\":...}`), then start again",
            ));
        }
        let id = format!("p{}", self.ids.next().map_err(|e| id_error("process", e))?);
        let label = label.unwrap_or_else(|| command.chars().take(60).collect());
        let status = NodeStatus::owned(
            "process",
            &id,
            conversation,
            format!("{conversation}: {label}"),
            self.notifier.clone(),
        );
        let (ended, _) = watch::channel(0);
        let hard = ttl_s.map(Duration::from_secs);
        let shared = Arc::new(ProcessShared {
            id: id.clone(),
            conversation: conversation.to_string(),
            command,
            label,
            cwd,
            status: status.clone(),
            output: Mutex::new(OutputLog::new(self.limits.buffer_bytes)),
            run: Mutex::new(RunState::default()),
            ended,
            ttl: Mutex::new(Ttl::new(Instant::now(), self.limits.idle_ttl, hard)),
            terminal: pty.map(|(cols, rows)| Mutex::new(Terminal::new(cols, rows))),
        });
        lock(&self.table).insert(id.clone(), shared.clone());
        let launcher = self.launcher.clone();
        let factory_shared = shared.clone();
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = ProcessStart {
                shared: factory_shared.clone(),
                launcher: launcher.clone(),
                attempt: ctx.attempt,
            };
            let name = format!("process/{}#{}", args.shared.id, ctx.attempt);
            Box::pin(async move {
                Actor::spawn_linked(Some(name), ProcessActor, args, ctx.supervisor)
                    .await
                    .map(|(actor, _)| actor.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        let policy = self.limits.restart.with_restart(match restart {
            RestartMode::No => Restart::Temporary,
            RestartMode::OnFailure => Restart::Transient,
            RestartMode::Always => Restart::Permanent,
        });
        let spec = ChildSpec {
            id: id.clone(),
            factory,
            policy,
            status,
        };
        match supervise::start(&self.supervisor, spec, Duration::from_secs(30)).await {
            Ok(()) => Ok(shared.info()),
            Err(StartFailed::Child(e)) => Err(ToolError::new(
                ErrorKind::Io,
                format!("process {id} could not start: {e}"),
                "check the command line; `process {\"op\":\"list\"}` shows its state",
            )),
            Err(StartFailed::NoAnswer(_)) => Err(ToolError::new(
                ErrorKind::ResourceFailed,
                "the processes supervisor did not answer within 30 s",
                "the daemon is overloaded or stuck; `toolvisor tree` shows its state",
            )),
        }
    }

    pub fn list(&self, conversation: &str) -> Vec<TrackedProcess> {
        self.collect();
        let mut out: Vec<_> = lock(&self.table)
            .values()
            .filter(|p| p.conversation == conversation)
            .map(|p| {
                p.touch();
                p.info()
            })
            .collect();
        out.sort_by_key(|p| p.id[1..].parse::<u64>().unwrap_or(0));
        out
    }

    pub fn read(
        &self,
        conversation: &str,
        id: &str,
        offset: Option<u64>,
        limit: Option<u64>,
    ) -> Result<ProcessSlice, ToolError> {
        let p = self.get(conversation, id)?;
        p.touch();
        let limit = limit.unwrap_or(READ_DEFAULT).clamp(1, READ_MAX) as usize;
        let offset = offset.unwrap_or_else(|| lock(&p.run).cursor);
        // Whether it is over and drained is read before the output: once both hold the log
        // is final, so a slice taken after holds all of it. The other way round, an empty
        // slice taken while the process started could meet an "exited, drained" read after it
        // ran its whole life, and be answered `eof` with its output never shown (a chaos run
        // under load found that). The state before the exit, too: the exit is recorded
        // before the state says exited.
        let over = p.is_over();
        let state = p.state();
        let drained = lock(&p.run)
            .pumps_open
            .load(std::sync::atomic::Ordering::Acquire)
            == 0;
        let exit = p.reported_exit();
        let (slice, end) = {
            let output = lock(&p.output);
            (output.read(offset, limit), output.end())
        };
        let (exit_code, signal) = (exit.and_then(|e| e.code), exit.and_then(|e| e.signal));
        lock(&p.run).cursor = slice.next_offset;
        let screen = p.terminal.as_ref().map(|t| lock(t).screen());
        Ok(ProcessSlice {
            screen,
            id: id.to_string(),
            text: slice.text,
            offset: slice.offset,
            next_offset: slice.next_offset,
            dropped: slice.dropped,
            eof: over && drained && slice.next_offset >= end,
            state,
            exit_code,
            signal,
        })
    }

    pub async fn write(
        &self,
        conversation: &str,
        id: &str,
        data: String,
        eof: bool,
    ) -> Result<TrackedProcess, ToolError> {
        let p = self.get(conversation, id)?;
        p.touch();
        let Some(tx) = lock(&p.run).stdin.clone() else {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!("process {id} is {} and has no open stdin", p.state()),
                "start it again, or read its output",
            ));
        };
        let mut ok = true;
        if p.terminal.is_some() {
            // Keys typed at the terminal; its end-of-file is Ctrl-D, not a closed pipe.
            let mut keys = data.into_bytes();
            if eof {
                keys.push(0x04);
            }
            for chunk in keys.chunks(64 * 1024) {
                ok &= tx
                    .send(StdinCmd::Data(pty::data_frame(chunk)))
                    .await
                    .is_ok();
            }
        } else {
            ok = tx.send(StdinCmd::Data(data.into_bytes())).await.is_ok();
            if eof {
                ok &= tx.send(StdinCmd::Close).await.is_ok();
                lock(&p.run).stdin = None;
            }
        }
        if !ok {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!("process {id} closed its stdin"),
                "the process is no longer reading input",
            ));
        }
        Ok(p.info())
    }

    /// Resize the terminal of a `pty` process (the program gets SIGWINCH).
    pub async fn resize(
        &self,
        conversation: &str,
        id: &str,
        cols: u16,
        rows: u16,
    ) -> Result<TrackedProcess, ToolError> {
        let p = self.get(conversation, id)?;
        p.touch();
        let Some(terminal) = &p.terminal else {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!("process {id} has no terminal: it was not started with `pty`"),
                "start it with `\"pty\": true` to run it on a terminal",
            ));
        };
        let Some(tx) = lock(&p.run).stdin.clone() else {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!("process {id} is {} and its terminal is gone", p.state()),
                "start it again",
            ));
        };
        {
            let mut t = lock(terminal);
            t.cols = cols;
            t.rows = rows;
            t.parser.screen_mut().set_size(rows, cols);
        }
        if tx
            .send(StdinCmd::Data(pty::resize_frame(cols, rows)))
            .await
            .is_err()
        {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!("process {id} no longer reads its terminal"),
                "read its output; start it again if it has ended",
            ));
        }
        Ok(p.info())
    }

    pub async fn kill(&self, conversation: &str, id: &str) -> Result<TrackedProcess, ToolError> {
        let p = self.get(conversation, id)?;
        if p.is_over() {
            return Ok(p.info());
        }
        lock(&p.run).killed = true;
        let mut ended = p.ended.subscribe();
        // A child runs now (not waiting out a backoff): its exit status is worth waiting for.
        let running = p.status.get().pid.is_some() && lock(&p.run).exit.is_none();
        let seen = *ended.borrow();
        let _ = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id: id.to_string(),
                    reason: "killed by `process kill`".into(),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await;
        tracing::info!(id, conversation, "process killed by request");
        if running {
            let _ =
                tokio::time::timeout(Duration::from_secs(5), ended.wait_for(|n| *n > seen)).await;
        }
        // Wait (bounded) for the supervisor to record the end, so the answer says so.
        let mut tree = self.notifier.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while !p.is_over() {
                if tree.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        Ok(p.info())
    }
}

/// The answer when the id counter under the state dir cannot be written.
fn id_error(what: &str, e: std::io::Error) -> ToolError {
    ToolError::new(
        ErrorKind::Io,
        format!("cannot reserve an id for the new {what}: {e}"),
        "check that the daemon's state dir is writable (disk full?); nothing was started",
    )
}
