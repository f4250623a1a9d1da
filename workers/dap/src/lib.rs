//! `debug`: a Debug Adapter Protocol driver with real adapters (debugpy, lldb-dap, delve;
//! dart configured), one session per conversation, each an actor under the
//! `debug_adapters` supervisor with a hard TTL.
//!
//! - `client.rs` is a thin, lenient DAP client on the shared Content-Length framing of
//!   `toolvisor-jsonrpc`. The `dap` crate is not used: its types are the *adapter's* side
//!   (requests in, responses and events out), its event enum is closed and its optional
//!   booleans serialise as `null`, so it rejects real debugpy traffic (`debugpySockets`,
//!   `debugpyWaitingForServer`) and sends what adapters refuse. Messages stay
//!   `serde_json::Value`, read field by field; unset options are omitted.
//! - `config.rs` the adapter registry as data (`[debug]`); `adapters.rs` roots, binaries and
//!   debugpy's interpreter.
//! - `session.rs` a session's shared state and what its events fold into; `session/` its
//!   actor, the event folding and the adapter's other streams; `debuggers.rs` the tool's ops,
//!   each answering its `toolvisor_protocol::results::DebugResult` typed; the debuggee's
//!   bounded output is a `toolvisor_kit::output::OutputLog`.

#![forbid(unsafe_code)]

pub mod adapters;
pub mod client;
pub mod config;
mod debuggers;
mod session;

pub use config::{AdapterSpec, DebugConfig, Transport};
pub use debuggers::{DebugCall, Debuggers, MAX_CHILDREN, MAX_FRAMES, MAX_VALUE_CHARS};

/// What can go wrong with one request to an adapter.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DapError {
    /// The adapter's stream ended (it exited, crashed or closed the connection).
    #[error("the debug adapter's stream closed ({0})")]
    Closed(String),
    #[error("`{command}` got no answer within {after_ms} ms")]
    Timeout { command: String, after_ms: u64 },
    /// The adapter answered `success: false`.
    #[error("`{command}` failed in the adapter: {message}")]
    Failed { command: String, message: String },
    #[error("cannot encode `{command}`: {message}")]
    Encode { command: String, message: String },
    /// The outgoing queue is full: the adapter has stopped reading its input.
    #[error(
        "`{command}` was not sent: the debug adapter is not reading its input ({queued} messages already wait to be written)"
    )]
    Backlog { command: String, queued: usize },
}

/// The crate's result.
pub type Result<T, E = DapError> = std::result::Result<T, E>;
