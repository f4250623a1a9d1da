//! One client connection: the handshake, a reader loop that dispatches frames in arrival
//! order and runs each call until it first waits (a call that waits goes on in a task of its
//! own), and a writer task for the frames the socket did not take at once. This is
//! the one place where wire frames become calls into the daemon and back. The gates a call
//! passes before its tool runs are in `session/gates.rs`; what a running handler sees of its
//! session (events, eval's `tool()` bridge) is in `session/bridge.rs`.
//!
//! A session is two tasks and a reader loop, not an actor: it owns no child process and no state
//! that outlives the connection (state is keyed by conversation). A call that does not end in its
//! first poll on the reader runs on as a task in a per-connection `JoinSet`, reaped as they finish;
//! a handler that panics fails its call `internal` (`caught`), never the connection. `Cancel {id}`
//! resolves the call's cancel channel: the call's future is dropped (and any guard it holds with
//! it, killing what it started) and the caller gets `cancelled`. When the client closes its sending
//! side, the calls in flight still finish and their results are written (half-close); if a write
//! fails, the remaining calls are cancelled. Approval requests wait for the client's answer up to
//! `approval_timeout_s`; a client without an approval handler is denied at once. Once the daemon
//! drains, a new call is answered `shutting_down` (`start_call`).
//!
//! What a client can make a session hold is bounded (`[limits]`), and every limit answers `busy` or
//! `timeout` naming its key: the Hello within `hello_timeout_s`, a started frame finished within
//! `frame_deadline_s`, at most `max_calls_in_flight` calls (past it `busy`, never queued: a queued
//! call would wait on results the client may not be reading), and the outbox's budget of queued
//! bytes. A declared frame length is never allocated up front: the read buffer (`FrameReader`)
//! grows as bytes arrive, and an idle connection holds none; what every connection's buffer
//! holds is charged to one daemon-wide budget (`max_partial_frame_bytes`, `FrameBudget`), and
//! the connection that would pass it gets an `error` frame (`busy`, naming the key), its bytes
//! given back in the same atomic step as the refusal (so of connections refused at once the last
//! one always goes on), and is closed. A malformed frame is answered with an
//! `error` frame (or as its call's result, when the id can be read) and the connection stays open;
//! an oversized length closes only that connection.
//!
//! A Hello carrying a vibe worker's credential (`run_token`, the worker's `TOOLVISOR_RUN_TOKEN`) is
//! pinned by `pin_by_token`: its surface and approvals are at most its tier's
//! (`[vibe.tiers.<tier>]`; a claim can only lower them), it is no question port, and its run is
//! `vibe:<id>`, so a worker calling the daemon passes the same gates as the model and inherits no
//! trust granted to another run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::Instrument;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;
use toolvisor_protocol::codec::{self, Codec, CodecError};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{
    ApprovalAnswer, ApprovalRequest, Call, ClientFrame, ClientKind, DaemonFrame, Event, Hello,
    Outcome, Tier, Topic, Welcome,
};
use toolvisor_protocol::{PROTOCOL_VERSION, Value};

use crate::admission::Admitted;
use crate::daemon::{Daemon, SessionInfo, TreeViewer};
use crate::logtext;
use crate::outbox::{Outbox, encode_into};
use crate::registry::validate;

mod bridge;
mod gates;
mod serve;
use bridge::SessionCaller;
pub(crate) use gates::execute;
pub use serve::run;

/// How much one read asks the kernel for at most (the read buffer grows by this much as a
/// large frame's bytes arrive, never to the declared length up front).
const READ_CHUNK: usize = 64 * 1024;

/// A connected, handshaken client.
pub struct Session {
    pub id: u64,
    pub hello: Hello,
    /// Frames for the client, bounded by `limits.max_queued_output_bytes`.
    pub out: Outbox,
    approvals: Mutex<HashMap<u64, oneshot::Sender<ApprovalAnswer>>>,
    /// `tool()` calls of eval cells forwarded to this client (its `bridge_tools`), by
    /// bridge id, waiting for their `bridge_result`.
    bridges: Mutex<HashMap<u64, oneshot::Sender<Outcome>>>,
    /// Calls in flight by id. The cancel sender is taken by `Cancel`, but the id stays
    /// reserved until the call's result has been queued.
    calls: Mutex<HashMap<u64, Option<oneshot::Sender<()>>>>,
    /// Set once the client closed its sending side: no approval answer can arrive any more.
    reader_closed: std::sync::atomic::AtomicBool,
    in_flight: Arc<AtomicU64>,
    /// What this client may see of the tree: its own conversations' resources, or all of
    /// them for an ops client.
    viewer: TreeViewer,
    /// A vibe worker's session: every call runs in this conversation, whatever it names.
    conversation_pin: Option<String>,
}

/// `tree` and `status` frames answered at once per connection.
const SNAPSHOTS_IN_FLIGHT: usize = 4;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why no frame could be read.
enum ReadError {
    Codec(CodecError),
    /// A frame was started and not finished within the deadline.
    Stalled {
        got: usize,
        want: Option<usize>,
    },
    /// Growing the buffer for this frame would take the bytes held by unfinished frames over
    /// every connection past `limits.max_partial_frame_bytes`. The buffer is given back.
    OverBudget {
        got: usize,
        want: Option<usize>,
        budget: usize,
    },
}

impl From<CodecError> for ReadError {
    fn from(e: CodecError) -> Self {
        ReadError::Codec(e)
    }
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Codec(e.into())
    }
}

impl ReadError {
    /// The `error` frame for a connection refused more bytes by the daemon-wide budget.
    fn over_budget(got: usize, want: Option<usize>, budget: usize) -> ToolError {
        let want = want.map(|w| format!(" of {w}")).unwrap_or_default();
        ToolError::new(
            ErrorKind::Busy,
            format!(
                "unfinished frames over all connections already hold the daemon's budget of {budget} bytes (limits.max_partial_frame_bytes); this connection's frame ({got}{want} bytes arrived) was dropped and the connection is closed"
            ),
            "send smaller frames and send each one whole, retry when other clients' large frames are done, or raise `max_partial_frame_bytes` under `[limits]` in the daemon's config",
        )
    }
}

/// What the read buffers of every connection may hold at once, and what they hold.
#[derive(Clone)]
pub(crate) struct FrameBudget {
    held: Arc<AtomicUsize>,
    cap: usize,
}

impl FrameBudget {
    pub(crate) fn new(held: Arc<AtomicUsize>, cap: usize) -> FrameBudget {
        FrameBudget { held, cap }
    }

    /// Take `more` bytes of the budget for a reader already holding `holds`; when that would
    /// pass the cap, give its `holds` back instead, in the same atomic step, and answer false.
    /// Refusal and give-back being one step is what lets some connection finish: of several
    /// readers refused at once, the last one sees every other refused reader's bytes already
    /// back, so a frame that fits the budget on its own is never refused for bytes that are
    /// on their way out.
    fn take_or_give_back(&self, more: usize, holds: usize) -> bool {
        let fits = |held: usize| held.checked_add(more).filter(|&total| total <= self.cap);
        // The closure always answers, so the update always happens; the held bytes it
        // happened on say which way it went.
        let before = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                Some(fits(held).unwrap_or(held.saturating_sub(holds)))
            })
            .unwrap_or_else(|held| held);
        fits(before).is_some()
    }

    /// Take `more` bytes whatever the cap (the allocator rounded a capacity up).
    fn force(&self, more: usize) {
        self.held.fetch_add(more, Ordering::AcqRel);
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The read side of a connection. Bytes read but not yet consumed wait in `buf`, which holds
/// no allocation while the connection is idle and grows only as a frame's bytes actually
/// arrive, so a declared length costs nothing until it is sent. Its capacity is charged to
/// the daemon-wide [`FrameBudget`] (`charged`), and given back as it shrinks or when the
/// reader is dropped.
struct FrameReader {
    half: OwnedReadHalf,
    buf: Vec<u8>,
    budget: FrameBudget,
    charged: usize,
}

impl Drop for FrameReader {
    fn drop(&mut self) {
        self.budget.give_back(self.charged);
    }
}

impl FrameReader {
    fn new(half: OwnedReadHalf, budget: FrameBudget) -> FrameReader {
        FrameReader {
            half,
            buf: Vec::new(),
            budget,
            charged: 0,
        }
    }

    /// Charge the budget for the buffer's capacity as it is now.
    fn settle(&mut self) {
        let capacity = self.buf.capacity();
        if capacity > self.charged {
            self.budget.force(capacity - self.charged);
        } else {
            self.budget.give_back(self.charged - capacity);
        }
        self.charged = capacity;
    }

    /// Drop what the buffer holds and give its bytes back.
    fn release(&mut self) {
        self.buf = Vec::new();
        self.settle();
    }

    /// Read more bytes (at most [`READ_CHUNK`], at least one) into `buf`; 0 at end of stream.
    /// The buffer grows only once bytes are ready to read (an idle connection holds nothing),
    /// and only within the daemon-wide budget: past it `Ok(None)`, and nothing is read.
    async fn fill(&mut self, want: usize) -> std::io::Result<Option<usize>> {
        let room = want.saturating_sub(self.buf.len()).clamp(512, READ_CHUNK);
        loop {
            self.half.readable().await?;
            let need = self.buf.len() + room;
            if need > self.buf.capacity() {
                if need > self.charged
                    && !self
                        .budget
                        .take_or_give_back(need - self.charged, self.charged)
                {
                    // Its bytes are back in the budget already; the buffer follows.
                    self.charged = 0;
                    return Ok(None);
                }
                self.charged = self.charged.max(need);
                self.buf.reserve_exact(need - self.buf.len());
                self.settle();
            }
            match self.half.try_read_buf(&mut self.buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next frame's payload. Once its first byte is here, the rest must arrive within
    /// `deadline`.
    async fn frame(&mut self, max: u32, deadline: Duration) -> Result<Vec<u8>, ReadError> {
        let mut started = (!self.buf.is_empty()).then(Instant::now);
        loop {
            let mut want = 4;
            let mut len = None;
            if self.buf.len() >= 4 {
                let header = [self.buf[0], self.buf[1], self.buf[2], self.buf[3]];
                let n = codec::frame_len(header, max)?;
                want = 4 + n;
                len = Some(n);
                if self.buf.len() >= want {
                    return Ok(self.take(want));
                }
            }
            let read = match started {
                None => self.fill(want).await?,
                Some(at) => {
                    match tokio::time::timeout_at((at + deadline).into(), self.fill(want)).await {
                        Ok(read) => read?,
                        Err(_) => {
                            return Err(ReadError::Stalled {
                                got: self.buf.len(),
                                want: len.map(|n| n + 4),
                            });
                        }
                    }
                }
            };
            let Some(read) = read else {
                let got = self.buf.len();
                self.release();
                return Err(ReadError::OverBudget {
                    got,
                    want: len.map(|n| n + 4),
                    budget: self.budget.cap,
                });
            };
            if read == 0 {
                return Err(if self.buf.is_empty() {
                    CodecError::Closed
                } else {
                    CodecError::Truncated {
                        got: self.buf.len().saturating_sub(4),
                        want: len.unwrap_or(0),
                    }
                }
                .into());
            }
            started.get_or_insert_with(Instant::now);
        }
    }

    /// Split the first `total` bytes (header and payload) off `buf` and return the payload.
    fn take(&mut self, total: usize) -> Vec<u8> {
        if self.buf.len() == total {
            // The common case: the buffer is exactly this frame. Hand it over; an idle
            // connection then holds no buffer at all.
            let mut payload = std::mem::take(&mut self.buf);
            self.settle();
            payload.drain(..4);
            return payload;
        }
        let payload = self.buf[4..total].to_vec();
        self.buf.drain(..total);
        if self.buf.capacity() > 2 * READ_CHUNK {
            self.buf.shrink_to(READ_CHUNK.max(self.buf.len()));
        }
        self.settle();
        payload
    }
}

async fn write_one(
    writer: &mut OwnedWriteHalf,
    codec: Codec,
    frame: &DaemonFrame,
    max: u32,
) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    encode_into(&mut bytes, codec, frame, max);
    writer.write_all(&bytes).await
}

/// Answer a peer of another uid with a refusal and close.
pub async fn refuse_peer(mut stream: UnixStream, who: String, uid: u32) {
    let err = ToolError::new(
        ErrorKind::Refused,
        format!("connection refused: peer is {who}, the daemon serves uid {uid} only"),
        "connect as the user that runs the daemon",
    );
    if let Ok(bytes) = codec::encode_frame(Codec::Json, &DaemonFrame::Refused(err), 1 << 20) {
        let _ = stream.write_all(&bytes).await;
    }
    let _ = stream.shutdown().await;
    // Keep reading (and discarding) for a moment: a client that sends its Hello right after
    // connecting must not get EPIPE before it can read why it was refused.
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// A Hello with a run token: the token must belong to a running vibe worker, and the
/// session's surface, approvals and run come from that worker's tier config, whatever the
/// Hello claims (a claim can only lower the tier). Its run is the worker's own
/// (`vibe:<id>`), so trust an approval granted to the parent run does not carry over. Its
/// workdir is the worker's (or a directory inside it: a claim outside is refused), and
/// every call it makes runs in the conversation `vibe:<id>` whatever the call names (the
/// returned pin), so it reaches neither another conversation's resources nor its stored
/// results. Without a token a client is taken at its word (the daemon cannot tell a worker
/// that drops its token from any other client of the same user).
fn pin_by_token(daemon: &Daemon, mut hello: Hello) -> Result<(Hello, Option<String>), ToolError> {
    let Some(token) = hello.run_token.take() else {
        return Ok((hello, None));
    };
    let Some(cred) = daemon.services().vibes.credential(&token) else {
        return Err(ToolError::new(
            ErrorKind::PolicyDenied,
            "the run token is unknown or its worker no longer runs",
            "connect without run_token, or from the worker while it runs (the daemon sets TOOLVISOR_RUN_TOKEN for it)",
        ));
    };
    let tiers = &daemon.config().vibe.tiers;
    let config = match cred.tier {
        toolvisor_protocol::tools::VibeTier::Fast => tiers.fast.as_ref(),
        toolvisor_protocol::tools::VibeTier::Good => tiers.good.as_ref(),
    };
    let (tier, approvals) = config.map_or((Tier::Read, false), |c| (c.surface, c.approvals));
    tracing::info!(
        worker = cred.id,
        vibe_tier = %cred.tier,
        claimed = %hello.surface.max_tier,
        pinned = %tier,
        "vibe worker connected with its credential"
    );
    let own = std::fs::canonicalize(&cred.workdir).unwrap_or_else(|_| cred.workdir.clone());
    if hello.workdir.is_empty() {
        hello.workdir = own.display().to_string();
    } else {
        let claimed = std::fs::canonicalize(&hello.workdir)
            .unwrap_or_else(|_| std::path::PathBuf::from(&hello.workdir));
        if !claimed.starts_with(&own) {
            return Err(ToolError::new(
                ErrorKind::PolicyDenied,
                format!(
                    "the run token's worker {} runs in {}; workdir {:?} is outside it",
                    cred.id,
                    own.display(),
                    hello.workdir
                ),
                "a vibe worker's sessions work in its own directory: send that directory (or one inside it) as workdir, or leave workdir empty",
            ));
        }
        hello.workdir = claimed.display().to_string();
    }
    hello.surface.max_tier = hello.surface.max_tier.min(tier);
    hello.surface.approvals &= approvals;
    hello.surface.questions = false;
    hello.run_id = format!("vibe:{}", cred.id);
    hello.client_kind = ClientKind::Harness;
    Ok((hello, Some(format!("vibe:{}", cred.id))))
}

/// The id of a JSON `call` frame that failed to decode, when one can be read.
fn malformed_call_id(codec: Codec, payload: &[u8]) -> Option<u64> {
    if codec != Codec::Json {
        return None;
    }
    let value: serde_json::Value = serde_json::from_slice(payload).ok()?;
    value.get("call")?.get("id")?.as_u64()
}

fn frame_name(frame: &ClientFrame) -> &'static str {
    match frame {
        ClientFrame::Hello(_) => "Hello",
        ClientFrame::Call(_) => "Call",
        ClientFrame::Cancel { .. } => "Cancel",
        ClientFrame::ApprovalAnswer(_) => "ApprovalAnswer",
        ClientFrame::QuestionAnswer(_) => "QuestionAnswer",
        ClientFrame::BridgeResult { .. } => "BridgeResult",
        ClientFrame::ListTools { .. } => "ListTools",
        ClientFrame::Tree => "Tree",
        ClientFrame::Subscribe { .. } => "Subscribe",
        ClientFrame::Unsubscribe { .. } => "Unsubscribe",
        ClientFrame::Status => "Status",
        ClientFrame::Ping { .. } => "Ping",
        ClientFrame::EndConversation { .. } => "EndConversation",
    }
}

async fn watch_tree(daemon: Arc<Daemon>, viewer: TreeViewer, out: Outbox) {
    let mut rx = daemon.tree_changes();
    if out
        .send(DaemonFrame::TreeUpdate(daemon.tree_for(&viewer).await))
        .await
        .is_err()
    {
        return;
    }
    // Also tick once a second so uptimes and TTLs move on screen.
    loop {
        let _ = tokio::time::timeout(Duration::from_secs(1), rx.changed()).await;
        // Coalesce bursts of changes into one redraw.
        tokio::time::sleep(Duration::from_millis(30)).await;
        rx.borrow_and_update();
        if out
            .send(DaemonFrame::TreeUpdate(daemon.tree_for(&viewer).await))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// A call's whole run, boxed where it is made: the reader polls it and a task may take it
/// over, and moving the pointer costs nothing where moving the future copied kilobytes.
type CallFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>>;

/// Register a call and return the task that runs it (or answer at once and return None).
async fn start_call(
    daemon: &Arc<Daemon>,
    session: &Arc<Session>,
    call: Call,
) -> Option<CallFuture> {
    let id = call.id;
    let (call, cancel_rx) = admit(daemon, session, call).await?;
    daemon.touch_conversation(&call.conversation);
    session.viewer.saw(&call.conversation);
    daemon.count_call();
    daemon.call_began();
    let began = std::time::Instant::now();
    // No tree notification per call: a session's busy/ready flips with every call, and
    // watchers pick it up on their once-a-second tick instead of redrawing per call.
    session.in_flight.fetch_add(1, Ordering::Relaxed);

    // The call's one registry lookup: the gates take its answer. Non-parallel-safe tools
    // take their turn in the conversation's lane, in arrival order. (A tool this session may
    // not call takes none: the gates refuse it, naming why.)
    let checked = daemon.registry().check(&call.tool, &session.hello.surface);
    let serial = checked.as_ref().is_ok_and(|t| !t.parallel_safe);
    let resource = checked.as_ref().map_or("", |t| t.resource);
    let turn = serial.then(|| lane_turn(daemon, &call.conversation));

    // Every log line of the call carries its id, conversation, tool and the resource kind
    // behind it, so logs join with the audit log (`--log-format json` prints the span). The
    // plain-text log takes them from a label, which costs nothing until a line is logged
    // (`logtext`); the others from the call's span.
    let call_label = (logtext::labels() && tracing::enabled!(tracing::Level::INFO)).then(|| {
        logtext::CallLabel {
            call: id,
            session: session.id,
            conversation: call.conversation.clone(),
            tool: call.tool.clone(),
            resource,
            run: session.hello.run_id.clone(),
        }
    });
    let span = match call_label {
        Some(_) => tracing::Span::none(),
        None => tracing::info_span!(
            "call",
            call = id,
            session = session.id,
            conversation = %call.conversation,
            tool = %call.tool,
            resource,
            run = %session.hello.run_id,
        ),
    };
    let task = run_call(
        daemon.clone(),
        session.clone(),
        call,
        checked,
        turn,
        cancel_rx,
        began,
    );
    Some(match call_label {
        Some(label) => Box::pin(logtext::in_call(label, task)),
        None => Box::pin(task.instrument(span)),
    })
}

/// The call with its conversation (the session's pin, if any) and its cancel channel, once
/// registered in flight; `None` once refused (no conversation, draining, at the cap, or its
/// id in flight), the client told why.
async fn admit(
    daemon: &Daemon,
    session: &Session,
    call: Call,
) -> Option<(Call, oneshot::Receiver<()>)> {
    let id = call.id;
    let reject = |err: ToolError| DaemonFrame::Result {
        id,
        outcome: Outcome::Err(err),
    };
    let mut call = call;
    if let Some(pinned) = &session.conversation_pin {
        call.conversation.clone_from(pinned);
    }
    if call.conversation.is_empty() {
        let _ = session
            .out
            .send(reject(ToolError::new(
                ErrorKind::InvalidArgs,
                "the call names no conversation",
                "set `conversation` to the id of the agent conversation making the call",
            )))
            .await;
        return None;
    }
    if daemon.is_draining() {
        let _ = session
            .out
            .send(reject(ToolError::new(
                ErrorKind::ShuttingDown,
                format!("call {id} was not started: the daemon is shutting down (draining the calls in flight)"),
                "retry once the daemon is back (a service manager restarts it; `toolvisor status` tells when it answers)",
            )))
            .await;
        return None;
    }
    let (cancel_tx, cancel_rx) = oneshot::channel();
    let cap = daemon.config().limits.max_calls_in_flight;
    let (duplicate, full) = {
        let mut calls = lock(&session.calls);
        let duplicate = calls.contains_key(&id);
        // A call counts until its result is queued: results the client does not read keep
        // their calls counted, so they cannot pile up past the cap either.
        let full = !duplicate && calls.len() >= cap;
        if !duplicate && !full {
            calls.insert(id, Some(cancel_tx));
        }
        (duplicate, full)
    };
    if full {
        // Refused, not queued: a queued call would wait on the very results the client may
        // be waiting to read after sending it (and an approval answer must stay readable).
        let _ = session
            .out
            .send(reject(ToolError::new(
                ErrorKind::Busy,
                format!("call {id} was not started: {cap} calls are already in flight on this connection (limits.max_calls_in_flight)"),
                "wait for some results before sending more calls, or raise `max_calls_in_flight` under `[limits]` in the daemon's config",
            )))
            .await;
        return None;
    }
    if duplicate {
        // Not a `result`: that id belongs to the call still running.
        let _ = session
            .out
            .send(DaemonFrame::Error(ToolError::new(
                ErrorKind::InvalidArgs,
                format!("call id {id} is already in flight on this connection; this call was not started"),
                "use a fresh id for every call; ids may be reused once their result has arrived",
            )))
            .await;
        return None;
    }
    Some((call, cancel_rx))
}

/// A place in `conversation`'s lane: the receiver hears when it is the call's turn, and the
/// lane stays busy until the sender it receives is dropped.
fn lane_turn(daemon: &Daemon, conversation: &str) -> oneshot::Receiver<oneshot::Sender<()>> {
    let (turn_tx, turn_rx) = oneshot::channel::<oneshot::Sender<()>>();
    daemon.lanes().enqueue(
        conversation,
        Box::pin(async move {
            let (done_tx, done_rx) = oneshot::channel();
            if turn_tx.send(done_tx).is_ok() {
                let _ = done_rx.await;
            }
        }),
    );
    turn_rx
}

/// A registered call's run: its lane's turn, its tool through the gates (a panic or the
/// client's cancel fails it), then its result queued and its slot freed.
async fn run_call(
    daemon: Arc<Daemon>,
    session: Arc<Session>,
    call: Call,
    checked: Result<Arc<crate::tools::ToolSpec>, ToolError>,
    turn: Option<oneshot::Receiver<oneshot::Sender<()>>>,
    cancel_rx: oneshot::Receiver<()>,
    began: Instant,
) {
    let id = call.id;
    let ctx = SessionCaller::ctx(
        &daemon,
        &session,
        id,
        call.conversation.clone(),
        workdir_of(&session),
    );
    let run = async {
        // Holding `_done` keeps the lane busy until this call ends.
        let _done = match turn {
            Some(turn) => match turn.await {
                Ok(done) => Some(done),
                Err(_) => {
                    return Err(ToolError::new(
                        ErrorKind::Internal,
                        "the conversation's lane went away",
                        "retry the call",
                    ));
                }
            },
            None => None,
        };
        execute(&daemon, &session, &ctx, &call.tool, checked, call.args).await
    };
    // A handler that panics fails its call, not the connection, and its client hears so
    // (its id would otherwise stay taken and the client wait for ever).
    let tool = &call.tool;
    let run = caught(run, |why| {
        tracing::error!(panic = why, "a tool's handler panicked");
        ToolError::new(
            ErrorKind::Internal,
            format!(
                "`{tool}` failed inside the daemon (its handler panicked: {why}); nothing of this call is known to have happened"
            ),
            "report this as a bug with the daemon's log; other calls and resources are unaffected",
        )
    });
    let outcome = tokio::select! {
        result = run => result,
        _ = cancel_rx => Err(ToolError::new(ErrorKind::Cancelled, format!("call {id} was cancelled by the client"), "nothing more will come for this call")),
    };
    let (outcome, label) = match outcome {
        Ok(value) => (Outcome::Ok(Value(value)), "ok"),
        Err(err) => {
            daemon.count_failure();
            let label = err.kind.as_str();
            (Outcome::Err(err), label)
        }
    };
    tracing::debug!(
        outcome = label,
        ms = began.elapsed().as_millis() as u64,
        "call ended"
    );
    // The id (and its in-flight slot) is freed once the result has its room in the queue
    // and before the client can read it; again after, should the connection be closed.
    let _ = session
        .out
        .send_then(DaemonFrame::Result { id, outcome }, || {
            lock(&session.calls).remove(&id);
        })
        .await;
    lock(&session.calls).remove(&id);
    session.in_flight.fetch_sub(1, Ordering::Relaxed);
    daemon.call_finished(&call.tool, label, began.elapsed());
}

/// `fut`'s output, or `on_panic`'s answer if polling it panics (the future is not polled
/// again).
async fn caught<T>(
    fut: impl std::future::Future<Output = Result<T, ToolError>>,
    on_panic: impl Fn(&str) -> ToolError,
) -> Result<T, ToolError> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |cx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                let why = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a panic without a message");
                std::task::Poll::Ready(Err(on_panic(why)))
            }
        }
    })
    .await
}

fn workdir_of(session: &Session) -> std::path::PathBuf {
    if session.hello.workdir.is_empty() {
        std::env::current_dir().unwrap_or_else(|_| "/".into())
    } else {
        session.hello.workdir.clone().into()
    }
}

impl Session {
    /// Forward a `tool()` call of an eval cell to this client, which runs `tool` itself (one
    /// of its `bridge_tools`), and wait up to `timeout` for its `bridge_result`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future withdraws the bridge call: a late `bridge_result` gets `not_found`.
    pub(crate) async fn forward_bridge(
        &self,
        daemon: &Daemon,
        call_id: u64,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
        timeout: Duration,
    ) -> Result<serde_json::Value, ToolError> {
        if self.reader_closed.load(Ordering::Relaxed) {
            return Err(ToolError::new(
                ErrorKind::Cancelled,
                format!(
                    "`{tool}` is run by the client, which has closed its side of the connection"
                ),
                "keep the connection open while eval cells may call your bridge tools",
            ));
        }
        let bridge_id = daemon.next_request_id();
        let (tx, rx) = oneshot::channel();
        lock(&self.bridges).insert(bridge_id, tx);
        struct Withdraw<'a>(&'a Session, u64);
        impl Drop for Withdraw<'_> {
            fn drop(&mut self) {
                lock(&self.0.bridges).remove(&self.1);
            }
        }
        let _withdraw = Withdraw(self, bridge_id);
        let frame = DaemonFrame::BridgeCall(toolvisor_protocol::wire::BridgeCall {
            bridge_id,
            call_id,
            conversation: conversation.to_string(),
            tool: tool.to_string(),
            args: Value(args),
        });
        if self.out.send(frame).await.is_err() {
            return Err(ToolError::new(
                ErrorKind::Cancelled,
                "the client went away before the bridge call could be sent",
                "reconnect and run the cell again",
            ));
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Outcome::Ok(value))) => Ok(value.into_inner()),
            Ok(Ok(Outcome::Err(err))) => Err(err),
            Ok(Err(_)) => Err(ToolError::new(
                ErrorKind::Cancelled,
                format!("the client closed before answering the bridge call to `{tool}`"),
                "keep the connection open while eval cells may call your bridge tools",
            )),
            Err(_) => Err(ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "the client did not answer the bridge call to `{tool}` within {} s",
                    timeout.as_secs()
                ),
                "answer bridge_call frames with bridge_result, or raise kernels.bridge_timeout_s",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two readers refused at the same moment: the first one's bytes are back before the
    /// second one asks, so the second goes on (the old take-then-release let both fail and
    /// left no connection able to finish a frame that fits the budget).
    #[test]
    fn of_readers_refused_at_once_the_last_goes_on() {
        let budget = FrameBudget::new(Arc::new(AtomicUsize::new(0)), 8);
        assert!(budget.take_or_give_back(5, 0), "a holds 5");
        assert!(budget.take_or_give_back(3, 0), "b holds 3");
        assert!(!budget.take_or_give_back(1, 5), "a asks past the cap");
        assert_eq!(
            budget.held.load(Ordering::Acquire),
            3,
            "a's 5 went back with the refusal"
        );
        assert!(budget.take_or_give_back(1, 3), "b asks next and fits");
        assert_eq!(budget.held.load(Ordering::Acquire), 4);
    }

    #[test]
    fn a_frame_past_the_whole_budget_is_refused_even_alone() {
        let budget = FrameBudget::new(Arc::new(AtomicUsize::new(0)), 8);
        assert!(budget.take_or_give_back(6, 0));
        assert!(!budget.take_or_give_back(3, 6));
        assert_eq!(budget.held.load(Ordering::Acquire), 0);
    }
}
