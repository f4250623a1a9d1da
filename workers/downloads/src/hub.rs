//! The Hugging Face-compatible endpoint: a repo's file listing, search, and one file's bytes
//! from an offset (HTTP `Range`). Everything it answers is untrusted input: names are checked
//! by `choose`, sizes and hashes by the transfer.

use std::time::Duration;

use serde::Deserialize;

use crate::error::DownloadError;

/// One file of a repo, as the listing gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sibling {
    pub name: String,
    pub size: Option<u64>,
    /// Lower-case hex sha256 of an LFS file.
    pub sha256: Option<String>,
}

/// A repo at a revision.
#[derive(Clone, Debug)]
pub struct RepoInfo {
    pub id: String,
    pub siblings: Vec<Sibling>,
}

/// One search hit.
#[derive(Clone, Debug)]
pub struct Hit {
    pub id: String,
    pub downloads: Option<u64>,
    pub siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct RawLfs {
    size: Option<u64>,
    #[serde(alias = "oid")]
    sha256: Option<String>,
}

#[derive(Deserialize)]
struct RawSibling {
    rfilename: String,
    size: Option<u64>,
    lfs: Option<RawLfs>,
}

#[derive(Deserialize)]
struct RawRepo {
    #[serde(alias = "modelId")]
    id: Option<String>,
    #[serde(default)]
    siblings: Vec<RawSibling>,
    downloads: Option<u64>,
}

fn siblings(raw: Vec<RawSibling>) -> Vec<Sibling> {
    raw.into_iter()
        .map(|s| {
            let (lfs_size, sha) = match s.lfs {
                Some(l) => (l.size, l.sha256),
                None => (None, None),
            };
            let sha256 = sha
                .map(|h| h.trim_start_matches("sha256:").to_ascii_lowercase())
                .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
            Sibling {
                name: s.rfilename,
                size: lfs_size.or(s.size),
                sha256,
            }
        })
        .collect()
}

/// The endpoint client: base URL, optional token (sent as a bearer token, never logged).
#[derive(Clone)]
pub struct Hub {
    client: reqwest::Client,
    endpoint: String,
    token: Option<String>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// What `what` is when a status comes back.
fn status_error(status: reqwest::StatusCode, what: &str, has_token: bool) -> DownloadError {
    match status.as_u16() {
        401 | 403 => DownloadError::Unauthorized {
            what: what.to_string(),
            status: status.as_u16(),
            token: if has_token {
                "or the configured token (`[models] token` / HF_TOKEN) has no access to it"
            } else {
                "and no token is configured (`[models] token` / HF_TOKEN)"
            },
        },
        404 => DownloadError::NotFound {
            what: what.to_string(),
        },
        s => DownloadError::Http {
            what: what.to_string(),
            cause: format!("HTTP {s}"),
            transient: s == 429 || s == 408 || (500..600).contains(&s),
        },
    }
}

impl Hub {
    /// `connect_timeout` bounds how long an unreachable endpoint can hold a call.
    pub fn new(
        endpoint: &str,
        token: Option<String>,
        connect_timeout: Duration,
    ) -> Result<Hub, DownloadError> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            // A stalled body (no byte for this long) is a transient error, retried by Range.
            .read_timeout(Duration::from_secs(30))
            .user_agent(concat!("toolvisor/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| DownloadError::Invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Hub {
            client,
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token: token.filter(|t| !t.is_empty()),
        })
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
            Err(e) => Err(DownloadError::Http {
                what: what.to_string(),
                cause: root_cause(&e),
                transient: true,
            }),
        }
    }

    async fn json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        what: &str,
    ) -> Result<T, DownloadError> {
        let resp = self.send(self.get(url), what).await?;
        if !resp.status().is_success() {
            return Err(status_error(resp.status(), what, self.token.is_some()));
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

    /// `GET /api/models/{repo}/revision/{rev}`: the repo's files with sizes and LFS hashes.
    pub async fn repo_info(&self, repo: &str, revision: &str) -> Result<RepoInfo, DownloadError> {
        let url = format!(
            "{}/api/models/{repo}/revision/{}?blobs=true",
            self.endpoint,
            encode(revision)
        );
        let what = format!("repo {repo} at revision {revision}");
        let raw: RawRepo = self.json(&url, &what).await?;
        Ok(RepoInfo {
            id: raw.id.unwrap_or_else(|| repo.to_string()),
            siblings: siblings(raw.siblings),
        })
    }

    /// `GET /api/models?search=`: candidate repos (siblings when the endpoint lists them).
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, DownloadError> {
        let url = format!(
            "{}/api/models?search={}&limit={limit}&full=true",
            self.endpoint,
            encode(query)
        );
        let raw: Vec<RawRepo> = self
            .json(&url, &format!("the search for {query:?}"))
            .await?;
        Ok(raw
            .into_iter()
            .filter_map(|r| {
                Some(Hit {
                    id: r.id?,
                    downloads: r.downloads,
                    siblings: siblings(r.siblings),
                })
            })
            .collect())
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
        let url = format!(
            "{}/{repo}/resolve/{}/{}",
            self.endpoint,
            encode(revision),
            file.split('/').map(encode).collect::<Vec<_>>().join("/")
        );
        let mut req = self.get(&url);
        if from > 0 {
            req = req.header(reqwest::header::RANGE, format!("bytes={from}-"));
        }
        let what = format!("{file} of {repo}");
        let resp = self.send(req, &what).await?;
        let status = resp.status();
        if status.is_success() || status.as_u16() == 416 {
            Ok(resp)
        } else {
            Err(status_error(status, &what, self.token.is_some()))
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
    fn listing_takes_lfs_size_and_hash_and_drops_malformed_hashes() {
        let raw: RawRepo = serde_json::from_str(
            r#"{"id":"o/m","siblings":[
                {"rfilename":"a.gguf","size":10,"lfs":{"size":10,"sha256":"AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12AB12"}},
                {"rfilename":"config.json","size":5},
                {"rfilename":"b.gguf","lfs":{"size":7,"sha256":"not-a-hash"}}]}"#,
        )
        .unwrap();
        let s = siblings(raw.siblings);
        assert_eq!(s[0].size, Some(10));
        assert_eq!(
            s[0].sha256.as_deref(),
            Some("ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12")
        );
        assert_eq!((s[1].size, s[1].sha256.is_none()), (Some(5), true));
        assert_eq!((s[2].size, s[2].sha256.is_none()), (Some(7), true));
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
        )
        .unwrap();
        assert!(!format!("{hub:?}").contains("secretsecret"));
    }
}
