//! A Hugging Face-compatible HTTP/1.1 server on loopback for the download tests, answering
//! the way the real Hub does: repo listings in the Hub's own field set (`answers.rs`, built on
//! the recorded shapes in `testhub/fixtures/`) at `/api/models/{repo}` and
//! `/api/models/{repo}/revision/{rev}` (sizes and LFS sha256 with `?blobs=true`), search
//! (`/api/models?search=`), `auth-check`, files with `Range` (`/{repo}/resolve/{rev}/{file}`),
//! several revisions per repo, gated repos, and the Hub's error statuses with `X-Error-Code`:
//! a missing repo is 401 `RepoNotFound` without a token and 404 with one, a gated repo's files
//! 401 `GatedRepo` without a token and 403 with a token that has no access, a missing revision
//! 404 `RevisionNotFound`, a missing file 404 `EntryNotFound`, an unknown token 401 "Invalid
//! credentials". Also throttling, and injected faults (corrupted bytes, a connection cut
//! mid-file, a stall the test releases, an error status). It counts the body bytes it serves
//! per file, so a test can say exactly what was fetched again.

#![forbid(unsafe_code)]

mod answers;
pub mod http;

pub use answers::{GATED_REPO, GGUF_REPO, SAFETENSORS_REPO, SEARCH_FULL};

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use answers::{INVALID_CREDENTIALS, Listed, Shape, respond, respond_error};

/// One file the hub serves.
#[derive(Clone)]
struct HubFile {
    bytes: Arc<Vec<u8>>,
    sha256: String,
    /// List its hash (LFS files do; small files like `config.json` do not).
    lfs: bool,
    /// A size to claim in the listing instead of the real one.
    listed_size: Option<u64>,
}

/// A repo at one revision (a branch or tag name; its commit `sha` names it too).
struct Revision {
    sha: String,
    files: BTreeMap<String, HubFile>,
}

struct Repo {
    revisions: BTreeMap<String, Revision>,
    gated: bool,
}

impl Repo {
    /// The revision named `rev`: a branch or tag name, or its commit.
    fn revision(&self, rev: &str) -> Option<(&str, &Revision)> {
        self.revisions
            .iter()
            .find(|(name, r)| name.as_str() == rev || r.sha == rev)
            .map(|(name, r)| (name.as_str(), r))
    }

    fn shape(&self) -> Shape {
        let main = self.revisions.values().next();
        if self.gated {
            Shape::Gated
        } else if main.is_some_and(|r| r.files.keys().any(|n| n.ends_with(".gguf"))) {
            Shape::Gguf
        } else {
            Shape::Safetensors
        }
    }
}

/// Faults injected into one file's next transfers.
#[derive(Default)]
struct Faults {
    /// Serve this many transfers with a flipped byte.
    corrupt: u32,
    /// Close the connection once after this many body bytes (absolute file offset).
    cut_at: Option<u64>,
    /// Stop once at this file offset until [`HfServer::release`].
    stall_at: Option<u64>,
    /// Answer the next range request with the file's first bytes (as many as the range
    /// asked for) and a `Content-Range` that says so: a broken server or proxy.
    misrange: bool,
    /// Answer the next request with this status.
    status: Option<u16>,
    /// Answer every request with the whole file (200), ranges ignored: a server without
    /// range support.
    no_ranges: bool,
    /// Answer every request with 404 `EntryNotFound` (the file left the repo after its
    /// listing was read).
    gone: bool,
    /// Answer the next request with a 302 to this `Location`.
    redirect: Option<String>,
    /// Answer this many requests with 429 and `Retry-After: retry_after` (seconds), as the
    /// Hub's rate limit does.
    limited: u32,
    retry_after: u64,
}

#[derive(Default)]
struct State {
    repos: Mutex<BTreeMap<String, Repo>>,
    /// The tokens the hub knows, each with whether its account may read gated repos.
    tokens: Mutex<BTreeMap<String, bool>>,
    /// Answer every search with this body instead of the hub's own repos.
    search_answer: Mutex<Option<String>>,
    served: Mutex<BTreeMap<String, u64>>,
    /// Range start of every file request.
    starts: Mutex<BTreeMap<String, Vec<u64>>>,
    /// When each file request arrived.
    arrivals: Mutex<BTreeMap<String, Vec<std::time::Instant>>>,
    faults: Mutex<BTreeMap<String, Faults>>,
    /// Body bytes per second per connection; 0 = as fast as possible.
    rate: AtomicU64,
    released: Mutex<bool>,
    wake: Condvar,
    stalled: AtomicBool,
    stop: AtomicBool,
}

/// The test hub; stops (and releases any stall) when dropped.
pub struct HfServer {
    addr: std::net::SocketAddr,
    state: Arc<State>,
}

/// Deterministic bytes that do not compress or repeat.
pub fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The counters' key of a file: `repo/file` at `main`, `repo@rev/file` at another revision.
fn key(repo: &str, rev: &str, file: &str) -> String {
    if rev == "main" {
        format!("{repo}/{file}")
    } else {
        format!("{repo}@{rev}/{file}")
    }
}

/// A stand-in commit id (40 hex digits) for a revision of a repo.
/// A commit id for `repo` at `rev` holding `files`: another file content is another commit,
/// as on the Hub.
fn commit(repo: &str, rev: &str, files: &BTreeMap<String, HubFile>) -> String {
    let mut text = format!("{repo}@{rev}");
    for (name, f) in files {
        text.push_str(&format!("\n{name} {}", f.sha256));
    }
    sha256_hex(text.as_bytes())[..40].to_string()
}

fn hub_files(files: Vec<(&str, Vec<u8>, bool)>) -> BTreeMap<String, HubFile> {
    files
        .into_iter()
        .map(|(name, bytes, lfs)| {
            let sha256 = sha256_hex(&bytes);
            (
                name.to_string(),
                HubFile {
                    bytes: Arc::new(bytes),
                    sha256,
                    lfs,
                    listed_size: None,
                },
            )
        })
        .collect()
}

impl HfServer {
    /// Start on 127.0.0.1 on a free port; `token`, when given, is a token the hub knows whose
    /// account may read the gated repos.
    pub fn start(token: Option<&str>) -> HfServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test hub");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        if let Some(t) = token {
            state.tokens.lock().unwrap().insert(t.to_string(), true);
        }
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(&st, conn);
                });
            }
        });
        HfServer { addr, state }
    }

    /// Know `token` too; `gated_access` says whether its account may read gated repos (a
    /// token without it gets 403 `GatedRepo` for their files). Tokens the hub does not know
    /// get 401 "Invalid credentials in Authorization header" everywhere.
    pub fn add_token(&self, token: &str, gated_access: bool) {
        self.state
            .tokens
            .lock()
            .unwrap()
            .insert(token.to_string(), gated_access);
    }

    /// Answer every search with `body` (a recorded search list) instead of the hub's repos;
    /// `None` goes back to searching them.
    pub fn set_search_answer(&self, body: Option<&str>) {
        *self.state.search_answer.lock().unwrap() = body.map(str::to_string);
    }

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Add (or replace) a repo with its `main` revision: each file with its bytes; `lfs`
    /// files list their sha256.
    pub fn add_repo(&self, repo: &str, files: Vec<(&str, Vec<u8>, bool)>, gated: bool) {
        let files = hub_files(files);
        let main = Revision {
            sha: commit(repo, "main", &files),
            files,
        };
        self.state.repos.lock().unwrap().insert(
            repo.to_string(),
            Repo {
                revisions: BTreeMap::from([("main".to_string(), main)]),
                gated,
            },
        );
    }

    /// Add (or replace) revision `rev` (a branch or tag) of a repo added before; returns its
    /// commit id, which names the revision too.
    pub fn add_revision(&self, repo: &str, rev: &str, files: Vec<(&str, Vec<u8>, bool)>) -> String {
        let files = hub_files(files);
        let sha = commit(repo, rev, &files);
        let mut repos = self.state.repos.lock().unwrap();
        let r = repos
            .get_mut(repo)
            .expect("add_revision of a repo the hub has");
        r.revisions.insert(
            rev.to_string(),
            Revision {
                sha: sha.clone(),
                files,
            },
        );
        sha
    }

    /// Forget a repo (its files' bytes with it): the chaos runner's hub would otherwise hold
    /// every model it ever served.
    pub fn remove_repo(&self, repo: &str) {
        self.state.repos.lock().unwrap().remove(repo);
    }

    /// Claim `size` for `file` in the listing (the bytes served stay the same).
    pub fn list_size(&self, repo: &str, file: &str, size: u64) {
        let mut repos = self.state.repos.lock().unwrap();
        repos
            .get_mut(repo)
            .unwrap()
            .revisions
            .get_mut("main")
            .unwrap()
            .files
            .get_mut(file)
            .unwrap()
            .listed_size = Some(size);
    }

    /// A 3-shard GGUF model (`tiny-Q4_K_M-0000k-of-00003.gguf`, `shard` bytes each) plus a
    /// second quantisation and a README; returns the shard names.
    pub fn add_gguf_3shard(&self, repo: &str, shard: usize) -> Vec<String> {
        let names: Vec<String> = (1..=3)
            .map(|k| format!("tiny-Q4_K_M-0000{k}-of-00003.gguf"))
            .collect();
        let mut files: Vec<(&str, Vec<u8>, bool)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut b = pseudo_random(i as u64 + 1, shard);
                b[..4].copy_from_slice(b"GGUF");
                (n.as_str(), b, true)
            })
            .collect();
        files.push(("tiny-Q8_0.gguf", pseudo_random(9, shard / 2), true));
        files.push(("README.md", b"# tiny\n".to_vec(), false));
        self.add_repo(repo, files, false);
        names
    }

    /// A GGUF model split in `parts` shards of `shard` bytes (`big-Q4_K_M-0000k-of-0000n.gguf`),
    /// for benchmarks; returns the shard names.
    pub fn add_gguf_split(&self, repo: &str, shard: usize, parts: usize) -> Vec<String> {
        let names: Vec<String> = (1..=parts)
            .map(|k| format!("big-Q4_K_M-{k:05}-of-{parts:05}.gguf"))
            .collect();
        let files = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), pseudo_random(i as u64 + 100, shard), true))
            .collect();
        self.add_repo(repo, files, false);
        names
    }

    /// A safetensors model with config and tokenizer files.
    pub fn add_safetensors(&self, repo: &str) {
        self.add_repo(
            repo,
            vec![
                ("config.json", br#"{"model_type":"tiny"}"#.to_vec(), false),
                ("tokenizer.json", br#"{"version":"1.0"}"#.to_vec(), false),
                (
                    "tokenizer_config.json",
                    br#"{"eos":"</s>"}"#.to_vec(),
                    false,
                ),
                ("model.safetensors", pseudo_random(21, 300_000), true),
                ("README.md", b"# st\n".to_vec(), false),
                ("pytorch_model.bin", pseudo_random(22, 1000), true),
            ],
            false,
        );
    }

    /// Body bytes served for `file` of `repo` so far.
    pub fn served(&self, repo: &str, file: &str) -> u64 {
        *self
            .state
            .served
            .lock()
            .unwrap()
            .get(&key(repo, "main", file))
            .unwrap_or(&0)
    }

    /// The range start of every request for `file` so far (0 for a whole-file request).
    pub fn starts(&self, repo: &str, file: &str) -> Vec<u64> {
        self.state
            .starts
            .lock()
            .unwrap()
            .get(&key(repo, "main", file))
            .cloned()
            .unwrap_or_default()
    }

    /// When each request for `file` arrived.
    pub fn arrivals(&self, repo: &str, file: &str) -> Vec<std::time::Instant> {
        self.state
            .arrivals
            .lock()
            .unwrap()
            .get(&key(repo, "main", file))
            .cloned()
            .unwrap_or_default()
    }

    /// Answer the next `times` requests for `file` with 429 and `Retry-After: secs`.
    pub fn rate_limit_next(&self, repo: &str, file: &str, times: u32, secs: u64) {
        self.fault(repo, file, |f| {
            f.limited = times;
            f.retry_after = secs;
        });
    }

    fn fault(&self, repo: &str, file: &str, f: impl FnOnce(&mut Faults)) {
        f(self
            .state
            .faults
            .lock()
            .unwrap()
            .entry(key(repo, "main", file))
            .or_default());
    }

    pub fn corrupt_next(&self, repo: &str, file: &str, times: u32) {
        self.fault(repo, file, |f| f.corrupt = times);
    }

    pub fn cut_at(&self, repo: &str, file: &str, offset: u64) {
        self.fault(repo, file, |f| f.cut_at = Some(offset));
    }

    pub fn stall_at(&self, repo: &str, file: &str, offset: u64) {
        *self.state.released.lock().unwrap() = false;
        self.fault(repo, file, |f| f.stall_at = Some(offset));
    }

    /// From now on, answer every request for `file` with the whole file (200).
    pub fn ignore_ranges(&self, repo: &str, file: &str) {
        self.fault(repo, file, |f| f.no_ranges = true);
    }

    pub fn misrange_next(&self, repo: &str, file: &str) {
        self.fault(repo, file, |f| f.misrange = true);
    }

    /// Answer the file's next request with `302 Found` to `location` (absolute or relative).
    pub fn redirect_next(&self, repo: &str, file: &str, location: &str) {
        let location = location.to_string();
        self.fault(repo, file, |f| f.redirect = Some(location));
    }

    pub fn status_next(&self, repo: &str, file: &str, status: u16) {
        self.fault(repo, file, |f| f.status = Some(status));
    }

    /// Keep listing `file` at `main` but answer its downloads 404 `EntryNotFound`.
    pub fn entry_gone(&self, repo: &str, file: &str) {
        self.fault(repo, file, |f| f.gone = true);
    }

    /// Whether a transfer is waiting at its stall point now.
    pub fn stalled(&self) -> bool {
        self.state.stalled.load(Ordering::SeqCst)
    }

    /// Let stalled transfers go on.
    pub fn release(&self) {
        *self.state.released.lock().unwrap() = true;
        self.state.wake.notify_all();
    }

    /// Body bytes per second per connection (0: unlimited), sent in pieces of an eighth of
    /// it, so a low rate trickles.
    pub fn set_rate(&self, bytes_per_s: u64) {
        self.state.rate.store(bytes_per_s, Ordering::SeqCst);
    }
}

impl Drop for HfServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        self.release();
        let _ = TcpStream::connect(self.addr);
    }
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn serve(st: &State, mut conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut range_start = 0u64;
    // The last byte asked for (`bytes=S-E`); open-ended (`bytes=S-`) when absent.
    let mut range_last: Option<u64> = None;
    let mut auth: Option<String> = None;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((&h, ""));
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "range" => {
                if let Some((first, last)) =
                    value.strip_prefix("bytes=").and_then(|r| r.split_once('-'))
                {
                    range_start = first.trim().parse().unwrap_or(0);
                    range_last = last.trim().parse().ok();
                }
            }
            "authorization" => auth = value.strip_prefix("Bearer ").map(str::to_string),
            _ => {}
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    // A token the hub does not know is refused everywhere, like the Hub does.
    let access = match &auth {
        None => Access::Anonymous,
        Some(t) => match st.tokens.lock().unwrap().get(t) {
            Some(gated) => Access::Token { gated: *gated },
            None => return respond_error(&mut conn, 401, None, INVALID_CREDENTIALS),
        },
    };
    if path == "/api/models" {
        return search(st, &mut conn, query);
    }
    if let Some(rest) = path.strip_prefix("/api/models/") {
        return api(st, &mut conn, rest, query, access);
    }
    // /{owner}/{name}/resolve/{rev}/{file...}
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if parts.len() != 5 || parts[2] != "resolve" {
        return respond(&mut conn, 404, b"not found", "text/plain");
    }
    let repo = format!("{}/{}", parts[0], parts[1]);
    let asked_rev = decode(parts[3]);
    let file_name = decode(parts[4]);
    let (rev, file) = {
        let repos = st.repos.lock().unwrap();
        let r = match find(&repos, &repo, &asked_rev, access) {
            Ok(found) => found,
            Err(e) => {
                drop(repos);
                return e.send(&mut conn);
            }
        };
        let (rev_name, revision) = r.revision(&asked_rev).expect("checked by find");
        if let Err(e) = gate(r, &repo, access) {
            drop(repos);
            return e.send(&mut conn);
        }
        match revision.files.get(&file_name) {
            Some(f) => (rev_name.to_string(), f.clone()),
            None => {
                drop(repos);
                return respond_error(&mut conn, 404, Some("EntryNotFound"), "Entry not found");
            }
        }
    };
    let k = key(&repo, &rev, &file_name);
    st.starts
        .lock()
        .unwrap()
        .entry(k.clone())
        .or_default()
        .push(range_start);
    st.arrivals
        .lock()
        .unwrap()
        .entry(k.clone())
        .or_default()
        .push(std::time::Instant::now());
    let (corrupt, cut_at, stall_at, misrange, no_ranges) = {
        let mut faults = st.faults.lock().unwrap();
        let f = faults.entry(k.clone()).or_default();
        if let Some(s) = f.status.take() {
            drop(faults);
            return respond(&mut conn, s, b"injected", "text/plain");
        }
        if f.limited > 0 {
            f.limited -= 1;
            let secs = f.retry_after;
            drop(faults);
            return answers::rate_limited(&mut conn, secs);
        }
        if let Some(location) = f.redirect.take() {
            drop(faults);
            return answers::redirect(&mut conn, &location);
        }
        if f.gone {
            drop(faults);
            return respond_error(&mut conn, 404, Some("EntryNotFound"), "Entry not found");
        }
        let corrupt = f.corrupt > 0;
        if corrupt {
            f.corrupt -= 1;
        }
        let misrange = f.misrange && range_start > 0;
        if misrange {
            f.misrange = false;
        }
        (corrupt, f.cut_at, f.stall_at, misrange, f.no_ranges)
    };
    if no_ranges {
        range_start = 0;
        range_last = None;
    }
    let len = file.bytes.len() as u64;
    if range_start > len {
        write!(
            conn,
            "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )?;
        return Ok(());
    }
    if misrange {
        let n = len - range_start;
        write!(
            conn,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-{}/{len}\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n",
            n - 1
        )?;
        conn.write_all(&file.bytes[..n as usize])?;
        *st.served.lock().unwrap().entry(k.clone()).or_default() += n;
        return conn.flush();
    }
    // One past the last byte sent: the range's end, or the file's.
    let stop = range_last.map_or(len, |last| (last + 1).min(len));
    if range_start > 0 || range_last.is_some() {
        write!(
            conn,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {range_start}-{}/{len}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            stop.saturating_sub(1),
            stop.saturating_sub(range_start)
        )?;
    } else {
        write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
        )?;
    }
    let started = Instant::now();
    let mut pos = range_start;
    let mut sent_here = 0u64;
    while pos < stop {
        // Under a rate, small pieces often (about eight a second): a slow hub trickles, it
        // does not burst then fall silent.
        let piece = match st.rate.load(Ordering::SeqCst) {
            0 => 64 * 1024,
            rate => (rate / 8).clamp(1, 64 * 1024),
        };
        let mut end = (pos + piece).min(stop);
        if let Some(c) = cut_at.filter(|c| *c > pos && *c < end) {
            end = c;
        }
        if let Some(s) = stall_at.filter(|s| *s > pos && *s < end) {
            end = s;
        }
        let mut chunk = file.bytes[pos as usize..end as usize].to_vec();
        if corrupt && pos == range_start {
            chunk[0] ^= 0xff;
        }
        conn.write_all(&chunk)?;
        let n = end - pos;
        *st.served.lock().unwrap().entry(k.clone()).or_default() += n;
        pos = end;
        sent_here += n;
        if cut_at == Some(pos) {
            st.faults.lock().unwrap().get_mut(&k).unwrap().cut_at = None;
            conn.flush()?;
            let _ = conn.shutdown(Shutdown::Both);
            return Ok(());
        }
        if stall_at == Some(pos) {
            st.faults.lock().unwrap().get_mut(&k).unwrap().stall_at = None;
            conn.flush()?;
            st.stalled.store(true, Ordering::SeqCst);
            let mut released = st.released.lock().unwrap();
            while !*released && !st.stop.load(Ordering::SeqCst) {
                released = st
                    .wake
                    .wait_timeout(released, Duration::from_millis(100))
                    .unwrap()
                    .0;
                // The client went away while we waited: stop here.
                if conn.peer_addr().is_err() {
                    break;
                }
            }
            st.stalled.store(false, Ordering::SeqCst);
        }
        let rate = st.rate.load(Ordering::SeqCst);
        if rate > 0 {
            let due = Duration::from_secs_f64(sent_here as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
    }
    conn.flush()
}

/// Who a request is from.
#[derive(Clone, Copy)]
enum Access {
    Anonymous,
    /// A token the hub knows; `gated`: its account may read gated repos.
    Token {
        gated: bool,
    },
}

/// An error answer, sent once the repos' lock is released.
struct HubError {
    status: u16,
    code: &'static str,
    message: String,
}

impl HubError {
    fn send(self, conn: &mut TcpStream) -> std::io::Result<()> {
        respond_error(conn, self.status, Some(self.code), &self.message)
    }
}

/// The repo and revision asked for, or the Hub's answer when either is missing: a missing
/// repo is 401 without a token (the Hub does not say whether a private repo exists) and 404
/// with one.
fn find<'a>(
    repos: &'a BTreeMap<String, Repo>,
    repo: &str,
    rev: &str,
    access: Access,
) -> Result<&'a Repo, HubError> {
    let Some(r) = repos.get(repo) else {
        return Err(HubError {
            status: if matches!(access, Access::Anonymous) {
                401
            } else {
                404
            },
            code: "RepoNotFound",
            message: "Repository not found".into(),
        });
    };
    if r.revision(rev).is_none() {
        return Err(HubError {
            status: 404,
            code: "RevisionNotFound",
            message: format!("Invalid rev id: {rev}"),
        });
    }
    Ok(r)
}

/// A gated repo's content: 401 without a token, 403 for a token whose account has no access.
fn gate(r: &Repo, repo: &str, access: Access) -> Result<(), HubError> {
    if !r.gated {
        return Ok(());
    }
    match access {
        Access::Token { gated: true } => Ok(()),
        Access::Token { gated: false } => Err(HubError {
            status: 403,
            code: "GatedRepo",
            message: answers::gated_message(repo, true),
        }),
        Access::Anonymous => Err(HubError {
            status: 401,
            code: "GatedRepo",
            message: answers::gated_message(repo, false),
        }),
    }
}

/// `GET /api/models?search=&limit=&full=true`: the hub's repos whose id contains the query,
/// as the Hub lists them (file names only; sizes come from each repo's own listing).
fn search(st: &State, conn: &mut TcpStream, query: &str) -> std::io::Result<()> {
    if let Some(body) = st.search_answer.lock().unwrap().clone() {
        return respond(
            conn,
            200,
            body.as_bytes(),
            "application/json; charset=utf-8",
        );
    }
    let mut search = String::new();
    let mut limit = usize::MAX;
    for kv in query.split('&') {
        match kv.split_once('=') {
            Some(("search", v)) => search = decode(v),
            Some(("limit", v)) => limit = v.parse().unwrap_or(usize::MAX),
            _ => {}
        }
    }
    let hits: Vec<serde_json::Value> = {
        let repos = st.repos.lock().unwrap();
        repos
            .iter()
            .filter(|(id, _)| id.to_lowercase().contains(&search.to_lowercase()))
            .take(limit)
            .filter_map(|(id, r)| {
                let main = r.revisions.get("main")?;
                let names: Vec<&str> = main.files.keys().map(String::as_str).collect();
                Some(answers::search_hit(id, &main.sha, r.gated, &names))
            })
            .collect()
    };
    respond(
        conn,
        200,
        serde_json::to_string(&hits).unwrap().as_bytes(),
        "application/json; charset=utf-8",
    )
}

/// `/api/models/{owner}/{name}[/revision/{rev}]` (the listing) and
/// `/api/models/{owner}/{name}/auth-check`.
fn api(
    st: &State,
    conn: &mut TcpStream,
    rest: &str,
    query: &str,
    access: Access,
) -> std::io::Result<()> {
    let parts: Vec<&str> = rest.splitn(4, '/').collect();
    if parts.len() < 2 {
        return respond(conn, 404, b"{}", "application/json");
    }
    let repo = format!("{}/{}", parts[0], parts[1]);
    let (rev, auth_check) = match &parts[2..] {
        [] => ("main".to_string(), false),
        ["auth-check"] => ("main".to_string(), true),
        ["revision", rev] => (decode(rev), false),
        _ => return respond(conn, 404, b"{}", "application/json"),
    };
    let blobs = query
        .split('&')
        .any(|kv| kv == "blobs=true" || kv == "blobs=1");
    let body = {
        let repos = st.repos.lock().unwrap();
        let found = find(&repos, &repo, &rev, access).and_then(|r| {
            if auth_check {
                gate(r, &repo, access)?;
            }
            Ok(r)
        });
        let r = match found {
            Ok(r) => r,
            Err(e) => {
                drop(repos);
                return e.send(conn);
            }
        };
        if auth_check {
            serde_json::json!({}).to_string()
        } else {
            let (_, revision) = r.revision(&rev).expect("checked by find");
            let listed: Vec<Listed> = revision
                .files
                .iter()
                .map(|(n, f)| Listed {
                    name: n,
                    size: f.listed_size.unwrap_or(f.bytes.len() as u64),
                    sha256: &f.sha256,
                    lfs: f.lfs,
                })
                .collect();
            answers::repo_info(r.shape(), &repo, &revision.sha, r.gated, &listed, blobs).to_string()
        }
    };
    respond(
        conn,
        200,
        body.as_bytes(),
        "application/json; charset=utf-8",
    )
}
