//! The `eval` tool's state: every conversation's kernels, and running one cell on one of
//! them with the inactivity budget, the bridge, interrupts, kills and restarts.
//!
//! A cell never hangs its caller: silent past its inactivity budget it is interrupted; still
//! running `interrupt_grace` later, its kernel is killed; a kernel that dies answers `kernel_died`
//! with the cause at once; a dropped call interrupts its cell (`InterruptOnDrop`). `tool("eval")`
//! from a cell is refused: the cell already holds the conversation's eval turn. A slot whose kernel
//! ended, whose record the supervisor collected and that no call holds is pruned whenever a new
//! slot is made (`prune_slots`), so conversations that come and go leave nothing.
//!
//! The tool handler is `supervisor/src/tools/eval.rs`; the `Bridge` a cell's `tool()` calls go
//! through is its caller's (`tools::Caller::bridge`; for calls from the wire,
//! `supervisor/src/session/bridge.rs`).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use serde_json::{Value as Json, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process;
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{self, ChildSpec, Factory, StartCtx, StartFailed, SupervisorMsg};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{EvalKernel, EvalKernelLanguage, EvalResult, EvalStatus};
use toolvisor_protocol::tree::NodeState;
use toolvisor_protocol::wire::Stream;

use crate::interpreter::{self, LaunchPlan, Probes};
use crate::kernel::{Event, Incarnation, KernelActor, KernelArgs, KernelMsg, Port, Slot, lock};
use crate::output::{Collector, OutputLimits};
use crate::pipe::{FromKernel, ToKernel, encode};
use crate::{KernelError, Language, Result, magic};

/// After a cell's `done`, how long to wait for the rest of its fd-level output.
const SYNC_WAIT: Duration = Duration::from_secs(1);

/// After a kernel's death, how long its last output has to come out of the pipes.
const DEATH_DRAIN: Duration = Duration::from_secs(1);

/// While an interrupted cell has not stopped, the interrupt is repeated this often: CPython
/// runs a signal's handler only at its next check, and a signal that lands just before a
/// blocking call (while the thread waits for the GIL) waits for that call to return.
const REINTERRUPT: Duration = Duration::from_millis(500);

/// Folds `event` into `collector` when it is output of `cell` (its streams, displays and
/// errors, and fd-level stderr) and says what to stream to the caller, if anything; any other
/// event comes back as `Err`.
fn fold_output(
    collector: &mut Collector,
    cell: u64,
    event: Event,
) -> std::result::Result<Option<(Stream, String)>, Event> {
    match event {
        Event::Frame(FromKernel::Stream {
            cell: Some(c),
            name,
            text,
        }) if c == cell => {
            let stream = if name == "stderr" {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            Ok(collector.stream(&name, &text).map(|t| (stream, t)))
        }
        Event::Stderr(text) => Ok(collector
            .stream("stderr", &text)
            .map(|t| (Stream::Stderr, t))),
        Event::Frame(FromKernel::Display {
            cell: Some(c),
            data,
            result,
        }) if c == cell => {
            collector.display(data, result);
            Ok(None)
        }
        Event::Frame(FromKernel::Error {
            cell: Some(c),
            ename,
            evalue,
            traceback,
        }) if c == cell => {
            collector.error(ename, evalue, traceback);
            Ok(None)
        }
        other => Err(other),
    }
}

/// Limits and choices of the kernels; see `[kernels]` in docs/OPERATIONS.md.
#[derive(Clone, Debug)]
pub struct KernelLimits {
    /// Python interpreter (path or name); `None`: the run's `.venv`, else `python3`.
    pub python: Option<String>,
    /// Node binary (path or name); `None`: `node` on the `PATH`.
    pub node: Option<String>,
    /// The `typescript` package directory for TypeScript cells on a Node without its own
    /// type stripping (relative paths are taken from the run's workdir).
    pub typescript: Option<String>,
    /// A kernel without a call this long is stopped; `None`: never.
    pub idle_ttl: Option<Duration>,
    /// After an interrupt, how long a cell gets to stop before the kernel is killed.
    pub interrupt_grace: Duration,
    /// Resident memory a kernel may use; `None`: no cap.
    pub memory_bytes: Option<u64>,
    pub output: OutputLimits,
    /// Rows shown of a table (pandas).
    pub table_rows: u32,
    /// How long an interpreter gets to start its driver.
    pub start_timeout: Duration,
}

impl Default for KernelLimits {
    fn default() -> Self {
        KernelLimits {
            python: None,
            node: None,
            typescript: None,
            idle_ttl: Some(Duration::from_secs(30 * 60)),
            interrupt_grace: Duration::from_secs(5),
            memory_bytes: Some(4096 << 20),
            output: OutputLimits::default(),
            table_rows: 50,
            start_timeout: Duration::from_secs(30),
        }
    }
}

/// What a bridge call returns to the cell.
pub type BridgeFuture = Pin<Box<dyn Future<Output = Result<Json, ToolError>> + Send>>;

/// Runs `tool(name, args)` calls from cells: the daemon passes one that applies the same
/// gates as a model-issued call of the cell's conversation.
pub trait Bridge: Send + Sync {
    fn call(&self, tool: String, args: Json) -> BridgeFuture;
}

/// One `eval` call.
#[derive(Clone, Debug)]
pub struct CellRequest {
    pub conversation: String,
    pub language: Language,
    pub code: String,
    /// The code is TypeScript (language JavaScript): the driver strips its types first.
    pub typescript: bool,
    /// Discard the interpreter and start clean first.
    pub reset: bool,
    /// The cell may go this long without output (bridge calls in flight do not count).
    pub inactivity: Duration,
    /// Where a new kernel starts (the run's workdir).
    pub workdir: PathBuf,
}

/// Every kernel, by conversation and language, and the supervisor they run under.
pub struct Kernels {
    supervisor: ActorRef<SupervisorMsg>,
    launcher: Launcher,
    limits: KernelLimits,
    notifier: TreeNotifier,
    slots: Mutex<HashMap<(String, Language), Arc<Slot>>>,
    probes: Probes,
    next_incarnation: AtomicU64,
}

/// How a cell ended when it did not end normally.
enum Stop {
    /// The kernel died (or its pipe broke) during the cell.
    Died,
    /// It went quiet past its budget; the interrupt worked.
    Interrupted,
    /// It went quiet past its budget and ignored the interrupt.
    Stuck,
}

/// Marks the slot busy for the length of a cell.
struct Busy<'a>(&'a Slot);

impl<'a> Busy<'a> {
    fn new(slot: &'a Slot) -> Self {
        slot.busy.store(true, Ordering::SeqCst);
        slot.touch();
        slot.status.update(|i| {
            if i.state == NodeState::Ready {
                i.state = NodeState::Busy;
            }
        });
        Busy(slot)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::SeqCst);
        self.0.touch();
        self.0.status.update(|i| {
            if i.state == NodeState::Busy {
                i.state = NodeState::Ready;
            }
        });
    }
}

/// Stops the cell if its caller goes away (a cancelled call): a cell not started yet is
/// skipped, a running one interrupted.
struct InterruptOnDrop {
    actor: ActorRef<KernelMsg>,
    stdin: mpsc::Sender<Vec<u8>>,
    cell: u64,
    armed: bool,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let _ = self
                .stdin
                .try_send(encode(&ToKernel::Cancel { cell: self.cell }));
            let _ = self.actor.cast(KernelMsg::Interrupt);
        }
    }
}

fn bridge_reply(id: u64, result: Result<Json, ToolError>) -> Vec<u8> {
    let (ok, err) = match result {
        Ok(v) => (Some(v), None),
        Err(e) => (
            None,
            Some(json!({"kind": e.kind.as_str(), "message": e.message, "hint": e.hint})),
        ),
    };
    encode(&ToKernel::BridgeResult { id, ok, err })
}

/// A finished bridge call: its id and what the tool answered.
type BridgeDone = (u64, Result<Json, ToolError>);

/// One cell on its way to its end: what `Kernels::drive` tracks between the kernel's events.
struct CellRun<'a> {
    slot: &'a Slot,
    inc: &'a Incarnation,
    cell: u64,
    bridge: &'a Arc<dyn Bridge>,
    output: &'a Option<mpsc::Sender<(Stream, String)>>,
    last_activity: Instant,
    interrupted_at: Option<Instant>,
    last_interrupt: Instant,
    done: Option<(String, Instant)>,
    synced: bool,
}

impl<'a> CellRun<'a> {
    /// A cell just sent, with nothing heard from it yet.
    fn new(
        slot: &'a Slot,
        inc: &'a Incarnation,
        cell: u64,
        bridge: &'a Arc<dyn Bridge>,
        output: &'a Option<mpsc::Sender<(Stream, String)>>,
    ) -> Self {
        CellRun {
            slot,
            inc,
            cell,
            bridge,
            output,
            last_activity: Instant::now(),
            interrupted_at: None,
            last_interrupt: Instant::now(),
            done: None,
            synced: false,
        }
    }

    /// The cell is done and its fd-level output is in (or waited for long enough).
    fn settled(&self) -> bool {
        matches!(&self.done, Some((_, at)) if self.synced || at.elapsed() >= SYNC_WAIT)
    }

    /// When to act if nothing comes: the end of the sync wait, the next interrupt, or the
    /// end of the inactivity budget (which does not run while bridge calls are in flight).
    fn deadline(&self, grace: Duration, inactivity: Duration, no_bridges: bool) -> Instant {
        let far = Duration::from_secs(365 * 24 * 3600);
        match (&self.done, self.interrupted_at) {
            (Some((_, at)), _) => *at + SYNC_WAIT,
            (None, Some(at)) => (at + grace).min(self.last_interrupt + REINTERRUPT),
            (None, None) if no_bridges => self.last_activity + inactivity,
            (None, None) => Instant::now() + far,
        }
    }

    /// Streams `text` to the caller, if it asked for output as it comes.
    async fn forward(&self, stream: Stream, text: String) {
        if let Some(tx) = self.output.clone() {
            let _ = tx.send((stream, text)).await;
        }
    }

    /// Takes one event of the kernel: the cell's output, a `tool()` call from it (refused or
    /// started), its end, its sync marker, or a broken pipe.
    async fn on_event(
        &mut self,
        event: Event,
        collector: &mut Collector,
        stdin: &mpsc::Sender<Vec<u8>>,
        bridges: &mut JoinSet<BridgeDone>,
    ) -> std::result::Result<(), Stop> {
        let cell = self.cell;
        let event = match fold_output(collector, cell, event) {
            Ok(fwd) => {
                self.last_activity = Instant::now();
                if let Some((stream, text)) = fwd {
                    self.forward(stream, text).await;
                }
                return Ok(());
            }
            Err(other) => other,
        };
        match event {
            Event::Frame(FromKernel::Bridge {
                cell: c,
                id,
                tool,
                args,
            }) => {
                self.last_activity = Instant::now();
                if c != Some(cell) {
                    let err = ToolError::new(
                        ErrorKind::Cancelled,
                        "the cell that made this tool() call has ended",
                        "",
                    );
                    let _ = stdin.send(bridge_reply(id, Err(err))).await;
                } else if tool == "eval" {
                    let err = ToolError::new(
                        ErrorKind::InvalidArgs,
                        "tool(\"eval\") from inside an eval cell is refused: this cell already holds the conversation's eval turn, so the nested cell would wait on itself",
                        "run that code directly in this cell",
                    );
                    let _ = stdin.send(bridge_reply(id, Err(err))).await;
                } else {
                    tracing::info!(kernel = self.slot.id, cell, tool, "bridge call from a cell");
                    let fut = self.bridge.call(tool, args);
                    bridges.spawn(async move { (id, fut.await) });
                }
            }
            Event::Frame(FromKernel::Done { cell: c, status }) if c == cell => {
                self.done = Some((status, Instant::now()));
            }
            Event::Sync(c) if c == cell => self.synced = true,
            Event::Broken(why) => {
                self.inc
                    .set_verdict(format!("broke the kernel pipe ({why}) and was ended"));
                return Err(Stop::Died);
            }
            other => tracing::debug!(
                kernel = self.slot.id,
                cell,
                ?other,
                "ignoring a frame of another cell"
            ),
        }
        Ok(())
    }

    /// Hands a finished bridge call's answer to the cell.
    async fn on_bridge_done(
        &mut self,
        joined: std::result::Result<BridgeDone, tokio::task::JoinError>,
        stdin: &mpsc::Sender<Vec<u8>>,
    ) -> std::result::Result<(), Stop> {
        self.last_activity = Instant::now();
        let (id, result) = match joined {
            Ok(pair) => pair,
            Err(e) => {
                tracing::error!(kernel = self.slot.id, error = %e, "a bridge call task failed");
                return Ok(());
            }
        };
        if stdin.send(bridge_reply(id, result)).await.is_err() {
            return Err(Stop::Died);
        }
        Ok(())
    }

    /// Takes what the cell wrote just before its kernel died.
    async fn drain_after_death(
        &self,
        events: &mut mpsc::Receiver<Event>,
        collector: &mut Collector,
    ) {
        // What the cell wrote just before the death may still be in the pipes
        // (the exit can be seen first): take it, for a bounded time (a
        // grandchild may hold stderr open), so the answer shows it.
        let until = tokio::time::Instant::now() + DEATH_DRAIN;
        while let Ok(Some(event)) = tokio::time::timeout_at(until, events.recv()).await {
            if let Ok(Some((stream, text))) = fold_output(collector, self.cell, event) {
                self.forward(stream, text).await;
            }
        }
    }

    /// The deadline passed with nothing heard: interrupts the cell (again), or gives up on it
    /// once the interrupt's grace is over.
    fn on_deadline(
        &mut self,
        grace: Duration,
        inactivity: Duration,
    ) -> std::result::Result<(), Stop> {
        if self.done.is_some() {
            return Ok(()); // the sync marker never came: finish with what arrived
        }
        match self.interrupted_at {
            None => {
                tracing::info!(
                    kernel = self.slot.id,
                    cell = self.cell,
                    budget_s = inactivity.as_secs(),
                    "cell silent past its budget; interrupting"
                );
                self.interrupted_at = Some(Instant::now());
                self.last_interrupt = Instant::now();
                let _ = self.inc.actor.cast(KernelMsg::Interrupt);
            }
            Some(at) if at.elapsed() < grace => {
                self.last_interrupt = Instant::now();
                let _ = self.inc.actor.cast(KernelMsg::Interrupt);
            }
            Some(_) => return Err(Stop::Stuck),
        }
        Ok(())
    }
}

/// Removes every slot nothing else uses any more: no cell, start or stop holds it (the map's
/// is the only reference, and references are only taken under the map's lock), its kernel
/// is not alive, and the supervisor has collected its ended record (it dropped its share of
/// the slot's status) or never had one. What such a slot still held — why its last kernel
/// ended, for a caller not told yet — is forgotten with the record.
fn prune_slots(slots: &mut HashMap<(String, Language), Arc<Slot>>) {
    slots.retain(|_, slot| {
        let unused = Arc::strong_count(slot) == 1;
        let record_collected = Arc::strong_count(&slot.status) == 1;
        let ended = slot.current().is_none_or(|inc| !inc.alive());
        !(unused && record_collected && ended)
    });
}

impl Kernels {
    pub fn new(
        supervisor: ActorRef<SupervisorMsg>,
        launcher: Launcher,
        limits: KernelLimits,
        notifier: TreeNotifier,
    ) -> Self {
        Kernels {
            supervisor,
            launcher,
            limits,
            notifier,
            slots: Mutex::new(HashMap::new()),
            probes: Probes::default(),
            next_incarnation: AtomicU64::new(1),
        }
    }

    pub fn limits(&self) -> &KernelLimits {
        &self.limits
    }

    /// Drops the slots whose kernel ended and whose record the supervisor collected; returns
    /// how many slots remain. (Also done whenever a new slot is made.)
    pub fn prune(&self) -> usize {
        let mut slots = lock(&self.slots);
        prune_slots(&mut slots);
        slots.len()
    }

    fn slot(&self, conversation: &str, language: Language) -> Arc<Slot> {
        let mut slots = lock(&self.slots);
        if !slots.contains_key(&(conversation.to_string(), language)) {
            prune_slots(&mut slots);
        }
        slots
            .entry((conversation.to_string(), language))
            .or_insert_with(|| {
                let id = format!("{conversation}/{language}");
                let status = NodeStatus::owned(
                    "kernel",
                    &id,
                    conversation,
                    format!("{conversation}: {language}"),
                    self.notifier.clone(),
                );
                Arc::new(Slot::new(
                    conversation,
                    language,
                    status,
                    self.limits.idle_ttl,
                ))
            })
            .clone()
    }

    async fn plan(&self, language: Language, workdir: &std::path::Path) -> Result<LaunchPlan> {
        match language {
            Language::Python => {
                interpreter::python(
                    self.limits.python.as_deref(),
                    workdir,
                    &self.launcher,
                    &self.probes,
                )
                .await
            }
            Language::Javascript => interpreter::node(
                self.limits.node.as_deref(),
                self.limits.typescript.as_deref(),
                workdir,
                &self.launcher,
                self.limits.memory_bytes.map(|b| (b >> 20).max(64)),
            ),
        }
    }

    /// Run one cell; the value is the tool's result.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future mid-cell interrupts the kernel (SIGINT) and aborts the cell's
    /// bridge calls; the kernel and its state stay.
    pub async fn run(
        &self,
        req: CellRequest,
        bridge: Arc<dyn Bridge>,
        output: Option<mpsc::Sender<(Stream, String)>>,
    ) -> Result<EvalResult> {
        let started = Instant::now();
        let code = match req.language {
            Language::Python => magic::rewrite_python(&req.code)?,
            Language::Javascript => req.code.clone(),
        };
        let slot = self.slot(&req.conversation, req.language);
        let mut notes = Vec::new();
        if req.reset {
            self.stop(&slot, "was discarded by `reset: true`").await?;
            notes.push("reset: this kernel starts clean".to_string());
        }
        let (inc, loss) = self.ensure(&slot, &req.workdir).await?;
        let fresh = loss.is_some() || req.reset;
        if let Some(Some(why)) = loss.filter(|_| !req.reset) {
            notes.push(format!(
                "a fresh kernel was started: the previous one {why}; its state was lost"
            ));
        }
        let busy = Busy::new(&slot);
        // The cell counts on the kernel's node while it runs (the tree's CALLS column).
        let call = slot.status.enqueue();
        let outcome = self.drive(&slot, &inc, &code, &req, bridge, output).await;
        drop(call);
        drop(busy);
        let (cell, status, collector) = match outcome {
            Ok(done) => done,
            Err((Stop::Died, collector)) => {
                inc.reported.store(true, Ordering::SeqCst);
                let cause = inc.cause().await;
                return Err(KernelError::Died {
                    language: req.language,
                    cause,
                    output: collector.text_tail(1500),
                });
            }
            Err((Stop::Interrupted, collector)) => {
                return Err(KernelError::Timeout {
                    language: req.language,
                    budget: req.inactivity,
                    recovered: true,
                    output: collector.text_tail(1500),
                });
            }
            Err((Stop::Stuck, collector)) => {
                tracing::warn!(
                    kernel = slot.id,
                    "the cell ignored the interrupt; killing the kernel"
                );
                let _ = self
                    .stop(&slot, "was killed because a cell ignored an interrupt")
                    .await;
                // Start the fresh kernel now, so the next call finds it ready.
                if let Err(e) = self.ensure(&slot, &req.workdir).await {
                    tracing::warn!(kernel = slot.id, error = %e, "could not start a fresh kernel after a kill");
                }
                return Err(KernelError::Timeout {
                    language: req.language,
                    budget: req.inactivity,
                    recovered: false,
                    output: collector.text_tail(1500),
                });
            }
        };
        let cells = inc.cells.fetch_add(1, Ordering::Relaxed) + 1;
        slot.show(&inc);
        let status = if status == "ok" {
            EvalStatus::Ok
        } else {
            EvalStatus::Error
        };
        let language = match req.language {
            Language::Python => EvalKernelLanguage::Python,
            Language::Javascript => EvalKernelLanguage::Javascript,
        };
        let kernel = EvalKernel {
            pid: inc.pid,
            version: inc.version.clone(),
            executable: inc.executable.clone(),
            cells,
            fresh,
        };
        let wall_ms = started.elapsed().as_millis() as u64;
        Ok(collector.finish(notes, status, language, cell, wall_ms, kernel))
    }

    /// Send the cell and follow it to its end.
    async fn drive(
        &self,
        slot: &Slot,
        inc: &Arc<Incarnation>,
        code: &str,
        req: &CellRequest,
        bridge: Arc<dyn Bridge>,
        output: Option<mpsc::Sender<(Stream, String)>>,
    ) -> Result<(u64, String, Collector), (Stop, Collector)> {
        let mut collector = Collector::new(self.limits.output);
        let mut port = inc.port.lock().await;
        let Some(cell) = self.send_cell(slot, inc, &mut port, code, req).await else {
            return Err((Stop::Died, collector));
        };
        let mut interrupt_on_drop = InterruptOnDrop {
            actor: inc.actor.clone(),
            stdin: port.stdin.clone(),
            cell,
            armed: true,
        };
        let mut bridges: JoinSet<BridgeDone> = JoinSet::new();
        let mut exit = inc.exit.clone();
        let mut run = CellRun::new(slot, inc, cell, &bridge, &output);
        loop {
            if run.settled() {
                break;
            }
            let deadline = run.deadline(
                self.limits.interrupt_grace,
                req.inactivity,
                bridges.is_empty(),
            );
            tokio::select! {
                event = port.events.recv() => {
                    let Some(event) = event else {
                        return Err((Stop::Died, collector));
                    };
                    if let Err(stop) = run.on_event(event, &mut collector, &port.stdin, &mut bridges).await {
                        return Err((stop, collector));
                    }
                }
                Some(joined) = bridges.join_next(), if !bridges.is_empty() => {
                    if let Err(stop) = run.on_bridge_done(joined, &port.stdin).await {
                        return Err((stop, collector));
                    }
                }
                _ = async { let _ = exit.wait_for(Option::is_some).await; } => {
                    run.drain_after_death(&mut port.events, &mut collector).await;
                    return Err((Stop::Died, collector));
                }
                _ = tokio::time::sleep_until(deadline.into()) => {
                    if let Err(stop) = run.on_deadline(self.limits.interrupt_grace, req.inactivity) {
                        interrupt_on_drop.armed = false;
                        return Err((stop, collector));
                    }
                }
            }
        }
        interrupt_on_drop.armed = false;
        drop(port);
        self.outcome(inc, run, collector).await
    }

    /// Drops output that came between cells and sends this cell to the kernel: its number, or
    /// `None` when the kernel is gone.
    async fn send_cell(
        &self,
        slot: &Slot,
        inc: &Incarnation,
        port: &mut Port,
        code: &str,
        req: &CellRequest,
    ) -> Option<u64> {
        while let Ok(stale) = port.events.try_recv() {
            tracing::debug!(
                kernel = slot.id,
                ?stale,
                "discarding output that came between cells"
            );
        }
        port.next_cell += 1;
        let cell = port.next_cell;
        let exec = encode(&ToKernel::Exec {
            cell,
            code,
            rows: self.limits.table_rows,
            typescript: req.typescript,
        });
        if !inc.alive() || port.stdin.send(exec).await.is_err() {
            return None;
        }
        Some(cell)
    }

    /// The end of a cell that stopped on its own or after an interrupt: a kernel over its
    /// memory cap is ended, an interrupted cell reported as such, else the cell's status.
    async fn outcome(
        &self,
        inc: &Incarnation,
        run: CellRun<'_>,
        collector: Collector,
    ) -> Result<(u64, String, Collector), (Stop, Collector)> {
        // The cap holds at every cell's end, not only at the next tick.
        if let Some(cap) = self.limits.memory_bytes
            && process::rss_bytes(inc.pid).is_some_and(|rss| rss > cap)
        {
            let _ = inc.actor.cast(KernelMsg::Tick);
            let mut exit = inc.exit.clone();
            let _ =
                tokio::time::timeout(Duration::from_secs(5), exit.wait_for(Option::is_some)).await;
            return Err((Stop::Died, collector));
        }
        if run.interrupted_at.is_some() {
            return Err((Stop::Interrupted, collector));
        }
        let (status, _) = run.done.unwrap_or_else(|| ("error".into(), Instant::now()));
        Ok((run.cell, status, collector))
    }

    /// The live incarnation of `slot`, starting one if there is none. The second value is
    /// `None` for a kernel that was already running, else `Some(why the previous one ended,
    /// if nobody was told yet)`.
    async fn ensure(
        &self,
        slot: &Arc<Slot>,
        workdir: &std::path::Path,
    ) -> Result<(Arc<Incarnation>, Option<Option<String>>)> {
        let _lifecycle = slot.lifecycle.lock().await;
        let previous = slot.current();
        if let Some(inc) = &previous
            && inc.alive()
        {
            return Ok((inc.clone(), None));
        }
        if previous.is_some() {
            self.await_ended(slot).await;
        }
        let loss = previous
            .filter(|p| !p.reported.swap(true, Ordering::SeqCst))
            .map(|p| p.cause_now());
        let plan = self.plan(slot.language, workdir).await?;
        let number = self.next_incarnation.fetch_add(1, Ordering::Relaxed);
        let args = Arc::new(Mutex::new(Some(KernelArgs {
            slot: slot.clone(),
            plan,
            launcher: self.launcher.clone(),
            workdir: workdir.to_path_buf(),
            number,
            memory_cap: self.limits.memory_bytes,
            start_timeout: self.limits.start_timeout,
            supervisor: self.supervisor.clone(),
        })));
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = lock(&args).take();
            Box::pin(async move {
                let args =
                    args.ok_or_else(|| "a kernel incarnation is started once".to_string())?;
                let name = format!("kernel/{}#{}", args.slot.id, args.number);
                Actor::spawn_linked(Some(name), KernelActor, args, ctx.supervisor)
                    .await
                    .map(|(actor, _)| actor.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        let spec = ChildSpec {
            id: slot.id.clone(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status: slot.status.clone(),
        };
        let wait = self.limits.start_timeout + Duration::from_secs(10);
        match supervise::start(&self.supervisor, spec, wait).await {
            Ok(()) => match slot.current() {
                Some(inc) if inc.number == number => Ok((inc, Some(loss))),
                _ => Err(KernelError::Supervisor(
                    "a kernel started but did not register".into(),
                )),
            },
            Err(StartFailed::Child(message)) => Err(KernelError::Start {
                language: slot.language,
                message,
            }),
            Err(StartFailed::NoAnswer(_)) => Err(KernelError::Supervisor(
                "the kernels supervisor did not answer a start request in time".into(),
            )),
        }
    }

    /// Wait (bounded) until the supervisor has recorded the end of the slot's last kernel,
    /// so its id can start again; a kernel still alive by then is stopped.
    async fn await_ended(&self, slot: &Slot) {
        let ended = |s: NodeState| matches!(s, NodeState::Exited | NodeState::Failed);
        let mut tree = self.notifier.subscribe();
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while !ended(slot.status.state()) {
                if tree.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        if waited.is_err() {
            let _ = self
                .supervisor
                .call(
                    |reply| SupervisorMsg::Stop {
                        id: slot.id.clone(),
                        reason: "its kernel died".into(),
                        reply,
                    },
                    Some(Duration::from_secs(5)),
                )
                .await;
            let _ = tokio::time::timeout(Duration::from_secs(5), async {
                while !ended(slot.status.state()) {
                    if tree.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
    }

    /// Stop every kernel of `conversation` (its session ended), saying `why` in their
    /// records; returns how many were running. Their slots go with the next prune.
    pub async fn end(&self, conversation: &str, why: &str) -> usize {
        let slots: Vec<Arc<Slot>> = lock(&self.slots)
            .iter()
            .filter(|((c, _), _)| c == conversation)
            .map(|(_, slot)| slot.clone())
            .collect();
        let mut stopped = 0;
        for slot in slots {
            if slot.current().is_some_and(|inc| inc.alive()) {
                if let Err(e) = self.stop(&slot, why).await {
                    tracing::warn!(kernel = %slot.id, error = %e, "could not stop a kernel of an ended conversation");
                }
                stopped += 1;
            }
        }
        stopped
    }

    /// Stop the slot's kernel for good (reset, or a kill after an ignored interrupt).
    async fn stop(&self, slot: &Arc<Slot>, why: &str) -> Result<()> {
        let _lifecycle = slot.lifecycle.lock().await;
        let Some(inc) = slot.current() else {
            return Ok(());
        };
        inc.set_verdict(why.to_string());
        inc.reported.store(true, Ordering::SeqCst);
        let stopped = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id: slot.id.clone(),
                    reason: why.to_string(),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await;
        if !matches!(stopped, Ok(CallResult::Success(_))) {
            return Err(KernelError::Supervisor(
                "the kernels supervisor did not answer a stop request in time".into(),
            ));
        }
        let mut exit = inc.exit.clone();
        let _ = tokio::time::timeout(Duration::from_secs(5), exit.wait_for(Option::is_some)).await;
        self.await_ended(slot).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(conversation: &str) -> Arc<Slot> {
        let status = NodeStatus::owned(
            "kernel",
            &format!("{conversation}/python"),
            conversation,
            String::new(),
            TreeNotifier::default(),
        );
        Arc::new(Slot::new(conversation, Language::Python, status, None))
    }

    #[test]
    fn slots_of_conversations_that_are_gone_are_pruned_and_no_live_one_is() {
        let mut slots = HashMap::new();
        for i in 0..2000 {
            let s = slot(&format!("c{i}"));
            slots.insert((format!("c{i}"), Language::Python), s);
        }
        // One still in use by a cell, one whose ended record the supervisor still shows.
        let in_use = slots[&("c1".to_string(), Language::Python)].clone();
        let record = slots[&("c2".to_string(), Language::Python)].status.clone();
        prune_slots(&mut slots);
        let mut left: Vec<_> = slots.keys().map(|(c, _)| c.clone()).collect();
        left.sort();
        assert_eq!(left, ["c1", "c2"]);
        drop(in_use);
        drop(record);
        prune_slots(&mut slots);
        assert!(slots.is_empty(), "{} slots left", slots.len());
    }
}
