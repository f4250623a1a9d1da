//! The routing endpoint: one OpenAI-compatible HTTP/1 server (a private Unix socket, and a
//! loopback port if configured) in front of the pool. A request's `"model"` names the alias;
//! the request goes to that model's server on loopback and the response comes back frame by
//! frame as the server sends it (never gathered first), its `usage` read on the way
//! ([`UsageBody`]) and counted per model per day.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value as Json, json};

use crate::error::InferenceError;
use crate::pool::{InFlight, Inference};
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
        InferenceError::NotLoaded { .. } | InferenceError::NotInStore { .. } => {
            (StatusCode::NOT_FOUND, "model_not_found")
        }
        InferenceError::Timeout { .. } => (StatusCode::GATEWAY_TIMEOUT, "model_not_ready"),
        InferenceError::TooLarge { .. }
        | InferenceError::BadAlias { .. }
        | InferenceError::Ambiguous { .. }
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
}

struct Done {
    book: Arc<UsageBook>,
    model: String,
    _flight: InFlight,
}

impl UsageBody {
    fn finish(&mut self) {
        let Some(done) = self.done.take() else {
            return;
        };
        let usage = self.scanner.take().and_then(Scanner::finish);
        done.book.record(&done.model, usage);
        let book = done.book.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn_blocking(move || book.save());
        }
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
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(scanner)) = (frame.data_ref(), this.scanner.as_mut()) {
                    scanner.feed(data);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.finish();
                Poll::Ready(Some(Err(e)))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
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

async fn handle(pool: Arc<Inference>, req: Request<Incoming>) -> Result<Out, Infallible> {
    let path = req.uri().path().to_string();
    let out = match (req.method().as_str(), path.as_str()) {
        ("GET", "/v1/models" | "/models") => models(&pool).await,
        ("GET", "/health") => full(StatusCode::OK, json!({"status": "ok"})),
        ("POST", p) if p.starts_with("/v1/") => proxy(&pool, req).await,
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

async fn proxy(pool: &Inference, req: Request<Incoming>) -> Out {
    let (parts, body) = req.into_parts();
    let bytes = match Limited::new(body, MAX_REQUEST).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request",
                format!("cannot read the request body (at most {MAX_REQUEST} bytes): {e}"),
            );
        }
    };
    let alias = match serde_json::from_slice::<Json>(&bytes) {
        Ok(v) => match v.get("model").and_then(Json::as_str) {
            Some(m) => m.to_string(),
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request",
                    "the request has no \"model\": name a loaded model's alias (GET /v1/models lists them)".into(),
                );
            }
        },
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!("the request body is not JSON: {e}"),
            );
        }
    };
    let (served, port) = match pool.route(&alias).await {
        Ok(r) => r,
        Err(e) => return route_error(e),
    };
    let flight = served.begin();
    let upstream = async {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
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
                "host"
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
            .body(Full::new(bytes.clone()))
            .map_err(std::io::Error::other)?;
        send.send_request(request)
            .await
            .map_err(std::io::Error::other)
    };
    let resp = match upstream.await {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_GATEWAY,
                "model_unreachable",
                format!("the server of {alias:?} on 127.0.0.1:{port} did not answer: {e}"),
            );
        }
    };
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
            _flight: flight,
        }),
    };
    Response::from_parts(head, body.boxed())
}

/// Where the endpoint listens.
pub struct Endpoint {
    pub socket: PathBuf,
    pub listen: Option<std::net::SocketAddr>,
}

fn serve_conn<S>(pool: Arc<Inference>, stream: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let service = hyper::service::service_fn(move |req| handle(pool.clone(), req));
        if let Err(e) = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await
        {
            tracing::debug!(error = %e, "inference endpoint connection ended");
        }
    });
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
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = unix.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                // Same rule as the daemon's socket: only this user's processes.
                match stream.peer_cred() {
                    Ok(c) if c.uid() == uid => serve_conn(pool.clone(), stream),
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
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = tcp.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                serve_conn(pool.clone(), stream);
            }
        });
    }
    *pool.endpoint.lock().unwrap_or_else(|p| p.into_inner()) = json!({
        "socket": socket.display().to_string(),
        "listen": bound.map(|a| format!("http://{a}/v1")),
    });
    Ok(Endpoint {
        socket: socket.to_path_buf(),
        listen: bound,
    })
}
