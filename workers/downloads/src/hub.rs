//! The Hugging Face-compatible endpoint: a repo's file listing, search, and one file's bytes
//! from an offset (HTTP `Range`). Everything it answers is untrusted input: names are checked
//! by `choose`, sizes and hashes by the transfer.
//!
//! Error statuses become typed errors by `huggingface_hub`'s rules: `X-Error-Code` first
//! (`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`, `GatedRepo`), then invalid credentials, a
//! disabled repo, the status; a failed connect or a connect timeout is `network_unavailable`.
//!
//! `reqwest` runs without its default features (`rustls-tls` only): rustls with the `ring` provider
//! and webpki roots (no OpenSSL, no aws-lc build), HTTP/1.1 only (no `h2`), no system proxy lookup,
//! no charset or decompression layers. Bodies are read with `Response::chunk`, so no `stream`
//! feature (and no `futures-util` dependency of ours) is needed.
//!
//! The token (`[models] token`, else `$HF_TOKEN`) is a known secret of the result store's masking
//! (named `models.token` and `HF_TOKEN`, `supervisor/src/tools/files.rs`), never in a `Debug` form
//! (`Hub` and the daemon's `ModelsConfig` print `***`), a log line or an error message. Only
//! `download_model` and `search_huggingface_models` reach the endpoint, and policy can deny each.

use std::time::Duration;

use serde_json::Value as Json;

use crate::error::DownloadError;
pub use crate::listing::{Gated, Hit, RepoInfo, Sibling};

/// The endpoint client: base URL, optional token (sent as a bearer token, never logged).
#[derive(Clone)]
pub struct Hub {
    client: reqwest::Client,
    endpoint: String,
    token: Option<String>,
    /// The slowest body kept (`models.min_rate_bytes_per_s`, 0: any), measured over
    /// `rate_window` (`models.stall_timeout_s`).
    min_rate: u64,
    rate_window: Duration,
}

/// Watches one body's rate: a body that sends some bytes but fewer than the floor over a
/// window holds a transfer slot as surely as one that sends nothing, so it is cut like a
/// stall.
pub(crate) struct RateFloor {
    min_rate: u64,
    window: Duration,
    since: std::time::Instant,
    bytes: u64,
}

impl RateFloor {
    /// Count `n` bytes just received; past a window, the rate seen over it when that is
    /// below the floor (the caller cuts the body), else a new window starts.
    pub(crate) fn add(&mut self, n: usize) -> Result<(), String> {
        self.bytes += n as u64;
        let elapsed = self.since.elapsed();
        if self.min_rate == 0 || elapsed < self.window {
            return Ok(());
        }
        let rate = self.bytes as f64 / elapsed.as_secs_f64();
        if rate < self.min_rate as f64 {
            return Err(format!(
                "the endpoint sent {} bytes in {:.1} s ({rate:.0} bytes/s), below the minimum of {} bytes/s (models.min_rate_bytes_per_s); lower that key (0 disables) if this endpoint is always this slow",
                self.bytes,
                elapsed.as_secs_f64(),
                self.min_rate
            ));
        }
        self.since = std::time::Instant::now();
        self.bytes = 0;
        Ok(())
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// What a request asked for: what an error status is about.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Asked<'a> {
    Repo {
        repo: &'a str,
        revision: &'a str,
    },
    AuthCheck {
        repo: &'a str,
    },
    Search {
        query: &'a str,
    },
    File {
        repo: &'a str,
        revision: &'a str,
        file: &'a str,
    },
}

impl Asked<'_> {
    fn what(&self) -> String {
        match self {
            Asked::Repo { repo, revision } => format!("repo {repo} at revision {revision}"),
            Asked::AuthCheck { repo } => format!("access to repo {repo}"),
            Asked::Search { query } => format!("the search for {query:?}"),
            Asked::File { repo, file, .. } => format!("{file} of {repo}"),
        }
    }

    fn repo(&self) -> Option<&str> {
        match self {
            Asked::Repo { repo, .. } | Asked::AuthCheck { repo } | Asked::File { repo, .. } => {
                Some(repo)
            }
            Asked::Search { .. } => None,
        }
    }
}

/// The hub's own words about an error (`X-Error-Message`), as `, "…"`: control characters
/// dropped, at most 200 characters (it is the endpoint's text, passed on quoted).
/// A `Retry-After` of delay-seconds (what the Hub sends; an HTTP-date is left to the backoff).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<std::time::Duration> {
    headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(std::time::Duration::from_secs)
}

fn server_words(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get("x-error-message")
        .and_then(|v| v.to_str().ok())
        .map(|m| {
            m.chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect::<String>()
        })
        .filter(|m| !m.trim().is_empty())
        .map(|m| format!(": {m:?}"))
        .unwrap_or_default()
}

/// The Hub's message for a token it does not know.
const INVALID_CREDENTIALS: &str = "Invalid credentials in Authorization header";

/// What an error status means, by the rules `huggingface_hub` applies to the Hub's answers
/// (`hf_raise_for_status`): its `X-Error-Code` first (`RevisionNotFound`, `EntryNotFound`,
/// `GatedRepo`, `RepoNotFound`), then a disabled repo, then the status (a 401 about a repo
/// is a repo not found unless it says the credentials are invalid; 403 is a token without
/// the right; 429 and 5xx are worth another try).
pub(crate) fn status_error(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    asked: Asked,
    has_token: bool,
) -> DownloadError {
    let code = headers
        .get("x-error-code")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let message = headers
        .get("x-error-message")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let server = server_words(headers);
    let what = asked.what();
    match (code, asked) {
        (
            "RevisionNotFound",
            Asked::Repo { repo, revision } | Asked::File { repo, revision, .. },
        ) => {
            return DownloadError::RevisionNotFound {
                repo: repo.into(),
                revision: revision.into(),
                status,
            };
        }
        (
            "EntryNotFound",
            Asked::File {
                repo,
                revision,
                file,
            },
        ) => {
            return DownloadError::EntryNotFound {
                repo: repo.into(),
                revision: revision.into(),
                file: file.into(),
                status,
            };
        }
        _ => {}
    }
    if let Some(repo) = asked.repo() {
        if code == "GatedRepo" {
            return DownloadError::Gated {
                repo: repo.into(),
                status,
                why: if has_token {
                    "the configured token's account is not on its authorized list"
                } else {
                    "no token is configured (`[models] token` / HF_TOKEN), and it needs one of an account granted access"
                },
                server,
                token: has_token,
            };
        }
        if message == "Access to this resource is disabled." {
            return DownloadError::Disabled {
                repo: repo.into(),
                status,
                server,
            };
        }
        if code == "RepoNotFound" || (status == 401 && message != INVALID_CREDENTIALS) {
            return DownloadError::RepoNotFound {
                repo: repo.into(),
                status,
                code: if code == "RepoNotFound" {
                    ", RepoNotFound"
                } else {
                    ""
                },
                token: has_token,
            };
        }
    }
    if matches!(status, 429 | 503)
        && let Some(retry_after) = retry_after(headers)
    {
        return DownloadError::RateLimited {
            what,
            status,
            retry_after,
            server,
        };
    }
    match status {
        401 if has_token => DownloadError::BadToken { what, status },
        401 => DownloadError::Http {
            what,
            cause: format!("HTTP 401{server}"),
            transient: false,
        },
        403 => DownloadError::Forbidden {
            what,
            server,
            token: if has_token {
                "the configured token (`[models] token` / HF_TOKEN) lacks the permission"
            } else {
                "no token is configured (`[models] token` / HF_TOKEN)"
            },
        },
        404 => DownloadError::NotFound { what },
        s => DownloadError::Http {
            what,
            cause: format!("HTTP {s}{server}"),
            transient: s == 429 || s == 408 || (500..600).contains(&s),
        },
    }
}

/// Redirects followed for one request at most.
const MAX_REDIRECTS: usize = 10;

/// Whether a redirect from the endpoint `origin` may be followed to `to`: to the endpoint's
/// own origin (scheme, host and port; a relative `Location` lands there), or over https to a
/// host that is not local (the Hub sends file downloads to its CDN that way). Never to a
/// loopback, private, link-local or unspecified address or `localhost` of another origin: a
/// hostile or broken hub must not make the daemon call the machine's own services (another
/// local port may be the inference endpoint, a database, a metadata service).
pub(crate) fn redirect_allowed(
    origin: Option<&reqwest::Url>,
    to: &reqwest::Url,
) -> Result<(), String> {
    let same_origin = origin.is_some_and(|o| {
        o.scheme() == to.scheme()
            && o.host_str() == to.host_str()
            && o.port_or_known_default() == to.port_or_known_default()
    });
    if same_origin {
        return Ok(());
    }
    let shown = format!(
        "{}://{}{}",
        to.scheme(),
        to.host_str().unwrap_or(""),
        to.port().map(|p| format!(":{p}")).unwrap_or_default()
    );
    let host = to.host_str().unwrap_or("");
    let local = match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
    {
        Ok(std::net::IpAddr::V4(ip)) => {
            ip.is_loopback() || ip.is_private() || ip.is_link_local() || ip.is_unspecified()
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private())
        }
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d.is_empty() || d == "localhost" || d.ends_with(".localhost")
        }
    };
    if local {
        return Err(format!(
            "the hub redirected to {shown}, a local address other than the endpoint's own; not followed"
        ));
    }
    if to.scheme() != "https" {
        return Err(format!(
            "the hub redirected to {shown} without https; not followed"
        ));
    }
    Ok(())
}

impl Hub {
    /// `connect_timeout` bounds how long an unreachable endpoint can hold a call;
    /// `stall_timeout`, how long a body may send nothing.
    pub fn new(
        endpoint: &str,
        token: Option<String>,
        connect_timeout: Duration,
        stall_timeout: Duration,
    ) -> Result<Hub, DownloadError> {
        let origin = reqwest::Url::parse(endpoint).ok();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                }
                match redirect_allowed(origin.as_ref(), attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(why) => attempt.error(why),
                }
            }))
            .connect_timeout(connect_timeout)
            // A stalled body (no byte for this long) is a transient error, retried by Range.
            .read_timeout(stall_timeout)
            .user_agent(concat!("toolvisor/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| DownloadError::Invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Hub {
            client,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
            min_rate: 0,
            rate_window: stall_timeout,
        })
    }

    /// Cut a body slower than `bytes_per_s` over the stall timeout (0: never).
    pub fn with_min_rate(mut self, bytes_per_s: u64) -> Hub {
        self.min_rate = bytes_per_s;
        self
    }

    /// A watch on the rate of a body starting now.
    pub(crate) fn rate_floor(&self) -> RateFloor {
        RateFloor {
            min_rate: self.min_rate,
            window: self.rate_window,
            since: std::time::Instant::now(),
            bytes: 0,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn get(&self, url: &str) -> reqwest::RequestBuilder {
        let req = self.client.get(url);
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        what: &str,
    ) -> Result<reqwest::Response, DownloadError> {
        match req.send().await {
            Ok(r) => Ok(r),
            Err(e) if e.is_connect() || e.is_timeout() => Err(DownloadError::Unreachable {
                endpoint: self.endpoint.clone(),
                cause: root_cause(&e),
            }),
            // A redirect refused by the policy is the hub's answer, not a passing fault.
            Err(e) if e.is_redirect() => Err(DownloadError::Http {
                what: what.to_string(),
                cause: root_cause(&e),
                transient: false,
            }),
            Err(e) => Err(DownloadError::Http {
                what: what.to_string(),
                cause: root_cause(&e),
                transient: true,
            }),
        }
    }

    async fn json(&self, url: &str, asked: Asked<'_>) -> Result<Json, DownloadError> {
        let what = &asked.what();
        let resp = self.send(self.get(url), what).await?;
        if !resp.status().is_success() {
            return Err(self.refused(&resp, asked));
        }
        // Listings are small; a huge one is refused rather than buffered.
        const MAX_LISTING: u64 = 32 * 1024 * 1024;
        if resp.content_length().is_some_and(|n| n > MAX_LISTING) {
            return Err(DownloadError::Malformed {
                what: what.into(),
                cause: "larger than 32 MiB".into(),
            });
        }
        let mut body = Vec::new();
        let mut resp = resp;
        while let Some(chunk) = resp.chunk().await.map_err(|e| DownloadError::Http {
            what: what.into(),
            cause: root_cause(&e),
            transient: true,
        })? {
            body.extend_from_slice(&chunk);
            if body.len() as u64 > MAX_LISTING {
                return Err(DownloadError::Malformed {
                    what: what.into(),
                    cause: "larger than 32 MiB".into(),
                });
            }
        }
        serde_json::from_slice(&body).map_err(|e| DownloadError::Malformed {
            what: what.into(),
            cause: e.to_string(),
        })
    }

    fn refused(&self, resp: &reqwest::Response, asked: Asked<'_>) -> DownloadError {
        status_error(
            resp.status().as_u16(),
            resp.headers(),
            asked,
            self.token.is_some(),
        )
    }

    /// `GET /api/models/{repo}/revision/{rev}?blobs=true`: the repo's files with sizes and
    /// LFS hashes, and whether it is gated.
    pub async fn repo_info(&self, repo: &str, revision: &str) -> Result<RepoInfo, DownloadError> {
        let url = format!(
            "{}/api/models/{repo}/revision/{}?blobs=true",
            self.endpoint,
            encode(revision)
        );
        let asked = Asked::Repo { repo, revision };
        let v = self.json(&url, asked).await?;
        crate::listing::repo_info(&v, repo).map_err(|cause| DownloadError::Malformed {
            what: asked.what(),
            cause,
        })
    }

    /// `GET /api/models/{repo}/auth-check`: whether this request (its token, or none) may
    /// read the repo's files; a gated repo's listing is public, its files are not.
    pub async fn auth_check(&self, repo: &str) -> Result<(), DownloadError> {
        let url = format!("{}/api/models/{repo}/auth-check", self.endpoint);
        let asked = Asked::AuthCheck { repo };
        let resp = self.send(self.get(&url), &asked.what()).await?;
        if resp.status().is_success() {
            Ok(())
        } else {
            Err(self.refused(&resp, asked))
        }
    }

    /// `GET /api/models?search=&full=true`: candidate repos (siblings when the endpoint lists
    /// them; the Hub lists names without sizes).
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, DownloadError> {
        let url = format!(
            "{}/api/models?search={}&limit={limit}&full=true",
            self.endpoint,
            encode(query)
        );
        let asked = Asked::Search { query };
        let v = self.json(&url, asked).await?;
        crate::listing::search_hits(&v).map_err(|cause| DownloadError::Malformed {
            what: asked.what(),
            cause,
        })
    }

    /// `GET /{repo}/resolve/{rev}/{file}` from byte `from` on. The answer's status says
    /// whether the range was honoured (206) or the whole file comes (200).
    pub async fn file(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
        from: u64,
    ) -> Result<reqwest::Response, DownloadError> {
        let range = (from > 0).then(|| format!("bytes={from}-"));
        self.fetch(repo, revision, file, range).await
    }

    /// The bytes `first..=last` of a file (`Range: bytes=first-last`): 206 when the endpoint
    /// serves ranges, 200 with the whole file when it ignores them.
    pub async fn file_range(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
        first: u64,
        last: u64,
    ) -> Result<reqwest::Response, DownloadError> {
        self.fetch(repo, revision, file, Some(format!("bytes={first}-{last}")))
            .await
    }

    async fn fetch(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
        range: Option<String>,
    ) -> Result<reqwest::Response, DownloadError> {
        let url = format!(
            "{}/{repo}/resolve/{}/{}",
            self.endpoint,
            encode(revision),
            file.split('/').map(encode).collect::<Vec<_>>().join("/")
        );
        let mut req = self.get(&url);
        if let Some(range) = range {
            req = req.header(reqwest::header::RANGE, range);
        }
        let asked = Asked::File {
            repo,
            revision,
            file,
        };
        let resp = self.send(req, &asked.what()).await?;
        let status = resp.status();
        if status.is_success() || status.as_u16() == 416 {
            Ok(resp)
        } else {
            Err(self.refused(&resp, asked))
        }
    }
}

/// The innermost cause of a reqwest error ("connection refused"), without the URL.
fn root_cause(e: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    if text.is_empty() {
        e.without_url_ref().to_string()
    } else {
        text
    }
}

/// Why a response body could not be read, as a person would say it: reqwest's own words
/// ("error decoding response body") name its layer, not the cause — a stall that hit the read
/// timeout, a connection reset, an early end.
pub(crate) fn body_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "the endpoint sent nothing for too long (the connection stalled)".to_string();
    }
    let cause = root_cause(e);
    if cause == e.without_url_ref() {
        cause
    } else {
        format!("the connection broke: {cause}")
    }
}

trait WithoutUrl {
    fn without_url_ref(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_ref(&self) -> String {
        let mut s = self.to_string();
        if let Some(url) = self.url() {
            s = s.replace(url.as_str(), "<url>");
        }
        s
    }
}

/// Percent-encode one path segment or query value (unreserved characters kept).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_go_to_the_endpoints_origin_or_a_remote_https_host_only() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        let hub = url("https://huggingface.co");
        let local_hub = url("http://127.0.0.1:8080");
        // The Hub's own CDN, and a relative Location (resolved to the same origin).
        redirect_allowed(Some(&hub), &url("https://cdn-lfs.hf.co/repos/x?sig=1")).unwrap();
        redirect_allowed(
            Some(&hub),
            &url("https://huggingface.co/api/resolve-cache/x"),
        )
        .unwrap();
        redirect_allowed(
            Some(&local_hub),
            &url("http://127.0.0.1:8080/o/m/resolve/main/a"),
        )
        .unwrap();
        // Another local port of the same machine, from a local or a remote hub: refused.
        for to in [
            "http://127.0.0.1:8081/secret",
            "http://localhost:9000/",
            "https://127.0.0.1/",
            "http://[::1]:8080/",
            "http://10.0.0.5/",
            "http://169.254.169.254/latest/meta-data/",
            "http://192.168.1.1/",
            "http://api.localhost/",
            "http://0.0.0.0:8080/",
        ] {
            for from in [&hub, &local_hub] {
                let e = redirect_allowed(Some(from), &url(to)).unwrap_err();
                assert!(e.contains("local address"), "{from} -> {to}: {e}");
            }
        }
        // A remote host without https: refused.
        let e = redirect_allowed(Some(&hub), &url("http://cdn.example.com/x")).unwrap_err();
        assert!(e.contains("without https"), "{e}");
    }

    #[test]
    fn encoding_keeps_unreserved_and_escapes_the_rest() {
        assert_eq!(encode("main"), "main");
        assert_eq!(encode("a b/c?d"), "a%20b%2Fc%3Fd");
    }

    #[test]
    fn the_token_never_shows_in_debug() {
        let hub = Hub::new(
            "http://127.0.0.1:1",
            Some("hf_secretsecret".into()),
            Duration::from_secs(1),
            Duration::from_secs(30),
        )
        .unwrap();
        assert!(!format!("{hub:?}").contains("secretsecret"));
    }

    fn headers(code: Option<&str>, message: Option<&str>) -> reqwest::header::HeaderMap {
        let mut h = reqwest::header::HeaderMap::new();
        if let Some(c) = code {
            h.insert("x-error-code", c.parse().unwrap());
        }
        if let Some(m) = message {
            h.insert("x-error-message", m.parse().unwrap());
        }
        h
    }

    #[test]
    fn error_statuses_are_read_the_way_huggingface_hub_reads_them() {
        let repo = Asked::Repo {
            repo: "o/m",
            revision: "main",
        };
        let file = Asked::File {
            repo: "o/m",
            revision: "v2",
            file: "a.gguf",
        };
        let e = |status, code, msg, asked, token| {
            status_error(status, &headers(code, msg), asked, token)
        };
        // A repo that does not exist: 401 without a token, 404 with one; never "gated".
        for (status, token) in [(401, false), (404, true)] {
            let got = e(
                status,
                Some("RepoNotFound"),
                Some("Repository not found"),
                repo,
                token,
            );
            assert!(matches!(got, DownloadError::RepoNotFound { .. }), "{got:?}");
            let text = got.to_string();
            assert!(
                text.contains("repo o/m was not found") && !text.contains("gated"),
                "{text}"
            );
        }
        // A bare 401 about a repo is a repo not found too, unless the credentials are invalid.
        assert!(matches!(
            e(401, None, None, repo, false),
            DownloadError::RepoNotFound { .. }
        ));
        let bad = e(401, None, Some(INVALID_CREDENTIALS), repo, true);
        assert!(matches!(bad, DownloadError::BadToken { .. }), "{bad:?}");
        let got = e(
            404,
            Some("RevisionNotFound"),
            Some("Invalid rev id: v9"),
            repo,
            false,
        );
        assert!(
            got.to_string().contains("revision main of repo o/m"),
            "{got}"
        );
        let got = e(
            404,
            Some("EntryNotFound"),
            Some("Entry not found"),
            file,
            false,
        );
        assert!(
            got.to_string()
                .contains("file a.gguf of repo o/m at revision v2"),
            "{got}"
        );
        for (status, token, says) in [
            (401, false, "no token is configured"),
            (403, true, "not on its authorized list"),
        ] {
            let got = e(
                status,
                Some("GatedRepo"),
                Some("Access to model o/m is restricted."),
                file,
                token,
            );
            let text = got.to_string();
            assert!(
                text.contains("is gated") && text.contains(says) && text.contains("restricted"),
                "{text}"
            );
        }
        let got = e(
            403,
            None,
            Some("Access to this resource is disabled."),
            repo,
            false,
        );
        assert!(matches!(got, DownloadError::Disabled { .. }), "{got:?}");
        let got = e(403, None, None, repo, true);
        assert!(got.to_string().contains("lacks the permission"), "{got}");
        let search = Asked::Search { query: "tiny" };
        assert!(matches!(
            e(401, None, Some(INVALID_CREDENTIALS), search, true),
            DownloadError::BadToken { .. }
        ));
        assert!(e(429, None, None, search, false).transient());
        assert!(e(503, None, None, file, false).transient());
        assert!(!e(404, Some("EntryNotFound"), None, file, false).transient());
        // The endpoint's words are passed on without control characters, and bounded.
        let long = format!("a\tb{}", "x".repeat(500));
        let got = e(403, None, Some(&long), repo, true).to_string();
        assert!(
            got.contains("\"ab") && !got.contains('\t') && got.len() < 400,
            "{got}"
        );
    }
}
