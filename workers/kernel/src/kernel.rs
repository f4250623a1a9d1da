//! One kernel: the actor that owns the interpreter child (through its process guard), the
//! pipes of the current incarnation, and the facts that outlive incarnations (the slot).
//!
//! The actor's mailbox only takes short messages (a tick for the idle TTL and the memory
//! cap, an interrupt, the child's exit); cells are driven by the caller's task through the
//! incarnation's [`Port`], so the mailbox never waits behind a cell.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard};
use toolvisor_kit::status::NodeStatus;
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_kit::ttl::Ttl;
use toolvisor_protocol::tree::NodeState;

use crate::Language;
use crate::interpreter::LaunchPlan;
use crate::output::{Piece, StderrScanner, Utf8Carry, floor_char_boundary};
use crate::pipe::{FrameReader, FromKernel};

/// How often the actor looks at its idle TTL and its memory.
const TICK: Duration = Duration::from_millis(250);

/// Bytes of a driver's stderr kept for death reports.
const TAIL_BYTES: usize = 4096;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Everything about one (conversation, language) kernel that survives its incarnations.
pub(crate) struct Slot {
    /// The supervisor's child id: `<conversation>/<language>`.
    pub(crate) id: String,
    pub(crate) conversation: String,
    pub(crate) language: Language,
    pub(crate) status: Arc<NodeStatus>,
    current: Mutex<Option<Arc<Incarnation>>>,
    /// A cell runs now (the idle TTL waits).
    pub(crate) busy: AtomicBool,
    /// Kernels started for this slot (the tree shows the ones after the first as restarts).
    starts: AtomicU32,
    ttl: Mutex<Ttl>,
    /// Serialises starting and stopping.
    pub(crate) lifecycle: tokio::sync::Mutex<()>,
}

impl Slot {
    pub(crate) fn new(
        conversation: &str,
        language: Language,
        status: Arc<NodeStatus>,
        idle: Option<Duration>,
    ) -> Slot {
        Slot {
            id: format!("{conversation}/{language}"),
            conversation: conversation.to_string(),
            language,
            status,
            current: Mutex::new(None),
            busy: AtomicBool::new(false),
            starts: AtomicU32::new(0),
            ttl: Mutex::new(Ttl::new(Instant::now(), idle, None)),
            lifecycle: tokio::sync::Mutex::new(()),
        }
    }

    /// The current (or most recent) incarnation.
    pub(crate) fn current(&self) -> Option<Arc<Incarnation>> {
        lock(&self.current).clone()
    }

    /// Record a use: the idle TTL starts again.
    pub(crate) fn touch(&self) {
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

    pub(crate) fn show(&self, inc: &Incarnation) {
        let detail = format!(
            "{}: {} {}, {} cells",
            self.conversation,
            self.language,
            inc.version,
            inc.cells.load(Ordering::Relaxed)
        );
        self.status.update(|i| i.detail = detail);
    }
}

/// What the reader tasks hand to whoever drives a cell.
#[derive(Debug)]
pub(crate) enum Event {
    Frame(FromKernel),
    /// Output written at the fd level (subprocesses, native code), from stderr.
    Stderr(String),
    /// The driver finished a cell: its fd-level output is complete.
    Sync(u64),
    /// The driver broke the pipe protocol.
    Broken(String),
}

/// The pipes of one incarnation; locked by the task driving a cell.
pub(crate) struct Port {
    pub(crate) stdin: mpsc::Sender<Vec<u8>>,
    pub(crate) events: mpsc::Receiver<Event>,
    pub(crate) next_cell: u64,
}

/// One running interpreter.
pub(crate) struct Incarnation {
    pub(crate) number: u64,
    pub(crate) pid: u32,
    pub(crate) version: String,
    pub(crate) executable: String,
    pub(crate) actor: ActorRef<KernelMsg>,
    pub(crate) port: tokio::sync::Mutex<Port>,
    pub(crate) exit: watch::Receiver<Option<ExitStatus>>,
    stderr_tail: Arc<Mutex<String>>,
    stderr_closed: watch::Receiver<bool>,
    /// Why the daemon ended it (memory cap, reset, idle TTL, a broken pipe), if it did.
    verdict: Mutex<Option<String>>,
    /// Its end has been told to a caller (so the next fresh start need not repeat it).
    pub(crate) reported: AtomicBool,
    pub(crate) cells: AtomicU64,
}

impl Incarnation {
    pub(crate) fn alive(&self) -> bool {
        self.exit.borrow().is_none() && lock(&self.verdict).is_none()
    }

    pub(crate) fn set_verdict(&self, why: String) {
        let mut v = lock(&self.verdict);
        if v.is_none() {
            *v = Some(why);
        }
    }

    fn stderr_tail(&self, n: usize) -> String {
        let tail = lock(&self.stderr_tail);
        let cut = floor_char_boundary(&tail, tail.len().saturating_sub(n));
        tail[cut..].trim().to_string()
    }

    /// Why it ended, as known now.
    pub(crate) fn cause_now(&self) -> String {
        if let Some(v) = lock(&self.verdict).clone() {
            return v;
        }
        let tail = self.stderr_tail(600);
        let mut cause = match *self.exit.borrow() {
            None => "ended".to_string(),
            Some(status) => describe_exit(status, &tail),
        };
        if !tail.is_empty() {
            cause.push_str(&format!(" (its last words on stderr: {tail:?})"));
        }
        cause
    }

    /// Why it ended, after waiting (briefly) for its exit status and the rest of its stderr.
    pub(crate) async fn cause(&self) -> String {
        let mut exit = self.exit.clone();
        let _ = tokio::time::timeout(Duration::from_secs(3), exit.wait_for(Option::is_some)).await;
        let mut closed = self.stderr_closed.clone();
        let _ = tokio::time::timeout(Duration::from_millis(500), closed.wait_for(|c| *c)).await;
        self.cause_now()
    }
}

fn describe_exit(status: ExitStatus, stderr: &str) -> String {
    if stderr.contains("heap out of memory") {
        return "it ran out of memory (the JavaScript heap limit) and aborted".into();
    }
    match (status.code, status.signal) {
        (Some(code), _) => format!("it exited with code {code}"),
        (None, Some(9)) => "it was killed by signal 9 (SIGKILL): from outside, or by the system's out-of-memory killer".into(),
        (None, Some(_)) => format!("it was {status}"),
        (None, None) => "it ended with an unknown status".into(),
    }
}

pub(crate) struct KernelActor;

pub(crate) struct KernelArgs {
    pub(crate) slot: Arc<Slot>,
    pub(crate) plan: LaunchPlan,
    pub(crate) launcher: Launcher,
    pub(crate) workdir: PathBuf,
    pub(crate) number: u64,
    pub(crate) memory_cap: Option<u64>,
    pub(crate) start_timeout: Duration,
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
}

pub(crate) enum KernelMsg {
    /// Look at the idle TTL and the memory cap.
    Tick,
    /// SIGINT to the interpreter.
    Interrupt,
    /// The child was reaped.
    Exited(ExitStatus),
    /// The driver broke the pipe protocol: end this kernel.
    Fatal(String),
}

pub(crate) struct KernelState {
    /// Kills and reaps the interpreter's whole tree when the actor goes, however it goes.
    guard: ProcessGuard,
    slot: Arc<Slot>,
    inc: Arc<Incarnation>,
    memory_cap: Option<u64>,
    supervisor: ActorRef<SupervisorMsg>,
    expiring: bool,
}

impl Actor for KernelActor {
    type Msg = KernelMsg;
    type State = KernelState;
    type Arguments = KernelArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<KernelMsg>,
        args: KernelArgs,
    ) -> Result<KernelState, ActorProcessingErr> {
        let slot = args.slot;
        let label = format!("kernel/{}", slot.id);
        let mut launched =
            launch(&myself, &args.launcher, &args.plan, &args.workdir, &label).await?;
        let (pid, version, executable) =
            wait_ready(&mut launched, &args.plan, args.start_timeout).await?;
        let Launched {
            exit,
            stderr_closed,
            stderr_tail,
            stdin,
            events,
            guard,
        } = launched;
        let inc = Arc::new(Incarnation {
            number: args.number,
            pid: if pid > 1 { pid } else { guard.main_pid() },
            version,
            executable,
            actor: myself.clone(),
            port: tokio::sync::Mutex::new(Port {
                stdin,
                events,
                next_cell: 0,
            }),
            exit,
            stderr_tail,
            stderr_closed,
            verdict: Mutex::new(None),
            reported: AtomicBool::new(false),
            cells: AtomicU64::new(0),
        });
        tracing::info!(
            kernel = slot.id,
            pid = inc.pid,
            version = inc.version,
            incarnation = inc.number,
            "kernel started"
        );
        *lock(&slot.current) = Some(inc.clone());
        let restarts = slot.starts.fetch_add(1, Ordering::Relaxed);
        slot.status.update(|i| {
            i.pid = Some(inc.pid);
            i.restarts = restarts;
        });
        slot.show(&inc);
        slot.touch();
        myself.send_interval(TICK, || KernelMsg::Tick);
        Ok(KernelState {
            guard,
            slot,
            inc,
            memory_cap: args.memory_cap,
            supervisor: args.supervisor,
            expiring: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<KernelMsg>,
        msg: KernelMsg,
        state: &mut KernelState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            KernelMsg::Tick => {
                if let Some(cap) = state.memory_cap
                    && state.inc.alive()
                    && let Some(rss) = process::rss_bytes(state.inc.pid)
                    && rss > cap
                {
                    let why = format!(
                        "it passed its memory cap of {} MiB (resident memory reached {} MiB) and was killed",
                        cap >> 20,
                        rss >> 20
                    );
                    tracing::warn!(
                        kernel = state.slot.id,
                        pid = state.inc.pid,
                        rss,
                        cap,
                        "kernel over its memory cap; killing it"
                    );
                    state.inc.set_verdict(why);
                    let _ = state.guard.signal_main(Signal::SIGKILL);
                }
                let expired = lock(&state.slot.ttl).expired(Instant::now());
                if let Some(why) = expired
                    && !state.expiring
                    && !state.slot.busy.load(Ordering::SeqCst)
                {
                    state.expiring = true;
                    tracing::info!(kernel = state.slot.id, reason = %why, "kernel idle; stopping it");
                    state
                        .inc
                        .set_verdict(format!("was stopped after going unused ({why})"));
                    let _ = state.supervisor.send_message(SupervisorMsg::Expire {
                        id: state.slot.id.clone(),
                        reason: why.to_string(),
                    });
                }
                Ok(())
            }
            KernelMsg::Interrupt => {
                tracing::info!(
                    kernel = state.slot.id,
                    pid = state.inc.pid,
                    "interrupting the kernel (SIGINT)"
                );
                let _ = state.guard.signal_main(Signal::SIGINT);
                Ok(())
            }
            KernelMsg::Fatal(why) => {
                tracing::warn!(
                    kernel = state.slot.id,
                    error = why,
                    "kernel pipe broken; ending the kernel"
                );
                state
                    .inc
                    .set_verdict(format!("broke the kernel pipe ({why}) and was ended"));
                Err(why.into())
            }
            KernelMsg::Exited(status) => {
                let cause = state.inc.cause().await;
                tracing::warn!(kernel = state.slot.id, pid = state.inc.pid, %status, cause, "kernel ended");
                if status.success() && lock(&state.inc.verdict).is_none() {
                    myself.stop(Some(status.to_string()));
                    Ok(())
                } else {
                    Err(cause.into())
                }
            }
        }
    }
}

/// An interpreter just spawned, its pipes wired, before it said `ready`.
struct Launched {
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr_closed: watch::Receiver<bool>,
    stderr_tail: Arc<Mutex<String>>,
    stdin: mpsc::Sender<Vec<u8>>,
    events: mpsc::Receiver<Event>,
    guard: ProcessGuard,
}

/// Spawns the interpreter of `plan` and starts the tasks around it: its stdin feed, its
/// frame and stderr readers, and the watch that tells `actor` of its exit.
async fn launch(
    actor: &ActorRef<KernelMsg>,
    launcher: &Launcher,
    plan: &LaunchPlan,
    workdir: &std::path::Path,
    label: &str,
) -> Result<Launched, ActorProcessingErr> {
    let mut spec = launcher.spec(&plan.program, &plan.args, workdir, true, label);
    for (key, value) in &plan.env {
        spec.env.retain(|(k, _)| k != key);
        spec.env.push((key.clone(), value.clone()));
    }
    let spawned = process::spawn(spec)
        .await
        .map_err(|e| format!("{}: {e}", plan.interpreter))?;
    let guard = spawned.guard;
    let (events_tx, events_rx) = mpsc::channel(256);
    let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(64);
    if let Some(stdin) = spawned.stdin {
        tokio::spawn(feed(stdin, stdin_rx));
    }
    tokio::spawn(read_frames(
        spawned.stdout,
        events_tx.clone(),
        actor.clone(),
    ));
    let tail = Arc::new(Mutex::new(String::new()));
    let (closed_tx, closed_rx) = watch::channel(false);
    tokio::spawn(read_stderr(
        spawned.stderr,
        events_tx,
        tail.clone(),
        closed_tx,
        label.to_string(),
    ));
    let exit = spawned.exit;
    {
        let mut exit = exit.clone();
        let me = actor.clone();
        tokio::spawn(async move {
            if let Ok(status) = exit.wait_for(Option::is_some).await
                && let Some(status) = *status
            {
                let _ = me.cast(KernelMsg::Exited(status));
            }
        });
    }
    Ok(Launched {
        exit,
        stderr_closed: closed_rx,
        stderr_tail: tail,
        stdin: stdin_tx,
        events: events_rx,
        guard,
    })
}

/// Waits for the driver's `ready` (pid, version, executable); a failure says why, with what
/// the interpreter wrote on stderr before it.
async fn wait_ready(
    launched: &mut Launched,
    plan: &LaunchPlan,
    start_timeout: Duration,
) -> Result<(u32, String, String), ActorProcessingErr> {
    // The driver says `ready` first; anything on stderr before it explains a failure.
    let mut early = String::new();
    let events = &mut launched.events;
    let ready = tokio::time::timeout(start_timeout, async {
        while let Some(event) = events.recv().await {
            match event {
                Event::Frame(FromKernel::Ready {
                    pid,
                    version,
                    executable,
                }) => return Ok((pid, version, executable)),
                Event::Stderr(text) => early.push_str(&text),
                Event::Broken(why) => return Err(why),
                _ => {}
            }
        }
        Err("it exited before it was ready".to_string())
    })
    .await;
    match ready {
        Ok(Ok(ready)) => Ok(ready),
        Ok(Err(why)) => {
            let mut exit = launched.exit.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(2), exit.wait_for(Option::is_some)).await;
            let status = exit.borrow().map(|s| format!(" ({s})")).unwrap_or_default();
            let early = early.trim();
            let early: String = early
                .chars()
                .rev()
                .take(1500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            Err(format!(
                "{} {why}{status}{}",
                plan.interpreter,
                if early.is_empty() {
                    String::new()
                } else {
                    format!("; it said: {early}")
                }
            )
            .into())
        }
        Err(_) => Err(format!(
            "{} did not report ready within {} s",
            plan.interpreter,
            start_timeout.as_secs()
        )
        .into()),
    }
}

async fn feed(mut tx: tokio::net::unix::pipe::Sender, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(bytes) = rx.recv().await {
        if tx.write_all(&bytes).await.is_err() {
            break;
        }
    }
}

async fn read_frames(
    rx: tokio::net::unix::pipe::Receiver,
    events: mpsc::Sender<Event>,
    actor: ActorRef<KernelMsg>,
) {
    let mut reader = FrameReader::new(tokio::io::BufReader::with_capacity(64 * 1024, rx));
    loop {
        match reader.next().await {
            Ok(Some(frame)) => {
                if events.send(Event::Frame(frame)).await.is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                let why = e.to_string();
                let _ = events.send(Event::Broken(why.clone())).await;
                let _ = actor.cast(KernelMsg::Fatal(why));
                return;
            }
        }
    }
}

async fn read_stderr(
    mut rx: tokio::net::unix::pipe::Receiver,
    events: mpsc::Sender<Event>,
    tail: Arc<Mutex<String>>,
    closed: watch::Sender<bool>,
    label: String,
) {
    let mut scanner = StderrScanner::default();
    let mut utf8 = Utf8Carry::default();
    let mut buf = vec![0u8; 16 * 1024];
    let mut events = Some(events);
    loop {
        let n = match rx.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in scanner.feed(&buf[..n]) {
            let event = match piece {
                Piece::Text(bytes) => {
                    let text = utf8.decode(&bytes);
                    if text.is_empty() {
                        continue;
                    }
                    tracing::debug!(kernel = label, stderr = text, "kernel stderr");
                    let mut t = lock(&tail);
                    t.push_str(&text);
                    if t.len() > TAIL_BYTES * 2 {
                        let cut = floor_char_boundary(&t, t.len() - TAIL_BYTES);
                        t.drain(..cut);
                    }
                    drop(t);
                    Event::Stderr(text)
                }
                Piece::Sync(n) => Event::Sync(n),
            };
            // Between cells nobody drains the channel: rather than block the kernel's
            // stderr for good, drop what does not fit (it is in the tail and the log).
            if let Some(tx) = &events {
                match tx.try_send(event) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(event)) => {
                        match tokio::time::timeout(Duration::from_secs(1), tx.send(event)).await {
                            Ok(Ok(())) | Err(_) => {}
                            Ok(Err(_)) => events = None,
                        }
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => events = None,
                }
            }
        }
    }
    closed.send_replace(true);
}
