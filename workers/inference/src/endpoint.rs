//! The routing endpoint: one OpenAI-compatible HTTP/1 server (a private Unix socket, and a
//! loopback port if configured) in front of the pool. A request's `"model"` names the alias;
//! the request goes to that model's server on loopback and the response comes back frame by
//! frame as the server sends it (never gathered first), its `usage` read on the way
//! ([`UsageBody`]) and counted per model per day.
//!
//! Bounded: `max_connections` permits per listener, taken at accept (a refused connection is
//! answered 503 and closed lingering, its request read away so no TCP reset discards the answer); a
//! 256 MiB budget (`BODY_BUDGET`) for the bodies being read, claimed before each is read; only the
//! body's `model` is parsed; `request_read_timeout_s` for a head (hyper's timer) and for a body;
//! `response_write_timeout_s` for a client that takes nothing (`WriteStall` around the connection).
//! The Unix socket is 0600 and refuses peers of another uid; the optional TCP listener is loopback
//! only (checked at config load, `InferenceConfig::check`). The proxy opens one hyper client
//! connection per request to the model's loopback port and passes the response back frame by frame
//! through `UsageBody`, which counts the request when the body ends or is dropped; the usage book
//! is then saved on the blocking pool (`UsageBook::save_soon`), never on the response's path. hyper
//! is used directly (it was already linked through `reqwest`): no axum, no router, no hyper-util
//! client pool.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value as Json, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::InferenceError;
use crate::pool::{BODY_BUDGET, InFlight, Inference, Served};
use crate::usage::{Scanner, UsageBook};

/// Largest request body accepted (a long chat with its history fits many times over).
const MAX_REQUEST: usize = 32 << 20;

type Out = Response<BoxBody<Bytes, hyper::Error>>;

fn full(status: StatusCode, body: Json) -> Out {
    let bytes = Bytes::from(body.to_string());
    let mut r = Response::new(Full::new(bytes).map_err(|n: Infallible| match n {}).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

/// An OpenAI-style error body.
fn error(status: StatusCode, code: &str, message: String) -> Out {
    full(
        status,
        json!({"error": {"message": message, "type": code, "code": code}}),
    )
}

fn route_error(e: InferenceError) -> Out {
    let (status, code) = match &e {
        InferenceError::NotLoaded { .. }
        | InferenceError::Gone { .. }
        | InferenceError::NotInStore { .. } => (StatusCode::NOT_FOUND, "model_not_found"),
        InferenceError::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "model_not_ready"),
        InferenceError::TooLarge { .. }
        | InferenceError::BadAlias { .. }
        | InferenceError::Ambiguous { .. }
        | InferenceError::NoModelFile { .. }
        | InferenceError::NoCommand { .. } => (StatusCode::BAD_REQUEST, "invalid_model"),
        InferenceError::TooMany { .. } => (StatusCode::TOO_MANY_REQUESTS, "too_many_models"),
        _ => (StatusCode::SERVICE_UNAVAILABLE, "model_failed"),
    };
    error(status, code, e.to_string())
}

/// A response body passed through frame by frame, its `usage` read as it passes and counted
/// when it ends (or is dropped: a client that went away still counts as a request).
pub struct UsageBody {
    inner: Incoming,
    scanner: Option<Scanner>,
    done: Option<Done>,
    /// The response is a server-sent event stream: a break-off ends it with an error event.
    sse: bool,
    /// The error event was sent: the body has ended.
    ended: bool,
    /// What was passed on so far ends inside an event (a frame may end anywhere).
    mid_event: bool,
}

/// Whether a stream that has passed on `data` last (after `mid_event` before it) stands
/// inside an event: anything but a blank line at its end leaves the event open.
fn still_mid_event(mid_event: bool, data: &[u8]) -> bool {
    if data.is_empty() {
        return mid_event;
    }
    !(data.ends_with(b"\n\n") || data.ends_with(b"\r\n\r\n") || data.ends_with(b"\r\r"))
}

/// The last event of a stream the model server broke off (it exited, was killed, or cut the
/// connection): an OpenAI-style error event, so a client sees why its stream ended early
/// instead of a connection cut short.
/// `mid_event`: the stream broke inside an event, which a blank line ends first, so the error
/// is an event of its own and not glued onto a half-sent one.
fn broken_stream_event(alias: &str, cause: &str, mid_event: bool) -> Bytes {
    let event = json!({"error": {
        "message": format!("the server of {alias:?} broke off the stream before its end ({cause}); the answer is incomplete: retry the request (get_inference_status shows the server's state)"),
        "type": "model_failed",
        "code": "model_failed",
    }});
    let close = if mid_event { "\n\n" } else { "" };
    Bytes::from(format!("{close}data: {event}\n\n"))
}

struct Done {
    book: Arc<UsageBook>,
    model: String,
    alias: String,
    _flight: InFlight,
    /// The model's slot, held until the response ends.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl UsageBody {
    fn finish(&mut self) {
        let Some(done) = self.done.take() else {
            return;
        };
        let usage = self.scanner.take().and_then(Scanner::finish);
        done.book.record(&done.model, usage);
        done.book.save_soon();
    }
}

impl Body for UsageBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.mid_event = still_mid_event(this.mid_event, data);
                    if let Some(scanner) = this.scanner.as_mut() {
                        scanner.feed(data);
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                let alias = this.done.as_ref().map(|d| d.alias.clone());
                this.finish();
                match alias {
                    Some(alias) if this.sse => {
                        tracing::warn!(alias, error = %e, "a model server broke off a stream");
                        this.ended = true;
                        Poll::Ready(Some(Ok(Frame::data(broken_stream_event(
                            &alias,
                            &e.to_string(),
                            this.mid_event,
                        )))))
                    }
                    _ => Poll::Ready(Some(Err(e))),
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for UsageBody {
    fn drop(&mut self) {
        self.finish();
    }
}

async fn models(pool: &Inference) -> Out {
    let data: Vec<Json> = pool
        .listing()
        .await
        .into_iter()
        .map(|(alias, model, state)| {
            json!({"id": alias, "object": "model", "owned_by": "toolvisor", "model": model, "state": state})
        })
        .collect();
    full(StatusCode::OK, json!({"object": "list", "data": data}))
}

/// Whether `given` is `key`, in time that does not depend on where they differ.
fn same_key(given: &[u8], key: &[u8]) -> bool {
    given.len() == key.len() && given.iter().zip(key).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

/// The key a request carries: `Authorization: Bearer <key>` (OpenAI's clients) or
/// `x-api-key: <key>` (Anthropic's).
fn key_of(req: &Request<Incoming>) -> Option<&[u8]> {
    let h = req.headers();
    if let Some(v) = h.get(hyper::header::AUTHORIZATION) {
        let v = v.as_bytes();
        return v
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
            .map(|_| v[7..].trim_ascii());
    }
    h.get("x-api-key").map(|v| v.as_bytes().trim_ascii())
}

async fn handle(
    pool: Arc<Inference>,
    key: Option<Arc<str>>,
    req: Request<Incoming>,
) -> Result<Out, Infallible> {
    let path = req.uri().path().to_string();
    let given = key_of(&req);
    if let Some(key) = key
        && path != "/health"
        && !given.is_some_and(|given| same_key(given, key.as_bytes()))
    {
        let missing = given.is_none();
        // A client without the key gets no keep-alive: it holds no connection slot.
        return Ok(closing(error(
            StatusCode::UNAUTHORIZED,
            "invalid_api_key",
            if missing {
                "this port needs the endpoint's key: send `Authorization: Bearer <key>` ([inference] api_key or $TOOLVISOR_INFERENCE_API_KEY), or use the Unix socket".into()
            } else {
                "the key sent is not the endpoint's ([inference] api_key or $TOOLVISOR_INFERENCE_API_KEY)".into()
            },
        )));
    }
    let out = match (req.method().as_str(), path.as_str()) {
        ("GET", "/v1/models" | "/models") => models(&pool).await,
        ("GET", "/health") => full(StatusCode::OK, json!({"status": "ok"})),
        ("POST", p) if p.starts_with("/v1/") && !has_dot_segment(p) => proxy(&pool, req).await,
        _ => error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "no route {} {path}: this endpoint serves GET /v1/models and POST /v1/... with a \"model\" field",
                req.method()
            ),
        ),
    };
    Ok(out)
}

/// `response` with `connection: close`: the connection ends once it is written.
fn closing(mut response: Out) -> Out {
    response.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    response
}

/// Send the request (`parts` and its `bytes`) on `stream` to the server on `port`: its
/// response once its head has arrived. Hop-by-hop headers and the endpoint's own key are not
/// passed on.
async fn forward(
    parts: &hyper::http::request::Parts,
    bytes: Bytes,
    stream: tokio::net::TcpStream,
    port: u16,
) -> std::io::Result<Response<Incoming>> {
    let _ = stream.set_nodelay(true);
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "model server connection ended");
        }
    });
    let mut builder = Request::builder()
        .method(parts.method.clone())
        .uri(
            parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string(),
        )
        .header(hyper::header::HOST, format!("127.0.0.1:{port}"));
    for (name, value) in &parts.headers {
        if matches!(
            name.as_str(),
            // The endpoint's key is the endpoint's: never passed on to a model server.
            "host"
                | "authorization"
                | "x-api-key"
                | "connection"
                | "keep-alive"
                | "transfer-encoding"
                | "content-length"
                | "upgrade"
                | "te"
                | "trailer"
                | "proxy-connection"
        ) {
            continue;
        }
        builder = builder.header(name, value);
    }
    let request = builder
        .body(Full::new(bytes))
        .map_err(std::io::Error::other)?;
    send.send_request(request)
        .await
        .map_err(std::io::Error::other)
}

/// The request's `"model"` when it is a string. Only that field is built: every other value of
/// the body is checked and skipped, so a large body costs its bytes, not a JSON tree many
/// times their size.
fn model_of(body: &[u8]) -> Result<Option<String>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Routed {
        model: Option<Json>,
    }
    let routed: Routed = serde_json::from_slice(body)?;
    Ok(routed.model.and_then(|m| m.as_str().map(str::to_owned)))
}

/// Whether `path` has a `.` or `..` segment, spelled out or percent-encoded: the endpoint routes
/// on the path as sent, so one the server would normalise (`/v1/../slots`) could reach a route
/// outside `/v1/`.
fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}

/// A `POST /v1/...`: its body read, sent to the server of the model it names, and that
/// server's response passed back frame by frame.
async fn proxy(pool: &Inference, req: Request<Incoming>) -> Out {
    let (parts, body) = req.into_parts();
    let (_budget, bytes) = match read_body(pool, &parts, body).await {
        Ok(read) => read,
        Err(out) => return out,
    };
    let alias = match alias_of(&bytes) {
        Ok(alias) => alias,
        Err(out) => return out,
    };
    match send(pool, &parts, &bytes, &alias).await {
        Ok((served, flight, slot, resp)) => relay(pool, &served, alias, flight, slot, resp),
        Err(out) => out,
    }
}

/// The request body, read whole within the read timeout, and its claim on the endpoint's
/// budget for bodies (held until the response); else the answer saying why not.
async fn read_body(
    pool: &Inference,
    parts: &hyper::http::request::Parts,
    body: Incoming,
) -> Result<(OwnedSemaphorePermit, Bytes), Out> {
    let deadline = Duration::from_secs(pool.config().request_read_timeout_s);
    let claim = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        .map_or(MAX_REQUEST, |n| n.min(MAX_REQUEST));
    let Ok(budget) = pool
        .bodies
        .clone()
        .try_acquire_many_owned((claim >> 10) as u32 + 1)
    else {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "the endpoint is reading {} MiB of request bodies at once, its most: retry in a moment",
                BODY_BUDGET >> 20
            ),
        ));
    };
    match tokio::time::timeout(deadline, Limited::new(body, MAX_REQUEST).collect()).await {
        Err(_) => Err(error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the request body did not arrive within {} s (inference.request_read_timeout_s): send it whole, at once",
                deadline.as_secs()
            ),
        )),
        Ok(Ok(b)) => Ok((budget, b.to_bytes())),
        Ok(Err(e)) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request",
            format!("cannot read the request body (at most {MAX_REQUEST} bytes): {e}"),
        )),
    }
}

/// The alias the body's `"model"` names; else the answer saying what is wrong.
#[expect(
    clippy::result_large_err,
    reason = "the error is the response itself, returned at once; boxing it only adds an allocation"
)]
fn alias_of(bytes: &[u8]) -> Result<String, Out> {
    match model_of(bytes) {
        Ok(Some(m)) => Ok(m),
        Ok(None) => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the request has no \"model\": name a loaded model's alias (GET /v1/models lists them)"
                .into(),
        )),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("the request body is not a JSON object: {e}"),
        )),
    }
}

/// The request sent to `alias`'s server once it has a slot: the model, the request counted
/// in flight, the slot, and the response's head; else the answer saying why not.
async fn send(
    pool: &Inference,
    parts: &hyper::http::request::Parts,
    bytes: &Bytes,
    alias: &str,
) -> Result<
    (
        Arc<Served>,
        InFlight,
        OwnedSemaphorePermit,
        Response<Incoming>,
    ),
    Out,
> {
    // A server that is not there (killed, crashed, restarting) has not seen the request: wait
    // for it to be ready again and send it then, within the readiness timeout. A server that
    // took the connection but died before any answer (the kill had not landed yet) may have
    // seen it: the request is sent once more, to its restart — the inference endpoints have
    // no side effects, so at worst a completion is computed twice. Past that, the error.
    let patience = Duration::from_secs(pool.config().ready_timeout_s);
    let began = tokio::time::Instant::now();
    let mut resent = false;
    let mut slot = None;
    loop {
        let (served, port) = match pool.route(alias).await {
            Ok(r) => r,
            Err(e) => return Err(route_error(e)),
        };
        if slot.is_none() {
            slot = Some(take_slot(pool, &served, alias, patience, began).await?);
            // It waited: the model may have been reloaded meanwhile; route it again.
            continue;
        }
        let stream = match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            Ok(stream) => stream,
            Err(e) if began.elapsed() < patience => {
                tracing::debug!(alias, port, error = %e, "model server not there; waiting for it to be ready again");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(e) => {
                return Err(error(
                    StatusCode::BAD_GATEWAY,
                    "model_unreachable",
                    format!(
                        "the server of {alias:?} on 127.0.0.1:{port} did not answer for {} s (inference.ready_timeout_s): {e}; get_inference_status shows its state",
                        patience.as_secs()
                    ),
                ));
            }
        };
        let flight = served.begin();
        match forward(parts, bytes.clone(), stream, port).await {
            Ok(resp) => {
                let slot = slot.expect("a slot was taken before the request was sent");
                return Ok((served, flight, slot, resp));
            }
            Err(e) if !resent && began.elapsed() < patience => {
                tracing::info!(alias, port, error = %e, "the model server dropped a request without answering; sending it again once");
                resent = true;
                drop(flight);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(error(
                    StatusCode::BAD_GATEWAY,
                    "model_unreachable",
                    format!(
                        "the server of {alias:?} on 127.0.0.1:{port} did not answer{}: {e}; get_inference_status shows its state",
                        if resent { " (twice)" } else { "" }
                    ),
                ));
            }
        }
    }
}

/// One of `served`'s slots, waited for in its queue at most until `patience` since `began`;
/// else the answer (retry after a second) saying the queue was full or stayed busy.
async fn take_slot(
    pool: &Inference,
    served: &Served,
    alias: &str,
    patience: Duration,
    began: tokio::time::Instant,
) -> Result<OwnedSemaphorePermit, Out> {
    let queue = pool.config().queue;
    // A queued request waits for its slot as long as it would for its model to be
    // ready, never for ever.
    let wait = patience.saturating_sub(began.elapsed());
    let mut out = match tokio::time::timeout(wait, served.slot(queue)).await {
        Ok(Some(s)) => return Ok(s),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "queue_timeout",
            format!(
                "{alias:?} gave this request no slot within {} s (inference.ready_timeout_s): its {} slots stayed busy (inference.parallel); retry, or load the model under a second alias",
                patience.as_secs(),
                pool.config().parallel
            ),
        ),
        Ok(None) => error(
            StatusCode::TOO_MANY_REQUESTS,
            "queue_full",
            format!(
                "{alias:?} is serving {} requests and {queue} more wait (inference.parallel, inference.queue): retry after a second",
                pool.config().parallel
            ),
        ),
    };
    out.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    Err(out)
}

/// The model server's response passed back frame by frame, its usage counted when it ends.
fn relay(
    pool: &Inference,
    served: &Served,
    alias: String,
    flight: InFlight,
    slot: OwnedSemaphorePermit,
    resp: Response<Incoming>,
) -> Out {
    let sse = resp
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    let (mut head, incoming) = resp.into_parts();
    for hop in ["connection", "keep-alive", "transfer-encoding"] {
        head.headers.remove(hop);
    }
    let body = UsageBody {
        inner: incoming,
        scanner: Some(Scanner::new(sse)),
        done: Some(Done {
            book: pool.usage.clone(),
            model: served.model.clone(),
            alias,
            _flight: flight,
            _slot: slot,
        }),
        sse,
        ended: false,
        mid_event: false,
    };
    Response::from_parts(head, body.boxed())
}

/// Where the endpoint listens.
pub struct Endpoint {
    pub socket: PathBuf,
    pub listen: Option<std::net::SocketAddr>,
}

/// Serve one connection; `key`: the key its requests must carry (the loopback port's).
fn serve_conn<S>(
    pool: Arc<Inference>,
    key: Option<Arc<str>>,
    stream: S,
    permit: OwnedSemaphorePermit,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let head_deadline = Duration::from_secs(pool.config().request_read_timeout_s);
    let stall = Duration::from_secs(pool.config().response_write_timeout_s);
    tokio::spawn(async move {
        let _permit = permit;
        let service = hyper::service::service_fn(move |req| handle(pool.clone(), key.clone(), req));
        if let Err(e) = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(head_deadline)
            .serve_connection(TokioIo::new(WriteStall::new(stream, stall)), service)
            .await
        {
            tracing::debug!(error = %e, "inference endpoint connection ended");
        }
    });
}

/// A client connection whose writes fail once the client has taken nothing for `limit`
/// (`[inference] response_write_timeout_s`): the connection then ends, and with it the
/// response body, its model's in-flight count and the connection's slot. Only a write that
/// cannot proceed starts the clock; any progress stops it.
struct WriteStall<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteStall<S> {
    fn new(inner: S, limit: Duration) -> Self {
        WriteStall {
            inner,
            limit,
            stalled: None,
        }
    }

    /// After the inner write came back `Pending`: still waiting, or the stall's error.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the client took nothing of its response for {} s (inference.response_write_timeout_s)",
                    limit.as_secs()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, result: std::io::Result<T>) -> Poll<std::io::Result<T>> {
        self.stalled = None;
        Poll::Ready(result)
    }
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteStall<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteStall<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(r) => this.progressed(r),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => this.progressed(r),
            Poll::Pending => this.pending(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Ready(r) => this.progressed(r),
            Poll::Pending => this.pending(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_shutdown(cx) {
            Poll::Ready(r) => this.progressed(r),
            Poll::Pending => this.pending(cx),
        }
    }
}

/// The answer to a connection past `max_connections`: a 503 written within a second, then
/// the connection closed (never a connection that waits unserved). Closed lingering: what the
/// client sent is read and dropped until it closes too (within the same second), because a
/// TCP socket closed with its peer's request unread is reset, and a reset can discard the
/// refusal before the client has read it.
fn refuse<S>(stream: S, max: usize)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tracing::warn!(
        max,
        "inference endpoint: refused a connection past inference.max_connections"
    );
    answer_and_close(
        stream,
        "503 Service Unavailable\r\nretry-after: 1",
        "too_many_connections",
        format!(
            "the inference endpoint is serving its maximum of {max} connections (inference.max_connections): close idle connections and retry, or raise it"
        ),
    );
}

/// Answer one JSON error on a connection nothing else is read from, then close it (at most a
/// second, so a peer that never reads holds nothing).
fn answer_and_close<S>(mut stream: S, status: &str, code: &str, message: String)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let body = json!({"error": {"message": message, "type": code, "code": code}}).to_string();
    let reply = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            stream.write_all(reply.as_bytes()).await?;
            stream.shutdown().await?;
            let mut sink = [0u8; 4096];
            while stream.read(&mut sink).await? > 0 {}
            Ok::<(), std::io::Error>(())
        })
        .await;
    });
}

/// Serve `stream` if a connection slot is free, else [`refuse`] it.
fn admit<S>(pool: &Arc<Inference>, key: Option<Arc<str>>, permits: &Arc<Semaphore>, stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    match permits.clone().try_acquire_owned() {
        Ok(permit) => serve_conn(pool.clone(), key, stream, permit),
        Err(_) => refuse(stream, pool.config().max_connections),
    }
}

/// Bind the endpoint (the Unix socket, 0600, whose stale file is replaced; the loopback port
/// if given) and serve it on tasks of the current runtime.
pub fn serve(
    pool: Arc<Inference>,
    socket: &Path,
    listen: Option<&str>,
) -> Result<Endpoint, String> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(m) = std::fs::symlink_metadata(socket)
        && m.file_type().is_socket()
    {
        let _ = std::fs::remove_file(socket);
    }
    let unix = std::os::unix::net::UnixListener::bind(socket)
        .map_err(|e| format!("cannot bind {}: {e}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot make {} private: {e}", socket.display()))?;
    unix.set_nonblocking(true)
        .map_err(|e| format!("cannot use {}: {e}", socket.display()))?;
    let unix = tokio::net::UnixListener::from_std(unix)
        .map_err(|e| format!("cannot use {}: {e}", socket.display()))?;
    let uid = nix::unistd::getuid().as_raw();
    {
        let pool = pool.clone();
        let permits = Arc::new(Semaphore::new(pool.config().max_connections));
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = unix.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                // Same rule as the daemon's socket: only this user's processes.
                match stream.peer_cred() {
                    Ok(c) if c.uid() == uid => admit(&pool, None, &permits, stream),
                    _ => tracing::warn!("inference endpoint: refused a connection of another user"),
                }
            }
        });
    }
    let mut bound = None;
    if let Some(listen) = listen {
        let tcp = std::net::TcpListener::bind(listen)
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        tcp.set_nonblocking(true)
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        bound = tcp.local_addr().ok();
        let tcp = tokio::net::TcpListener::from_std(tcp)
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let pool = pool.clone();
        // The port's connections count against a limit of their own: whatever a process on
        // the port does, the Unix socket keeps its slots.
        let permits = Arc::new(Semaphore::new(pool.config().max_connections));
        let key: Option<Arc<str>> = pool.config().api_key().map(Arc::from);
        if key.is_none() {
            tracing::warn!(
                listen,
                "the inference endpoint's loopback port has no key: only this user's processes are admitted (set [inference] api_key to admit others that hold it)"
            );
        }
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = tcp.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                if key.is_some() {
                    admit(&pool, key.clone(), &permits, stream);
                    continue;
                }
                // Without a key the port is held to the Unix socket's rule: only this user's
                // processes (the kernel's socket table names the peer's owner; read off the
                // accept loop, it can take milliseconds).
                let (pool, permits) = (pool.clone(), permits.clone());
                tokio::spawn(async move {
                    let ends = stream.local_addr().ok().zip(stream.peer_addr().ok());
                    let owner = tokio::task::spawn_blocking(move || {
                        ends.and_then(|(local, remote)| {
                            toolvisor_kit::peer::tcp_peer_uid(local, remote)
                        })
                    })
                    .await
                    .ok()
                    .flatten();
                    if owner == Some(uid) {
                        return admit(&pool, None, &permits, stream);
                    }
                    tracing::warn!(
                        peer_uid = owner,
                        "inference endpoint: refused a loopback connection of another user (the port has no key)"
                    );
                    answer_and_close(
                        stream,
                        "403 Forbidden",
                        "other_user",
                        "this port has no key, so only the daemon's user may use it: ask that user to set [inference] api_key (or $TOOLVISOR_INFERENCE_API_KEY) and send it as `Authorization: Bearer <key>`".into(),
                    );
                });
            }
        });
    }
    *pool.endpoint.lock().unwrap_or_else(|p| p.into_inner()) =
        Some(toolvisor_protocol::results::InferenceEndpoint {
            socket: socket.display().to_string(),
            listen: bound.map(|a| format!("http://{a}/v1")),
            listen_needs_key: bound.is_some() && pool.config().api_key().is_some(),
        });
    Ok(Endpoint {
        socket: socket.to_path_buf(),
        listen: bound,
    })
}

impl Inference {
    /// Remove the endpoint's Unix socket file (the daemon is stopping): a drained daemon
    /// leaves no `<socket>.inference` behind for a client to find refused.
    pub fn close_endpoint(&self) {
        use std::os::unix::fs::FileTypeExt;
        let socket = self
            .endpoint
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|e| PathBuf::from(&e.socket));
        if let Some(socket) = socket
            && std::fs::symlink_metadata(&socket).is_ok_and(|m| m.file_type().is_socket())
        {
            let _ = std::fs::remove_file(&socket);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_model_field_is_read_and_a_non_object_is_refused() {
        let body =
            br#"{"messages":[{"role":"user","content":"hi"}],"model":"tiny","n":[1,2,{"x":null}]}"#;
        assert_eq!(model_of(body).unwrap().as_deref(), Some("tiny"));
        assert_eq!(model_of(br#"{"model":7}"#).unwrap(), None);
        assert_eq!(model_of(br#"{"messages":[]}"#).unwrap(), None);
        assert!(model_of(br#"["model","tiny"]"#).is_err());
        assert!(model_of(br#"{"model":"tiny""#).is_err());
    }

    #[test]
    fn dot_segments_are_found_spelled_out_or_encoded() {
        for path in [
            "/v1/../slots",
            "/v1/./chat/completions",
            "/v1/%2e%2e/props",
            "/v1/%2E./props",
            "/v1/chat/..",
        ] {
            assert!(has_dot_segment(path), "{path}");
        }
        for path in ["/v1/chat/completions", "/v1/models/a..b", "/v1/x.y"] {
            assert!(!has_dot_segment(path), "{path}");
        }
    }

    #[tokio::test]
    async fn a_stalled_reader_fails_the_write_and_a_slow_one_does_not() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let limit = Duration::from_millis(300);
        // Nobody reads: the write fails once the 64-byte pipe is full and the limit passed.
        let (ours, _theirs) = tokio::io::duplex(64);
        let mut stalled = WriteStall::new(ours, limit);
        let err = stalled.write_all(&[b'x'; 4096]).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(
            err.to_string()
                .contains("inference.response_write_timeout_s")
        );
        // A reader that takes a little every 20 ms keeps it going: only a stall counts.
        let (ours, mut theirs) = tokio::io::duplex(64);
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0; 64];
            while got < 1024 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                got += theirs.read(&mut buf).await.unwrap();
            }
            got
        });
        let mut slow = WriteStall::new(ours, limit);
        slow.write_all(&[b'x'; 1024]).await.unwrap();
        assert_eq!(reader.await.unwrap(), 1024);
    }

    #[test]
    fn an_error_event_after_a_half_sent_event_closes_that_one_first() {
        let mut mid = false;
        mid = still_mid_event(
            mid,
            b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
        );
        assert!(!mid);
        mid = still_mid_event(mid, b"data: {\"choices\":[{\"delta\"");
        assert!(mid);
        assert!(still_mid_event(mid, b""), "an empty frame changes nothing");
        let event = broken_stream_event("tiny", "connection reset", mid);
        assert!(event.starts_with(b"\n\ndata: {\"error\""), "{event:?}");
        let clean = broken_stream_event("tiny", "connection reset", false);
        assert!(clean.starts_with(b"data: {\"error\""), "{clean:?}");
        assert!(!still_mid_event(true, b"x\r\n\r\n"));
    }
}
