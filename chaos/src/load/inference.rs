//! The inference kind: chat completions through the daemon's OpenAI-compatible endpoint
//! (`<socket>.inference`) to llama.cpp's `llama-server` serving the tiny GGUF, which the
//! runner put on its model hub and had the daemon download before the load began; the first
//! request loads it (`[inference] on_demand`). The fault thread SIGKILLs and SIGSTOPs the
//! model server like any other child: every request must end in a whole answer (exactly
//! `max_tokens` tokens: the end-of-sequence token is biased away), an OpenAI-shaped error
//! with a message, or — for a stream the server broke off — an error event; never a hang, a
//! cut without a word, or a short answer passed off as whole. After the faults stop, a
//! model of its own is audited: the usage book must hold exactly the tokens the answers said.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_testhub::HfServer;
use toolvisor_testhub::http::{self, Head};

use super::{Load, deadline};
use crate::net;

/// The store model the load asks for (by its repo: the endpoint loads it on demand).
pub const MODEL: &str = "chaos/tiny-llama";
/// The same file under another repo, only for the final usage audit (no other client sends
/// it requests, so the book's counts for it are exactly the audit's).
pub const AUDIT_MODEL: &str = "chaos/tiny-llama-audit";
const FILE: &str = "tiny-F32.gguf";
/// How long staging (two downloads of the tiny model from the throttled hub) may take.
const STAGE_DEADLINE: Duration = Duration::from_secs(120);

/// The endpoint's socket of the daemon at `socket`.
pub fn endpoint(socket: &Path) -> PathBuf {
    PathBuf::from(format!("{}.inference", socket.display()))
}

/// Put the tiny model on the hub as [`MODEL`] and [`AUDIT_MODEL`] and have the daemon
/// download both into its store (the real path a model takes before it is loaded).
pub fn stage(hub: &HfServer, socket: &Path, workdir: &Path, gguf: Vec<u8>) -> anyhow::Result<()> {
    let mut client = net::connect(
        socket,
        net::options(Codec::Json, true, workdir),
        Duration::from_secs(10),
        Duration::from_secs(30),
    )
    .map_err(|m| anyhow::anyhow!("connect to stage the model: {m:?}"))?;
    let mut jobs = Vec::new();
    for repo in [MODEL, AUDIT_MODEL] {
        hub.add_repo(repo, vec![(FILE, gguf.clone(), true)], false);
        let v = client
            .call_with(
                "chaos-stage",
                "download_model",
                json!({"repo": repo}),
                |_| true,
            )
            .with_context(|| format!("download_model {repo}"))?;
        let v = match v.outcome {
            toolvisor_protocol::wire::Outcome::Ok(v) => v.0,
            toolvisor_protocol::wire::Outcome::Err(e) => bail!("download_model {repo}: {e}"),
        };
        if let Some(id) = v["job_id"].as_str() {
            jobs.push((repo, id.to_string()));
        }
    }
    let began = Instant::now();
    for (repo, id) in jobs {
        loop {
            let v = client
                .call("chaos-stage", "list_downloads", json!({"job_id": id}))
                .context("list_downloads")?;
            let v = match v.outcome {
                toolvisor_protocol::wire::Outcome::Ok(v) => v.0,
                toolvisor_protocol::wire::Outcome::Err(e) => bail!("list_downloads {id}: {e}"),
            };
            match v["jobs"][0]["state"].as_str() {
                Some("done") => break,
                Some("failed" | "cancelled") => bail!("downloading {repo} ended: {v}"),
                _ if began.elapsed() > STAGE_DEADLINE => {
                    bail!("downloading {repo} took over {STAGE_DEADLINE:?}: {v}")
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
    Ok(())
}

/// A chat completion of `max_tokens` tokens of `model` (never the end-of-sequence token).
fn completion(model: &str, max_tokens: u64, stream: bool, nonce: &str) -> Json {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": format!("say hello {nonce}")}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "logit_bias": {"2": -100},
        "stream": stream,
    })
}

/// What one request through the endpoint came back as.
enum Reply {
    /// A whole answer: its prompt and completion tokens (from its `usage`, or the stream's
    /// `timings`).
    Whole(u64, u64),
    /// An answer that is not what was asked (too short, no content, no counts).
    Wrong(String),
    /// An OpenAI-shaped error (status, type, message), or a stream's error event (status 200).
    Error(u16, String, String),
    /// A body cut short, or not an answer at all, without an error saying why.
    Unclear(String),
}

/// The `data:` payloads of an event stream, parsed (`[DONE]` as `None`).
fn events(body: &str) -> Vec<Option<Json>> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            if d == "[DONE]" {
                None
            } else {
                Some(serde_json::from_str(d).unwrap_or(Json::Null))
            }
        })
        .collect()
}

fn error_of(v: &Json) -> Option<(String, String)> {
    let e = v.get("error")?;
    Some((
        e["type"].as_str().unwrap_or("").to_string(),
        e["message"].as_str().unwrap_or("").to_string(),
    ))
}

fn judge(head: &Head, body: &str, stream: bool, max_tokens: u64) -> Reply {
    if head.status != 200 {
        return match serde_json::from_str::<Json>(body)
            .ok()
            .as_ref()
            .and_then(error_of)
        {
            Some((kind, message)) => Reply::Error(head.status, kind, message),
            None => Reply::Unclear(format!(
                "status {} without an OpenAI error body: {body:.300}",
                head.status
            )),
        };
    }
    if !stream {
        let Ok(v) = serde_json::from_str::<Json>(body) else {
            return Reply::Wrong(format!("a 200 answer that is not JSON: {body:.300}"));
        };
        let content = v["choices"][0]["message"]["content"].as_str();
        let (p, c) = (
            v["usage"]["prompt_tokens"].as_u64(),
            v["usage"]["completion_tokens"].as_u64(),
        );
        return match (content, p, c) {
            (Some(_), Some(p), Some(c)) if c == max_tokens => Reply::Whole(p, c),
            _ => Reply::Wrong(format!(
                "asked for {max_tokens} tokens, got content {content:?} and usage {}",
                v["usage"]
            )),
        };
    }
    let evs = events(body);
    if let Some((kind, message)) = evs.iter().flatten().find_map(error_of) {
        if evs.iter().any(Option::is_none) {
            return Reply::Wrong(format!(
                "a stream with an error event and [DONE]: {body:.300}"
            ));
        }
        return Reply::Error(200, kind, message);
    }
    if !evs.iter().any(Option::is_none) {
        return Reply::Unclear(format!(
            "a stream that ended without [DONE] and without an error event: {body:.300}"
        ));
    }
    // The tiny model's tokens are often single bytes of an unfinished UTF-8 sequence, which
    // the server holds back: a whole stream may carry no content at all. Its length is what
    // the server generated.
    let contents = evs
        .iter()
        .flatten()
        .filter(|e| e["choices"][0]["delta"]["content"].is_string())
        .count();
    let timings = evs.iter().flatten().rev().find_map(|e| e.get("timings"));
    match timings {
        Some(t) if t["predicted_n"].as_u64() == Some(max_tokens) => {
            let p = t["prompt_n"].as_u64().unwrap_or(0) + t["cache_n"].as_u64().unwrap_or(0);
            Reply::Whole(p, max_tokens)
        }
        _ => Reply::Wrong(format!(
            "a stream of {contents} content events asked for {max_tokens} tokens ended [DONE] with timings {timings:?}"
        )),
    }
}

impl Load {
    /// One request through the endpoint: plain or streamed, judged.
    pub(super) fn inference(&mut self) {
        const K: &str = "inference";
        if self.rng.below(10) == 0 {
            // Now and then the pool's view: its server's pid (restarts seen).
            if let Some(Ok(v)) = self.call(K, "get_inference_status", json!({}))
                && let Some(m) = v["models"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|m| m["model"] == MODEL)
            {
                let pid = m["pid"].clone();
                self.note_pid(K, &pid);
            }
            return;
        }
        let stream = self.rng.below(3) == 0;
        let max_tokens = self.rng.range(2, 17);
        let nonce = self.token();
        if let Some(Reply::Error(_, kind, message)) =
            self.complete(K, MODEL, max_tokens, stream, &nonce)
            && kind == "model_failed"
            && message.contains("gave up")
        {
            // Past its restart intensity: unload it, and the next request loads it again.
            self.call(K, "unload_model", json!({"alias": MODEL}));
        }
    }

    /// Send one completion of `model`, count and judge it; the reply when one came.
    fn complete(
        &mut self,
        kind: &'static str,
        model: &str,
        max_tokens: u64,
        stream: bool,
        nonce: &str,
    ) -> Option<Reply> {
        let body = completion(model, max_tokens, stream, nonce).to_string();
        let what = format!(
            "client {} inference {}{max_tokens} tokens of {model}",
            self.ctx.index,
            if stream { "stream of " } else { "" }
        );
        let epoch = self.ctx.life.epoch();
        let limit = deadline(kind);
        let socket = endpoint(&self.ctx.socket);
        let started = Instant::now();
        let mut bytes = Vec::new();
        let sent = http::send(
            &socket,
            "POST",
            "/v1/chat/completions",
            Some(body.as_bytes()),
            limit,
            |c| bytes.extend_from_slice(c),
        );
        self.count_call(kind, started.elapsed());
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let life = self.ctx.life.clone();
        let down = || life.down() || life.epoch() != epoch;
        let head = match sent {
            Ok(head) => head,
            Err(_) if down() => {
                self.stats.kind(kind).cut += 1;
                return None;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                self.note_miss(
                    kind,
                    &what,
                    net::Miss::Hung(format!("no whole answer within {limit:?}: {text:.300}")),
                );
                return None;
            }
            Err(e) => {
                self.stats.kind(kind).unclear += 1;
                self.stats.problems.push(format!(
                    "UNCLEAR: {what}: the answer broke off without an error ({e}): {text:.300}"
                ));
                return None;
            }
        };
        let reply = judge(&head, &text, stream, max_tokens);
        match &reply {
            Reply::Whole(..) => self.stats.kind(kind).ok += 1,
            Reply::Wrong(why) => self.lost(kind, format!("{what}: {why}")),
            Reply::Error(status, k, message) if !message.trim().is_empty() => {
                self.stats.kind(kind).clear += 1;
                let k = format!("{k} ({status})");
                *self.stats.clear_errors.entry(k.clone()).or_default() += 1;
                self.stats
                    .error_samples
                    .entry(format!("{kind} {k}"))
                    .or_insert_with(|| format!("{what}: {message}"));
            }
            Reply::Error(status, k, _) => {
                self.stats.kind(kind).unclear += 1;
                self.stats.problems.push(format!(
                    "UNCLEAR ERROR: {what}: status {status} {k} without a message"
                ));
            }
            Reply::Unclear(_) if down() => self.stats.kind(kind).cut += 1,
            Reply::Unclear(why) => {
                self.stats.kind(kind).unclear += 1;
                self.stats.problems.push(format!("UNCLEAR: {what}: {why}"));
            }
        }
        Some(reply)
    }

    /// The final check of the kind, once the faults stopped: [`MODEL`] answers, and the
    /// usage book counts exactly what a plain and a streamed answer of [`AUDIT_MODEL`] said.
    pub(super) fn inference_serves(&mut self) -> Result<(), String> {
        const K: &str = "inference";
        match self.complete(K, MODEL, 4, false, "serve") {
            Some(Reply::Whole(..)) => {}
            Some(Reply::Error(status, k, m)) => return Err(format!("{status} {k}: {m}")),
            Some(Reply::Wrong(w) | Reply::Unclear(w)) => return Err(w),
            None => return Err("no answer".into()),
        }
        let totals = |me: &mut Load| -> Result<Json, String> {
            match me.call(K, "get_token_usage_stats", json!({"model": AUDIT_MODEL})) {
                Some(Ok(v)) => Ok(v["totals"].clone()),
                Some(Err(e)) => Err(e.to_string()),
                None => Err("no answer to get_token_usage_stats".into()),
            }
        };
        let before = totals(self)?;
        let mut said = (0, 0);
        for (stream, n) in [(false, 5), (true, 7), (false, 3)] {
            match self.complete(K, AUDIT_MODEL, n, stream, "audit") {
                Some(Reply::Whole(p, c)) => {
                    said.0 += p;
                    said.1 += c;
                }
                Some(Reply::Error(status, k, m)) => return Err(format!("{status} {k}: {m}")),
                Some(Reply::Wrong(w) | Reply::Unclear(w)) => return Err(w),
                None => return Err("no answer".into()),
            }
        }
        // The book is written as each body ends: give the last one a moment.
        let began = Instant::now();
        loop {
            let after = totals(self)?;
            let delta = |k: &str| after[k].as_u64().unwrap_or(0) - before[k].as_u64().unwrap_or(0);
            if delta("requests") == 3 {
                let counted = (delta("prompt_tokens"), delta("completion_tokens"));
                if counted != said || delta("requests_without_usage") != 0 {
                    self.lost(
                        K,
                        format!(
                            "the usage book counted {counted:?} tokens (prompt, completion) and {} requests without usage for three answers that said {said:?}",
                            delta("requests_without_usage")
                        ),
                    );
                }
                return Ok(());
            }
            if began.elapsed() > Duration::from_secs(10) {
                return Err(format!(
                    "the usage book counted {} of the audit's 3 requests",
                    delta("requests")
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
