//! The crate's typed error, and how each variant reads as a `ToolError {kind, message, hint}`
//! on the wire: every message names the offending path or value, every hint says what to do.

use toolvisor_protocol::error::{ErrorKind, ToolError};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: no such file or directory")]
    NotFound { path: String },
    #[error("{path} resolves to {real}, outside {allowed}")]
    Outside {
        path: String,
        real: String,
        allowed: String,
    },
    #[error(
        "{path} lies in a location kept private (the daemon's state, a sensitive data-hub collection's originals or the hub's own files); no tool reaches it"
    )]
    Protected { path: String },
    #[error(
        "{path} changed while the call ran: a directory on its way became a symlink, which was not followed"
    )]
    Moved { path: String },
    #[error("{path} is a directory")]
    IsDir { path: String },
    #[error("{path} is not a directory")]
    NotDir { path: String },
    /// A FIFO, socket or device: never opened for its content (`toolvisor_kit::special`).
    #[error("{path} is {kind}, not a regular file")]
    NotRegular { path: String, kind: &'static str },
    #[error("{path} is a binary file ({why})")]
    Binary { path: String, why: String },
    #[error("{path}: {op}: {source}")]
    Io {
        path: String,
        op: &'static str,
        source: std::io::Error,
    },
    #[error("{what}: {message}")]
    BadArgs { what: String, message: String },
    #[error("{message}")]
    NoMatch { message: String, hint: String },
    #[error("{message}")]
    Ambiguous { message: String },
    #[error("{message}")]
    PatchSyntax { message: String },
    #[error("{message}")]
    PatchConflict { message: String, hint: String },
    #[error("{message}")]
    TooLarge { message: String, hint: String },
    #[error("malformed ref {given:?}: {why}")]
    InvalidRef { given: String, why: String },
    #[error("no stored result {reference}")]
    RefNotFound { reference: String },
    #[error("stored result {reference} belongs to another conversation")]
    OutOfScope { reference: String },
    #[error("stored result {reference} cannot be read: {why}")]
    NotAvailable { reference: String, why: String },
    #[error("the call was cancelled")]
    Cancelled,
}

impl Error {
    /// An I/O error on `path`, with `NotFound` lifted to its own variant.
    pub fn io(path: impl Into<String>, op: &'static str, source: std::io::Error) -> Error {
        let path = path.into();
        if let Some(kind) = toolvisor_kit::special::not_regular(&source) {
            return Error::NotRegular { path, kind };
        }
        match source.kind() {
            std::io::ErrorKind::NotFound => Error::NotFound { path },
            std::io::ErrorKind::IsADirectory => Error::IsDir { path },
            std::io::ErrorKind::NotADirectory => Error::NotDir { path },
            _ => Error::Io { path, op, source },
        }
    }

    pub fn bad(what: impl Into<String>, message: impl Into<String>) -> Error {
        Error::BadArgs {
            what: what.into(),
            message: message.into(),
        }
    }

    /// The wire form, prefixed by the tool's name.
    pub fn to_tool_error(&self, tool: &str) -> ToolError {
        let msg = format!("{tool}: {self}");
        match self {
            Error::NotFound { .. } => ToolError::new(
                ErrorKind::NotFound,
                msg,
                "check the path (relative paths start at the run's workdir); `ls` or `find` shows what exists",
            ),
            Error::Outside { .. } => ToolError::new(
                ErrorKind::OutOfScope,
                msg,
                "use a path inside the run's workdir; the operator can allow more with `[files] read_roots` or `allow_outside_workdir`",
            ),
            Error::Protected { .. } => ToolError::new(
                ErrorKind::OutOfScope,
                msg,
                "leave these files alone: the operator marked them `sensitive` in `[data.collections]`, which keeps them from every tool, named or not",
            ),
            Error::Moved { .. } => ToolError::new(
                ErrorKind::OutOfScope,
                msg,
                "something replaced part of the path while the tool used it; check it with `ls`, then retry with a path whose real location is inside the run's workdir",
            ),
            Error::IsDir { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                "name a file; `ls` lists a directory",
            ),
            Error::NotDir { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                "name a directory (or the parent of the file)",
            ),
            Error::NotRegular { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                "the file tools read and write regular files only (a FIFO's reader would wait for a writer for ever); read or write it with `bash` if you mean to",
            ),
            Error::Binary { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                "read shows text and images (PNG, JPEG, GIF, WebP, BMP) only; inspect other files with bash (`file`, `xxd`)",
            ),
            Error::Io { source, .. } => ToolError::new(
                ErrorKind::Io,
                msg,
                match source.kind() {
                    std::io::ErrorKind::PermissionDenied => {
                        "the daemon's user may not do this; check the file's permissions"
                    }
                    _ => "check the path and the filesystem, then retry",
                },
            ),
            Error::BadArgs { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                format!("`toolvisor tools --json` shows the schema of `{tool}`"),
            ),
            Error::NoMatch { hint, .. } => ToolError::new(ErrorKind::NotFound, msg, hint.clone()),
            Error::Ambiguous { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                "include more surrounding lines in old_text so it matches once, or set replace_all to change every occurrence",
            ),
            Error::PatchSyntax { .. } => ToolError::new(
                ErrorKind::InvalidArgs,
                msg,
                "send a unified diff (`--- a/path`, `+++ b/path`, then `@@ -l,n +l,n @@` hunks whose lines start with ' ', '-' or '+') or a `*** Begin Patch` patch (`*** Update File: path`, `@@ context` sections of ' ', '-', '+' lines, `*** End Patch`)",
            ),
            Error::PatchConflict { hint, .. } => {
                ToolError::new(ErrorKind::Conflict, msg, hint.clone())
            }
            Error::TooLarge { hint, .. } => {
                ToolError::new(ErrorKind::InvalidArgs, msg, hint.clone())
            }
            Error::InvalidRef { .. } => ToolError::new(
                ErrorKind::InvalidRef,
                msg,
                "pass the exact `ref` a projected result named (`tr_` and 20 hex digits), not a path",
            ),
            Error::RefNotFound { .. } => ToolError::new(
                ErrorKind::NotFound,
                msg,
                "the result may have expired or been removed; run the tool again for fresh output",
            ),
            Error::OutOfScope { .. } => ToolError::new(
                ErrorKind::OutOfScope,
                msg,
                "only the conversation that made a result can read it; run the tool again in this conversation",
            ),
            Error::NotAvailable { .. } => ToolError::new(
                ErrorKind::NotAvailable,
                msg,
                "only the projection exists; run the tool again (narrower) to see the rest",
            ),
            Error::Cancelled => ToolError::new(
                ErrorKind::Cancelled,
                msg,
                "nothing more will come for this call",
            ),
        }
    }
}
