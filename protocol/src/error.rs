//! Tool errors as data: `{kind, message, hint}`, never a panic, never a bare string.

use serde::{Deserialize, Serialize};

/// What went wrong, as a stable machine-readable word. JSON spells it in snake_case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// Arguments missing, of the wrong type, or out of range.
    InvalidArgs,
    /// No tool of that name exists.
    UnknownTool,
    /// The tool exists but cannot run here (its worker is not built, its resource is absent).
    NotAvailable,
    /// The operator's policy denies the tool.
    PolicyDenied,
    /// The client declined the approval request, or has no approval handler.
    ApprovalDenied,
    /// The client's surface (max tier) does not include the tool.
    SurfaceDenied,
    /// The call or a request inside it ran out of time.
    Timeout,
    /// The caller cancelled the call.
    Cancelled,
    /// The resource behind the tool crashed or stays failed after its restart budget.
    ResourceFailed,
    /// The resource is still starting or indexing; an empty answer would be a lie.
    NotReady,
    /// The resource is busy with something that must finish first.
    Busy,
    /// The thing named (process, file, ref, edit) does not exist.
    NotFound,
    /// The thing named belongs to another conversation or session.
    OutOfScope,
    /// A stored-result reference is malformed.
    InvalidRef,
    /// A frame could not be decoded or broke the protocol.
    Protocol,
    /// The client and daemon speak different protocol versions.
    VersionMismatch,
    /// The daemon refused the connection (peer check, handshake).
    Refused,
    /// An operating-system error (I/O, spawn).
    Io,
    /// No person is attached to answer a question.
    NoHuman,
    /// An interpreter kernel died; its state is lost.
    KernelDied,
    /// A session outlived its hard TTL.
    Expired,
    /// The world changed under a staged change (files edited since staging).
    Conflict,
    /// A bug in the daemon. The message says what; please report it.
    Internal,
    /// The daemon is draining (SIGTERM, `toolvisor drain`): calls in flight finish, new ones
    /// are refused. Retry against the next daemon.
    ShuttingDown,
    /// A network endpoint the tool needs (the model hub) cannot be reached.
    NetworkUnavailable,
}

impl ErrorKind {
    /// The snake_case word used on the wire and in the CLI's JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgs => "invalid_args",
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::NotAvailable => "not_available",
            ErrorKind::PolicyDenied => "policy_denied",
            ErrorKind::ApprovalDenied => "approval_denied",
            ErrorKind::SurfaceDenied => "surface_denied",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::ResourceFailed => "resource_failed",
            ErrorKind::NotReady => "not_ready",
            ErrorKind::Busy => "busy",
            ErrorKind::NotFound => "not_found",
            ErrorKind::OutOfScope => "out_of_scope",
            ErrorKind::InvalidRef => "invalid_ref",
            ErrorKind::Protocol => "protocol",
            ErrorKind::VersionMismatch => "version_mismatch",
            ErrorKind::Refused => "refused",
            ErrorKind::Io => "io",
            ErrorKind::NoHuman => "no_human",
            ErrorKind::KernelDied => "kernel_died",
            ErrorKind::Expired => "expired",
            ErrorKind::Conflict => "conflict",
            ErrorKind::NetworkUnavailable => "network_unavailable",
            ErrorKind::Internal => "internal",
            ErrorKind::ShuttingDown => "shutting_down",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool or protocol error as the caller sees it: what kind, what happened, what to do.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    pub kind: ErrorKind,
    /// What was wrong, naming the offending value.
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

impl ToolError {
    pub fn new(kind: ErrorKind, message: impl Into<String>, hint: impl Into<String>) -> Self {
        ToolError {
            kind,
            message: message.into(),
            hint: hint.into(),
        }
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if !self.hint.is_empty() {
            write!(f, " (hint: {})", self.hint)?;
        }
        Ok(())
    }
}

impl std::error::Error for ToolError {}
