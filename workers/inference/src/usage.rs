//! Token usage: the scanner that finds `usage` in a response as it passes (a JSON body, or
//! the `data:` lines of a server-sent event stream), and the book of requests and tokens per
//! model per UTC day, persisted under the state directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use toolvisor_kit::private::{Durability, write_private_file};
use toolvisor_protocol::results::{
    DayModelUsage, DayUsage, ModelUsage, TokenCounts, TokenUsageResult,
};

/// Tokens one response reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens the server took from its prompt cache (counted in `prompt_tokens` too),
    /// where it says: OpenAI's `prompt_tokens_details.cached_tokens`, Anthropic's
    /// `cache_read_input_tokens`, llama-server's `timings.cache_n`.
    pub cached_tokens: u64,
}

/// What one JSON document (a response body, or one event of a stream) says about tokens:
/// the prompt and completion counts it names, each where it names one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Said {
    prompt: Option<u64>,
    completion: Option<u64>,
    cached: Option<u64>,
}

impl Said {
    fn any(self) -> bool {
        self.prompt.is_some() || self.completion.is_some()
    }

    /// `later` where it names a count, else what was said before (Anthropic's stream names the
    /// prompt in its first event and the completion in a later one; OpenAI's names both last).
    fn then(self, later: Said) -> Said {
        Said {
            prompt: later.prompt.or(self.prompt),
            completion: later.completion.or(self.completion),
            cached: later.cached.or(self.cached),
        }
    }

    fn usage(self) -> Usage {
        Usage {
            prompt_tokens: self.prompt.unwrap_or(0),
            completion_tokens: self.completion.unwrap_or(0),
            cached_tokens: self.cached.unwrap_or(0),
        }
    }
}

/// A `usage` object: OpenAI's `prompt_tokens`/`completion_tokens` (chat, completions,
/// embeddings) or `input_tokens`/`output_tokens` (Responses and Anthropic Messages).
fn said_by_usage(u: &Json) -> Said {
    let n = |a: &str, b: &str| u.get(a).or_else(|| u.get(b)).and_then(Json::as_u64);
    Said {
        prompt: n("prompt_tokens", "input_tokens"),
        completion: n("completion_tokens", "output_tokens"),
        cached: u
            .pointer("/prompt_tokens_details/cached_tokens")
            .or_else(|| u.pointer("/input_tokens_details/cached_tokens"))
            .or_else(|| u.get("cache_read_input_tokens"))
            .and_then(Json::as_u64),
    }
}

/// The `usage` of a document: at its top (OpenAI, Anthropic's `message_delta`), in its
/// `response` (Responses' `response.completed`) or its `message` (Anthropic's
/// `message_start`).
fn usage_of(v: &Json) -> Said {
    [
        v.get("usage"),
        v.pointer("/response/usage"),
        v.pointer("/message/usage"),
    ]
    .into_iter()
    .flatten()
    .filter(|u| u.is_object())
    .fold(Said::default(), |acc, u| acc.then(said_by_usage(u)))
}

/// llama.cpp's `llama-server` puts `timings` in a stream's last event whether or not the
/// client asked for `usage`: the prompt is the tokens it took from its cache (`cache_n`) and
/// the ones it processed (`prompt_n`), the completion the ones it generated (`predicted_n`).
fn timings_of(v: &Json) -> Option<Usage> {
    let t = v.get("timings")?;
    let n = |k: &str| t.get(k).and_then(Json::as_u64);
    let predicted = n("predicted_n")?;
    let prompt = n("prompt_n")?;
    let cached = n("cache_n").unwrap_or(0);
    Some(Usage {
        prompt_tokens: prompt + cached,
        completion_tokens: predicted,
        cached_tokens: cached,
    })
}

/// A JSON body is kept up to this size to read its `usage`; an SSE line up to this length.
const KEEP_MAX: usize = 8 << 20;

/// Reads `usage` from the bytes of a response as they pass, keeping at most [`KEEP_MAX`].
#[derive(Debug)]
pub struct Scanner {
    sse: bool,
    buf: Vec<u8>,
    overflow: bool,
    said: Said,
    timings: Option<Usage>,
}

impl Scanner {
    /// `sse`: the response is `text/event-stream`.
    pub fn new(sse: bool) -> Scanner {
        Scanner {
            sse,
            buf: Vec::new(),
            overflow: false,
            said: Said::default(),
            timings: None,
        }
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        if !self.sse {
            if self.buf.len() + bytes.len() > KEEP_MAX {
                self.overflow = true;
                self.buf.clear();
            } else if !self.overflow {
                self.buf.extend_from_slice(bytes);
            }
            return;
        }
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|&b| b == b'\n') {
            if !self.overflow {
                self.buf.extend_from_slice(&rest[..nl]);
                let line = std::mem::take(&mut self.buf);
                self.line(&line);
            }
            self.buf.clear();
            self.overflow = false;
            rest = &rest[nl + 1..];
        }
        if self.buf.len() + rest.len() > KEEP_MAX {
            self.overflow = true;
            self.buf.clear();
        } else if !self.overflow {
            self.buf.extend_from_slice(rest);
        }
    }

    fn line(&mut self, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(data) = line.strip_prefix(b"data:") else {
            return;
        };
        let data = data.trim_ascii();
        if data.is_empty() || data == b"[DONE]" {
            return;
        }
        if let Ok(v) = serde_json::from_slice::<Json>(data) {
            self.said = self.said.then(usage_of(&v));
            if let Some(t) = timings_of(&v) {
                self.timings = Some(t);
            }
        }
    }

    /// The tokens the response reported: its `usage` (for a stream, each count as its last
    /// event that named it), else llama-server's `timings`; `None` when it said neither.
    pub fn finish(mut self) -> Option<Usage> {
        if self.sse {
            if !self.overflow && !self.buf.is_empty() {
                let line = std::mem::take(&mut self.buf);
                self.line(&line);
            }
        } else if !self.overflow
            && let Ok(v) = serde_json::from_slice::<Json>(&self.buf)
        {
            self.said = usage_of(&v);
            self.timings = timings_of(&v);
        }
        if self.said.any() {
            let mut usage = self.said.usage();
            // A `usage` that does not say what came from the cache: llama-server's timings do.
            if self.said.cached.is_none()
                && let Some(t) = self.timings
            {
                usage.cached_tokens = t.cached_tokens;
            }
            Some(usage)
        } else {
            self.timings
        }
    }
}

/// Counts of one model on one day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub requests: u64,
    /// Requests whose response carried no `usage` (cut short, or a server that does not say).
    pub requests_without_usage: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the server's prompt cache, where it said.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.requests_without_usage += o.requests_without_usage;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.cached_prompt_tokens += o.cached_prompt_tokens;
    }

    fn shown(self) -> TokenCounts {
        TokenCounts {
            requests: self.requests,
            requests_without_usage: self.requests_without_usage,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            total_tokens: self.prompt_tokens + self.completion_tokens,
            cached_prompt_tokens: self.cached_prompt_tokens,
        }
    }
}

/// Day (`YYYY-MM-DD`, UTC) → model → counts.
type Days = BTreeMap<String, BTreeMap<String, Counts>>;

#[derive(Default, Serialize, Deserialize)]
struct Book {
    days: Days,
}

/// The usage book, persisted to one private JSON file after every change.
pub struct UsageBook {
    path: PathBuf,
    book: Mutex<Book>,
    /// Held while writing, so an older state never overwrites a newer one.
    write: Mutex<()>,
    /// A record since the last save began.
    dirty: AtomicBool,
    /// A saver is on the blocking pool ([`UsageBook::save_soon`]).
    saving: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The UTC calendar date of a Unix time in seconds.
pub fn utc_date(secs: u64) -> String {
    // Howard Hinnant's days-to-civil.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn today() -> String {
    utc_date(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    )
}

impl UsageBook {
    /// The book at `path` (missing: empty; unreadable: empty, with a warning).
    pub fn open(path: &Path) -> UsageBook {
        let book = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "the token usage file is not readable; starting a new one");
                Book::default()
            }),
            Err(_) => Book::default(),
        };
        UsageBook {
            path: path.to_path_buf(),
            book: Mutex::new(book),
            write: Mutex::new(()),
            dirty: AtomicBool::new(false),
            saving: AtomicBool::new(false),
        }
    }

    /// Count one request of `model` today (in memory; [`UsageBook::save`] persists).
    pub fn record(&self, model: &str, usage: Option<Usage>) {
        let mut book = lock(&self.book);
        let c = book
            .days
            .entry(today())
            .or_default()
            .entry(model.to_string())
            .or_default();
        c.requests += 1;
        match usage {
            Some(u) => {
                c.prompt_tokens += u.prompt_tokens;
                c.completion_tokens += u.completion_tokens;
                c.cached_prompt_tokens += u.cached_tokens;
            }
            None => c.requests_without_usage += 1,
        }
    }

    /// Persist the book from the blocking pool, coalesced: at most one saver is queued or
    /// running at a time, however many requests end at once, and it saves again while records
    /// arrive during its write, so the last record always reaches the file.
    pub fn save_soon(self: &Arc<Self>) {
        self.dirty.store(true, Ordering::SeqCst);
        if self.saving.swap(true, Ordering::SeqCst) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.saving.store(false, Ordering::SeqCst);
            self.save();
            return;
        };
        let book = self.clone();
        rt.spawn_blocking(move || {
            loop {
                book.dirty.store(false, Ordering::SeqCst);
                book.save();
                book.saving.store(false, Ordering::SeqCst);
                // A record during the write set `dirty`: save once more, unless its recorder
                // already started a saver of its own.
                if !book.dirty.load(Ordering::SeqCst) || book.saving.swap(true, Ordering::SeqCst) {
                    break;
                }
            }
        });
    }

    /// Write the book (blocking I/O: call from the blocking pool).
    pub fn save(&self) {
        let _w = lock(&self.write);
        let bytes = match serde_json::to_vec(&*lock(&self.book)) {
            Ok(b) => b,
            Err(_) => return,
        };
        if let Err(e) = write_private_file(&self.path, &bytes, "token usage", Durability::Unsynced)
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot persist token usage");
        }
    }

    /// `get_token_usage_stats`: totals, per day, per model and per day and model, optionally
    /// for one model and the last `days` days.
    pub fn stats(&self, model: Option<&str>, days: Option<u32>) -> TokenUsageResult {
        let book = lock(&self.book);
        let first = days.map(|n| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            utc_date(now.saturating_sub(u64::from(n.saturating_sub(1)) * 86_400))
        });
        let mut total = Counts::default();
        let mut per_model: BTreeMap<&str, Counts> = BTreeMap::new();
        let mut per_day = Vec::new();
        let mut per_day_model = Vec::new();
        for (day, models) in &book.days {
            if first.as_ref().is_some_and(|f| day < f) {
                continue;
            }
            let mut day_total = Counts::default();
            for (m, c) in models {
                if model.is_some_and(|want| want != m) {
                    continue;
                }
                day_total.add(c);
                per_model.entry(m).or_default().add(c);
                per_day_model.push(DayModelUsage {
                    date: day.clone(),
                    model: m.clone(),
                    counts: c.shown(),
                });
            }
            if day_total.requests > 0 {
                total.add(&day_total);
                per_day.push(DayUsage {
                    date: day.clone(),
                    counts: day_total.shown(),
                });
            }
        }
        TokenUsageResult {
            totals: total.shown(),
            per_day,
            per_model: per_model
                .into_iter()
                .map(|(m, c)| ModelUsage {
                    model: m.to_string(),
                    counts: c.shown(),
                })
                .collect(),
            per_day_model,
            file: self.path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn saves_are_coalesced_and_the_last_record_reaches_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        let book = Arc::new(UsageBook::open(&path));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let book = book.clone();
                tokio::spawn(async move {
                    for _ in 0..250 {
                        book.record("m", None);
                        book.save_soon();
                        // At most the one saver: never a queue of them.
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while book.saving.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the saver never ended"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let reread = UsageBook::open(&path);
        assert_eq!(reread.stats(Some("m"), None).totals.requests, 2000);
    }

    #[test]
    fn dates_are_utc_calendar_days() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_796_083_200), "2026-12-01");
    }

    #[test]
    fn a_json_body_and_a_stream_split_anywhere_give_their_usage() {
        let body =
            br#"{"id":"x","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#;
        for cut in 0..body.len() {
            let mut s = Scanner::new(false);
            s.feed(&body[..cut]);
            s.feed(&body[cut..]);
            assert_eq!(
                s.finish(),
                Some(Usage {
                    prompt_tokens: 7,
                    completion_tokens: 3,
                    cached_tokens: 0,
                })
            );
        }
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        for cut in 0..stream.len() {
            let mut s = Scanner::new(true);
            s.feed(&stream[..cut]);
            s.feed(&stream[cut..]);
            assert_eq!(
                s.finish(),
                Some(Usage {
                    prompt_tokens: 5,
                    completion_tokens: 2,
                    cached_tokens: 0,
                })
            );
        }
        let mut s = Scanner::new(true);
        s.feed(b"data: {\"usage\":null}\n\n");
        assert_eq!(s.finish(), None);
    }

    fn scan(sse: bool, bytes: &[u8]) -> Option<Usage> {
        let mut s = Scanner::new(sse);
        s.feed(bytes);
        s.finish()
    }

    fn usage(prompt_tokens: u64, completion_tokens: u64) -> Option<Usage> {
        Some(Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens: 0,
        })
    }

    #[test]
    fn llama_servers_timings_count_a_stream_that_carried_no_usage() {
        let last = b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"length\"}],\"timings\":{\"cache_n\":3,\"prompt_n\":9,\"prompt_ms\":1.5,\"predicted_n\":16,\"predicted_ms\":20.0}}\n\ndata: [DONE]\n\n";
        let mut cached = usage(12, 16).unwrap();
        cached.cached_tokens = 3;
        assert_eq!(scan(true, last), Some(cached));
        // A client that asked for usage gets both in the last event: usage is what counts,
        // and the timings say what came from the cache.
        let both = b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":16},\"timings\":{\"cache_n\":3,\"prompt_n\":1,\"predicted_n\":1}}\n\n";
        assert_eq!(scan(true, both), Some(cached));
        // OpenAI's and Anthropic's names for cached prompt tokens.
        let openai = br#"{"usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":8}}}"#;
        assert_eq!(scan(false, openai).unwrap().cached_tokens, 8);
        let anthropic =
            br#"{"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":6}}"#;
        assert_eq!(scan(false, anthropic).unwrap().cached_tokens, 6);
        // Timings without the counts are not a count.
        assert_eq!(
            scan(true, b"data: {\"timings\":{\"prompt_ms\":1.0}}\n\n"),
            None
        );
    }

    #[test]
    fn responses_and_anthropic_messages_name_input_and_output_tokens() {
        let responses = b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":8,\"output_tokens\":5,\"total_tokens\":13}}}\n\n";
        assert_eq!(scan(true, responses), usage(8, 5));
        let anthropic = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":21,\"output_tokens\":1}}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n";
        assert_eq!(scan(true, anthropic), usage(21, 7));
        assert_eq!(
            scan(
                false,
                br#"{"type":"message","usage":{"input_tokens":4,"output_tokens":2}}"#
            ),
            usage(4, 2)
        );
        // An embeddings answer names only its prompt.
        assert_eq!(
            scan(
                false,
                br#"{"data":[],"usage":{"prompt_tokens":6,"total_tokens":6}}"#
            ),
            usage(6, 0)
        );
    }

    #[test]
    fn a_usage_that_names_no_count_is_no_usage() {
        assert_eq!(scan(false, br#"{"usage":{"cost":1}}"#), None);
        assert_eq!(scan(false, br#"{"usage":{}}"#), None);
        assert_eq!(scan(false, b"not json"), None);
        assert_eq!(scan(true, b"data: {\"choices\":[]}\n\n"), None);
    }

    #[test]
    fn the_book_counts_per_model_and_day_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("usage.json");
        let book = UsageBook::open(&path);
        book.record(
            "a",
            Some(Usage {
                prompt_tokens: 4,
                completion_tokens: 6,
                cached_tokens: 0,
            }),
        );
        book.record("b", None);
        book.save();
        let again = UsageBook::open(&path);
        let s = serde_json::to_value(again.stats(None, None)).unwrap();
        assert_eq!(s["totals"]["requests"], 2);
        assert_eq!(s["totals"]["total_tokens"], 10);
        assert_eq!(s["per_model"][1]["requests_without_usage"], 1);
        assert_eq!(s["per_day"][0]["date"], today());
        assert_eq!(again.stats(Some("a"), Some(1)).totals.requests, 1);
    }
}
