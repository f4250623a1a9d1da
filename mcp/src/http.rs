//! The Streamable HTTP transport: rmcp's tower service (one `Bridge`, so one daemon
//! connection, per MCP session) served by hyper on a private Unix socket or a loopback port,
//! behind the [`Gate`]: a loopback port needs the listener's bearer token on every request,
//! a Unix socket serves our own uid only, a browser `Origin` is refused unless allowed, and
//! sessions and 2026-07-28 runs are capped per client and in all. Before a connection has
//! shown the token it is a stranger's: a user holds at most [`MAX_STRANGERS_PER_USER`] such
//! connections, each for at most [`STRANGER_HOLD`], and every 401 and 403 closes its
//! connection, so a user without the token cannot hold the listener's connections.

use std::collections::HashMap;
use std::convert::Infallible;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::gate::{Body, Gate, Ledger, SessionCaps, TokenSource, resolve_token};
use crate::peer::{Peer, tcp_peer, tcp_peer_uid, unix_peer};
use crate::{Bridge, BridgeError, Listen, Options};

/// The path MCP clients post to.
pub const PATH: &str = "/mcp";

/// HTTP connections served at once; past it a new connection is closed at once (each holds a
/// task and a socket, authenticated or not).
pub const MAX_CONNECTIONS: usize = 256;

/// Connections one user may hold at once before they have shown the token; past it a new
/// one is closed at once. Counted per uid (SO_PEERCRED on a Unix socket, the kernel's socket
/// table on loopback TCP), so another local user cannot take the connections the token's
/// holders need.
pub const MAX_STRANGERS_PER_USER: usize = 8;

/// How long a connection may stay open without a request carrying the token; then it is
/// closed (a legitimate client sends its first request at once).
pub const STRANGER_HOLD: Duration = Duration::from_secs(5);

/// How long a connection may take to send a request's headers (a client that trickles them
/// would otherwise hold its connection for ever).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How `toolvisor mcp --listen` serves.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    pub listen: Listen,
    /// The bearer token; `None`: a generated one on a loopback port, none on a Unix socket.
    pub token: Option<TokenSource>,
    /// Browser origins allowed to call (`http://localhost:3000`); any other `Origin` is refused.
    pub allowed_origins: Vec<String>,
    pub caps: SessionCaps,
}

impl HttpOptions {
    pub fn new(listen: Listen) -> HttpOptions {
        HttpOptions {
            listen,
            token: None,
            allowed_origins: Vec::new(),
            caps: SessionCaps::default(),
        }
    }
}

/// What a started listener tells its starter.
#[derive(Clone, Debug)]
pub struct Ready {
    /// The URL clients connect to (for a Unix socket, `http://localhost/mcp on PATH`).
    pub url: String,
    /// The file holding the bearer token, when there is one.
    pub token_file: Option<PathBuf>,
}

/// Serve until `stop` is cancelled; `ready` is told once the socket listens.
pub async fn serve_http(
    opts: Options,
    http: HttpOptions,
    stop: CancellationToken,
    ready: impl FnOnce(&Ready),
) -> Result<(), BridgeError> {
    let opts = Arc::new(opts);
    let factory_opts = opts.clone();
    let manager = Arc::new(LocalSessionManager::default());
    // Sessions and 2026 runs share the caps: each holds a daemon connection.
    let ledger = Ledger::new(http.caps, manager.clone());
    // What outlives one request (2026 clients' runs, calls waiting for an answer, tasks).
    let runs = crate::runs::Runs::for_listener(opts.clone(), ledger.clone(), stop.child_token());
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop.child_token())
        .with_allowed_origins(http.allowed_origins.clone());
    if http.allowed_origins.is_empty() {
        config = config.enforce_origin_validation();
    }
    let service = StreamableHttpService::new(
        move || Ok(Bridge::new(factory_opts.clone(), runs.clone())),
        manager.clone(),
        config,
    );
    let conns = Conns {
        strangers: Strangers::new(),
        slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        service,
    };
    match http.listen {
        Listen::Tcp(addr) => {
            serve_tcp(
                addr,
                &opts,
                http.token.as_ref(),
                ledger,
                conns,
                &stop,
                ready,
            )
            .await
        }
        Listen::Unix(path) => {
            serve_unix(path, http.token.as_ref(), ledger, conns, &stop, ready).await
        }
    }
}

/// What every accepted connection is served with.
struct Conns {
    strangers: Arc<Strangers>,
    slots: Arc<Semaphore>,
    service: Svc,
}

/// A listener's refusal to start, as an I/O error.
fn refuse(e: String) -> BridgeError {
    BridgeError::Io(std::io::Error::other(e))
}

/// Serves on loopback port `addr`, behind the bearer token, until `stop` is cancelled.
async fn serve_tcp(
    addr: std::net::SocketAddr,
    opts: &Options,
    token: Option<&TokenSource>,
    ledger: Arc<Ledger>,
    conns: Conns,
    stop: &CancellationToken,
    ready: impl FnOnce(&Ready),
) -> Result<(), BridgeError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let (_remove, gate, token_file) = tcp_gate(opts, token, local, ledger)?;
    ready(&Ready {
        url: format!("http://{local}{PATH}"),
        token_file,
    });
    loop {
        let (stream, remote) = tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(x) => x,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
            },
        };
        let Ok(slot) = conns.slots.clone().try_acquire_owned() else {
            tracing::warn!(%remote, "refused a connection past {MAX_CONNECTIONS} open");
            continue;
        };
        // Small JSON-RPC answers must not wait for the client's delayed ACK (Nagle's
        // algorithm: about 40 ms per call).
        let _ = stream.set_nodelay(true);
        // Its process is looked up only when it opens a session (a walk of /proc); its
        // user at once, for the cap on connections without the token.
        let peer = ConnPeer::Tcp { local, remote };
        let (service, gate, strangers) =
            (conns.service.clone(), gate.clone(), conns.strangers.clone());
        tokio::spawn(async move {
            let uid = tokio::task::spawn_blocking(move || tcp_peer_uid(local, remote))
                .await
                .ok()
                .flatten();
            let Some(place) = strangers.enter(uid) else {
                tracing::warn!(%remote, ?uid, "refused a connection past {MAX_STRANGERS_PER_USER} without the token from one user");
                return;
            };
            spawn_conn(stream, peer, service, gate, slot, Some(place));
        });
    }
}

/// The gate of a loopback listener on `local`: its token (generated unless one was given,
/// its file beside the daemon's socket), what removes a generated token's file when the
/// listener stops, and that file.
fn tcp_gate(
    opts: &Options,
    token: Option<&TokenSource>,
    local: std::net::SocketAddr,
    ledger: Arc<Ledger>,
) -> Result<(RemoveOnDrop, Arc<Gate>, Option<PathBuf>), BridgeError> {
    let socket_dir = opts
        .socket
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let source = token.cloned().unwrap_or(TokenSource::Generate);
    let resolved = resolve_token(&source, &socket_dir, local.port()).map_err(refuse)?;
    let token_at = match &resolved.file {
        Some(f) => format!("in {}", f.display()),
        None => "in TOOLVISOR_MCP_TOKEN where toolvisor mcp was started".to_string(),
    };
    let remove = RemoveOnDrop(
        resolved
            .remove_at_exit
            .then(|| resolved.file.clone())
            .flatten(),
    );
    let gate = Arc::new(Gate::new(Some(resolved.token), token_at, ledger));
    Ok((remove, gate, resolved.file.clone()))
}

/// Serves on the Unix socket `path`, to our own uid (and root) only, until `stop` is
/// cancelled.
async fn serve_unix(
    path: PathBuf,
    token: Option<&TokenSource>,
    ledger: Arc<Ledger>,
    conns: Conns,
    stop: &CancellationToken,
    ready: impl FnOnce(&Ready),
) -> Result<(), BridgeError> {
    let (gate, token_file) = unix_gate(&path, token, ledger)?;
    let listener = tokio::net::UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    ready(&Ready {
        url: format!("http://localhost{PATH} on {}", path.display()),
        token_file,
    });
    let our_uid = nix::unistd::geteuid().as_raw();
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => { let _ = std::fs::remove_file(&path); return Ok(()) }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => { tracing::warn!(error = %e, "accept failed"); continue; }
            },
        };
        let peer = unix_peer(&stream);
        match peer.uid() {
            Some(uid) if uid == our_uid || uid == 0 => {}
            Some(uid) => {
                tracing::warn!(uid, "refused a peer of another uid");
                continue;
            }
            None => {
                tracing::warn!("cannot read the peer's credentials; refused");
                continue;
            }
        }
        let Ok(slot) = conns.slots.clone().try_acquire_owned() else {
            tracing::warn!("refused a connection past {MAX_CONNECTIONS} open");
            continue;
        };
        // Without a token the uid check was the authentication.
        let place = if gate.needs_token() {
            match conns.strangers.enter(peer.uid()) {
                Some(place) => Some(place),
                None => {
                    tracing::warn!(%peer, "refused a connection past {MAX_STRANGERS_PER_USER} without the token from one user");
                    continue;
                }
            }
        } else {
            None
        };
        spawn_conn(
            stream,
            ConnPeer::Known(peer),
            conns.service.clone(),
            gate.clone(),
            slot,
            place,
        );
    }
}

/// Clears the way for a Unix listener at `path` (a stale socket goes, anything else is
/// refused) and makes its gate: a token only when the operator asked for one; with the
/// token's file.
fn unix_gate(
    path: &Path,
    token: Option<&TokenSource>,
    ledger: Arc<Ledger>,
) -> Result<(Arc<Gate>, Option<PathBuf>), BridgeError> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        use std::os::unix::fs::FileTypeExt;
        if !meta.file_type().is_socket() {
            return Err(refuse(format!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            )));
        }
        std::fs::remove_file(path)?;
    }
    // A token on a Unix socket only when the operator asked for one.
    let resolved = match token {
        Some(TokenSource::Generate) | None => None,
        Some(source) => Some(resolve_token(source, path, 0).map_err(refuse)?),
    };
    let token_file = resolved.as_ref().and_then(|r| r.file.clone());
    let token_at = match &token_file {
        Some(f) => format!("in {}", f.display()),
        None => "in TOOLVISOR_MCP_TOKEN where toolvisor mcp was started".to_string(),
    };
    let gate = Arc::new(Gate::new(resolved.map(|r| r.token), token_at, ledger));
    Ok((gate, token_file))
}

/// Connections open per user that have not shown the token yet.
struct Strangers(std::sync::Mutex<HashMap<Option<u32>, usize>>);

/// A connection's place among its user's strangers, given back when dropped.
struct StrangerPlace {
    strangers: Arc<Strangers>,
    uid: Option<u32>,
}

impl Strangers {
    fn new() -> Arc<Strangers> {
        Arc::new(Strangers(std::sync::Mutex::new(HashMap::new())))
    }

    /// A place for one more connection of user `uid` (`None`: unknown, all share one), or
    /// `None` past [`MAX_STRANGERS_PER_USER`].
    fn enter(self: &Arc<Self>, uid: Option<u32>) -> Option<StrangerPlace> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(uid).or_default();
        if *n >= MAX_STRANGERS_PER_USER {
            return None;
        }
        *n += 1;
        Some(StrangerPlace {
            strangers: self.clone(),
            uid,
        })
    }
}

impl Drop for StrangerPlace {
    fn drop(&mut self) {
        let mut held = self.strangers.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.uid) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.uid);
            }
        }
    }
}

/// The client of one connection: known at accept (a Unix socket's credentials) or found on
/// first need (loopback TCP).
#[derive(Clone, Copy)]
enum ConnPeer {
    Known(Peer),
    Tcp {
        local: std::net::SocketAddr,
        remote: std::net::SocketAddr,
    },
}

impl ConnPeer {
    async fn resolve(self) -> Peer {
        match self {
            ConnPeer::Known(p) => p,
            ConnPeer::Tcp { local, remote } => {
                tokio::task::spawn_blocking(move || tcp_peer(local, remote))
                    .await
                    .unwrap_or(Peer::Unknown)
            }
        }
    }
}

/// Removes a generated token file when the listener stops.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_file(path);
        }
    }
}

type Svc = StreamableHttpService<Bridge, LocalSessionManager>;

/// One request: the token, then (for a request that may open a session or start a
/// 2026-07-28 run) the caps, then rmcp. Every 401 and 403 closes its connection.
async fn handle(
    svc: &Svc,
    gate: &Gate,
    peer: &tokio::sync::OnceCell<Peer>,
    conn: ConnPeer,
    authed: &Notify,
    req: Request<Incoming>,
) -> Response<Body> {
    let mut resp = answer(svc, gate, peer, conn, authed, req).await;
    let status = resp.status();
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        resp.headers_mut().insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    resp
}

async fn answer(
    svc: &Svc,
    gate: &Gate,
    peer: &tokio::sync::OnceCell<Peer>,
    conn: ConnPeer,
    authed: &Notify,
    mut req: Request<Incoming>,
) -> Response<Body> {
    if let Err(refused) = gate.authenticate(&req) {
        tracing::info!("refused a request without the listener's token");
        return *refused;
    }
    authed.notify_one();
    let opens = req.method() == Method::POST && !req.headers().contains_key("mcp-session-id");
    if !opens {
        return svc.handle(req).await;
    }
    let peer = *peer.get_or_init(|| conn.resolve()).await;
    if speaks_2026(&req) {
        // No session: the run it may start takes its place under the caps (`Runs::run`),
        // which needs to know whose it is.
        req.extensions_mut().insert(peer);
        let resp = svc.handle(req).await;
        // An `initialize` opens a session whatever its header said: counted now.
        if let Some(id) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            && let Err(refused) = gate.adopt(peer, &id).await
        {
            return *refused;
        }
        return resp;
    }
    let ticket = match gate.admit(peer).await {
        Ok(t) => t,
        Err(refused) => return *refused,
    };
    let resp = svc.handle(req).await;
    if let Some(id) = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
    {
        ticket.opened(id);
    }
    resp
}

/// Whether a request says it speaks 2026-07-28 or later (rmcp serves it without a session
/// unless it is an `initialize`).
fn speaks_2026<B>(req: &Request<B>) -> bool {
    req.headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

fn spawn_conn<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    conn: ConnPeer,
    svc: Svc,
    gate: Arc<Gate>,
    slot: tokio::sync::OwnedSemaphorePermit,
    stranger: Option<StrangerPlace>,
) {
    tokio::spawn(async move {
        let _slot = slot;
        let io = TokioIo::new(stream);
        let peer = Arc::new(tokio::sync::OnceCell::new());
        let authed = Arc::new(Notify::new());
        let shown = authed.clone();
        let service = hyper::service::service_fn(move |req| {
            let svc = svc.clone();
            let gate = gate.clone();
            let peer = peer.clone();
            let authed = authed.clone();
            async move { Ok::<_, Infallible>(handle(&svc, &gate, &peer, conn, &authed, req).await) }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(io, service);
        tokio::pin!(served);
        // A stranger's connection until a request shows the token: then its place among
        // its user's strangers is given back; past STRANGER_HOLD it is closed.
        let ended = match stranger {
            None => None,
            Some(place) => tokio::select! {
                ended = served.as_mut() => Some(ended),
                _ = shown.notified() => { drop(place); None }
                _ = tokio::time::sleep(STRANGER_HOLD) => {
                    tracing::info!("closed a connection that showed no token within {STRANGER_HOLD:?}");
                    return;
                }
            },
        };
        let ended = match ended {
            Some(ended) => ended,
            None => served.await,
        };
        if let Err(e) = ended {
            tracing::debug!(error = %e, "an HTTP connection ended with an error");
        }
    });
}
