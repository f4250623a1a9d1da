//! JSON-RPC 2.0 over a child's stdio: Content-Length framing with a size cap (shared by the
//! LSP and DAP workers), message types, and a transport of three tasks plus a pending map.
//!
//! The transport follows helix's and zed's shape: a stdout reader, a stdin writer and a
//! stderr logger, a map request id → oneshot, every request with a timeout, a dropped
//! request cancelled on the wire, and on end of stream every pending request failed at once.

#![forbid(unsafe_code)]

pub mod framing;
pub mod message;
pub mod transport;

pub use framing::{FrameError, read_frame, write_frame};
pub use message::{Id, Message, ResponseError};
pub use transport::{
    DEFAULT_INCOMING_CAPACITY, DEFAULT_OUTGOING_CAPACITY, Incoming, RpcClient, StderrTail,
    Transport, TransportOptions,
};

/// What can go wrong with one request.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RpcError {
    /// The child's stdout ended (it exited or closed it): nothing more will be answered.
    #[error("the server's output stream closed (it exited or crashed)")]
    StreamClosed,
    #[error("`{method}` got no answer within {after_ms} ms")]
    Timeout { method: String, after_ms: u64 },
    #[error("`{method}` failed on the server: {message} (code {code})")]
    Server {
        method: String,
        code: i64,
        message: String,
    },
    #[error("cannot encode `{method}`: {message}")]
    Encode { method: String, message: String },
    /// The outgoing queue is full: the child has stopped reading its stdin.
    #[error(
        "`{method}` was not sent: the server is not reading its input ({queued} messages already wait to be written)"
    )]
    Backlog { method: String, queued: usize },
}

pub type Result<T, E = RpcError> = std::result::Result<T, E>;
