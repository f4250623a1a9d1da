//! Who may use the Streamable HTTP listener, checked before rmcp sees a request: a bearer
//! token on every request to a loopback port (any local user can connect to one), and MCP
//! sessions and 2026-07-28 runs capped together per client process and in all (each holds a
//! daemon connection, so a flood of them would leave the daemon answering `busy` to everyone
//! else).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Request, Response, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;

use crate::peer::Peer;

/// A response body, rmcp's type.
pub type Body = BoxBody<Bytes, Infallible>;

/// The shortest token accepted from an operator (a generated one is 64 hex digits).
pub const MIN_TOKEN_LEN: usize = 32;

/// Where the listener's token comes from (a loopback port always has one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// A fresh random token, written 0600 beside the daemon's socket and removed at exit.
    Generate,
    /// This file's contents (made 0600 with a fresh token when it does not exist yet; kept).
    File(PathBuf),
    /// This value (from `TOOLVISOR_MCP_TOKEN`).
    Value(String),
}

/// A bearer token, compared in constant time; never printed.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(***)")
    }
}

impl Token {
    /// 32 random bytes from the kernel, as 64 hex digits.
    pub fn generate() -> std::io::Result<Token> {
        let mut bytes = [0u8; 32];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
        Ok(Token(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// An operator's token: at least [`MIN_TOKEN_LEN`] visible ASCII characters.
    pub fn new(value: &str, from: &str) -> Result<Token, String> {
        let value = value.trim();
        if value.len() < MIN_TOKEN_LEN || !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!(
                "the MCP listener's token from {from} must be at least {MIN_TOKEN_LEN} visible ASCII characters (it has {}); generate one with `head -c 32 /dev/urandom | xxd -p -c 64`, or give no token and let toolvisor mcp make one",
                value.chars().count()
            ));
        }
        Ok(Token(value.to_string()))
    }

    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether an `Authorization` header value carries this token.
    fn admits(&self, header: &str) -> bool {
        let Some((scheme, given)) = header.trim().split_once(' ') else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return false;
        }
        let (a, b) = (given.trim().as_bytes(), self.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The token of a listener and where it is kept.
pub struct Resolved {
    pub token: Token,
    /// The file holding it, when there is one.
    pub file: Option<PathBuf>,
    /// Remove `file` when the listener stops (we made it).
    pub remove_at_exit: bool,
}

/// Resolve `source` for a loopback listener on `port`; `socket_dir` is the daemon socket's
/// directory (private by the daemon's own rule), where a generated token goes.
pub fn resolve_token(
    source: &TokenSource,
    socket_dir: &Path,
    port: u16,
) -> Result<Resolved, String> {
    match source {
        TokenSource::Value(v) => Ok(Resolved {
            token: Token::new(v, "TOOLVISOR_MCP_TOKEN")?,
            file: None,
            remove_at_exit: false,
        }),
        TokenSource::File(path) => {
            // Opened once beneath its checked directory, never through a link, and read
            // from the descriptor that was checked: a link flipped between a check by path
            // and a read by path once handed another user's token to the listener.
            let read = toolvisor_kit::private::read_secret_file(path, "the token file", 4096)
                .map_err(|e| e.to_string())?;
            let token = match read {
                Some(bytes) => {
                    let text = String::from_utf8(bytes).map_err(|_| {
                        format!(
                            "the token file {} is not text: it must hold the token alone",
                            path.display()
                        )
                    })?;
                    Token::new(&text, &path.display().to_string())?
                }
                None => write_new(path)?,
            };
            Ok(Resolved {
                token,
                file: Some(path.clone()),
                remove_at_exit: false,
            })
        }
        TokenSource::Generate => {
            toolvisor_kit::private::ensure_private_dir(socket_dir, "the MCP token's directory")
                .map_err(|e| format!("{e}; or pass --token-file PATH"))?;
            let path = socket_dir.join(format!("toolvisor-mcp-{port}.token"));
            let token = write_new(&path)?;
            Ok(Resolved {
                token,
                file: Some(path),
                remove_at_exit: true,
            })
        }
    }
}

fn write_new(path: &Path) -> Result<Token, String> {
    let token = Token::generate().map_err(|e| format!("cannot make a token: {e}"))?;
    toolvisor_kit::private::write_private_file(
        path,
        format!("{}\n", token.secret()).as_bytes(),
        "the MCP token file",
        toolvisor_kit::private::Durability::Unsynced,
    )
    .map_err(|e| format!("cannot write the token file {}: {e}", path.display()))?;
    // `write_private_file` makes 0600; say so explicitly in case it ever changes.
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    Ok(token)
}

/// The listener's caps on MCP sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionCaps {
    /// Sessions open at once, all clients together.
    pub total: usize,
    /// Sessions open at once from one client process.
    pub per_client: usize,
    /// A 2026-07-28 run (no session) nobody used this long gives its daemon connection and
    /// its place under the caps back.
    pub run_idle: std::time::Duration,
}

impl Default for SessionCaps {
    fn default() -> Self {
        SessionCaps {
            total: 64,
            per_client: 16,
            run_idle: std::time::Duration::from_secs(300),
        }
    }
}

#[derive(Default)]
struct Holdings {
    /// Session ids this client opened (pruned against the live sessions before counting).
    ids: Vec<String>,
    /// Requests that may be opening a session now.
    pending: usize,
    /// 2026-07-28 runs this client started that still hold their place ([`RunPlace`]).
    runs: usize,
}

impl Holdings {
    fn held(&self) -> usize {
        self.ids.len() + self.pending + self.runs
    }
}

/// Who holds what under the caps: MCP sessions and 2026-07-28 runs alike (each holds a
/// daemon connection), per client and in all.
pub struct Ledger {
    caps: SessionCaps,
    manager: Arc<LocalSessionManager>,
    book: Mutex<HashMap<Peer, Holdings>>,
}

/// A 2026-07-28 run's place under the caps, given back when dropped.
pub struct RunPlace {
    ledger: Arc<Ledger>,
    peer: Peer,
}

impl Drop for RunPlace {
    fn drop(&mut self) {
        let mut book = self.ledger.lock();
        if let Some(h) = book.get_mut(&self.peer) {
            h.runs = h.runs.saturating_sub(1);
        }
    }
}

/// Why a client may not take one more place: the message and what to do.
pub struct CapsFull {
    pub message: String,
    pub hint: String,
}

impl Ledger {
    pub fn new(caps: SessionCaps, manager: Arc<LocalSessionManager>) -> Arc<Ledger> {
        Arc::new(Ledger {
            caps,
            manager,
            book: Mutex::new(HashMap::new()),
        })
    }

    pub fn caps(&self) -> SessionCaps {
        self.caps
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Peer, Holdings>> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The book with sessions that ended pruned, and `peer`'s count and the total.
    async fn counted(
        &self,
        peer: Peer,
    ) -> (
        std::sync::MutexGuard<'_, HashMap<Peer, Holdings>>,
        usize,
        usize,
    ) {
        let live: HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        let mut book = self.lock();
        book.retain(|_, h| {
            h.ids.retain(|id| live.contains(id));
            h.held() > 0
        });
        let total: usize = book.values().map(Holdings::held).sum();
        let mine = book.get(&peer).map(Holdings::held).unwrap_or(0);
        (book, mine, total)
    }

    fn full(&self, peer: Peer, mine: usize, total: usize) -> Option<CapsFull> {
        if mine >= self.caps.per_client {
            Some(CapsFull {
                message: format!(
                    "toolvisor mcp: {peer} already holds {mine} MCP sessions and 2026-07-28 conversations open, the most one client may hold (--max-sessions-per-client {})",
                    self.caps.per_client
                ),
                hint: format!(
                    "close sessions you no longer use (HTTP DELETE with their Mcp-Session-Id; idle ones close after 5 minutes), send back the `{}` handle of an earlier result instead of starting a new conversation (idle ones give their place back after {} s), or raise --max-sessions-per-client",
                    crate::HANDLE_KEY,
                    self.caps.run_idle.as_secs()
                ),
            })
        } else if total >= self.caps.total {
            Some(CapsFull {
                message: format!(
                    "toolvisor mcp: {total} MCP sessions and 2026-07-28 conversations are open, the most this listener holds (--max-sessions {})",
                    self.caps.total
                ),
                hint: format!(
                    "retry later (idle sessions close after 5 minutes, idle conversations give their place back after {} s), or raise --max-sessions",
                    self.caps.run_idle.as_secs()
                ),
            })
        } else {
            None
        }
    }

    /// A place for one more 2026-07-28 run of `peer`, or why not.
    pub async fn admit_run(self: &Arc<Self>, peer: Peer) -> Result<RunPlace, CapsFull> {
        let (mut book, mine, total) = self.counted(peer).await;
        if let Some(full) = self.full(peer, mine, total) {
            tracing::warn!(%peer, mine, total, "refused a new 2026-07-28 run past the cap");
            return Err(full);
        }
        book.entry(peer).or_default().runs += 1;
        Ok(RunPlace {
            ledger: self.clone(),
            peer,
        })
    }
}

/// What every request of a listener goes through.
pub struct Gate {
    token: Option<Token>,
    /// Where the token is, for the 401's text.
    token_at: String,
    ledger: Arc<Ledger>,
}

/// A request that may open a session, counted until it has its answer.
pub struct Ticket<'a> {
    gate: &'a Gate,
    peer: Peer,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        let mut book = self.gate.ledger.lock();
        if let Some(h) = book.get_mut(&self.peer) {
            h.pending = h.pending.saturating_sub(1);
        }
    }
}

impl Ticket<'_> {
    /// The request opened session `id`.
    pub fn opened(&self, id: &str) {
        self.gate
            .ledger
            .lock()
            .entry(self.peer)
            .or_default()
            .ids
            .push(id.to_string());
    }
}

impl Gate {
    pub fn new(token: Option<Token>, token_at: String, ledger: Arc<Ledger>) -> Gate {
        Gate {
            token,
            token_at,
            ledger,
        }
    }

    /// Whether requests must carry a token (a Unix socket without one serves our uid only).
    pub fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// `Err(401)` unless the request carries the token (when there is one).
    pub fn authenticate<B>(&self, req: &Request<B>) -> Result<(), Box<Response<Body>>> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let ok = req
            .headers()
            .get_all(header::AUTHORIZATION)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| token.admits(v)));
        if ok {
            return Ok(());
        }
        let given = req.headers().contains_key(header::AUTHORIZATION);
        Err(Box::new(refusal(
            StatusCode::UNAUTHORIZED,
            -32001,
            &format!(
                "toolvisor mcp: {} (this listener serves only clients holding its token)",
                if given {
                    "the Authorization header does not carry this listener's token"
                } else {
                    "no `Authorization: Bearer <token>` header"
                }
            ),
            &format!(
                "send `Authorization: Bearer <token>` on every request; the token is {} (readable by its owner only). Claude Code: `headers` in .mcp.json; Codex: `bearer_token_env_var` (docs/SECURITY.md)",
                self.token_at
            ),
            &[(header::WWW_AUTHENTICATE, "Bearer realm=\"toolvisor mcp\"")],
        )))
    }

    /// Room for one more session for `peer`, or the 503 that says whose cap is reached.
    pub async fn admit(&self, peer: Peer) -> Result<Ticket<'_>, Box<Response<Body>>> {
        let (mut book, mine, total) = self.ledger.counted(peer).await;
        let Some(full) = self.ledger.full(peer, mine, total) else {
            book.entry(peer).or_default().pending += 1;
            return Ok(Ticket { gate: self, peer });
        };
        drop(book);
        tracing::warn!(%peer, mine, total, "refused a new MCP session past the cap");
        Err(Box::new(busy(&full)))
    }

    /// Session `id` was opened by a request admitted as a 2026-07-28 one (an `initialize`
    /// under a 2026 header): counted now, and closed again with the 503 when it was past
    /// the cap.
    pub async fn adopt(&self, peer: Peer, id: &str) -> Result<(), Box<Response<Body>>> {
        let (mut book, mine, total) = self.ledger.counted(peer).await;
        // Counted without this session (not in the book yet).
        let Some(full) = self.ledger.full(peer, mine, total) else {
            book.entry(peer).or_default().ids.push(id.to_string());
            return Ok(());
        };
        drop(book);
        use rmcp::transport::streamable_http_server::session::SessionManager;
        let _ = self.ledger.manager.close_session(&id.into()).await;
        Err(Box::new(busy(&full)))
    }
}

/// The 503 of a full cap.
fn busy(full: &CapsFull) -> Response<Body> {
    refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        -32000,
        &full.message,
        &full.hint,
        &[(header::RETRY_AFTER, "10")],
    )
}

/// A JSON-RPC error answer with an HTTP status (no request id: the request was not read).
fn refusal(
    status: StatusCode,
    code: i64,
    message: &str,
    hint: &str,
    headers: &[(header::HeaderName, &str)],
) -> Response<Body> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": message, "data": {"hint": hint}},
    });
    let mut resp = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        resp = resp.header(name, *value);
    }
    resp.body(Full::new(Bytes::from(body.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_token_is_checked_whole_and_by_scheme() {
        let t = Token::new(&"a".repeat(40), "test").unwrap();
        let a40 = "a".repeat(40);
        assert!(t.admits(&format!("Bearer {a40}")));
        assert!(t.admits(&format!("bearer  {a40} ")));
        assert!(!t.admits(&format!("Basic {a40}")));
        assert!(!t.admits(&format!("Bearer {}", "a".repeat(39))));
        assert!(!t.admits(&format!("Bearer {a40}a")));
        assert!(!t.admits("Bearer"));
        assert!(!format!("{t:?}").contains("aaaa"));
    }

    #[test]
    fn a_short_operator_token_is_refused_saying_how_to_make_one() {
        let err = Token::new("hunter2", "TOOLVISOR_MCP_TOKEN").unwrap_err();
        assert!(
            err.contains("at least 32") && err.contains("/dev/urandom"),
            "{err}"
        );
        assert_eq!(Token::generate().unwrap().secret().len(), 64);
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "b".repeat(40)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = resolve_token(&TokenSource::File(path.clone()), dir.path(), 1)
            .err()
            .unwrap();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let ok = resolve_token(&TokenSource::File(path), dir.path(), 1).unwrap();
        assert_eq!(ok.token.secret(), "b".repeat(40));
    }

    #[test]
    fn a_generated_token_file_is_private() {
        let dir = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .unwrap();
        let r = resolve_token(&TokenSource::Generate, dir.path(), 4242).unwrap();
        let file = r.file.unwrap();
        assert_eq!(file, dir.path().join("toolvisor-mcp-4242.token"));
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap().trim(),
            r.token.secret()
        );
        assert!(r.remove_at_exit);
    }
}
