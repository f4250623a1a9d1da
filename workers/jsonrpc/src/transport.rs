//! The transport to one child: three tasks (stdout reader, stdin writer, stderr logger) and a
//! pending map request id → oneshot. The owner gets the server's own requests and
//! notifications as [`Incoming`] messages, and [`Incoming::Closed`] once stdout ends, after
//! every pending request has been failed with [`RpcError::StreamClosed`].
//!
//! Requests carry a timeout; a request future dropped before its answer (caller cancelled,
//! timeout) is removed from the map and cancelled on the wire with the configured cancel
//! notification (`$/cancelRequest` for LSP).
//!
//! Both queues are bounded, so a child can fill neither:
//!
//! - **Incoming** (the server's requests and notifications, to the owner): when it is full
//!   the reader waits for room, which stops reading the child's stdout — backpressure on a
//!   server flooding `$/progress` or `window/logMessage`. Responses to our own requests do
//!   not go through this queue (the reader hands them to their caller directly), so the
//!   rule that keeps this deadlock-free is the owner's: **drain `Incoming` on a task that
//!   never waits for an answer from the same transport.** Then a full queue always empties
//!   and the reader reaches the answer behind the flood.
//! - **Outgoing** (frames to the child's stdin): [`RpcClient::request`] waits for room
//!   (within its timeout); the synchronous [`RpcClient::notify`] and
//!   [`RpcClient::respond`] (called under document locks) fail with [`RpcError::Backlog`]
//!   instead, and so does nothing else: a cancel or a shutdown-time `null` answer that finds
//!   the queue full is dropped (logged). A full outgoing queue means the child stopped
//!   reading its stdin; the reader never waits on it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::framing;
use crate::message::{Id, Message, ResponseError};
use crate::{Result, RpcError};

/// How a transport behaves.
#[derive(Clone, Debug)]
pub struct TransportOptions {
    /// Names the child in logs, e.g. `lsp/python:/src/app`.
    pub label: String,
    /// Cap on one incoming frame.
    pub max_frame: usize,
    /// Notification sent when a request is dropped before its answer; `None`: none.
    pub cancel_method: Option<String>,
    /// Lines of stderr kept for error messages.
    pub stderr_lines: usize,
    /// Capacity of the queue of the server's requests and notifications to the owner; when
    /// full, the reader stops reading the child's stdout until the owner catches up.
    pub incoming_capacity: usize,
    /// Capacity of the queue of frames to the child's stdin.
    pub outgoing_capacity: usize,
}

/// Default [`TransportOptions::incoming_capacity`].
pub const DEFAULT_INCOMING_CAPACITY: usize = 1024;
/// Default [`TransportOptions::outgoing_capacity`].
pub const DEFAULT_OUTGOING_CAPACITY: usize = 1024;

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions {
            label: "child".into(),
            max_frame: framing::DEFAULT_MAX_FRAME,
            cancel_method: Some("$/cancelRequest".into()),
            stderr_lines: 40,
            incoming_capacity: DEFAULT_INCOMING_CAPACITY,
            outgoing_capacity: DEFAULT_OUTGOING_CAPACITY,
        }
    }
}

/// What the server sends that is not an answer to us.
#[derive(Debug)]
pub enum Incoming {
    /// A request from the server; answer it with [`RpcClient::respond`].
    Request {
        id: Id,
        method: String,
        params: Value,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// Stdout ended or broke; every pending request has already failed. Last message.
    Closed {
        reason: String,
    },
}

type Pending = HashMap<i64, oneshot::Sender<Result<Value>>>;

/// The last lines a child wrote to stderr.
#[derive(Clone, Debug, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String, keep: usize) {
        let mut q = lock(&self.0);
        q.push_back(line);
        while q.len() > keep {
            q.pop_front();
        }
    }

    /// The kept lines, joined.
    pub fn text(&self) -> String {
        lock(&self.0).iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

struct Inner {
    label: String,
    pending: Mutex<Pending>,
    /// Set (under the pending lock) once stdout ended: no request is added after.
    closed: AtomicBool,
    /// After `shutdown`: the server's own requests are answered with null.
    shutting_down: AtomicBool,
    next_id: AtomicI64,
    out: mpsc::Sender<Vec<u8>>,
    cancel_method: Option<String>,
    stderr: StderrTail,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn encode(msg: &Message) -> Result<Vec<u8>> {
    serde_json::to_vec(&msg.to_json()).map_err(|e| RpcError::Encode {
        method: String::new(),
        message: e.to_string(),
    })
}

/// The method a message names, for errors (`response` for answers).
fn method_of(msg: &Message) -> String {
    match msg {
        Message::Request { method, .. } | Message::Notification { method, .. } => method.clone(),
        Message::Response { .. } => "response".into(),
    }
}

impl Inner {
    /// Queues `msg` for the child's stdin without waiting: a full queue is
    /// [`RpcError::Backlog`].
    fn send(&self, msg: &Message) -> Result<()> {
        let bytes = encode(msg)?;
        self.out.try_send(bytes).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => RpcError::Backlog {
                method: method_of(msg),
                queued: self.out.max_capacity(),
            },
            mpsc::error::TrySendError::Closed(_) => RpcError::StreamClosed,
        })
    }

    /// Queues `msg`, waiting for room.
    async fn send_wait(&self, msg: &Message) -> Result<()> {
        let bytes = encode(msg)?;
        self.out
            .send(bytes)
            .await
            .map_err(|_| RpcError::StreamClosed)
    }

    /// Queues `msg` if there is room; a message that is only a courtesy (a cancel, a
    /// shutdown-time answer) is dropped, logged, when the child stopped reading.
    fn send_or_drop(&self, msg: &Message) {
        if let Err(RpcError::Backlog { method, queued }) = self.send(msg) {
            tracing::debug!(
                label = self.label,
                method,
                queued,
                "the child is not reading its stdin; a courtesy message was dropped"
            );
        }
    }

    /// Fail every pending request at once and refuse new ones.
    fn close(&self) {
        let drained: Vec<_> = {
            let mut pending = lock(&self.pending);
            self.closed.store(true, Ordering::SeqCst);
            pending.drain().collect()
        };
        for (_, tx) in drained {
            let _ = tx.send(Err(RpcError::StreamClosed));
        }
    }
}

/// Starts the three tasks of a transport.
pub struct Transport;

impl Transport {
    /// Returns the client handle and the receiver of the server's own messages.
    pub fn start<R, W, E>(
        stdout: R,
        stdin: W,
        stderr: E,
        options: TransportOptions,
    ) -> (RpcClient, mpsc::Receiver<Incoming>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
        E: AsyncRead + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::channel(options.outgoing_capacity.max(1));
        let (in_tx, in_rx) = mpsc::channel(options.incoming_capacity.max(1));
        let inner = Arc::new(Inner {
            label: options.label.clone(),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            shutting_down: AtomicBool::new(false),
            next_id: AtomicI64::new(1),
            out: out_tx,
            cancel_method: options.cancel_method.clone(),
            stderr: StderrTail::default(),
        });
        tokio::spawn(write_loop(stdin, out_rx, options.label.clone()));
        tokio::spawn(stderr_loop(
            stderr,
            inner.stderr.clone(),
            options.stderr_lines,
            options.label.clone(),
        ));
        tokio::spawn(read_loop(stdout, inner.clone(), in_tx, options.max_frame));
        (RpcClient { inner }, in_rx)
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut stdin: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    label: String,
) {
    while let Some(bytes) = rx.recv().await {
        if let Err(e) = framing::write_frame(&mut stdin, &bytes).await {
            tracing::debug!(label, error = %e, "writing to the child's stdin failed");
            break;
        }
    }
}

async fn stderr_loop<E: AsyncRead + Unpin>(
    stderr: E,
    tail: StderrTail,
    keep: usize,
    label: String,
) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text: String = String::from_utf8_lossy(&line)
                    .trim_end()
                    .chars()
                    .take(500)
                    .collect();
                tracing::debug!(label, stderr = text, "child stderr");
                tail.push(text, keep);
            }
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    stdout: R,
    inner: Arc<Inner>,
    incoming: mpsc::Sender<Incoming>,
    max_frame: usize,
) {
    let mut reader = BufReader::new(stdout);
    let reason = loop {
        let payload = match framing::next_frame(&mut reader, max_frame, &inner.label).await {
            Ok(payload) => payload,
            Err(reason) => break reason,
        };
        let msg = match Message::parse(&payload) {
            Ok(m) => m,
            Err(what) => {
                tracing::warn!(
                    label = inner.label,
                    what,
                    "a frame that is not JSON-RPC; skipped"
                );
                continue;
            }
        };
        match msg {
            Message::Response {
                id: Id::Num(n),
                result,
            } => {
                let tx = lock(&inner.pending).remove(&n);
                if let Some(tx) = tx {
                    let _ = tx.send(result.map_err(|e| RpcError::Server {
                        method: String::new(),
                        code: e.code,
                        message: e.message,
                    }));
                }
            }
            Message::Response { .. } => {}
            Message::Request { id, method, params } => {
                // The reader never waits on the outgoing queue (the child may be blocked
                // writing to us while not reading its stdin): these answers are courtesies.
                if inner.shutting_down.load(Ordering::SeqCst) {
                    // Some servers treat an error reply (even to registerCapability) as fatal.
                    inner.send_or_drop(&Message::Response {
                        id,
                        result: Ok(Value::Null),
                    });
                } else if incoming
                    .send(Incoming::Request {
                        id: id.clone(),
                        method,
                        params,
                    })
                    .await
                    .is_err()
                {
                    inner.send_or_drop(&Message::Response {
                        id,
                        result: Ok(Value::Null),
                    });
                }
            }
            Message::Notification { method, params } => {
                // Waits for room when the owner is behind: backpressure on the child.
                let _ = incoming
                    .send(Incoming::Notification { method, params })
                    .await;
            }
        }
    };
    tracing::debug!(label = inner.label, reason, "child stdout closed");
    inner.close();
    let _ = incoming.send(Incoming::Closed { reason }).await;
}

/// A handle to send requests and notifications; cheap to clone.
#[derive(Clone)]
pub struct RpcClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcClient")
            .field("label", &self.inner.label)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Removes a request from the pending map and cancels it on the wire unless disarmed.
struct CancelOnDrop {
    inner: Arc<Inner>,
    id: i64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let was_pending = lock(&self.inner.pending).remove(&self.id).is_some();
        if was_pending && let Some(method) = &self.inner.cancel_method {
            self.inner.send_or_drop(&Message::Notification {
                method: method.clone(),
                params: json!({"id": self.id}),
            });
        }
    }
}

impl RpcClient {
    /// Sends a request and waits for its answer, at most `timeout` (waiting for room in the
    /// outgoing queue counts against it).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future removes the request from the pending map and sends
    /// the cancel notification, so the server can stop working on it.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.inner.pending);
            if self.inner.closed.load(Ordering::SeqCst) {
                return Err(RpcError::StreamClosed);
            }
            pending.insert(id, tx);
        }
        let mut guard = CancelOnDrop {
            inner: self.inner.clone(),
            id,
            armed: true,
        };
        let msg = Message::Request {
            id: Id::Num(id),
            method: method.to_string(),
            params,
        };
        let timed_out = || RpcError::Timeout {
            method: method.to_string(),
            after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.inner.send_wait(&msg)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                guard.armed = false;
                lock(&self.inner.pending).remove(&id);
                return Err(match e {
                    RpcError::Encode { message, .. } => RpcError::Encode {
                        method: method.into(),
                        message,
                    },
                    other => other,
                });
            }
            Err(_) => {
                // Never written: nothing to cancel on the wire.
                guard.armed = false;
                lock(&self.inner.pending).remove(&id);
                return Err(timed_out());
            }
        }
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(answer) => {
                guard.armed = false;
                match answer {
                    Ok(Err(RpcError::Server { code, message, .. })) => Err(RpcError::Server {
                        method: method.to_string(),
                        code,
                        message,
                    }),
                    Ok(other) => other,
                    Err(_) => Err(RpcError::StreamClosed),
                }
            }
            Err(_) => Err(timed_out()),
        }
    }

    /// Queues a notification without waiting; [`RpcError::Backlog`] when the child has
    /// stopped reading its stdin and the outgoing queue is full.
    pub fn notify(&self, method: &str, params: Value) -> Result<()> {
        self.inner.send(&Message::Notification {
            method: method.to_string(),
            params,
        })
    }

    /// Answers one of the server's own requests; like [`RpcClient::notify`], never waits.
    pub fn respond(&self, id: Id, result: Result<Value, ResponseError>) -> Result<()> {
        self.inner.send(&Message::Response { id, result })
    }

    /// From now on the server's own requests are answered with `null` by the transport.
    pub fn begin_shutdown(&self) {
        self.inner.shutting_down.store(true, Ordering::SeqCst);
    }

    /// True once the server's stdout ended.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::SeqCst)
    }

    /// Requests waiting for an answer.
    pub fn pending(&self) -> usize {
        lock(&self.inner.pending).len()
    }

    pub fn stderr_tail(&self) -> StderrTail {
        self.inner.stderr.clone()
    }
}
