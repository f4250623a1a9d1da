//! One connection to the daemon on tokio: the protocol crate's frames and codec, a writer task,
//! a reader task that routes each frame to the call, list request or handler waiting for it.
//!
//! Before a byte is sent, the server's uid is checked (`protocol::client::check_server_uid`).
//! Results, events and approval requests go to their call, `Tools` answers to list requests,
//! questions to the session, tree updates to the tool-list watcher.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, oneshot};
use toolvisor_protocol::client::{ClientError, check_server_uid};
use toolvisor_protocol::codec::{self, Codec, CodecError};
use toolvisor_protocol::wire::{
    ApprovalRequest, Call, ClientFrame, ClientKind, DaemonFrame, Event, Hello, Outcome, Question,
    Surface, ToolInfo, Topic, Welcome,
};
use toolvisor_protocol::{DEFAULT_MAX_FRAME, ErrorKind, PROTOCOL_VERSION, ToolError, Value};

use crate::BridgeError;

/// What reaches a call while it runs.
#[derive(Debug)]
pub enum CallMsg {
    Event(Event),
    Approval(ApprovalRequest),
    Done(Outcome),
}

/// Output and progress events a call's queue holds before further ones are dropped (they
/// become MCP progress notifications, a preview: the whole output is in the result).
const EVENT_QUEUE: usize = 256;
/// Room always kept in a call's queue for what must arrive: one approval request (a call
/// waits for its answer before it can ask again) and the outcome.
const RESERVED: usize = 2;

/// One call's queue, bounded: a harness that reads its progress notifications slower than the
/// daemon streams output costs dropped notifications, never unbounded memory.
struct CallRoute {
    tx: mpsc::Sender<CallMsg>,
    /// Events dropped because the queue was full.
    dropped: u64,
}

impl CallRoute {
    fn event(&mut self, event: Event) {
        if self.tx.capacity() > RESERVED {
            let _ = self.tx.try_send(CallMsg::Event(event));
        } else {
            self.dropped += 1;
        }
    }

    /// An approval request or the outcome: always has room (see [`RESERVED`]).
    fn must(&self, id: u64, msg: CallMsg) {
        if let Err(mpsc::error::TrySendError::Full(msg)) = self.tx.try_send(msg) {
            tracing::error!(
                call = id,
                ?msg,
                "a call's queue had no room for a message it must get"
            );
        }
    }
}

#[derive(Default)]
struct Routes {
    calls: HashMap<u64, CallRoute>,
    lists: VecDeque<oneshot::Sender<Vec<ToolInfo>>>,
    /// Why the connection ended, once it has.
    closed: Option<String>,
    /// Conversations this connection made calls in (the ones the daemon lets it end).
    called: std::collections::HashSet<String>,
}

/// A handshaken connection; cheap to share behind an `Arc`.
pub struct DaemonConn {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    routes: Arc<Mutex<Routes>>,
    next_id: AtomicU64,
    welcome: Welcome,
    /// Notified after every supervisor tree change (the `Tree` topic).
    pub tree_changed: Arc<Notify>,
    /// Notified when the writer has stopped (after `close`).
    flushed: Arc<Notify>,
}

/// Who we say we are to the daemon.
pub struct HelloParts<'a> {
    pub run_id: String,
    pub workdir: String,
    pub surface: Surface,
    pub socket: &'a Path,
    /// A vibe worker's credential (`TOOLVISOR_RUN_TOKEN`), if this process is one's.
    pub run_token: Option<String>,
}

const CODEC: Codec = Codec::Bincode;

fn lost(why: &str) -> ToolError {
    ToolError::new(
        ErrorKind::ResourceFailed,
        format!("the connection to the toolvisor daemon ended: {why}"),
        "check that the daemon is running (`toolvisor status`), then restart the MCP server",
    )
}

impl DaemonConn {
    /// Connect (checking the server's uid before a byte is sent), say `Hello`, read the
    /// `Welcome`, and start the reader and writer tasks. Questions go to `questions`.
    pub async fn connect(
        hello: HelloParts<'_>,
        questions: mpsc::UnboundedSender<Question>,
    ) -> Result<DaemonConn, BridgeError> {
        let path = hello.socket;
        let std_stream = std::os::unix::net::UnixStream::connect(path).map_err(|source| {
            BridgeError::Daemon(ClientError::Connect {
                path: path.display().to_string(),
                source,
            })
        })?;
        check_server_uid(&std_stream, path).map_err(BridgeError::Daemon)?;
        std_stream.set_nonblocking(true)?;
        let stream = tokio::net::UnixStream::from_std(std_stream)?;
        let (mut rd, mut wr) = stream.into_split();
        let frame = ClientFrame::Hello(Hello {
            protocol_version: PROTOCOL_VERSION,
            codec: CODEC,
            client_kind: ClientKind::Harness,
            run_id: hello.run_id,
            workdir: hello.workdir,
            surface: hello.surface,
            run_token: hello.run_token,
        });
        wr.write_all(&codec::encode_frame(CODEC, &frame, DEFAULT_MAX_FRAME)?)
            .await?;
        let payload = read_frame(&mut rd, DEFAULT_MAX_FRAME).await?;
        let welcome = match codec::decode::<DaemonFrame>(CODEC, &payload)? {
            DaemonFrame::Welcome(w) => w,
            DaemonFrame::Refused(err) => {
                return Err(BridgeError::Daemon(ClientError::Refused(err)));
            }
            other => {
                return Err(BridgeError::Daemon(ClientError::Unexpected(format!(
                    "{other:?}"
                ))));
            }
        };
        let max_frame = welcome.max_frame.min(DEFAULT_MAX_FRAME);
        let (tx, mut out) = mpsc::unbounded_channel::<Vec<u8>>();
        let routes = Arc::new(Mutex::new(Routes::default()));
        let tree_changed = Arc::new(Notify::new());
        let flushed = Arc::new(Notify::new());
        let writer_flushed = flushed.clone();
        tokio::spawn(async move {
            while let Some(bytes) = out.recv().await {
                // An empty message is `close`: everything queued before it is written.
                if bytes.is_empty() {
                    let _ = wr.shutdown().await;
                    break;
                }
                if wr.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            writer_flushed.notify_one();
        });
        let reader_routes = routes.clone();
        let reader_tree = tree_changed.clone();
        tokio::spawn(async move {
            let why = loop {
                let payload = match read_frame(&mut rd, max_frame).await {
                    Ok(p) => p,
                    Err(CodecError::Closed) => {
                        break "the daemon closed the connection".to_string();
                    }
                    Err(e) => break e.to_string(),
                };
                let frame = match codec::decode::<DaemonFrame>(CODEC, &payload) {
                    Ok(f) => f,
                    Err(e) => break e.to_string(),
                };
                route(&reader_routes, &reader_tree, &questions, frame);
            };
            let mut r = reader_routes.lock().unwrap_or_else(|e| e.into_inner());
            for (id, call) in r.calls.drain() {
                call.must(id, CallMsg::Done(Outcome::Err(lost(&why))));
            }
            r.lists.clear();
            r.closed = Some(why);
            reader_tree.notify_waiters();
        });
        let conn = DaemonConn {
            tx,
            routes,
            next_id: AtomicU64::new(1),
            welcome,
            tree_changed,
            flushed,
        };
        conn.send(&ClientFrame::Subscribe { topic: Topic::Tree })?;
        Ok(conn)
    }

    /// The MCP session ended: cancel every call still in flight (so nothing a call started
    /// outlives the session; the daemon would otherwise let them finish after our
    /// half-close), end `end`'s conversation if this connection made calls in it (the daemon
    /// stops what it holds), then close our side once those frames are written.
    pub async fn close(&self, end: Option<&str>) {
        let (ids, ending) = {
            let r = self.routes.lock().unwrap_or_else(|e| e.into_inner());
            let ids: Vec<u64> = r.calls.keys().copied().collect();
            (ids, end.filter(|c| r.called.contains(*c)))
        };
        for id in ids {
            let _ = self.send(&ClientFrame::Cancel { id });
        }
        if let Some(conversation) = ending {
            let _ = self.send(&ClientFrame::EndConversation {
                conversation: conversation.to_string(),
            });
        }
        if self.tx.send(Vec::new()).is_ok() {
            let _ =
                tokio::time::timeout(std::time::Duration::from_secs(2), self.flushed.notified())
                    .await;
        }
    }

    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Why the connection ended, if it has.
    pub fn closed(&self) -> Option<String> {
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed
            .clone()
    }

    pub fn send(&self, frame: &ClientFrame) -> Result<(), BridgeError> {
        let bytes = codec::encode_frame(CODEC, frame, self.welcome.max_frame)?;
        self.tx
            .send(bytes)
            .map_err(|_| BridgeError::Closed(self.closed().unwrap_or_default()))
    }

    /// Start a call; its events, approval requests and outcome arrive on the receiver.
    pub fn start_call(
        &self,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<(u64, mpsc::Receiver<CallMsg>), BridgeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(EVENT_QUEUE + RESERVED);
        {
            let mut r = self.routes.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(why) = &r.closed {
                return Err(BridgeError::Closed(why.clone()));
            }
            r.calls.insert(id, CallRoute { tx, dropped: 0 });
            if !r.called.contains(conversation) {
                r.called.insert(conversation.to_string());
            }
        }
        self.send(&ClientFrame::Call(Call {
            id,
            conversation: conversation.to_string(),
            tool: tool.to_string(),
            args: Value(args),
        }))?;
        Ok((id, rx))
    }

    /// Call and wait for the outcome, denying any approval request (used for reads).
    pub async fn call(
        &self,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<Outcome, BridgeError> {
        let (_, mut rx) = self.start_call(conversation, tool, args)?;
        while let Some(msg) = rx.recv().await {
            match msg {
                CallMsg::Done(outcome) => return Ok(outcome),
                CallMsg::Approval(req) => self.answer_approval(req.request_id, false, None)?,
                CallMsg::Event(_) => {}
            }
        }
        Ok(Outcome::Err(lost("no outcome arrived")))
    }

    /// Call and wait for the outcome, answering its approval requests with `approved` and
    /// `reason` (a task's own cancellation, which the MCP client asked for).
    pub async fn call_answering(
        &self,
        conversation: &str,
        tool: &str,
        args: serde_json::Value,
        approved: bool,
        reason: &str,
    ) -> Result<Outcome, BridgeError> {
        let (_, mut rx) = self.start_call(conversation, tool, args)?;
        while let Some(msg) = rx.recv().await {
            match msg {
                CallMsg::Done(outcome) => return Ok(outcome),
                CallMsg::Approval(req) => {
                    self.answer_approval(req.request_id, approved, Some(reason.to_string()))?
                }
                CallMsg::Event(_) => {}
            }
        }
        Ok(Outcome::Err(lost("no outcome arrived")))
    }

    pub fn answer_approval(
        &self,
        request_id: u64,
        approved: bool,
        reason: Option<String>,
    ) -> Result<(), BridgeError> {
        self.send(&ClientFrame::ApprovalAnswer(
            toolvisor_protocol::wire::ApprovalAnswer {
                request_id,
                approved,
                reason,
            },
        ))
    }

    /// The tools this run may see right now (the daemon's `list_tools`).
    pub async fn list_tools(&self) -> Result<Vec<ToolInfo>, BridgeError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut r = self.routes.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(why) = &r.closed {
                return Err(BridgeError::Closed(why.clone()));
            }
            r.lists.push_back(tx);
        }
        self.send(&ClientFrame::ListTools { all: false })?;
        rx.await
            .map_err(|_| BridgeError::Closed(self.closed().unwrap_or_default()))
    }
}

fn route(
    routes: &Mutex<Routes>,
    tree: &Notify,
    questions: &mpsc::UnboundedSender<Question>,
    frame: DaemonFrame,
) {
    let mut r = routes.lock().unwrap_or_else(|e| e.into_inner());
    match frame {
        DaemonFrame::Result { id, outcome } => {
            if let Some(call) = r.calls.remove(&id) {
                if call.dropped > 0 {
                    tracing::info!(
                        call = id,
                        dropped = call.dropped,
                        "progress notifications dropped: the MCP client read them slower than the call streamed output (the result holds all of it)"
                    );
                }
                call.must(id, CallMsg::Done(outcome));
            }
        }
        DaemonFrame::Event { id, event } => {
            if let Some(call) = r.calls.get_mut(&id) {
                call.event(event);
            }
        }
        DaemonFrame::ApprovalRequest(req) => {
            let id = req.call_id;
            if let Some(call) = r.calls.get(&id) {
                call.must(id, CallMsg::Approval(req));
            }
        }
        DaemonFrame::Question(q) => {
            let _ = questions.send(q);
        }
        DaemonFrame::Tools { tools } => {
            if let Some(waiter) = r.lists.pop_front() {
                let _ = waiter.send(tools);
            }
        }
        DaemonFrame::TreeUpdate(_) => tree.notify_waiters(),
        DaemonFrame::Error(err) => {
            tracing::warn!(error = %err, "the daemon reported a frame error");
        }
        other => tracing::debug!(frame = ?other, "ignored daemon frame"),
    }
}

async fn read_frame<R: AsyncReadExt + Unpin>(rd: &mut R, max: u32) -> Result<Vec<u8>, CodecError> {
    let mut header = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = rd.read(&mut header[got..]).await?;
        if n == 0 {
            return Err(if got == 0 {
                CodecError::Closed
            } else {
                CodecError::Truncated { got, want: 4 }
            });
        }
        got += n;
    }
    let len = codec::frame_len(header, max)?;
    let mut payload = vec![0u8; len];
    rd.read_exact(&mut payload)
        .await
        .map_err(|_| CodecError::Truncated { got: 0, want: len })?;
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A harness that never reads a call's progress: the daemon's output events are dropped
    /// past the queue's bound, and the outcome still arrives (the queue was unbounded before).
    #[test]
    fn a_call_whose_events_are_not_read_holds_a_bounded_queue_and_still_gets_its_outcome() {
        let routes = Mutex::new(Routes::default());
        let (tx, mut rx) = mpsc::channel(EVENT_QUEUE + RESERVED);
        routes
            .lock()
            .unwrap()
            .calls
            .insert(7, CallRoute { tx, dropped: 0 });
        let (questions, _q) = mpsc::unbounded_channel();
        let tree = Notify::new();
        for n in 0..10_000 {
            let event = Event::Output {
                stream: toolvisor_protocol::wire::Stream::Stdout,
                text: format!("line {n}\n"),
            };
            route(
                &routes,
                &tree,
                &questions,
                DaemonFrame::Event { id: 7, event },
            );
        }
        assert_eq!(
            routes.lock().unwrap().calls[&7].dropped,
            10_000 - EVENT_QUEUE as u64
        );
        route(
            &routes,
            &tree,
            &questions,
            DaemonFrame::Result {
                id: 7,
                outcome: Outcome::Ok(Value(serde_json::json!({"done": true}))),
            },
        );
        let mut events = 0;
        let mut done = false;
        while let Ok(msg) = rx.try_recv() {
            match msg {
                CallMsg::Event(_) => events += 1,
                CallMsg::Done(Outcome::Ok(_)) => done = true,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(events, EVENT_QUEUE, "the queue held its bound");
        assert!(done, "the outcome arrived after the dropped events");
    }
}
