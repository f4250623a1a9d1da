//! One debug session: the shared [`Session`] that the tool's calls drive, the actor under the
//! `debug_adapters` supervisor that owns the adapter child and the hard TTL (`session/actor.rs`),
//! the folding of the adapter's events into [`RunState`] (`session/events.rs`), and the adapter's
//! other streams: stderr, and a `tcp-listen` adapter's address and program output
//! (`session/streams.rs`).
//!
//! An adapter speaks DAP on its stdio, or (`transport = "tcp-listen"`, delve) on a loopback
//! port it prints on stdout: the actor reads the address within `start_timeout_s`, connects,
//! and reads the rest of stdout as the program's output; the child is the same guarded child
//! either way (through its process guard; the debuggee runs inside the adapter's process tree,
//! so the same guard reaps it).
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
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use ractor::ActorRef;
use serde_json::{Value, json};
use tokio::sync::watch;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::ExitStatus;
use toolvisor_kit::status::NodeStatus;
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::results::{
    DebugEndKind, DebugException, DebugFrame, DebugState, DebugWatch,
};
use toolvisor_protocol::tree::NodeState;

use crate::adapters::{Flavor, Resolved};
use crate::client::DapClient;
use toolvisor_kit::output::OutputLog;
use toolvisor_protocol::ToolError;

mod events;
mod streams;

pub(crate) mod actor;

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
    /// Asks the reader of a `tcp-listen` adapter's stdout (the program's output) to read what
    /// the pipe holds now (`streams::read_program_output`).
    output_drain: OnceLock<tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<()>>>,
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
            output_drain: OnceLock::new(),
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

    /// What the program wrote before now, still in the pipe of a `tcp-listen` adapter's
    /// stdout, read into the output (at most 1 s waited for the reader).
    async fn drain_program_output(&self) {
        let Some(drain) = self.output_drain.get() else {
            return;
        };
        let (done, read) = tokio::sync::oneshot::channel();
        if drain.try_send(done).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(1), read).await;
        }
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
            self.drain_program_output().await;
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
}
