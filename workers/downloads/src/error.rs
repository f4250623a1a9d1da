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
    /// The repo does not exist: the Hub's `RepoNotFound` (404, or 401 to a request without a
    /// token, which is also what a private repo answers to one).
    #[error("repo {repo} was not found at the endpoint (HTTP {status}{code})")]
    RepoNotFound {
        repo: String,
        status: u16,
        /// `, RepoNotFound` when the endpoint said so.
        code: &'static str,
        token: bool,
    },
    /// The repo exists, the revision does not (`RevisionNotFound`).
    #[error(
        "revision {revision} of repo {repo} was not found at the endpoint (HTTP {status}, RevisionNotFound)"
    )]
    RevisionNotFound {
        repo: String,
        revision: String,
        status: u16,
    },
    /// The repo and revision exist, the file does not (`EntryNotFound`).
    #[error(
        "file {file} of repo {repo} at revision {revision} was not found at the endpoint (HTTP {status}, EntryNotFound)"
    )]
    EntryNotFound {
        repo: String,
        revision: String,
        file: String,
        status: u16,
    },
    /// The repo is gated and this request may not read it (`GatedRepo`).
    #[error("repo {repo} is gated (HTTP {status}, GatedRepo): {why}{server}")]
    Gated {
        repo: String,
        status: u16,
        why: &'static str,
        /// The endpoint's own words (`X-Error-Message`), quoted, or empty.
        server: String,
        token: bool,
    },
    /// The endpoint does not know the configured token at all.
    #[error(
        "the endpoint refused the configured token (`[models] token` / HF_TOKEN) as invalid credentials (HTTP {status}) when asked for {what}"
    )]
    BadToken { what: String, status: u16 },
    /// 403 for another reason: the token may not do this.
    #[error("the endpoint refused {what} (HTTP 403{server}): {token}")]
    Forbidden {
        what: String,
        server: String,
        token: &'static str,
    },
    /// The repo exists but the hub has disabled it.
    #[error("repo {repo} is disabled at the endpoint (HTTP {status}{server})")]
    Disabled {
        repo: String,
        status: u16,
        server: String,
    },
    /// 404 from an endpoint that does not say what is missing.
    #[error("{what} was not found at the endpoint (HTTP 404)")]
    NotFound { what: String },
    /// Any other HTTP answer or a broken transfer; `transient` ones are retried.
    #[error("{what}: {cause}")]
    Http {
        what: String,
        cause: String,
        transient: bool,
    },
    /// 429 (or 503) with a `Retry-After` in seconds: retried after the wait the hub asked for
    /// (at most [`RETRY_AFTER_MAX`]), not after the quick backoff.
    #[error("{what}: HTTP {status}, the endpoint asks to wait {} s before trying again{server}", .retry_after.as_secs())]
    RateLimited {
        what: String,
        status: u16,
        retry_after: std::time::Duration,
        server: String,
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
        "not enough disk space under {path}: {needed} bytes still to fetch, {available} available{}",
        reserved_note(*available, *reserved, by)
    )]
    DiskFull {
        path: String,
        needed: u64,
        available: u64,
        /// Bytes the unfinished jobs still have to write, counted as taken.
        reserved: u64,
        /// Those jobs: `dl3 1048576, dl4 2048`.
        by: String,
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
    /// No stored model by that name, or more than one.
    #[error("{0}")]
    NotStored(String),
    /// The model is in use: a download job of it has not ended, or it is loaded.
    #[error("{what}")]
    InUse { what: String, hint: String },
}

/// The longest `Retry-After` waited for before one more try; a hub asking more is waited
/// this long (the try after it may well be refused again, and counts as one).
pub const RETRY_AFTER_MAX: std::time::Duration = std::time::Duration::from_secs(60);

impl DownloadError {
    /// Worth another try with backoff (5xx, 429, a connection cut mid-body, a bad hash).
    pub fn transient(&self) -> bool {
        match self {
            DownloadError::Http { transient, .. } => *transient,
            DownloadError::RateLimited { .. } => true,
            DownloadError::Unreachable { .. } | DownloadError::Verify { .. } => true,
            _ => false,
        }
    }

    /// How long to wait before the next try: what the endpoint asked (`Retry-After`, capped
    /// at [`RETRY_AFTER_MAX`]), else `backoff`.
    pub fn retry_wait(&self, backoff: std::time::Duration) -> std::time::Duration {
        match self {
            DownloadError::RateLimited { retry_after, .. } => (*retry_after).min(RETRY_AFTER_MAX),
            _ => backoff,
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
            DownloadError::RepoNotFound { token: false, .. } => (
                ErrorKind::NotFound,
                "check the repo id (search_huggingface_models finds repos); the hub answers a request without a token the same way for a private repo, so if it is one you can read, set `[models] token` or HF_TOKEN".to_string(),
            ),
            DownloadError::RepoNotFound { token: true, .. } => (
                ErrorKind::NotFound,
                "check the repo id (search_huggingface_models finds repos); a private repo the configured token cannot read gets the same answer".to_string(),
            ),
            DownloadError::RevisionNotFound { .. } => (
                ErrorKind::NotFound,
                "name a branch, tag or commit the repo has (the default is main)".to_string(),
            ),
            DownloadError::EntryNotFound { .. } => (
                ErrorKind::NotFound,
                "the repo no longer has that file at that revision; call download_model again to read its files afresh".to_string(),
            ),
            DownloadError::Gated { token: false, .. } => (
                ErrorKind::PolicyDenied,
                "accept the model's terms on its hub page, then set `[models] token` or HF_TOKEN to a token of that account and retry".to_string(),
            ),
            DownloadError::Gated { token: true, .. } => (
                ErrorKind::PolicyDenied,
                "the configured token's account has no access yet: accept the terms on the model's hub page (a manual gate also waits for the owners' approval), then retry".to_string(),
            ),
            DownloadError::BadToken { .. } => (
                ErrorKind::PolicyDenied,
                "set `[models] token` or HF_TOKEN to a valid token (or remove it: public repos need none)".to_string(),
            ),
            DownloadError::Forbidden { .. } => (
                ErrorKind::PolicyDenied,
                "give `[models] token` (or HF_TOKEN) read access to the repo's content (a fine-grained token needs it per repo)".to_string(),
            ),
            DownloadError::Disabled { .. } => (
                ErrorKind::NotAvailable,
                "the hub has disabled that repo; choose another (search_huggingface_models)".to_string(),
            ),
            DownloadError::NotFound { .. } => (
                ErrorKind::NotFound,
                "check the repo id and the revision (branch, tag or commit); search_huggingface_models lists repos".to_string(),
            ),
            DownloadError::RateLimited { .. } => (
                ErrorKind::Busy,
                "the hub limits its requests: the waits it asked for were kept and its limit still held; try again later, or set `[models] token` (a token is usually allowed more)".to_string(),
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
                "free that much space, or point `[models] store` at a larger disk, then retry; space reserved for running downloads frees as they end (list_downloads, cancel_download)".to_string(),
            ),
            DownloadError::Io { .. } => (
                ErrorKind::Io,
                "check the model store's directory and its permissions".to_string(),
            ),
            DownloadError::NoJob(_) => (
                ErrorKind::NotFound,
                "list_downloads shows the jobs and their ids".to_string(),
            ),
            DownloadError::NotStored(_) => (
                ErrorKind::NotFound,
                "name a model as list_models shows it (owner/name, with @REVISION or :VARIANT when the store has several)".to_string(),
            ),
            DownloadError::InUse { hint, .. } => (ErrorKind::Busy, hint.clone()),
        };
        ToolError::new(kind, message, hint)
    }
}

/// What of the free space the running downloads still need, for `DiskFull`.
fn reserved_note(available: u64, reserved: u64, by: &str) -> String {
    if reserved == 0 {
        String::new()
    } else {
        format!(
            ", of which {reserved} are reserved for the downloads still running (job, bytes to come: {by}), so {} are free for this one",
            available.saturating_sub(reserved)
        )
    }
}
