//! `toolvisor mcp`: a Model Context Protocol server, over stdio or Streamable HTTP, that is a
//! client of the daemon (one MCP session = one daemon connection = one run); it hosts nothing.
//!
//! It hosts nothing and has no gate of its own: one MCP session is one daemon connection (one run),
//! and every call goes through the daemon's gates. Approvals are answered as the operator chose
//! (`--approvals`, `Approvals`), never the model: by a person's answer to an MCP elicitation (the
//! default; a multi round-trip form on 2026-07-28; a client without the elicitation capability gets
//! every approval denied), by the MCP client's own call (`harness`), or never (`deny`). Questions
//! reach a person only through elicitation: a client without it, one known to decline every form
//! unseen, or `--questions none` is no question port, and `ask_user` answers `no_human`; a form
//! declined faster than a person reads it is `no_human` too, never a skip. When an MCP session ends its calls in flight
//! are cancelled (`DaemonConn::close`), since the daemon lets a half-closed connection's calls
//! finish; a stdio run also ends its own conversation unless `--conversation` named it
//! (`SessionEnd::close`). The Streamable HTTP transport listens on loopback or a private Unix socket only, and a
//! loopback port serves only requests carrying its bearer token (`docs/SECURITY.md`): any local
//! user can reach a port.
//!
//! It is its own crate because rmcp, hyper and tokio-util are its dependencies alone: the daemon's
//! crate stays free of them (its modules never import this one; `main.rs` calls it for the `mcp`
//! subcommand), and the layering is visible in `Cargo.toml`. It depends on `toolvisor-kit` only for
//! the private-directory and private-file rules of the token file.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolvisor_protocol::client::ClientError;
use toolvisor_protocol::codec::CodecError;
use toolvisor_protocol::wire::Tier;

pub mod bridge;
pub mod calls;
pub mod client;
pub mod content;
pub mod daemon;
pub mod gate;
pub mod handler;
pub mod http;
pub use toolvisor_kit::peer;
pub mod render;
pub mod runs;
pub mod tasks;

pub use bridge::Bridge;
/// The `_meta` key of the conversation handle (request and result).
pub const HANDLE_KEY: &str = "toolvisor/conversation";

/// Cancels `http::serve_http`.
pub use tokio_util::sync::CancellationToken as StopToken;

/// What `toolvisor mcp` was told.
#[derive(Clone, Debug)]
pub struct Options {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The highest tier the MCP client may see and call.
    pub surface: Tier,
    /// The conversation every call goes to; `None`: one per MCP session.
    pub conversation: Option<String>,
    /// The run id; `None`: one per MCP session.
    pub run_id: Option<String>,
    /// The run's working directory.
    pub workdir: String,
    /// How often an open session looks at its tool list (besides after tree changes).
    pub poll: Duration,
    /// Who answers approval requests: chosen by the operator, never by the model.
    pub approvals: Approvals,
    /// Where `ask_user` questions go (`--questions`).
    pub questions: Questions,
    /// Typed results (`--structured`): each result carries its whole JSON as
    /// `structuredContent` and the tool list carries each tool's `outputSchema`. Off by
    /// default: the harnesses give the model `structuredContent` when it is there, instead
    /// of the rendering in `content`.
    pub structured: bool,
    /// Where a result's images go (`--images`).
    pub images: Images,
    /// The credential a vibe worker got from the daemon (`TOOLVISOR_RUN_TOKEN` in the
    /// environment `toolvisor mcp` was started with), sent in every Hello: the daemon then
    /// pins the session to the worker's tier surface, run and conversation `vibe:<id>`.
    pub run_token: Option<String>,
    /// Each tool's rendering of its results, from its result type (the binary's `ToolSpec`s);
    /// the default renders every result by the generic rules.
    pub renderer: render::Renderer,
}

/// Where `ask_user` questions go (`toolvisor mcp --questions`). Whatever the mode, a form the
/// client declines faster than a person can read it ([`client::UNSEEN`]) answers `no_human`:
/// a skip is only ever a person's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Questions {
    /// A question port when the client declares form elicitation and is not one known to
    /// decline every form unseen ([`client::HEADLESS_CLIENTS`]); otherwise none, so a
    /// `toolvisor operator` attached to every run gets the question, or `ask_user` answers
    /// `no_human`.
    #[default]
    Auto,
    /// A question port whenever the client declares form elicitation.
    Elicit,
    /// No question port: `ask_user` answers `no_human` at once (unless an operator is attached).
    None,
}

impl std::str::FromStr for Questions {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Questions::Auto),
            "elicit" => Ok(Questions::Elicit),
            "none" => Ok(Questions::None),
            other => Err(format!(
                "unknown questions mode {other:?}: use auto (the MCP client's elicitation form, unless it is a client known to decline every form unseen, such as Codex; the default), elicit (the form whenever the client declares elicitation) or none (no question port: ask_user answers no_human unless a toolvisor operator is attached)"
            )),
        }
    }
}

/// Where a result's images go (`toolvisor mcp --images`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Images {
    /// By the client's `clientInfo.name`: written to files for the clients known to drop
    /// image content ([`content::NO_IMAGE_CLIENTS`]), image content for every other.
    #[default]
    Auto,
    /// Always MCP image content.
    Inline,
    /// Always a PNG (or JPEG) under the workdir's `.toolvisor/images/`, named in the text.
    File,
}

impl std::str::FromStr for Images {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Images::Auto),
            "inline" => Ok(Images::Inline),
            "file" => Ok(Images::File),
            other => Err(format!(
                "unknown images mode {other:?}: use auto (image content, or a file for the clients known to drop it; the default), inline (always image content) or file (always a file under the workdir's .toolvisor/images/, named in the text)"
            )),
        }
    }
}

/// Who approves the calls that need approval (`toolvisor mcp --approvals`, `[mcp] approvals`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approvals {
    /// A person, through an MCP elicitation per call; denied without elicitation.
    #[default]
    Elicit,
    /// The MCP client: its `tools/call` is the approval, because the harness's own permission
    /// system already asked the person, or was told by them (`--allowedTools`, a sandbox
    /// policy). Audited as approved by that client, by name and version.
    Harness,
    /// Nobody: no call that needs approval runs, and nothing above the read tier is offered.
    Deny,
}

impl Approvals {
    pub fn as_str(self) -> &'static str {
        match self {
            Approvals::Elicit => "elicit",
            Approvals::Harness => "harness",
            Approvals::Deny => "deny",
        }
    }
}

impl std::str::FromStr for Approvals {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "elicit" => Ok(Approvals::Elicit),
            "harness" => Ok(Approvals::Harness),
            "deny" => Ok(Approvals::Deny),
            other => Err(format!(
                "unknown approvals mode {other:?}: use elicit (a person answers each approval through MCP elicitation; the default), harness (the MCP client's tools/call is the approval: its own permission prompt or allow-list asked the person) or deny (nothing that needs approval runs)"
            )),
        }
    }
}

/// Where the Streamable HTTP transport listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket (made 0600; peers of another uid are refused).
    Unix(PathBuf),
    /// A loopback TCP address (port 0 picks one).
    Tcp(SocketAddr),
}

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.starts_with('/') || s.starts_with("./") || s.starts_with("unix:") {
            return Ok(Listen::Unix(PathBuf::from(
                s.strip_prefix("unix:").unwrap_or(s),
            )));
        }
        let addr: SocketAddr = s.parse().map_err(|_| {
            format!("--listen {s:?}: expected a loopback address with a port (127.0.0.1:8765, [::1]:0) or a Unix socket path (/run/user/1000/toolvisor-mcp.sock)")
        })?;
        if !addr.ip().is_loopback() {
            return Err(format!(
                "--listen {s:?}: toolvisor mcp listens on loopback only ({} is not); use 127.0.0.1 or ::1, or a Unix socket path, and put a proxy with authentication in front for anything else",
                addr.ip()
            ));
        }
        Ok(Listen::Tcp(addr))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error(transparent)]
    Daemon(ClientError),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the daemon connection is closed: {0}")]
    Closed(String),
    #[error("the MCP transport failed: {0}")]
    Transport(String),
}

/// Serve one MCP session on stdin/stdout until the client closes it.
pub async fn serve_stdio(opts: Options) -> Result<(), BridgeError> {
    use rmcp::ServiceExt;
    let opts = Arc::new(opts);
    let bridge = Bridge::new(opts.clone(), runs::Runs::new(opts)).single_client();
    let end = bridge.session_end();
    let service = bridge
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| BridgeError::Transport(e.to_string()))?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    // Harnesses close stdin and then, soon after, send SIGTERM: either way what the session's
    // calls started is cancelled before we exit (rmcp lets handlers drain for a while after
    // end of input; the signal does not wait for that).
    let quit = tokio::select! {
        quit = service.waiting() => quit.map(|_| ()),
        _ = term.recv() => Ok(()),
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    end.close().await;
    quit.map_err(|e| BridgeError::Transport(e.to_string()))?;
    Ok(())
}
