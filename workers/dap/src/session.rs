//! One debug session: the actor under the `debug_adapters` supervisor that owns the adapter
//! child (through its process guard; the debuggee runs inside the adapter's process tree,
//! so the same guard reaps it), the hard TTL, and the shared [`Session`] that the tool's
//! calls drive.
//!
//! An adapter speaks DAP on its stdio, or (`transport = "tcp-listen"`, delve) on a loopback
//! port it prints on stdout: the actor reads the address within `start_timeout_s`, connects,
//! and reads the rest of stdout as the program's output; the child is the same guarded child
//! either way.
//!
//! The actor's mailbox only takes short messages (a TTL tick, the adapter's exit, the end of
//! a TCP connection); requests are sent by the caller's task through [`Session::client`],
//! and the adapter's events are folded into [`RunState`] by an event task, so the mailbox
//! never waits behind the adapter.
//!
//! The debuggee runs inside the adapter's process tree, never in a terminal of its own: debugpy is
//! launched with `console: internalConsole`, and reverse requests (`runInTerminal`,
//! `startDebugging`) are refused, so the actor's one guard kills and reaps both. DAP requests are
//! sent from the calling task, never awaited inside the actor's `handle`. `RunState` counts stops,
//! so a stop that overtakes its request's answer is never missed.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::{mpsc, watch};
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard};
use toolvisor_kit::status::NodeStatus;
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::results::{
    DebugEndKind, DebugException, DebugFrame, DebugState, DebugWatch,
};
use toolvisor_protocol::tree::NodeState;

use crate::adapters::{Flavor, Resolved};
use crate::client::{DapClient, Incoming};
use crate::config::Transport;
use toolvisor_kit::output::OutputLog;
use toolvisor_protocol::{ErrorKind, ToolError};

/// How often the actor looks at its TTL.
const TICK: Duration = Duration::from_millis(250);
/// Cap on one frame from an adapter.
const MAX_FRAME: usize = 64 * 1024 * 1024;
/// Bytes of the adapter's own stderr kept for crash reports.
const TAIL_BYTES: usize = 4096;
/// Lines of the adapter's console messages kept.
const CONSOLE_LINES: usize = 20;
/// Bytes a `tcp-listen` adapter may print before the address it listens on.
const ADDRESS_SEARCH_BYTES: usize = 64 * 1024;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What the session debugs.
#[derive(Clone, Debug)]
pub enum Target {
    /// `module` set: `python -m module` run in `program` (the working directory).
    Launch {
        program: PathBuf,
        args: Vec<String>,
        module: Option<String>,
    },
    Attach {
        port: u16,
    },
    /// Attached to a running process by its id (debugpy injects itself; lldb-dap ptraces).
    AttachPid {
        pid: u32,
    },
}

/// How the adapter is reached.
#[derive(Clone, Debug)]
pub(crate) enum Connect {
    /// Run the adapter as a child and speak over its stdio, or (`tcp-listen`) over the
    /// loopback port it prints.
    Spawn {
        resolved: Box<Resolved>,
        cwd: PathBuf,
        launcher: Launcher,
        /// How long a `tcp-listen` adapter may take to print its address.
        address_wait: Duration,
    },
    /// A debug server already listens on 127.0.0.1:port (`python -m debugpy --listen`).
    Tcp { port: u16 },
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndKind {
    /// `terminate`.
    Terminated,
    /// The program ran to its end (or the adapter said `terminated`).
    Exited,
    /// The adapter died or closed its stream on its own.
    Crashed,
    /// The hard TTL ran out.
    Expired,
    /// The launch or attach did not complete.
    Failed,
}

impl EndKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EndKind::Terminated => "terminated",
            EndKind::Exited => "exited",
            EndKind::Crashed => "crashed",
            EndKind::Expired => "expired",
            EndKind::Failed => "failed",
        }
    }
}

impl From<EndKind> for DebugEndKind {
    fn from(kind: EndKind) -> Self {
        match kind {
            EndKind::Terminated => DebugEndKind::Terminated,
            EndKind::Exited => DebugEndKind::Exited,
            EndKind::Crashed => DebugEndKind::Crashed,
            EndKind::Expired => DebugEndKind::Expired,
            EndKind::Failed => DebugEndKind::Failed,
        }
    }
}

#[derive(Clone, Debug)]
pub struct End {
    pub kind: EndKind,
    pub message: String,
    pub at: Instant,
}

/// The last `stopped` event.
#[derive(Clone, Debug)]
pub struct StopInfo {
    pub reason: String,
    pub thread_id: Option<i64>,
    pub description: Option<String>,
    pub text: Option<String>,
}

/// Where the program is, as far as the adapter's events tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Starting,
    Running,
    Stopped,
}

/// Everything the adapter's events tell, folded.
#[derive(Debug)]
pub struct RunState {
    pub phase: Phase,
    pub initialized: bool,
    /// `stopped` events so far: a waiter compares counts, so an event that overtakes the
    /// answer of the request that caused it is never missed.
    pub stops: u64,
    pub stop: Option<StopInfo>,
    /// The top frame of the current stop, once asked for: (stops, frame).
    pub top: Option<(u64, DebugFrame)>,
    /// What the exception of the current stop is (reason `exception`), once asked for.
    pub exception: Option<(u64, DebugException)>,
    pub debuggee_pid: Option<u32>,
    pub exit_code: Option<i64>,
    pub terminated: bool,
    /// The adapter's stream ended (why).
    pub closed: Option<String>,
    /// A `tcp-listen` adapter's stdout, where the program's output arrives (delve's debuggee
    /// inherits it), is still being read: its last bytes may come after the DAP stream
    /// closed.
    pub program_output_open: bool,
    pub end: Option<End>,
}

impl RunState {
    /// The session's state as results say it: how it ended, else where the program is.
    pub fn debug_state(&self) -> DebugState {
        match (&self.end, self.phase) {
            (Some(e), _) => match e.kind {
                EndKind::Terminated => DebugState::Terminated,
                EndKind::Exited => DebugState::Exited,
                EndKind::Crashed => DebugState::Crashed,
                EndKind::Expired => DebugState::Expired,
                EndKind::Failed => DebugState::Failed,
            },
            (None, Phase::Starting) => DebugState::Starting,
            (None, Phase::Running) => DebugState::Running,
            (None, Phase::Stopped) => DebugState::Stopped,
        }
    }
}

/// How long after a session's end its output counts as all in while the adapter is still
/// up (`Session::output_settled`).
pub const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// How long after a session's end a program output pipe still open is waited for (an
/// adapter that keeps it open after the end).
pub const PIPE_GRACE: Duration = Duration::from_secs(10);

/// [`Session::output_settled`] of a session that ended `since_end` ago (`None`: it runs),
/// whose DAP stream `closed`, with a program output pipe still `pipe_open`.
fn settled(since_end: Option<Duration>, closed: bool, pipe_open: bool) -> bool {
    since_end.is_some_and(|t| match pipe_open {
        true => t >= PIPE_GRACE,
        false => closed || t >= OUTPUT_GRACE,
    })
}

/// One session, shared by the actor, its event task and the tool's calls.
pub struct Session {
    /// The supervisor's child id, `<conversation>#<n>`.
    pub id: String,
    pub conversation: String,
    pub adapter: String,
    pub flavor: Flavor,
    pub target: Target,
    /// The adapter's command line (or `127.0.0.1:PORT`), for messages.
    pub command: String,
    pub status: Arc<NodeStatus>,
    pub started: Instant,
    /// When the hard TTL runs out; set once the launch or attach completed (the handshake
    /// has its own bound, `start_timeout_s`).
    deadline: Mutex<Option<Instant>>,
    pub ttl: Duration,
    client: OnceLock<DapClient>,
    exit: OnceLock<watch::Receiver<Option<ExitStatus>>>,
    adapter_pid: AtomicU32,
    state: Mutex<RunState>,
    changed: watch::Sender<u64>,
    output: Mutex<OutputLog>,
    /// Where the last `output` read stopped.
    pub(crate) cursor: Mutex<u64>,
    console: Mutex<VecDeque<String>>,
    stderr_tail: Mutex<String>,
    pub(crate) capabilities: Mutex<Value>,
    /// The adapter's `breakpoint` events (`changed`: verified later, moved), by breakpoint id.
    pub(crate) breakpoint_changes: Mutex<HashMap<i64, Value>>,
    /// `watch`'s data breakpoints, as sent (`setDataBreakpoints` replaces the set), each
    /// with what the tool shows of it: (DAP breakpoint, shown).
    pub(crate) watches: Mutex<Vec<(Value, DebugWatch)>>,
    /// Launched with `stopOnEntry` and not stopped yet: lldb-dap (19) reports that first stop
    /// as reason `exception`, `signal SIGSTOP`; it is the entry.
    pub(crate) entry_pending: AtomicBool,
    shutting_down: AtomicBool,
    /// Set once `disconnect` went out: output after it is the adapter's, not the program's.
    disconnected: AtomicBool,
    /// Why the actor could not start, as the caller should see it (when more is known than
    /// the actor's error text).
    start_failure: OnceLock<ToolError>,
    supervisor: ActorRef<SupervisorMsg>,
}

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: String,
        conversation: &str,
        adapter: &str,
        flavor: Flavor,
        target: Target,
        command: String,
        status: Arc<NodeStatus>,
        ttl: Duration,
        output_bytes: usize,
        supervisor: ActorRef<SupervisorMsg>,
    ) -> Arc<Session> {
        let now = Instant::now();
        let (changed, _) = watch::channel(0);
        Arc::new(Session {
            id,
            conversation: conversation.to_string(),
            adapter: adapter.to_string(),
            flavor,
            target,
            command,
            status,
            started: now,
            deadline: Mutex::new(None),
            ttl,
            client: OnceLock::new(),
            exit: OnceLock::new(),
            adapter_pid: AtomicU32::new(0),
            state: Mutex::new(RunState {
                phase: Phase::Starting,
                initialized: false,
                stops: 0,
                stop: None,
                top: None,
                exception: None,
                debuggee_pid: None,
                exit_code: None,
                terminated: false,
                closed: None,
                program_output_open: false,
                end: None,
            }),
            changed,
            output: Mutex::new(OutputLog::new(output_bytes)),
            cursor: Mutex::new(0),
            console: Mutex::new(VecDeque::new()),
            stderr_tail: Mutex::new(String::new()),
            capabilities: Mutex::new(Value::Null),
            breakpoint_changes: Mutex::new(HashMap::new()),
            watches: Mutex::new(Vec::new()),
            entry_pending: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            disconnected: AtomicBool::new(false),
            start_failure: OnceLock::new(),
            supervisor,
        })
    }

    /// Starts the hard TTL's clock (once).
    pub(crate) fn arm_ttl(&self) {
        let deadline = {
            let mut d = lock(&self.deadline);
            *d.get_or_insert_with(|| Instant::now() + self.ttl)
        };
        self.status.update(|i| i.ttl_deadline = Some(deadline));
    }

    pub fn deadline(&self) -> Option<Instant> {
        *lock(&self.deadline)
    }

    /// The client, once the actor connected it.
    pub fn client(&self) -> Option<&DapClient> {
        self.client.get()
    }

    pub fn adapter_pid(&self) -> Option<u32> {
        Some(self.adapter_pid.load(Ordering::Relaxed)).filter(|p| *p > 1)
    }

    /// A look at the folded state.
    pub fn state(&self) -> MutexGuard<'_, RunState> {
        lock(&self.state)
    }

    /// Change the state and wake waiters (and the tree).
    pub(crate) fn update(&self, f: impl FnOnce(&mut RunState)) {
        {
            let mut s = lock(&self.state);
            f(&mut s);
        }
        self.changed.send_modify(|n| *n += 1);
        self.show();
    }

    /// Why the actor could not start, when it said more than its error text.
    pub(crate) fn start_failure(&self) -> Option<ToolError> {
        self.start_failure.get().cloned()
    }

    /// The program's stdout and stderr, until `disconnect` went out.
    fn append_output(&self, bytes: &[u8]) {
        if !self.disconnected.load(Ordering::SeqCst) {
            lock(&self.output).append(bytes);
            self.changed.send_modify(|n| *n += 1);
        }
    }

    pub fn ended(&self) -> Option<End> {
        lock(&self.state).end.clone()
    }

    pub fn is_live(&self) -> bool {
        lock(&self.state).end.is_none()
    }

    /// Whether the program's output is all in: the session ended and the adapter's stream
    /// closed (nothing more can come), or it ended [`OUTPUT_GRACE`] ago (an adapter that
    /// stays up after the end). An adapter may send the program's last output after it says
    /// the program exited (delve reads the program's pipe in its own time).
    ///
    /// A program output pipe (delve's stdout) is a stream of its own: its last bytes may be
    /// read after the DAP stream closed, so while it is open the output is all in only once
    /// it reaches its end, or [`PIPE_GRACE`] after the session's.
    pub fn output_settled(&self) -> bool {
        let s = lock(&self.state);
        settled(
            s.end.as_ref().map(|e| e.at.elapsed()),
            s.closed.is_some(),
            s.program_output_open,
        )
    }

    /// Record why the session ended (the first reason wins).
    pub(crate) fn mark_end(&self, kind: EndKind, message: String) {
        self.update(|s| {
            if s.end.is_none() {
                s.end = Some(End {
                    kind,
                    message,
                    at: Instant::now(),
                });
            }
        });
    }

    /// Waits until `pred` holds, at most `timeout`; whether it held.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only watches.
    pub async fn wait_until(&self, timeout: Duration, pred: impl Fn(&RunState) -> bool) -> bool {
        let mut rx = self.changed.subscribe();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if pred(&lock(&self.state)) {
                    return;
                }
                if rx.changed().await.is_err() {
                    // The sender lives as long as `self`: unreachable, but never spin.
                    std::future::pending::<()>().await;
                }
            }
        })
        .await;
        waited.is_ok()
    }

    pub fn output_read(&self, offset: u64, limit: usize) -> toolvisor_kit::output::Slice {
        lock(&self.output).read(offset, limit)
    }

    pub fn output_end(&self) -> u64 {
        lock(&self.output).end()
    }

    /// The adapter's last console messages (its notes, lldb-dap's logpoint messages).
    pub fn console_lines(&self) -> Vec<String> {
        lock(&self.console).iter().cloned().collect()
    }

    /// The adapter's last console messages and stderr, for error messages.
    pub fn last_words(&self) -> String {
        let mut parts = Vec::new();
        let console: Vec<String> = lock(&self.console).iter().cloned().collect();
        if !console.is_empty() {
            parts.push(console.join("").trim().to_string());
        }
        let tail = lock(&self.stderr_tail).trim().to_string();
        if !tail.is_empty() {
            let cut: String = tail
                .chars()
                .rev()
                .take(800)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            parts.push(cut);
        }
        parts.join("\n")
    }

    /// The session's state now, as results say it.
    pub fn state_now(&self) -> DebugState {
        lock(&self.state).debug_state()
    }

    /// Phase as one word for callers and the tree.
    pub fn state_word(&self) -> &'static str {
        let s = lock(&self.state);
        if let Some(end) = &s.end {
            return end.kind.as_str();
        }
        match s.phase {
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopped => "stopped",
        }
    }

    /// Refresh the tree node from the state.
    fn show(&self) {
        let (word, pid, at, ended, phase) = {
            let s = lock(&self.state);
            let at = s
                .top
                .as_ref()
                .filter(|(n, _)| *n == s.stops && s.phase == Phase::Stopped)
                .and_then(|(_, f)| {
                    Some(format!(
                        " at {}:{}",
                        f.file.as_deref()?.rsplit('/').next()?,
                        f.line.map_or_else(|| "null".into(), |l| l.to_string())
                    ))
                })
                .unwrap_or_default();
            (
                match (&s.end, s.phase) {
                    (Some(e), _) => e.kind.as_str(),
                    (None, Phase::Starting) => "starting",
                    (None, Phase::Running) => "running",
                    (None, Phase::Stopped) => "stopped",
                },
                s.debuggee_pid,
                at,
                s.end.is_some(),
                s.phase,
            )
        };
        let what = match &self.target {
            Target::Launch {
                module: Some(m), ..
            } => format!("-m {m}"),
            Target::Launch { program, .. } => program
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            Target::Attach { port } => format!("attach 127.0.0.1:{port}"),
            Target::AttachPid { pid } => format!("attach pid {pid}"),
        };
        let debuggee = pid
            .map(|p| format!(", debuggee pid {p}"))
            .unwrap_or_default();
        let detail = format!(
            "{}: {} {what}, {word}{at}{debuggee}",
            self.conversation, self.adapter
        );
        self.status.update(|i| {
            i.detail = detail;
            if !ended
                && !matches!(
                    i.state,
                    NodeState::Exited | NodeState::Failed | NodeState::Stopping
                )
            {
                i.state = match phase {
                    Phase::Starting => NodeState::Starting,
                    Phase::Running => NodeState::Busy,
                    Phase::Stopped => NodeState::Ready,
                };
            }
        });
    }

    /// Ends the session: `disconnect` (terminating a launched debuggee), closes the
    /// adapter's input (debugpy exits only then), waits briefly for it to exit, then stops
    /// the actor, whose guard kills and reaps whatever is left of the tree. Idempotent; the
    /// first caller does the work, later ones wait for it (bounded).
    pub(crate) async fn shutdown(self: &Arc<Self>, kind: EndKind, message: String) {
        self.mark_end(kind, message.clone());
        if self.shutting_down.swap(true, Ordering::SeqCst) {
            let mut exit = self.exit.get().cloned();
            if let Some(exit) = exit.as_mut() {
                let _ =
                    tokio::time::timeout(Duration::from_secs(6), exit.wait_for(Option::is_some))
                        .await;
            }
            return;
        }
        if let Some(client) = self.client()
            && !client.is_closed()
        {
            let terminate = matches!(self.target, Target::Launch { .. });
            self.disconnected.store(true, Ordering::SeqCst);
            let _ = client
                .request(
                    "disconnect",
                    Some(json!({"terminateDebuggee": terminate})),
                    Duration::from_secs(3),
                )
                .await;
            client.close_input();
        }
        if let Some(exit) = self.exit.get() {
            let mut exit = exit.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(2), exit.wait_for(Option::is_some)).await;
        }
        let _ = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id: self.id.clone(),
                    reason: message,
                    reply,
                },
                Some(Duration::from_secs(5)),
            )
            .await;
        if let Some(exit) = self.exit.get() {
            let mut exit = exit.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(5), exit.wait_for(Option::is_some)).await;
        }
        // The supervisor records the end from the actor's termination event.
        let mut tree = self.status.notifier().subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while !matches!(self.status.state(), NodeState::Exited | NodeState::Failed) {
                if tree.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
    }

    /// Folds one adapter event into the state.
    fn on_event(self: &Arc<Self>, event: &str, body: &Value) {
        let str_of = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        match event {
            "initialized" => self.update(|s| s.initialized = true),
            "stopped" => {
                let mut reason = str_of("reason").unwrap_or_else(|| "unknown".into());
                if self.entry_pending.swap(false, Ordering::SeqCst)
                    && reason == "exception"
                    && str_of("description").as_deref() == Some("signal SIGSTOP")
                {
                    reason = "entry".into();
                }
                let info = StopInfo {
                    reason,
                    thread_id: body.get("threadId").and_then(Value::as_i64),
                    description: str_of("description"),
                    text: str_of("text"),
                };
                self.update(|s| {
                    s.stops += 1;
                    s.stop = Some(info);
                    s.phase = Phase::Stopped;
                });
            }
            "continued" => self.update(|s| {
                if s.phase != Phase::Starting {
                    s.phase = Phase::Running;
                }
            }),
            "exited" => {
                let code = body.get("exitCode").and_then(Value::as_i64);
                self.update(|s| s.exit_code = code);
            }
            "terminated" => {
                // The session is over from this moment (so an answer given now says so);
                // winding the adapter down happens in the background.
                if self.flavor == Flavor::Delve && self.state().exit_code.is_none() {
                    // delve sends no `exited`; it says "Process N has exited with status S"
                    // on its console just before `terminated`.
                    let code = lock(&self.console)
                        .iter()
                        .rev()
                        .find_map(|l| delve_exit_code(l));
                    self.update(|s| s.exit_code = code);
                }
                let code = self.state().exit_code;
                let message = match code {
                    Some(c) => format!("the program exited with code {c}"),
                    None => "the program ended (the adapter sent `terminated`)".into(),
                };
                self.update(|s| {
                    s.terminated = true;
                    if s.end.is_none() {
                        s.end = Some(End {
                            kind: EndKind::Exited,
                            message: message.clone(),
                            at: Instant::now(),
                        });
                    }
                });
                if !self.shutting_down.load(Ordering::SeqCst) {
                    let me = self.clone();
                    tokio::spawn(async move { me.shutdown(EndKind::Exited, message).await });
                }
            }
            "process" => {
                let pid = body
                    .get("systemProcessId")
                    .and_then(Value::as_u64)
                    .and_then(|p| u32::try_from(p).ok())
                    .filter(|p| *p > 1);
                self.update(|s| s.debuggee_pid = pid.or(s.debuggee_pid));
            }
            "breakpoint" => {
                let breakpoint = body.get("breakpoint").cloned().unwrap_or(Value::Null);
                if let Some(id) = breakpoint.get("id").and_then(Value::as_i64) {
                    let mut changes = lock(&self.breakpoint_changes);
                    if str_of("reason").as_deref() == Some("removed") {
                        changes.remove(&id);
                    } else {
                        changes.insert(id, breakpoint);
                    }
                }
            }
            "output" => {
                let text = str_of("output").unwrap_or_default();
                match body
                    .get("category")
                    .and_then(Value::as_str)
                    .unwrap_or("console")
                {
                    "stdout" | "stderr" => self.append_output(text.as_bytes()),
                    "telemetry" => {}
                    _ => {
                        let mut console = lock(&self.console);
                        console.push_back(text.chars().take(500).collect());
                        while console.len() > CONSOLE_LINES {
                            console.pop_front();
                        }
                    }
                }
            }
            other => tracing::trace!(session = self.id, event = other, "adapter event ignored"),
        }
    }
}

/// The status in delve's console line `Process 1234 has exited with status 6`.
fn delve_exit_code(line: &str) -> Option<i64> {
    let rest = line.trim().strip_prefix("Process ")?;
    let (_, status) = rest.split_once(" has exited with status ")?;
    status.trim().parse().ok()
}

/// Reads the adapter's events and reverse requests until its stream ends.
async fn pump(
    session: Arc<Session>,
    mut incoming: mpsc::Receiver<Incoming>,
    actor: ActorRef<SessionMsg>,
) {
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Event { event, body } => session.on_event(&event, &body),
            Incoming::Request { seq, command, .. } => {
                // The program runs inside the adapter (`console: internalConsole`): no
                // terminal to run it in, and no child sessions.
                tracing::debug!(session = session.id, command, "reverse request refused");
                if let Some(client) = session.client() {
                    let _ = client.respond(
                        seq,
                        &command,
                        Some(&format!(
                            "toolvisor does not support the reverse request `{command}`"
                        )),
                    );
                }
            }
            Incoming::Closed { reason } => {
                session.update(|s| s.closed = Some(reason.clone()));
                let _ = actor.cast(SessionMsg::Closed(reason));
                return;
            }
        }
    }
}

async fn read_stderr(mut rx: tokio::net::unix::pipe::Receiver, session: Arc<Session>) {
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let text = String::from_utf8_lossy(&buf[..n]);
        tracing::debug!(session = session.id, stderr = %text.trim_end(), "debug adapter stderr");
        let mut tail = lock(&session.stderr_tail);
        tail.push_str(&text);
        if tail.len() > TAIL_BYTES * 2 {
            let mut cut = tail.len() - TAIL_BYTES;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.drain(..cut);
        }
    }
}

/// What a `tcp-listen` adapter printed before its address; `None` on end of stream.
enum Heard {
    /// The address, and the bytes after its line (the program's output already).
    At(SocketAddr, Vec<u8>),
    Eof,
    TooLong,
}

/// Reads the adapter's stdout until a complete line names a loopback address.
///
/// # Cancel safety
///
/// Not cancel safe: bytes read are kept in `seen`, which the caller reads after a timeout.
async fn hear_address(stdout: &mut tokio::net::unix::pipe::Receiver, seen: &mut Vec<u8>) -> Heard {
    let mut buf = [0u8; 4096];
    loop {
        let mut start = 0;
        while let Some(nl) = seen[start..].iter().position(|b| *b == b'\n') {
            if let Some(addr) = listen_address(&String::from_utf8_lossy(&seen[start..start + nl])) {
                return Heard::At(addr, seen[start + nl + 1..].to_vec());
            }
            start += nl + 1;
        }
        if seen.len() > ADDRESS_SEARCH_BYTES {
            return Heard::TooLong;
        }
        match stdout.read(&mut buf).await {
            Ok(0) | Err(_) => return Heard::Eof,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// The first loopback `host:port` in `line` (`127.0.0.1:PORT`, `localhost:PORT`,
/// `[::1]:PORT`), the address a `tcp-listen` adapter says it listens at. Other hosts are
/// never connected to.
pub(crate) fn listen_address(line: &str) -> Option<SocketAddr> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let hosts = [
        ("127.0.0.1:", IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ("localhost:", IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ("[::1]:", IpAddr::V6(Ipv6Addr::LOCALHOST)),
    ];
    let mut best: Option<(usize, SocketAddr)> = None;
    for (host, ip) in hosts {
        for (at, _) in line.match_indices(host) {
            // A whole host: `1127.0.0.1:` or `x.localhost:` is not one.
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-') {
                continue;
            }
            let digits: String = line[at + host.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let Some(port) = digits.parse::<u16>().ok().filter(|p| *p > 0) else {
                continue;
            };
            if best.is_none_or(|(b, _)| at < b) {
                best = Some((at, SocketAddr::new(ip, port)));
            }
        }
    }
    best.map(|(_, addr)| addr)
}

/// A `tcp-listen` adapter's connection: waits up to `wait` for the address it prints on
/// stdout, then connects. Fails `resource_failed` naming the adapter, what it printed (stdout
/// and stderr) and what to do.
async fn connect_listening(
    session: &Arc<Session>,
    resolved: &Resolved,
    stdout: &mut tokio::net::unix::pipe::Receiver,
    mut exit: watch::Receiver<Option<ExitStatus>>,
    wait: Duration,
) -> Result<(tokio::net::TcpStream, Vec<u8>), ToolError> {
    let command = resolved.command_line();
    let name = &resolved.name;
    let mut seen = Vec::new();
    let heard = tokio::time::timeout(wait, hear_address(stdout, &mut seen)).await;
    let said = |session: &Session, seen: &[u8]| {
        let out = String::from_utf8_lossy(seen);
        let err = lock(&session.stderr_tail).clone();
        format!(
            "stdout: {}; stderr: {}",
            ends(out.trim(), 400),
            ends(err.trim(), 400)
        )
    };
    let hint = format!(
        "run `{command}` by hand in the project: it must print the address it listens at (delve: `DAP server listening at: 127.0.0.1:PORT`); an adapter that speaks DAP on stdin and stdout needs `transport = \"stdio\"` in `[debug.adapters.{name}]`"
    );
    let addr = match heard {
        Ok(Heard::At(addr, rest)) => (addr, rest),
        Ok(Heard::Eof) => {
            // Its stdout closed: it exited, or is about to. Let its stderr and exit arrive.
            let status =
                tokio::time::timeout(Duration::from_secs(2), exit.wait_for(Option::is_some))
                    .await
                    .ok()
                    .and_then(|s| s.ok().and_then(|s| *s));
            let how = status.map_or("closed its stdout".to_string(), |s| format!("exited ({s})"));
            return Err(ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) {how} before printing the address it listens at; {}",
                    said(session, &seen)
                ),
                hint,
            ));
        }
        Ok(Heard::TooLong) => {
            return Err(ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) printed {} bytes without a 127.0.0.1:PORT line to connect to; {}",
                    seen.len(),
                    said(session, &seen)
                ),
                hint,
            ));
        }
        Err(_) => {
            return Err(ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) printed no address to connect to (127.0.0.1:PORT) within {} s; {}",
                    wait.as_secs(),
                    said(session, &seen)
                ),
                format!("{hint}; `[debug] start_timeout_s` sets the wait"),
            ));
        }
    };
    let (addr, rest) = addr;
    let stream = tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| "took longer than 5 s".to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
        .map_err(|why| {
            ToolError::new(
                ErrorKind::ResourceFailed,
                format!(
                    "the {name} debug adapter (`{command}`) said it listens at {addr}, but connecting there failed: {why}; {}",
                    said(session, &seen)
                ),
                hint.clone(),
            )
        })?;
    let _ = stream.set_nodelay(true);
    tracing::info!(session = session.id, %addr, "connected to the debug adapter's port");
    Ok((stream, rest))
}

/// `text`, or its first and last `keep` characters when longer (a usage text names the bad
/// flag first, a crash says why last); "(nothing)" when empty.
fn ends(text: &str, keep: usize) -> String {
    let chars = text.chars().count();
    if chars == 0 {
        return "(nothing)".into();
    }
    if chars <= 2 * keep {
        return text.to_string();
    }
    let head: String = text.chars().take(keep).collect();
    let tail: String = text.chars().skip(chars - keep).collect();
    format!("{head} [… {} characters …] {tail}", chars - 2 * keep)
}

/// A `tcp-listen` adapter's stdout after its address: the program's output (delve's debuggee
/// inherits it).
async fn read_program_output(
    mut rx: tokio::net::unix::pipe::Receiver,
    first: Vec<u8>,
    session: Arc<Session>,
) {
    if !first.is_empty() {
        session.append_output(&first);
    }
    let mut buf = vec![0u8; 8192];
    loop {
        match rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => session.append_output(&buf[..n]),
        }
    }
    session.update(|s| s.program_output_open = false);
}

pub(crate) struct SessionActor;

pub(crate) struct SessionArgs {
    pub(crate) session: Arc<Session>,
    pub(crate) connect: Connect,
}

pub(crate) enum SessionMsg {
    /// Look at the hard TTL.
    Tick,
    /// The adapter child was reaped.
    Exited(ExitStatus),
    /// The adapter's stream ended.
    Closed(String),
}

pub(crate) struct SessionState {
    /// Kills and reaps the adapter's whole tree (the debuggee with it) when the actor goes,
    /// however it goes. `None` for a session attached over TCP (nothing of ours runs).
    _guard: Option<ProcessGuard>,
    session: Arc<Session>,
    expiring: bool,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let session = args.session;
        let label = format!("debug/{}", session.id);
        let (client, incoming, guard) = match args.connect {
            Connect::Spawn {
                resolved,
                cwd,
                launcher,
                address_wait,
            } => {
                let stdio = resolved.transport == Transport::Stdio;
                let mut spec = launcher.spec(
                    &resolved.program.display().to_string(),
                    &resolved.args,
                    &cwd,
                    stdio,
                    &label,
                );
                for (key, value) in &resolved.env {
                    spec.env.retain(|(k, _)| k != key);
                    spec.env.push((key.clone(), value.clone()));
                }
                let spawned = process::spawn(spec)
                    .await
                    .map_err(|e| format!("cannot start the {} adapter: {e}", resolved.name))?;
                let pid = spawned.guard.main_pid();
                session.adapter_pid.store(pid, Ordering::Relaxed);
                tokio::spawn(read_stderr(spawned.stderr, session.clone()));
                let _ = session.exit.set(spawned.exit.clone());
                let (client, incoming) = if stdio {
                    let stdin = spawned
                        .stdin
                        .ok_or_else(|| "the adapter's stdin pipe is missing".to_string())?;
                    DapClient::start(spawned.stdout, stdin, &label, MAX_FRAME)
                } else {
                    // Until it connects, a failure drops the guard: the adapter is killed and
                    // reaped like any child of a failed start.
                    let mut stdout = spawned.stdout;
                    let stream = match connect_listening(
                        &session,
                        &resolved,
                        &mut stdout,
                        spawned.exit.clone(),
                        address_wait,
                    )
                    .await
                    {
                        Ok((stream, rest)) => {
                            session.update(|s| s.program_output_open = true);
                            tokio::spawn(read_program_output(stdout, rest, session.clone()));
                            stream
                        }
                        Err(failure) => {
                            let message = failure.message.clone();
                            let _ = session.start_failure.set(failure);
                            return Err(message.into());
                        }
                    };
                    let (r, w) = stream.into_split();
                    DapClient::start(r, w, &label, MAX_FRAME)
                };
                let mut exit = spawned.exit.clone();
                let me = myself.clone();
                tokio::spawn(async move {
                    if let Ok(status) = exit.wait_for(Option::is_some).await
                        && let Some(status) = *status
                    {
                        let _ = me.cast(SessionMsg::Exited(status));
                    }
                });
                tracing::info!(
                    session = session.id,
                    pid,
                    command = session.command,
                    "debug adapter started"
                );
                (client, incoming, Some(spawned.guard))
            }
            Connect::Tcp { port } => {
                let stream = tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio::net::TcpStream::connect(("127.0.0.1", port)),
                )
                .await
                .map_err(|_| format!("connecting to 127.0.0.1:{port} took longer than 5 s"))?
                .map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
                let _ = stream.set_nodelay(true);
                let (r, w) = stream.into_split();
                let (client, incoming) = DapClient::start(r, w, &label, MAX_FRAME);
                tracing::info!(session = session.id, port, "attached to a debug server");
                (client, incoming, None)
            }
        };
        let _ = session.client.set(client);
        tokio::spawn(pump(session.clone(), incoming, myself.clone()));
        let pid = session.adapter_pid();
        session.status.update(|i| i.pid = pid);
        session.show();
        myself.send_interval(TICK, || SessionMsg::Tick);
        Ok(SessionState {
            _guard: guard,
            session,
            expiring: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        let session = &state.session;
        match msg {
            SessionMsg::Tick => {
                if !state.expiring && session.deadline().is_some_and(|d| Instant::now() >= d) {
                    state.expiring = true;
                    let message = format!(
                        "the debug session {} expired: it reached its hard TTL of {} s and was terminated",
                        session.id,
                        session.ttl.as_secs()
                    );
                    toolvisor_kit::status::count_event("debug_adapters", "ttl_expiry");
                    tracing::info!(
                        session = session.id,
                        ttl_s = session.ttl.as_secs(),
                        "debug session TTL expired; terminating it"
                    );
                    let me = session.clone();
                    tokio::spawn(async move { me.shutdown(EndKind::Expired, message).await });
                }
                Ok(())
            }
            SessionMsg::Exited(status) => {
                if session.shutting_down.load(Ordering::SeqCst) {
                    myself.stop(Some(format!("adapter {status}")));
                    return Ok(());
                }
                let pid = session
                    .adapter_pid()
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default();
                let words = session.last_words();
                let mut message = format!(
                    "the debug adapter {}{pid} died: {status}; the session and the program it debugged are gone",
                    session.adapter
                );
                if !words.is_empty() {
                    message.push_str(&format!(". Its last words: {words}"));
                }
                tracing::warn!(session = session.id, %status, "debug adapter died");
                session.mark_end(EndKind::Crashed, message.clone());
                Err(message.into())
            }
            SessionMsg::Closed(reason) => {
                if session.exit.get().is_none() && !session.shutting_down.load(Ordering::SeqCst) {
                    // Attached over TCP: the server went away.
                    let message = format!(
                        "the debug server at {} closed the connection ({reason}); the session is over",
                        session.command
                    );
                    session.mark_end(EndKind::Crashed, message.clone());
                    myself.stop(Some(message));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_all_in_only_once_every_stream_it_comes_by_has_ended() {
        let ms = Duration::from_millis;
        assert!(!settled(None, true, false), "a running session");
        assert!(
            settled(Some(ms(0)), true, false),
            "stdio: the stream closed"
        );
        assert!(!settled(Some(ms(0)), false, false));
        assert!(
            settled(Some(OUTPUT_GRACE), false, false),
            "an adapter that stays up"
        );
        // delve: the DAP connection closed, its stdout (the program's output) not yet read
        // to its end: its last line may still come.
        assert!(!settled(Some(ms(0)), true, true));
        assert!(!settled(Some(OUTPUT_GRACE), true, true));
        assert!(settled(Some(PIPE_GRACE), true, true));
    }

    #[test]
    fn listen_addresses_are_loopback_host_ports_on_a_line() {
        assert_eq!(
            listen_address("DAP server listening at: 127.0.0.1:39167"),
            Some("127.0.0.1:39167".parse().unwrap())
        );
        assert_eq!(
            listen_address("listening on [::1]:5678 (and 127.0.0.1:9)"),
            Some("[::1]:5678".parse().unwrap())
        );
        assert_eq!(
            listen_address("at localhost:4711."),
            Some("127.0.0.1:4711".parse().unwrap())
        );
        for no in [
            "DAP server listening at: 10.0.0.2:39167",
            "listening at 1127.0.0.1:80",
            "api.localhost:80",
            "127.0.0.1:0",
            "127.0.0.1:70000",
            "127.0.0.1:",
            "starting up",
        ] {
            assert_eq!(listen_address(no), None, "{no:?}");
        }
    }

    #[test]
    fn delve_says_the_exit_status_on_its_console() {
        assert_eq!(
            delve_exit_code("Process 4242 has exited with status 6\n"),
            Some(6)
        );
        assert_eq!(
            delve_exit_code("Process 7 has exited with status -1"),
            Some(-1)
        );
        assert_eq!(
            delve_exit_code("Type 'dlv help' for list of commands."),
            None
        );
    }

    #[test]
    fn long_texts_keep_both_ends() {
        assert_eq!(ends("", 3), "(nothing)");
        assert_eq!(ends("abcdef", 3), "abcdef");
        assert_eq!(ends("abcdefgh", 3), "abc [… 2 characters …] fgh");
    }
}
