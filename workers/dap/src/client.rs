//! A lenient Debug Adapter Protocol client over any byte stream (a child's stdio, a TCP
//! socket): the shared Content-Length framing of `toolvisor-jsonrpc`, a writer task, a reader
//! task and a pending map `seq` → oneshot.
//!
//! DAP is not JSON-RPC: requests carry `seq`, answers `request_seq`, and the adapter also
//! sends events and its own ("reverse") requests. Messages stay `serde_json::Value` and are
//! read field by field, so unknown events, unknown fields and `null`s are tolerated — real
//! adapters send all three (debugpy's `debugpySockets`, lldb-dap's `$__lldb_extensions`).
//!
//! Every request has a timeout. A request dropped before its answer is removed from the map
//! and, when the adapter supports it, cancelled on the wire with a `cancel` request. When the
//! stream ends, every pending request fails at once with [`DapError::Closed`] and the owner
//! gets [`Incoming::Closed`] as the last message.
//!
//! Both queues are bounded, as in `toolvisor-jsonrpc`'s transport: when the owner is behind
//! on events the reader waits for room (backpressure on the adapter; answers bypass that
//! queue, so the owner must drain [`Incoming`] on a task that never waits for an answer from
//! the same client), and when the adapter stops reading its input, writes fail with
//! [`DapError::Backlog`] (a cancel is dropped instead) rather than queueing without end.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::{mpsc, oneshot};
use toolvisor_jsonrpc::framing;

use crate::{DapError, Result};

/// What the adapter sends that is not an answer to one of our requests.
#[derive(Debug)]
pub enum Incoming {
    Event {
        event: String,
        body: Value,
    },
    /// A reverse request (`runInTerminal`, `startDebugging`); answer with
    /// [`DapClient::respond`].
    Request {
        seq: i64,
        command: String,
        arguments: Value,
    },
    /// The stream ended or broke; every pending request has already failed. Last message.
    Closed {
        reason: String,
    },
}

type Answer = std::result::Result<Value, DapError>;

/// Events and reverse requests queued for the owner before the reader waits for room.
pub const INCOMING_CAPACITY: usize = 1024;
/// Frames queued for the adapter before writes fail with [`DapError::Backlog`].
pub const OUTGOING_CAPACITY: usize = 1024;

struct Inner {
    label: String,
    pending: Mutex<HashMap<i64, (String, oneshot::Sender<Answer>)>>,
    /// Why the stream ended, once it did (set under the pending lock).
    closed: Mutex<Option<String>>,
    next_seq: AtomicI64,
    /// `None` once the input side was closed on purpose ([`DapClient::close_input`]).
    out: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    supports_cancel: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    fn write(&self, message: &Value) -> Result<()> {
        let bytes = serde_json::to_vec(message).map_err(|e| DapError::Encode {
            command: message["command"].as_str().unwrap_or("").to_string(),
            message: e.to_string(),
        })?;
        let closed = || DapError::Closed(self.closed_reason());
        match lock(&self.out).as_ref() {
            Some(tx) => tx.try_send(bytes).map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => DapError::Backlog {
                    command: message["command"].as_str().unwrap_or("").to_string(),
                    queued: tx.max_capacity(),
                },
                mpsc::error::TrySendError::Closed(_) => closed(),
            }),
            None => Err(closed()),
        }
    }

    fn closed_reason(&self) -> String {
        lock(&self.closed)
            .clone()
            .unwrap_or_else(|| "the adapter's input was closed".into())
    }

    /// Fail every pending request at once and refuse new ones.
    fn close(&self, reason: &str) {
        let drained: Vec<_> = {
            let mut pending = lock(&self.pending);
            let mut closed = lock(&self.closed);
            if closed.is_none() {
                *closed = Some(reason.to_string());
            }
            pending.drain().collect()
        };
        for (_, (_, tx)) in drained {
            let _ = tx.send(Err(DapError::Closed(reason.to_string())));
        }
    }
}

/// A handle to the adapter; cheap to clone.
#[derive(Clone)]
pub struct DapClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DapClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DapClient")
            .field("label", &self.inner.label)
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// A request on the wire whose answer has not been awaited yet.
///
/// Dropping it before the answer removes it from the pending map and cancels it on the wire
/// (when the adapter supports `cancel`).
pub struct Pending {
    inner: Arc<Inner>,
    seq: i64,
    command: String,
    rx: Option<oneshot::Receiver<Answer>>,
}

impl Pending {
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Waits for the answer's body (`null` when the adapter sent none), at most `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the request (see [`Pending`]).
    pub async fn wait(mut self, timeout: Duration) -> Result<Value> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(DapError::Closed(self.inner.closed_reason()));
        };
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(answer)) => {
                self.rx = None;
                answer
            }
            Ok(Err(_)) => {
                self.rx = None;
                Err(DapError::Closed(self.inner.closed_reason()))
            }
            Err(_) => Err(DapError::Timeout {
                command: self.command.clone(),
                after_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.rx.is_none() {
            return;
        }
        let was_pending = lock(&self.inner.pending).remove(&self.seq).is_some();
        if was_pending && self.inner.supports_cancel.load(Ordering::Relaxed) {
            let seq = self.inner.next_seq.fetch_add(1, Ordering::Relaxed);
            // A courtesy: dropped (logged) when the adapter stopped reading its input.
            if let Err(e) = self.inner.write(&json!({
                "seq": seq, "type": "request", "command": "cancel",
                "arguments": {"requestId": self.seq},
            })) {
                tracing::debug!(label = self.inner.label, error = %e, "cancel not sent");
            }
        }
    }
}

impl DapClient {
    /// Starts the reader and writer tasks on `reader`/`writer`; returns the handle and the
    /// receiver of the adapter's events and reverse requests.
    pub fn start<R, W>(
        reader: R,
        writer: W,
        label: &str,
        max_frame: usize,
    ) -> (DapClient, mpsc::Receiver<Incoming>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::start_bounded(
            reader,
            writer,
            label,
            max_frame,
            INCOMING_CAPACITY,
            OUTGOING_CAPACITY,
        )
    }

    /// [`DapClient::start`] with the capacities of the incoming (events, reverse requests)
    /// and outgoing (frames to the adapter) queues.
    pub fn start_bounded<R, W>(
        reader: R,
        writer: W,
        label: &str,
        max_frame: usize,
        incoming_capacity: usize,
        outgoing_capacity: usize,
    ) -> (DapClient, mpsc::Receiver<Incoming>)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::channel(outgoing_capacity.max(1));
        let (in_tx, in_rx) = mpsc::channel(incoming_capacity.max(1));
        let inner = Arc::new(Inner {
            label: label.to_string(),
            pending: Mutex::new(HashMap::new()),
            closed: Mutex::new(None),
            next_seq: AtomicI64::new(1),
            out: Mutex::new(Some(out_tx)),
            supports_cancel: AtomicBool::new(false),
        });
        tokio::spawn(write_loop(writer, out_rx, label.to_string()));
        tokio::spawn(read_loop(reader, inner.clone(), in_tx, max_frame));
        (DapClient { inner }, in_rx)
    }

    /// Puts a request on the wire and returns at once; await [`Pending::wait`] for its answer.
    /// `arguments: None` omits the member (some adapters reject `null`).
    pub fn send(&self, command: &str, arguments: Option<Value>) -> Result<Pending> {
        let seq = self.inner.next_seq.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = lock(&self.inner.pending);
            if let Some(reason) = lock(&self.inner.closed).clone() {
                return Err(DapError::Closed(reason));
            }
            pending.insert(seq, (command.to_string(), tx));
        }
        let pending = Pending {
            inner: self.inner.clone(),
            seq,
            command: command.to_string(),
            rx: Some(rx),
        };
        let mut message = Map::new();
        message.insert("seq".into(), json!(seq));
        message.insert("type".into(), json!("request"));
        message.insert("command".into(), json!(command));
        if let Some(arguments) = arguments {
            message.insert("arguments".into(), arguments);
        }
        self.inner.write(&Value::Object(message))?;
        Ok(pending)
    }

    /// Sends a request and waits for its answer's body, at most `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe (see [`Pending`]).
    pub async fn request(
        &self,
        command: &str,
        arguments: Option<Value>,
        timeout: Duration,
    ) -> Result<Value> {
        self.send(command, arguments)?.wait(timeout).await
    }

    /// Answers one of the adapter's reverse requests.
    pub fn respond(&self, request_seq: i64, command: &str, error: Option<&str>) -> Result<()> {
        let seq = self.inner.next_seq.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({
            "seq": seq, "type": "response", "request_seq": request_seq,
            "command": command, "success": error.is_none(),
        });
        if let Some(error) = error {
            message["message"] = json!(error);
        }
        self.inner.write(&message)
    }

    /// Whether dropped requests are cancelled on the wire (the adapter's
    /// `supportsCancelRequest`).
    pub fn set_supports_cancel(&self, yes: bool) {
        self.inner.supports_cancel.store(yes, Ordering::Relaxed);
    }

    /// Closes our side of the stream once what is queued has been written (debugpy's adapter
    /// exits only when its stdin closes). Later requests fail with [`DapError::Closed`].
    pub fn close_input(&self) {
        lock(&self.inner.out).take();
    }

    /// True once the adapter's stream ended.
    pub fn is_closed(&self) -> bool {
        lock(&self.inner.closed).is_some()
    }

    /// Requests waiting for an answer.
    pub fn pending(&self) -> usize {
        lock(&self.inner.pending).len()
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    label: String,
) {
    while let Some(bytes) = rx.recv().await {
        if let Err(e) = framing::write_frame(&mut writer, &bytes).await {
            tracing::debug!(label, error = %e, "writing to the debug adapter failed");
            break;
        }
    }
    // Dropping the writer closes the adapter's input.
}

/// The readable text of a failed response: `body.error.format` with its `{variables}`
/// substituted when present, else `message`.
fn failure_text(message: &Map<String, Value>) -> String {
    let short = message
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let error = message.get("body").and_then(|b| b.get("error"));
    let format = error.and_then(|e| e.get("format")).and_then(Value::as_str);
    let Some(format) = format else {
        return if short.is_empty() {
            "the adapter gave no reason".into()
        } else {
            short
        };
    };
    let mut text = format.to_string();
    if let Some(vars) = error
        .and_then(|e| e.get("variables"))
        .and_then(Value::as_object)
    {
        for (name, value) in vars {
            let value = value
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            text = text.replace(&format!("{{{name}}}"), &value);
        }
    }
    text
}

async fn read_loop<R: AsyncRead + Unpin>(
    reader: R,
    inner: Arc<Inner>,
    incoming: mpsc::Sender<Incoming>,
    max_frame: usize,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let reason = loop {
        let payload = match framing::next_frame(&mut reader, max_frame, &inner.label).await {
            Ok(payload) => payload,
            Err(reason) => break reason,
        };
        let message = match serde_json::from_slice::<Value>(&payload) {
            Ok(Value::Object(m)) => m,
            _ => {
                let text = String::from_utf8_lossy(&payload);
                tracing::warn!(label = inner.label, frame = %text.chars().take(200).collect::<String>(), "a frame that is not a DAP message; skipped");
                continue;
            }
        };
        match message.get("type").and_then(Value::as_str).unwrap_or("") {
            "response" => {
                let Some(request_seq) = message.get("request_seq").and_then(Value::as_i64) else {
                    continue;
                };
                let Some((command, tx)) = lock(&inner.pending).remove(&request_seq) else {
                    continue;
                };
                let success = message
                    .get("success")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let answer = if success {
                    Ok(message.get("body").cloned().unwrap_or(Value::Null))
                } else {
                    Err(DapError::Failed {
                        command,
                        message: failure_text(&message),
                    })
                };
                let _ = tx.send(answer);
            }
            "event" => {
                let event = message
                    .get("event")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let body = message.get("body").cloned().unwrap_or(Value::Null);
                // Waits for room when the owner is behind: backpressure on the adapter.
                let _ = incoming.send(Incoming::Event { event, body }).await;
            }
            "request" => {
                let seq = message.get("seq").and_then(Value::as_i64).unwrap_or(0);
                let command = message
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let arguments = message.get("arguments").cloned().unwrap_or(Value::Null);
                let _ = incoming
                    .send(Incoming::Request {
                        seq,
                        command,
                        arguments,
                    })
                    .await;
            }
            other => {
                tracing::debug!(
                    label = inner.label,
                    kind = other,
                    "a DAP message of unknown type; skipped"
                );
            }
        }
    };
    tracing::debug!(label = inner.label, reason, "debug adapter stream closed");
    inner.close(&reason);
    let _ = incoming.send(Incoming::Closed { reason }).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncWriteExt, duplex};

    fn frame(v: Value) -> Vec<u8> {
        let body = serde_json::to_vec(&v).unwrap();
        let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend(body);
        out
    }

    async fn next_request(
        r: &mut BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>,
    ) -> Value {
        let bytes = framing::read_frame(r, 1 << 20).await.unwrap().unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn answers_events_garbage_and_reverse_requests() {
        let (ours, theirs) = duplex(1 << 16);
        let (our_r, our_w) = tokio::io::split(ours);
        let (their_r, mut their_w) = tokio::io::split(theirs);
        let (client, mut incoming) = DapClient::start(our_r, our_w, "test", 1 << 20);
        let mut their_r = BufReader::new(their_r);
        let pending = client
            .send("initialize", Some(json!({"adapterID": "x"})))
            .unwrap();
        let req = next_request(&mut their_r).await;
        assert_eq!(req["command"], "initialize");
        assert_eq!(req["type"], "request");
        let seq = req["seq"].as_i64().unwrap();
        // An unknown event with nulls, a stray line, a non-JSON frame, then the answer.
        their_w
            .write_all(&frame(
                json!({"seq": 0, "type": "event", "event": "debugpySockets", "body": {"x": null}}),
            ))
            .await
            .unwrap();
        their_w
            .write_all(b"PLEASE submit a bug report\r\n")
            .await
            .unwrap();
        their_w
            .write_all(b"Content-Length: 3\r\n\r\nabc")
            .await
            .unwrap();
        their_w
            .write_all(&frame(json!({"seq": 0, "type": "response", "request_seq": seq, "success": true, "command": "initialize", "body": {"supportsCancelRequest": true}})))
            .await
            .unwrap();
        let body = pending.wait(Duration::from_secs(5)).await.unwrap();
        assert_eq!(body["supportsCancelRequest"], true);
        match incoming.recv().await.unwrap() {
            Incoming::Event { event, .. } => assert_eq!(event, "debugpySockets"),
            other => panic!("{other:?}"),
        }
        // A failed request reads its error format.
        let pending = client.send("evaluate", None).unwrap();
        let req = next_request(&mut their_r).await;
        assert!(
            req.get("arguments").is_none(),
            "unset arguments are omitted: {req}"
        );
        their_w
            .write_all(&frame(json!({"seq": 0, "type": "response", "request_seq": req["seq"], "success": false, "command": "evaluate", "message": "x", "body": {"error": {"format": "name {n} is not defined", "variables": {"n": "zz"}}}})))
            .await
            .unwrap();
        let err = pending.wait(Duration::from_secs(5)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "`evaluate` failed in the adapter: name zz is not defined"
        );
        // A reverse request reaches the owner.
        their_w
            .write_all(&frame(
                json!({"seq": 7, "type": "request", "command": "runInTerminal", "arguments": {}}),
            ))
            .await
            .unwrap();
        match incoming.recv().await.unwrap() {
            Incoming::Request { seq, command, .. } => {
                assert_eq!((seq, command.as_str()), (7, "runInTerminal"));
                client
                    .respond(seq, &command, Some("not supported"))
                    .unwrap();
            }
            other => panic!("{other:?}"),
        }
        let answer = next_request(&mut their_r).await;
        assert_eq!(answer["success"], false);
        assert_eq!(answer["request_seq"], 7);
        // A dropped request is cancelled on the wire once cancel is supported.
        client.set_supports_cancel(true);
        let dropped = client
            .send("stackTrace", Some(json!({"threadId": 1})))
            .unwrap();
        let req = next_request(&mut their_r).await;
        drop(dropped);
        let cancel = next_request(&mut their_r).await;
        assert_eq!(cancel["command"], "cancel");
        assert_eq!(cancel["arguments"]["requestId"], req["seq"]);
        assert_eq!(client.pending(), 0);
        // End of stream fails what is pending and says so last.
        let pending = client.send("threads", None).unwrap();
        drop(their_w);
        drop(their_r);
        let err = pending.wait(Duration::from_secs(5)).await.unwrap_err();
        assert!(matches!(err, DapError::Closed(_)), "{err}");
        loop {
            if let Incoming::Closed { .. } = incoming.recv().await.unwrap() {
                break;
            }
        }
        assert!(client.is_closed());
        assert!(matches!(
            client.send("threads", None),
            Err(DapError::Closed(_))
        ));
    }

    /// Lets every runnable task run (scheduling on a current-thread runtime, not time).
    async fn let_everything_run() {
        for _ in 0..10_000 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_event_flood_is_held_back_and_the_answer_behind_it_arrives() {
        const FLOOD: usize = 5000;
        const CAPACITY: usize = 8;
        let (ours, theirs) = duplex(1024);
        let (our_r, our_w) = tokio::io::split(ours);
        let (their_r, mut their_w) = tokio::io::split(theirs);
        let (client, mut incoming) =
            DapClient::start_bounded(our_r, our_w, "test", 1 << 20, CAPACITY, 64);
        let written = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peer_written = written.clone();
        let pending = client.send("threads", None).unwrap();
        let adapter = tokio::spawn(async move {
            let mut their_r = BufReader::new(their_r);
            let req = next_request(&mut their_r).await;
            for i in 0..FLOOD {
                their_w
                    .write_all(&frame(
                        json!({"seq": 0, "type": "event", "event": "output", "body": {"n": i}}),
                    ))
                    .await
                    .unwrap();
                peer_written.fetch_add(1, Ordering::SeqCst);
            }
            their_w
                .write_all(&frame(json!({"seq": 0, "type": "response", "request_seq": req["seq"], "success": true, "command": "threads", "body": {"threads": []}})))
                .await
                .unwrap();
            (their_r, their_w)
        });
        tokio::time::timeout(Duration::from_secs(30), async {
            while incoming.len() < CAPACITY {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the incoming queue fills while the owner does not drain it");
        let_everything_run().await;
        assert_eq!(incoming.len(), CAPACITY, "the reader queued past capacity");
        let sent = written.load(Ordering::SeqCst);
        assert!(
            sent < FLOOD,
            "the adapter wrote its whole flood ({sent} events) unread: no backpressure"
        );
        let drain = tokio::spawn(async move {
            let mut next = 0;
            while let Some(Incoming::Event { body, .. }) = incoming.recv().await {
                assert_eq!(body["n"], json!(next));
                next += 1;
                if next == FLOOD {
                    break;
                }
            }
            next
        });
        let body = pending.wait(Duration::from_secs(30)).await.unwrap();
        assert_eq!(body["threads"], json!([]));
        assert_eq!(drain.await.unwrap(), FLOOD);
        drop(adapter.await.unwrap());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_adapter_that_stops_reading_fills_the_outgoing_queue_and_send_says_so() {
        // The adapter never reads its input.
        let (ours, _theirs) = duplex(256);
        let (r, w) = tokio::io::split(ours);
        let (client, _incoming) = DapClient::start_bounded(r, w, "test", 1 << 20, 8, 4);
        let text = "x".repeat(200);
        let mut kept = Vec::new();
        let mut refused = None;
        for i in 0..10_000 {
            match client.send("evaluate", Some(json!({"expression": text, "n": i}))) {
                Ok(pending) => {
                    kept.push(pending);
                    tokio::task::yield_now().await;
                }
                Err(e) => {
                    refused = Some((i, e));
                    break;
                }
            }
        }
        let (accepted, error) =
            refused.expect("10,000 requests queued for an adapter that reads none");
        assert!(accepted < 100, "{accepted} requests were queued");
        assert_eq!(
            error,
            DapError::Backlog {
                command: "evaluate".into(),
                queued: 4
            }
        );
        assert!(error.to_string().contains("not reading its input"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_without_an_answer_times_out() {
        let (ours, _theirs) = duplex(1 << 16);
        let (r, w) = tokio::io::split(ours);
        let (client, _incoming) = DapClient::start(r, w, "test", 1 << 20);
        let err = client
            .request("threads", None, Duration::from_secs(3))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "`threads` got no answer within 3000 ms");
        assert_eq!(client.pending(), 0);
    }
}
