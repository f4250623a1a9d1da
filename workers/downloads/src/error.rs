//! The typed errors of download jobs and their `ToolError` form (what was wrong, what to do).

use toolvisor_protocol::error::{ErrorKind, ToolError};

/// Everything a download tool or job can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DownloadError {
    /// A repo, revision, variant or job id that is not well formed.
    #[error("{0}")]
    Invalid(String),
    /// The endpoint could not be reached at all (refused, DNS, timeout, TLS).
    #[error("the model endpoint {endpoint} is unreachable: {cause}")]
    Unreachable { endpoint: String, cause: String },
    /// 401 or 403: the repo is gated or private, or the token is wrong.
    #[error("the endpoint refused {what} (HTTP {status}): the repo is gated or private, {token}")]
    Unauthorized {
        what: String,
        status: u16,
        token: &'static str,
    },
    /// 404: no such repo, revision or file.
    #[error("{what} was not found at the endpoint (HTTP 404)")]
    NotFound { what: String },
    /// Any other HTTP answer or a broken transfer; `transient` ones are retried.
    #[error("{what}: {cause}")]
    Http {
        what: String,
        cause: String,
        transient: bool,
    },
    /// The endpoint's listing or answer is not what a Hugging Face endpoint sends.
    #[error("the endpoint's answer for {what} is malformed: {cause}")]
    Malformed { what: String, cause: String },
    /// No variant or file set can be chosen from the listing.
    #[error("{0}")]
    Choice(String),
    /// The downloaded bytes do not match the listed sha256 (or size).
    #[error("{file}: {cause}")]
    Verify { file: String, cause: String },
    /// Not enough free space for what is left to fetch.
    #[error(
        "not enough disk space under {path}: {needed} bytes still to fetch, {available} available"
    )]
    DiskFull {
        path: String,
        needed: u64,
        available: u64,
    },
    /// Local file-system trouble.
    #[error("{what} {path}: {cause}")]
    Io {
        what: &'static str,
        path: String,
        cause: String,
    },
    /// No job with that id.
    #[error("no download job {0:?}")]
    NoJob(String),
}

impl DownloadError {
    /// Worth another try with backoff (5xx, 429, a connection cut mid-body, a bad hash).
    pub fn transient(&self) -> bool {
        match self {
            DownloadError::Http { transient, .. } => *transient,
            DownloadError::Unreachable { .. } | DownloadError::Verify { .. } => true,
            _ => false,
        }
    }

    pub fn io(what: &'static str, path: &std::path::Path, e: impl std::fmt::Display) -> Self {
        DownloadError::Io {
            what,
            path: path.display().to_string(),
            cause: e.to_string(),
        }
    }
}

impl From<DownloadError> for ToolError {
    fn from(e: DownloadError) -> ToolError {
        let message = e.to_string();
        let (kind, hint) = match &e {
            DownloadError::Invalid(_) => (
                ErrorKind::InvalidArgs,
                "a repo is `owner/name`; a revision and a variant are plain names (no `/..`, no spaces)".to_string(),
            ),
            DownloadError::Unreachable { .. } => (
                ErrorKind::NetworkUnavailable,
                "check the network or `[models] endpoint` / HF_ENDPOINT; models already in the store (list_models) still work".to_string(),
            ),
            DownloadError::Unauthorized { .. } => (
                ErrorKind::PolicyDenied,
                "accept the model's terms on the hub and set `[models] token` or HF_TOKEN to a token with access, then retry".to_string(),
            ),
            DownloadError::NotFound { .. } => (
                ErrorKind::NotFound,
                "check the repo id and the revision (branch, tag or commit); search_huggingface_models lists repos".to_string(),
            ),
            DownloadError::Http { .. } | DownloadError::Malformed { .. } => (
                ErrorKind::Io,
                "retry later; the endpoint may be overloaded or not Hugging Face-compatible".to_string(),
            ),
            DownloadError::Choice(_) => (
                ErrorKind::InvalidArgs,
                "name a variant from the list (a quantisation such as Q4_K_M, a file name, or `safetensors`)".to_string(),
            ),
            DownloadError::Verify { .. } => (
                ErrorKind::Io,
                "the file was fetched again and still did not match; the endpoint may serve damaged data".to_string(),
            ),
            DownloadError::DiskFull { .. } => (
                ErrorKind::Io,
                "free that much space, or point `[models] store` at a larger disk, then retry".to_string(),
            ),
            DownloadError::Io { .. } => (
                ErrorKind::Io,
                "check the model store's directory and its permissions".to_string(),
            ),
            DownloadError::NoJob(_) => (
                ErrorKind::NotFound,
                "list_downloads shows the jobs and their ids".to_string(),
            ),
        };
        ToolError::new(kind, message, hint)
    }
}
