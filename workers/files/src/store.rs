//! The result store: a tool result larger than the inline bound is stored on disk under the
//! daemon's state dir, per conversation, and the caller gets a bounded projection plus a
//! `ref`; `tool_result_read` reads stored results back by characters. Known secrets are
//! masked before anything is returned or stored, and the stored record says what was
//! masked. A reference is never answered from a preview: what was not stored whole is
//! `not_available`.
//!
//! Every tool result reaches this store through one function, `tools::files::finish` in the daemon
//! (called at the end of `tools::run`): no tool projects on its own. Results live under
//! `<state_dir>/results/<conversation>/`, written 0600 by `kit::private::write_private_file`
//! (unsynced: a lost one answers `not_available`), are keyed by the conversation that made them and
//! read back only by it, and are evicted oldest first past the per-conversation and total byte
//! budgets. Secrets are masked before the text is written, so none reaches the disk.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value as Json, json};
use toolvisor_protocol::results::ToolResultReadResult;

use crate::error::{Error, Result};
use crate::secrets::Secrets;
use crate::text;

/// Bounds of the store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Where results live (`<state_dir>/results`).
    pub dir: PathBuf,
    /// A result whose JSON is longer than this (characters) is stored and projected.
    pub inline_chars: usize,
    /// Characters of stored text a projection shows (shared by the fields projected).
    pub projection_chars: usize,
    /// A single result above this many bytes is not stored (only its projection exists).
    pub max_result_bytes: u64,
    /// Oldest results of a conversation are evicted past this.
    pub max_bytes_per_conversation: u64,
    /// Oldest results of any conversation are evicted past this.
    pub max_total_bytes: u64,
    /// Results older than this are deleted.
    pub keep: Duration,
}

impl StoreConfig {
    pub fn new(dir: PathBuf) -> StoreConfig {
        StoreConfig {
            dir,
            inline_chars: 48_000,
            projection_chars: 12_000,
            max_result_bytes: 64 * 1024 * 1024,
            max_bytes_per_conversation: 256 * 1024 * 1024,
            max_total_bytes: 1024 * 1024 * 1024,
            keep: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// Default and largest `limit` of `tool_result_read`, in characters.
pub const DEFAULT_READ_CHARS: usize = 12_000;
pub const MAX_READ_CHARS: usize = 48_000;
/// A byte offset is recorded every this many characters, so reads seek instead of scanning.
const CHECKPOINT_CHARS: usize = 16_384;
/// Fields shorter than this are never projected on their own.
const MIN_FIELD_CHARS: usize = 1024;
/// What a projected field costs beyond its shown characters (marker, `projected` entry).
const FIELD_OVERHEAD: usize = 400;

#[derive(Clone, Debug)]
struct Rec {
    conv_key: String,
    bytes: u64,
    created_ms: u64,
    /// Order of storing in this process (0: found on disk at start, older than any new one):
    /// two results stored in one millisecond are still evicted oldest first.
    order: u64,
    inspectable: bool,
}

#[derive(Default)]
struct Index {
    recs: HashMap<String, Rec>,
    per_conv: HashMap<String, u64>,
    total: u64,
    last_sweep_ms: u64,
}

pub struct ResultStore {
    cfg: StoreConfig,
    secrets: Secrets,
    index: Mutex<Index>,
    seq: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Directory name of a conversation: a readable prefix and a hash (names may hold anything).
fn conv_key(conversation: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in conversation.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    let readable: String = conversation
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(24)
        .collect();
    format!("{readable}.{h:016x}")
}

/// Is `r` a well-formed reference (`tr_` and 20 hex digits)?
fn check_ref(r: &str) -> Result<()> {
    let why = if r.contains('/') {
        Some("a ref is a name, not a path")
    } else if !r.starts_with("tr_") {
        Some("refs start with `tr_`")
    } else if r.len() != 23
        || !r[3..]
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Some("`tr_` must be followed by exactly 20 lowercase hex digits")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::InvalidRef {
            given: r.chars().take(80).collect(),
            why: why.into(),
        }),
        None => Ok(()),
    }
}

/// Characters each byte adds to a JSON string beyond itself: 1 for `"`, `\\` and the short
/// escapes (`\n`, `\r`, `\t`, `\b`, `\f`), 5 for other control bytes (`\u00XX`).
const ESCAPE_EXTRA: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = 5;
        i += 1;
    }
    t[b'"' as usize] = 1;
    t[b'\\' as usize] = 1;
    t[b'\n' as usize] = 1;
    t[b'\r' as usize] = 1;
    t[b'\t' as usize] = 1;
    t[0x08] = 1;
    t[0x0c] = 1;
    t
};

/// Characters of `x` as a JSON string, quotes included.
fn str_chars(x: &str) -> usize {
    // A character starts at every byte that is not a UTF-8 continuation byte.
    2 + x
        .as_bytes()
        .iter()
        .map(|&b| usize::from((b & 0xC0) != 0x80) + usize::from(ESCAPE_EXTRA[b as usize]))
        .sum::<usize>()
}

/// Characters of `v` serialised as compact JSON.
pub fn json_chars(v: &Json) -> usize {
    match v {
        Json::Null => 4,
        Json::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Json::Number(n) => n.to_string().len(),
        Json::String(x) => str_chars(x),
        Json::Array(a) => 2 + a.iter().map(json_chars).sum::<usize>() + a.len().saturating_sub(1),
        Json::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| str_chars(k) + 1 + json_chars(v))
                .sum::<usize>()
                + m.len().saturating_sub(1)
        }
    }
}

/// An upper bound of `json_chars(v)` that costs one step per node, not per byte (every
/// byte of a string counted as its worst escape).
pub fn json_chars_bound(v: &Json) -> usize {
    match v {
        Json::Null | Json::Bool(_) => 5,
        Json::Number(_) => 24,
        Json::String(x) => 2 + 6 * x.len(),
        Json::Array(a) => 2 + a.iter().map(|i| json_chars_bound(i) + 1).sum::<usize>(),
        Json::Object(m) => {
            2 + m
                .iter()
                .map(|(k, v)| 4 + 6 * k.len() + json_chars_bound(v))
                .sum::<usize>()
        }
    }
}

/// The stored text's bytes from the checkpoint at or before `offset`, enough for `limit`
/// characters after the ones to skip to reach `offset`; with how many to skip.
fn read_span(
    f: &mut File,
    meta: &Json,
    reference: &str,
    offset: usize,
    limit: usize,
    size: u64,
) -> Result<(Vec<u8>, usize)> {
    let points: Vec<u64> = meta["checkpoints"]
        .as_array()
        .map(|a| a.iter().filter_map(Json::as_u64).collect())
        .unwrap_or_else(|| vec![0]);
    let cp = (offset / CHECKPOINT_CHARS).min(points.len().saturating_sub(1));
    let start_byte = points.get(cp).copied().unwrap_or(0);
    let skip = offset - cp * CHECKPOINT_CHARS;
    let want = ((skip + limit) as u64 * 4).min(size - start_byte.min(size));
    f.seek(SeekFrom::Start(start_byte))
        .map_err(|e| Error::io(reference, "read", e))?;
    let mut buf = vec![0u8; want as usize];
    f.read_exact(&mut buf).map_err(|e| Error::NotAvailable {
        reference: reference.into(),
        why: format!("its stored text cannot be read ({e})"),
    })?;
    Ok((buf, skip))
}

/// `buf` as text; a character the cut split at its end is left out.
fn valid_prefix(buf: &[u8]) -> std::result::Result<&str, std::str::Utf8Error> {
    match std::str::from_utf8(buf) {
        Ok(s) => Ok(s),
        Err(e) if e.error_len().is_none() => {
            Ok(std::str::from_utf8(&buf[..e.valid_up_to()]).expect("valid prefix"))
        }
        Err(e) => Err(e),
    }
}

/// `taken` cut to keep the encoded answer within one frame of `max_frame` bytes (JSON
/// escaping counted at its worst), and whether it was cut.
fn clamp_to_frame(taken: &str, max_frame: usize) -> (&str, bool) {
    let budget = max_frame.saturating_sub(4096);
    let mut used = 0;
    for (i, c) in taken.char_indices() {
        used += encoded_len(c);
        if used > budget {
            return (&taken[..i], true);
        }
    }
    (taken, false)
}

/// Bytes `c` takes in a JSON string.
fn encoded_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{08}' | '\u{0c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

fn random_hex(n_bytes: usize, seq: u64) -> String {
    let mut buf = vec![0u8; n_bytes];
    let ok = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        // No /dev/urandom: time, pid and a counter, mixed.
        let mut x =
            now_ms() ^ (u64::from(std::process::id()) << 32) ^ seq.wrapping_mul(0x9E3779B97F4A7C15);
        for b in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// Byte offsets of characters 0, N, 2N, ... of `text`.
fn checkpoints(text: &str) -> (usize, Vec<u64>) {
    let mut points = vec![0u64];
    let mut count = 0usize;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if (b & 0xC0) != 0x80 {
            if count > 0 && count.is_multiple_of(CHECKPOINT_CHARS) {
                points.push(i as u64);
            }
            count += 1;
        }
    }
    (count, points)
}

fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // Not synced: a result lost in a crash is detected (size mismatch: `not_available`) and
    // syncing megabytes per large result would cost more than the search that made them.
    toolvisor_kit::private::write_private_file(
        path,
        bytes,
        "a stored result",
        toolvisor_kit::private::Durability::Unsynced,
    )
    .map_err(std::io::Error::other)
}

/// A stored (or unstorable) piece of a result.
struct Stored {
    reference: Option<String>,
    total_chars: usize,
    storage_kind: &'static str,
    why_not: Option<String>,
}

impl ResultStore {
    /// Open (creating) the store and sweep what has expired.
    pub fn open(mut cfg: StoreConfig, secrets: Secrets) -> std::io::Result<ResultStore> {
        // A projection must leave room for the rest of the result.
        cfg.projection_chars = cfg.projection_chars.min(cfg.inline_chars / 2);
        // Stored results are whole tool outputs: ours alone, whatever an older version left.
        crate::private_dir(&cfg.dir, "the result store")?;
        let store = ResultStore {
            cfg,
            secrets,
            index: Mutex::new(Index::default()),
            seq: AtomicU64::new(0),
        };
        store.load_index();
        store.sweep(now_ms());
        Ok(store)
    }

    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    pub fn secrets(&self) -> &Secrets {
        &self.secrets
    }

    /// Bytes of stored results on disk now (what `max_total_bytes` caps).
    pub fn bytes(&self) -> u64 {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn load_index(&self) {
        let mut index = self.lock();
        let Ok(convs) = std::fs::read_dir(&self.cfg.dir) else {
            return;
        };
        for conv in convs.flatten() {
            let conv_key = conv.file_name().to_string_lossy().into_owned();
            // Temp files of a daemon killed mid-store; a live one's (another daemon sharing
            // the state directory) may be mid-write and stays.
            toolvisor_kit::private::remove_stale_temps(&conv.path());
            let Ok(files) = std::fs::read_dir(conv.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if name.ends_with(".tmp") {
                    if toolvisor_kit::private::temp_pid(name.as_bytes()).is_none() {
                        // An older version's `<ref>.json.tmp`.
                        let _ = std::fs::remove_file(f.path());
                    }
                    continue;
                }
                let Some(reference) = name.strip_suffix(".json") else {
                    continue;
                };
                let Some(meta) = toolvisor_kit::special::read(&f.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Json>(&b).ok())
                else {
                    continue;
                };
                let inspectable = meta["storage_kind"] == "inspectable";
                let bytes = if inspectable {
                    meta["bytes"].as_u64().unwrap_or(0)
                } else {
                    0
                };
                let rec = Rec {
                    conv_key: conv_key.clone(),
                    bytes,
                    created_ms: meta["created_ms"].as_u64().unwrap_or(0),
                    order: 0,
                    inspectable,
                };
                *index.per_conv.entry(conv_key.clone()).or_default() += bytes;
                index.total += bytes;
                index.recs.insert(reference.to_string(), rec);
            }
        }
    }

    /// Delete results older than `keep`.
    fn sweep(&self, now: u64) {
        let keep = self.cfg.keep.as_millis() as u64;
        let mut index = self.lock();
        index.last_sweep_ms = now;
        let old: Vec<String> = index
            .recs
            .iter()
            .filter(|(_, r)| now.saturating_sub(r.created_ms) > keep)
            .map(|(k, _)| k.clone())
            .collect();
        for reference in old {
            if let Some(rec) = index.recs.remove(&reference) {
                let dir = self.cfg.dir.join(&rec.conv_key);
                let _ = std::fs::remove_file(dir.join(format!("{reference}.txt")));
                let _ = std::fs::remove_file(dir.join(format!("{reference}.json")));
                let _ = std::fs::remove_dir(&dir); // only when empty
                index.total -= rec.bytes;
                if let Some(c) = index.per_conv.get_mut(&rec.conv_key) {
                    *c -= rec.bytes;
                }
            }
        }
    }

    /// Evict the oldest stored texts until `conv_key` and the whole store are within
    /// bounds; their records stay (as `evicted`) so a read says what happened.
    fn evict(&self, index: &mut Index, conv_key: &str) {
        let over = |i: &Index| {
            i.total > self.cfg.max_total_bytes
                || i.per_conv.get(conv_key).copied().unwrap_or(0)
                    > self.cfg.max_bytes_per_conversation
        };
        if !over(index) {
            return;
        }
        let mut by_age: Vec<((u64, u64), String)> = index
            .recs
            .iter()
            .filter(|(_, r)| r.inspectable)
            .map(|(k, r)| ((r.order, r.created_ms), k.clone()))
            .collect();
        by_age.sort();
        for (_, reference) in by_age {
            if !over(index) {
                break;
            }
            let conv_over = index.per_conv.get(conv_key).copied().unwrap_or(0)
                > self.cfg.max_bytes_per_conversation;
            let rec = index.recs.get(&reference).cloned().expect("indexed");
            if conv_over && index.total <= self.cfg.max_total_bytes && rec.conv_key != conv_key {
                continue;
            }
            let dir = self.cfg.dir.join(&rec.conv_key);
            let meta_path = dir.join(format!("{reference}.json"));
            if let Some(mut meta) = toolvisor_kit::special::read(&meta_path)
                .ok()
                .and_then(|b| serde_json::from_slice::<Json>(&b).ok())
            {
                meta["storage_kind"] = json!("evicted");
                meta["why_not"] = json!("evicted to keep the result store within its size bounds");
                let _ = write_file(&meta_path, meta.to_string().as_bytes());
            }
            let _ = std::fs::remove_file(dir.join(format!("{reference}.txt")));
            index.total -= rec.bytes;
            if let Some(c) = index.per_conv.get_mut(&rec.conv_key) {
                *c -= rec.bytes;
            }
            if let Some(r) = index.recs.get_mut(&reference) {
                r.inspectable = false;
                r.bytes = 0;
            }
        }
    }

    fn put(
        &self,
        conversation: &str,
        tool: &str,
        content: &str,
        content_type: &str,
        masked: &BTreeMap<String, u64>,
    ) -> Stored {
        let now = now_ms();
        if now.saturating_sub(self.lock().last_sweep_ms) > 10 * 60 * 1000 {
            self.sweep(now);
        }
        let order = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let reference = format!("tr_{}", random_hex(10, order));
        let key = conv_key(conversation);
        let dir = self.cfg.dir.join(&key);
        let (total_chars, points) = checkpoints(content);
        let bytes = content.len() as u64;
        let too_big = bytes > self.cfg.max_result_bytes;
        let mut meta = json!({
            "ref": reference,
            "conversation": conversation,
            "source_tool": tool,
            "content_type": content_type,
            "storage_kind": if too_big { "projected" } else { "inspectable" },
            "total_chars": total_chars,
            "bytes": bytes,
            "created_ms": now,
            "masked": masked,
            "checkpoints": points,
        });
        if too_big {
            meta["why_not"] = json!(format!(
                "the full result had {bytes} bytes, above result_store.max_result_bytes ({})",
                self.cfg.max_result_bytes
            ));
        }
        let written = (|| -> std::io::Result<()> {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
            if !too_big {
                write_file(&dir.join(format!("{reference}.txt")), content.as_bytes())?;
            }
            write_file(
                &dir.join(format!("{reference}.json")),
                meta.to_string().as_bytes(),
            )
        })();
        if let Err(e) = written {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot store a large tool result; only its projection is returned");
            let _ = std::fs::remove_file(dir.join(format!("{reference}.txt")));
            return Stored {
                reference: None,
                total_chars,
                storage_kind: "projected",
                why_not: Some(format!("the full result could not be stored: {e}")),
            };
        }
        let stored_bytes = if too_big { 0 } else { bytes };
        let mut index = self.lock();
        index.recs.insert(
            reference.clone(),
            Rec {
                conv_key: key.clone(),
                bytes: stored_bytes,
                created_ms: now,
                order,
                inspectable: !too_big,
            },
        );
        *index.per_conv.entry(key.clone()).or_default() += stored_bytes;
        index.total += stored_bytes;
        self.evict(&mut index, &key);
        let evicted_now = !index.recs.get(&reference).is_some_and(|r| r.inspectable);
        drop(index);
        Stored {
            reference: Some(reference),
            total_chars,
            storage_kind: if too_big || evicted_now {
                "projected"
            } else {
                "inspectable"
            },
            why_not: too_big.then(|| meta["why_not"].as_str().unwrap_or("").to_string()),
        }
    }

    /// True when `value` certainly goes back as it is (after masking), without storing:
    /// decided in one step per JSON node, so cheap enough for every call. False means
    /// "maybe not": `finish` measures exactly.
    pub fn surely_fits(&self, value: &Json) -> bool {
        json_chars_bound(value) <= self.cfg.inline_chars
    }

    /// Mask known secrets in `value`; when it is larger than the inline bound, store it and
    /// return a bounded projection with refs. Blocking (disk) when it stores.
    pub fn finish(&self, conversation: &str, tool: &str, mut value: Json) -> Json {
        let masked = self.secrets.mask_json(&mut value);
        if !masked.is_empty()
            && let Json::Object(map) = &mut value
        {
            map.insert("masked".into(), json!(masked.keys().collect::<Vec<_>>()));
        }
        let total = json_chars(&value);
        if total <= self.cfg.inline_chars {
            return value;
        }
        if let Json::Object(map) = &mut value
            && let Some(done) = self.project_fields(conversation, tool, map, total, &masked)
        {
            return done;
        }
        self.project_whole(conversation, tool, &value, &masked)
    }

    /// Project the largest string and array fields until the result fits; `None` when
    /// that cannot make it fit.
    fn project_fields(
        &self,
        conversation: &str,
        tool: &str,
        map: &mut Map<String, Json>,
        total: usize,
        masked: &BTreeMap<String, u64>,
    ) -> Option<Json> {
        let mut cands: Vec<(String, usize)> = map
            .iter()
            .filter(|(k, v)| (v.is_string() || v.is_array()) && k.as_str() != "projected")
            .map(|(k, v)| (k.clone(), json_chars(v)))
            .filter(|(_, n)| *n > MIN_FIELD_CHARS)
            .collect();
        cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut chosen = 0;
        for k in 1..=cands.len() {
            let share = self.cfg.projection_chars / k;
            let removed: usize = cands[..k].iter().map(|c| c.1).sum();
            let after = total - removed + k * (share + FIELD_OVERHEAD);
            if after <= self.cfg.inline_chars {
                chosen = k;
                break;
            }
        }
        if chosen == 0 {
            return None;
        }
        let share = self.cfg.projection_chars / chosen;
        let mut projected = Map::new();
        for (key, _) in &cands[..chosen] {
            let v = map.remove(key).expect("candidate");
            let (entry, preview) = match v {
                Json::String(s) => {
                    let stored = self.put(conversation, tool, &s, "text/plain", masked);
                    let preview = head_tail(&s, share, &stored);
                    let shown = preview.1;
                    (
                        entry(&stored, "text/plain", json!({"shown_chars": shown})),
                        Json::String(preview.0),
                    )
                }
                Json::Array(items) => {
                    let all_strings = items.iter().all(Json::is_string);
                    let lines: Vec<String> = items
                        .iter()
                        .map(|i| match i {
                            Json::String(s) if all_strings => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    let content_type = if all_strings {
                        "text/plain"
                    } else {
                        "application/x-ndjson"
                    };
                    let stored = self.put(
                        conversation,
                        tool,
                        &(lines.join("\n") + "\n"),
                        content_type,
                        masked,
                    );
                    let mut used = 0;
                    let shown: Vec<Json> = items
                        .into_iter()
                        .take_while(|i| {
                            used += json_chars(i) + 1;
                            used <= share
                        })
                        .collect();
                    let note = format!(
                        "showing the first {} of {} items; {}",
                        shown.len(),
                        lines.len(),
                        read_hint(&stored, 0, "every item, one per line")
                    );
                    (
                        entry(
                            &stored,
                            content_type,
                            json!({"shown_items": shown.len(), "total_items": lines.len(), "note": note}),
                        ),
                        Json::Array(shown),
                    )
                }
                _ => unreachable!("candidates are strings and arrays"),
            };
            map.insert(key.clone(), preview);
            projected.insert(key.clone(), entry);
        }
        map.insert("projected".into(), Json::Object(projected));
        Some(Json::Object(std::mem::take(map)))
    }

    /// Store the whole result as JSON and return a preview of it.
    fn project_whole(
        &self,
        conversation: &str,
        tool: &str,
        value: &Json,
        masked: &BTreeMap<String, u64>,
    ) -> Json {
        let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
        let stored = self.put(conversation, tool, &text, "application/json", masked);
        let head = text::prefix_chars(&text, self.cfg.projection_chars);
        let shown = head.chars().count();
        let preview = format!(
            "{head}\n[… toolvisor: the result has {} characters of JSON, {shown} shown; {}]",
            stored.total_chars,
            read_hint(&stored, shown, "the rest")
        );
        let mut out = json!({
            "preview": preview,
            "projected": {"result": entry(&stored, "application/json", json!({"shown_chars": shown}))},
        });
        if !masked.is_empty() {
            out["masked"] = json!(masked.keys().collect::<Vec<_>>());
        }
        out
    }

    /// `tool_result_read {ref, offset, limit}` for `conversation`. `max_frame` bounds the
    /// encoded answer; a limit that would not fit is lowered (`envelope_clamped`).
    pub fn read(
        &self,
        conversation: &str,
        reference: &str,
        offset: Option<usize>,
        limit: Option<usize>,
        max_frame: usize,
    ) -> Result<ToolResultReadResult> {
        check_ref(reference)?;
        let limit = limit.unwrap_or(DEFAULT_READ_CHARS);
        if limit == 0 || limit > MAX_READ_CHARS {
            return Err(Error::bad(
                "limit",
                format!("{limit} is outside 1..={MAX_READ_CHARS} characters"),
            ));
        }
        let offset = offset.unwrap_or(0);
        let key = conv_key(conversation);
        let dir = self.cfg.dir.join(&key);
        let meta = self.inspectable_record(conversation, reference, &dir)?;
        let kind = meta["storage_kind"].as_str().unwrap_or("");
        let total_chars = meta["total_chars"].as_u64().unwrap_or(0) as usize;
        let bytes = meta["bytes"].as_u64().unwrap_or(0);
        let incomplete = |why: String| Error::NotAvailable {
            reference: reference.into(),
            why,
        };
        let mut f = toolvisor_kit::special::open_read(&dir.join(format!("{reference}.txt")))
            .map_err(|e| incomplete(format!("its stored text is missing ({e})")))?;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        if size != bytes {
            return Err(incomplete(format!(
                "its stored text is incomplete ({size} of {bytes} bytes)"
            )));
        }
        if offset > total_chars {
            return Err(Error::bad(
                "offset",
                format!("{offset} is past the end: the result has {total_chars} characters"),
            ));
        }
        let (buf, skip) = read_span(&mut f, &meta, reference, offset, limit, size)?;
        let valid = valid_prefix(&buf)
            .map_err(|e| incomplete(format!("its stored text is not UTF-8 ({e})")))?;
        let mut chars = valid.char_indices().skip(skip);
        let from = chars.next().map(|(i, _)| i).unwrap_or(valid.len());
        let taken = text::prefix_chars(&valid[from..], limit);
        let (taken, envelope_clamped) = clamp_to_frame(taken, max_frame);
        let n = taken.chars().count();
        let next_offset = offset + n;
        let masked = meta["masked"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
                    .collect()
            })
            .unwrap_or_default();
        Ok(ToolResultReadResult {
            reference: reference.into(),
            text: taken.to_string(),
            offset: offset as u64,
            next_offset: next_offset as u64,
            total_chars: total_chars as u64,
            eof: next_offset >= total_chars,
            source_tool: meta["source_tool"].as_str().unwrap_or("").into(),
            content_type: meta["content_type"].as_str().unwrap_or("").into(),
            storage_kind: kind.into(),
            masked,
            envelope_clamped,
        })
    }

    /// The record of `reference` in `dir`, when it is `conversation`'s and its text was
    /// stored whole.
    fn inspectable_record(&self, conversation: &str, reference: &str, dir: &Path) -> Result<Json> {
        let meta_path = dir.join(format!("{reference}.json"));
        let meta = match toolvisor_kit::special::read(&meta_path) {
            Ok(b) => serde_json::from_slice::<Json>(&b).map_err(|e| Error::NotAvailable {
                reference: reference.into(),
                why: format!("its record is damaged ({e})"),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.elsewhere(reference));
            }
            Err(e) => return Err(Error::io(reference, "read the record", e)),
        };
        if meta["conversation"] != conversation {
            return Err(Error::OutOfScope {
                reference: reference.into(),
            });
        }
        let kind = meta["storage_kind"].as_str().unwrap_or("");
        if kind != "inspectable" {
            return Err(Error::NotAvailable {
                reference: reference.into(),
                why: meta["why_not"]
                    .as_str()
                    .unwrap_or("only a projection was kept")
                    .to_string(),
            });
        }
        Ok(meta)
    }

    /// The error for a ref not in the caller's conversation: out of scope when another
    /// conversation holds it, else not found.
    fn elsewhere(&self, reference: &str) -> Error {
        let held = self.lock().recs.contains_key(reference)
            || std::fs::read_dir(&self.cfg.dir)
                .map(|dirs| {
                    dirs.flatten()
                        .any(|d| d.path().join(format!("{reference}.json")).exists())
                })
                .unwrap_or(false);
        if held {
            Error::OutOfScope {
                reference: reference.into(),
            }
        } else {
            Error::RefNotFound {
                reference: reference.into(),
            }
        }
    }
}

fn read_hint(stored: &Stored, offset: usize, what: &str) -> String {
    match (&stored.reference, stored.storage_kind) {
        (Some(r), "inspectable") => {
            format!("tool_result_read {{\"ref\":\"{r}\",\"offset\":{offset}}} reads {what}")
        }
        _ => format!(
            "the rest is not available ({})",
            stored.why_not.as_deref().unwrap_or("evicted")
        ),
    }
}

fn entry(stored: &Stored, content_type: &str, extra: Json) -> Json {
    let mut e = json!({
        "ref": stored.reference,
        "total_chars": stored.total_chars,
        "content_type": content_type,
        "storage_kind": stored.storage_kind,
    });
    if let Some(why) = &stored.why_not {
        e["why_not"] = json!(why);
    }
    if let (Json::Object(e), Json::Object(x)) = (&mut e, extra) {
        e.extend(x);
    }
    e
}

/// The first two thirds and the last third of `share` characters of `s`, with a marker
/// between that names the omitted character range and how to read it. Also returns how
/// many characters of `s` are shown.
fn head_tail(s: &str, share: usize, stored: &Stored) -> (String, usize) {
    let total = stored.total_chars;
    let head_n = share * 2 / 3;
    let tail_n = share - head_n;
    let head = text::prefix_chars(s, head_n);
    let tail = text::suffix_chars(s, tail_n);
    let (hn, tn) = (head.chars().count(), tail.chars().count());
    let omitted_to = total - tn;
    let marker = format!(
        "\n[… toolvisor: characters {hn}..{omitted_to} of {total} omitted; {} …]\n",
        read_hint(stored, hn, "them")
    );
    (format!("{head}{marker}{tail}"), hn + tn)
}

#[cfg(test)]
mod tests;
