//! One client connection: the handshake, a reader loop that dispatches frames in arrival
//! order, a writer task that owns the socket's write half, and one task per call. This is
//! the one place where wire frames become calls into the daemon and back. The gates a call
//! passes before its tool runs are in `session/gates.rs`; what a running handler sees of its
//! session (events, eval's `tool()` bridge) is in `session/bridge.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
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
use crate::outbox::{Outbox, encode_into};
use crate::registry::validate;

mod bridge;
mod gates;
use bridge::SessionCaller;
pub(crate) use gates::execute;

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

/// The read side of a connection. Bytes read but not yet consumed wait in `buf`, which holds
/// no allocation while the connection is idle and grows only as a frame's bytes actually
/// arrive, so a declared length costs nothing until it is sent.
struct FrameReader {
    half: OwnedReadHalf,
    buf: Vec<u8>,
}

impl FrameReader {
    fn new(half: OwnedReadHalf) -> FrameReader {
        FrameReader {
            half,
            buf: Vec::new(),
        }
    }

    /// Read more bytes (at most [`READ_CHUNK`], at least one) into `buf`; 0 at end of stream.
    async fn fill(&mut self, want: usize) -> std::io::Result<usize> {
        let room = want.saturating_sub(self.buf.len()).clamp(512, READ_CHUNK);
        self.buf.reserve(room);
        loop {
            self.half.readable().await?;
            match self.half.try_read_buf(&mut self.buf) {
                Ok(n) => return Ok(n),
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
            payload.drain(..4);
            return payload;
        }
        let payload = self.buf[4..total].to_vec();
        self.buf.drain(..total);
        if self.buf.capacity() > 2 * READ_CHUNK {
            self.buf.shrink_to(READ_CHUNK.max(self.buf.len()));
        }
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
/// (`vibe:<id>`), so trust an approval granted to the parent run does not carry over.
/// Without a token a client is taken at its word (the daemon cannot tell a worker that
/// drops its token from any other client of the same user).
fn pin_by_token(daemon: &Daemon, mut hello: Hello) -> Result<Hello, ToolError> {
    let Some(token) = hello.run_token.take() else {
        return Ok(hello);
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
    hello.surface.max_tier = hello.surface.max_tier.min(tier);
    hello.surface.approvals &= approvals;
    hello.surface.questions = false;
    hello.run_id = format!("vibe:{}", cred.id);
    hello.client_kind = ClientKind::Harness;
    Ok(hello)
}

/// Serve one connection to the end.
///
/// `admitted` is the connection's place under `limits.max_sessions`, held to the end; its
/// pre-Hello part lets the accept loop shed this connection while it has not said Hello.
pub async fn run(
    daemon: Arc<Daemon>,
    stream: UnixStream,
    peer_pid: Option<u32>,
    admitted: Admitted,
) {
    let Admitted {
        slot: _slot,
        mut pre_hello,
    } = admitted;
    let max = daemon.config().max_frame;
    let limits = &daemon.config().limits;
    let frame_deadline = Duration::from_secs(limits.frame_deadline_s);
    let hello_timeout = Duration::from_secs(limits.hello_timeout_s);
    let (reader, mut writer) = stream.into_split();
    let mut reader = FrameReader::new(reader);

    // Handshake: the first frame's first byte tells its codec.
    let first = tokio::select! {
        read = tokio::time::timeout(hello_timeout, reader.frame(max, frame_deadline)) => read,
        _ = &mut pre_hello.shed => {
            let err = ToolError::new(
                ErrorKind::Busy,
                "the daemon is at its connection limit and this connection had not sent its Hello",
                "send a Hello frame right after connecting, then retry",
            );
            // In the codec of the Hello if part of it is here (JSON otherwise).
            let codec = match reader.buf.get(4..5) {
                Some(first_byte) => Codec::sniff(first_byte),
                None => Codec::Json,
            };
            let _ = write_one(&mut writer, codec, &DaemonFrame::Refused(err), max).await;
            return;
        }
    };
    let first = match first {
        Ok(Ok(payload)) => payload,
        Ok(Err(ReadError::Codec(CodecError::Closed))) => return,
        Ok(Err(ReadError::Stalled { got, .. })) => {
            let err = ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "the Hello frame was not complete within {} s ({got} bytes arrived)",
                    frame_deadline.as_secs()
                ),
                "send each frame whole: its 4-byte length, then that many bytes",
            );
            let _ = write_one(&mut writer, Codec::Json, &DaemonFrame::Refused(err), max).await;
            return;
        }
        Ok(Err(ReadError::Codec(e))) => {
            let err = ToolError::new(
                ErrorKind::Protocol,
                format!("bad first frame: {e}"),
                "send a Hello frame first (see docs/PROTOCOL.md)",
            );
            let _ = write_one(&mut writer, Codec::Json, &DaemonFrame::Refused(err), max).await;
            return;
        }
        Err(_) => {
            let err = ToolError::new(
                ErrorKind::Timeout,
                format!("no Hello within {} s", hello_timeout.as_secs()),
                "send a Hello frame right after connecting",
            );
            let _ = write_one(&mut writer, Codec::Json, &DaemonFrame::Refused(err), max).await;
            return;
        }
    };
    let sniffed = Codec::sniff(&first);
    let refuse = |kind, message: String, hint: &str| {
        DaemonFrame::Refused(ToolError::new(kind, message, hint))
    };
    let hello = match toolvisor_protocol::wire::decode_first(sniffed, &first) {
        Ok(ClientFrame::Hello(hello)) => hello,
        Ok(other) => {
            let frame = refuse(
                ErrorKind::Protocol,
                format!(
                    "the first frame must be a Hello, got {}",
                    frame_name(&other)
                ),
                "send a Hello frame first (see docs/PROTOCOL.md)",
            );
            let _ = write_one(&mut writer, sniffed, &frame, max).await;
            return;
        }
        Err(e) => {
            let frame = refuse(
                ErrorKind::Protocol,
                format!("cannot decode the Hello: {e}"),
                "send a Hello frame first, as JSON or bincode (see docs/PROTOCOL.md)",
            );
            let _ = write_one(&mut writer, sniffed, &frame, max).await;
            return;
        }
    };
    // The Hello's bytes are not kept for the life of the connection.
    drop(first);
    let codec = hello.codec;
    // Refusals go out in the codec the client demonstrably speaks (that of its Hello).
    if hello.protocol_version != PROTOCOL_VERSION {
        let frame = refuse(
            ErrorKind::VersionMismatch,
            format!(
                "client speaks protocol version {}, this daemon speaks version {PROTOCOL_VERSION}",
                hello.protocol_version
            ),
            "upgrade the client or the daemon so both speak the same version",
        );
        let _ = write_one(&mut writer, sniffed, &frame, max).await;
        tracing::warn!(
            client_version = hello.protocol_version,
            "refused a client of another protocol version"
        );
        return;
    }
    let workdir = std::path::Path::new(&hello.workdir);
    let workdir_ok = hello.workdir.is_empty() || (workdir.is_absolute() && workdir.is_dir());
    if !workdir_ok {
        let frame = refuse(
            ErrorKind::InvalidArgs,
            format!("workdir {:?} is not a directory", hello.workdir),
            "send an existing absolute directory as workdir (or leave it empty)",
        );
        let _ = write_one(&mut writer, sniffed, &frame, max).await;
        return;
    }

    // A client that said Hello is no longer one to shed.
    drop(pre_hello);
    // A process the daemon started (a vibe worker) gets the surface its config sets.
    let hello = match pin_by_token(&daemon, hello) {
        Ok(hello) => hello,
        Err(err) => {
            tracing::warn!(peer_pid, "refused a client with an unknown run token");
            let _ = write_one(&mut writer, sniffed, &DaemonFrame::Refused(err), max).await;
            return;
        }
    };

    let in_flight = Arc::new(AtomicU64::new(0));
    let (out_tx, drain) = crate::outbox::spooled(
        codec,
        max,
        daemon.config().limits.max_queued_output_bytes,
        daemon.spool(),
    );
    let session_id = daemon.add_session(SessionInfo {
        queued: out_tx.meter(),
        kind: hello.client_kind,
        run_id: hello.run_id.clone(),
        tier: hello.surface.max_tier,
        connected: Instant::now(),
        in_flight: in_flight.clone(),
        pid: peer_pid,
    });
    tracing::info!(session = session_id, kind = ?hello.client_kind, codec = %codec, tier = %hello.surface.max_tier, peer_pid, "client connected");
    // A client holding its Welcome is already a question port, so a question asked right
    // after finds it; frames queue in the channel until the writer task starts.
    if hello.surface.questions {
        daemon.services().questions.attach(
            session_id,
            hello.client_kind,
            &hello.run_id,
            out_tx.clone(),
        );
    }
    let welcome = DaemonFrame::Welcome(Welcome {
        protocol_version: PROTOCOL_VERSION,
        daemon_version: env!("CARGO_PKG_VERSION").into(),
        daemon_pid: std::process::id(),
        session_id,
        codec,
        max_frame: max,
        tools: daemon.registry().advertised(&hello.surface),
    });
    let sent = write_one(&mut writer, codec, &welcome, max).await;
    // Not kept for the life of the connection: with every tool's schema it is most of what
    // an idle session would cost (~100 KB).
    drop(welcome);
    if sent.is_err() {
        daemon.services().questions.detach(session_id);
        daemon.remove_session(session_id);
        return;
    }

    let writer_task = tokio::spawn(drain.run(writer));
    let viewer = TreeViewer::new(hello.client_kind);
    let session = Arc::new(Session {
        id: session_id,
        hello,
        out: out_tx.clone(),
        approvals: Mutex::new(HashMap::new()),
        bridges: Mutex::new(HashMap::new()),
        calls: Mutex::new(HashMap::new()),
        reader_closed: std::sync::atomic::AtomicBool::new(false),
        in_flight,
        viewer,
    });
    let mut tree_watch: Option<tokio::task::JoinHandle<()>> = None;
    // `tree` and `status` answers being built at once for this client; past it the reader
    // waits (a client sending them in a loop gets backpressure, not a task per frame).
    let snapshots = Arc::new(tokio::sync::Semaphore::new(SNAPSHOTS_IN_FLIGHT));
    let mut call_tasks = tokio::task::JoinSet::new();

    loop {
        // Backpressure: while the client has not read `max_queued_output_bytes` of what it
        // was sent, read nothing more from it (its calls' results are what it must read).
        if out_tx.room().await.is_err() {
            break;
        }
        let payload = match reader.frame(max, frame_deadline).await {
            Ok(p) => p,
            Err(ReadError::Codec(CodecError::Closed)) => break,
            Err(ReadError::Stalled { got, want }) => {
                tracing::warn!(
                    session = session_id,
                    got,
                    want,
                    "frame not finished within the deadline; closing the connection"
                );
                let want = want.map(|w| format!(" of {w}")).unwrap_or_default();
                let _ = out_tx
                    .send(DaemonFrame::Error(ToolError::new(
                        ErrorKind::Timeout,
                        format!(
                            "a frame was started and not finished within {} s ({got}{want} bytes arrived); the connection is closed",
                            frame_deadline.as_secs()
                        ),
                        "send each frame whole and promptly, or raise `frame_deadline_s` under `[limits]` in the daemon's config",
                    )))
                    .await;
                break;
            }
            Err(ReadError::Codec(e @ CodecError::Oversized { .. })) => {
                // The stream cannot be resynchronised past an unread payload: say why, close.
                tracing::warn!(session = session_id, error = %e, "oversized frame; closing the connection");
                let _ = out_tx
                    .send(DaemonFrame::Error(ToolError::new(
                        ErrorKind::Protocol,
                        e.to_string(),
                        format!("keep every frame's payload at most {max} bytes; the connection is closed"),
                    )))
                    .await;
                break;
            }
            Err(ReadError::Codec(e)) => {
                tracing::info!(session = session_id, error = %e, "connection ended mid-frame");
                break;
            }
        };
        let frame = match codec::decode::<ClientFrame>(codec, &payload) {
            Ok(frame) => frame,
            Err(e) => {
                tracing::warn!(session = session_id, error = %e, "malformed frame");
                // A JSON call whose id can still be read gets its answer as that call's result,
                // so a client waiting on it never hangs.
                if let Some(id) = malformed_call_id(codec, &payload) {
                    let _ = out_tx
                        .send(DaemonFrame::Result {
                            id,
                            outcome: Outcome::Err(ToolError::new(
                                ErrorKind::Protocol,
                                format!("malformed call: {e}"),
                                "a call is {\"call\": {\"id\", \"conversation\", \"tool\", \"args\"}} (see docs/PROTOCOL.md)",
                            )),
                        })
                        .await;
                    continue;
                }
                let _ = out_tx
                    .send(DaemonFrame::Error(ToolError::new(ErrorKind::Protocol, e.to_string(), format!("frames must be {codec} encoded ClientFrame values (see docs/PROTOCOL.md); the connection stays open"))))
                    .await;
                continue;
            }
        };
        match frame {
            ClientFrame::Call(call) => {
                // Finished calls hold their task until joined: reap them as we go, or a
                // long-lived connection would keep every call it ever made.
                while call_tasks.try_join_next().is_some() {}
                if let Some(task) = start_call(&daemon, &session, call).await {
                    call_tasks.spawn(task);
                }
            }
            ClientFrame::Cancel { id } => {
                let cancel = lock(&session.calls).get_mut(&id).and_then(Option::take);
                if let Some(cancel) = cancel {
                    let _ = cancel.send(());
                }
            }
            ClientFrame::ApprovalAnswer(answer) => {
                let waiter = lock(&session.approvals).remove(&answer.request_id);
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(answer);
                    }
                    None => {
                        let _ = out_tx
                            .send(DaemonFrame::Error(ToolError::new(
                                ErrorKind::NotFound,
                                format!("no approval request {} is pending", answer.request_id),
                                "answer only requests this connection received, once",
                            )))
                            .await;
                    }
                }
            }
            ClientFrame::QuestionAnswer(a) => {
                // Valid: the asking call gets it. Invalid: the answerer hears why and the
                // question stays pending.
                if let Err(err) = daemon.services().questions.answer(session_id, a) {
                    let _ = out_tx.send(DaemonFrame::Error(err)).await;
                }
            }
            ClientFrame::BridgeResult { bridge_id, outcome } => {
                let waiter = lock(&session.bridges).remove(&bridge_id);
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(outcome);
                    }
                    None => {
                        let _ = out_tx
                            .send(DaemonFrame::Error(ToolError::new(
                                ErrorKind::NotFound,
                                format!("no bridge call {bridge_id} is pending"),
                                "answer only bridge calls this connection received, once",
                            )))
                            .await;
                    }
                }
            }
            ClientFrame::ListTools { all } => {
                let tools = if all {
                    daemon.registry().everything(&session.hello.surface)
                } else {
                    daemon.registry().advertised(&session.hello.surface)
                };
                let _ = out_tx.send(DaemonFrame::Tools { tools }).await;
            }
            ClientFrame::Tree => {
                let Ok(permit) = snapshots.clone().acquire_owned().await else {
                    break;
                };
                let d = daemon.clone();
                let tx = out_tx.clone();
                let viewer = session.viewer.clone();
                tokio::spawn(async move {
                    let _ = tx.send(DaemonFrame::Tree(d.tree_for(&viewer).await)).await;
                    drop(permit);
                });
            }
            ClientFrame::Subscribe { topic: Topic::Tree } => {
                if tree_watch.is_none() {
                    tree_watch = Some(tokio::spawn(watch_tree(
                        daemon.clone(),
                        session.viewer.clone(),
                        out_tx.clone(),
                    )));
                }
            }
            ClientFrame::Unsubscribe { topic: Topic::Tree } => {
                if let Some(task) = tree_watch.take() {
                    task.abort();
                }
            }
            ClientFrame::Status => {
                let Ok(permit) = snapshots.clone().acquire_owned().await else {
                    break;
                };
                let d = daemon.clone();
                let tx = out_tx.clone();
                tokio::spawn(async move {
                    let _ = tx.send(DaemonFrame::Status(d.status().await)).await;
                    drop(permit);
                });
            }
            ClientFrame::Ping { nonce } => {
                let _ = out_tx.send(DaemonFrame::Pong { nonce }).await;
            }
            ClientFrame::Hello(_) => {
                let _ = out_tx
                    .send(DaemonFrame::Error(ToolError::new(
                        ErrorKind::Protocol,
                        "this connection already said Hello",
                        "send Hello once, as the first frame",
                    )))
                    .await;
            }
        }
    }

    // The client closed its side: finish what it asked for (it may still be reading),
    // then close. Approval requests can no longer be answered: deny them now.
    if let Some(task) = tree_watch.take() {
        task.abort();
    }
    session.reader_closed.store(true, Ordering::Relaxed);
    // No answer can arrive any more: questions pending on this client fail at once.
    daemon.services().questions.detach(session_id);
    lock(&session.approvals).clear();
    // Nor can a bridge result: the cells waiting on one get an error at once.
    lock(&session.bridges).clear();
    drop(out_tx);
    let mut writer_task = writer_task;
    let writer_done = tokio::select! {
        _ = async { while call_tasks.join_next().await.is_some() {} } => false,
        _ = &mut writer_task => true,
    };
    if writer_done {
        // The peer is gone for good (a write failed): cancel what is still running.
        for cancel in lock(&session.calls).values_mut().filter_map(Option::take) {
            let _ = cancel.send(());
        }
        while call_tasks.join_next().await.is_some() {}
    }
    drop(session);
    if !writer_done {
        let _ = writer_task.await;
    }
    daemon.remove_session(session_id);
    tracing::info!(session = session_id, "client disconnected");
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

/// Register a call and return the task that runs it (or answer at once and return None).
async fn start_call(
    daemon: &Arc<Daemon>,
    session: &Arc<Session>,
    call: Call,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let id = call.id;
    let reject = |err: ToolError| DaemonFrame::Result {
        id,
        outcome: Outcome::Err(err),
    };
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
    daemon.touch_conversation(&call.conversation);
    session.viewer.saw(&call.conversation);
    daemon.count_call();
    daemon.call_began();
    let began = std::time::Instant::now();
    // No tree notification per call: a session's busy/ready flips with every call, and
    // watchers pick it up on their once-a-second tick instead of redrawing per call.
    session.in_flight.fetch_add(1, Ordering::Relaxed);

    // Non-parallel-safe tools take their turn in the conversation's lane, in arrival order.
    let serial = daemon
        .registry()
        .get(&call.tool)
        .is_some_and(|t| !t.parallel_safe);
    let turn = if serial {
        let (turn_tx, turn_rx) = oneshot::channel::<oneshot::Sender<()>>();
        daemon.lanes().enqueue(
            &call.conversation,
            Box::pin(async move {
                let (done_tx, done_rx) = oneshot::channel();
                if turn_tx.send(done_tx).is_ok() {
                    let _ = done_rx.await;
                }
            }),
        );
        Some(turn_rx)
    } else {
        None
    };

    // Every log line of the call carries its id, conversation, tool and the resource kind
    // behind it, so logs join with the audit log (`--log-format json` prints the span).
    let span = tracing::info_span!(
        "call",
        call = id,
        session = session.id,
        conversation = %call.conversation,
        tool = %call.tool,
        resource = daemon.registry().get(&call.tool).map_or("", |t| t.resource),
        run = %session.hello.run_id,
    );
    let daemon = daemon.clone();
    let session = session.clone();
    Some(async move {
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
            execute(&daemon, &session, &ctx, &call.tool, call.args).await
        };
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
        tracing::debug!(outcome = label, ms = began.elapsed().as_millis() as u64, "call ended");
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
    .instrument(span))
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
