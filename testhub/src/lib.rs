//! A Hugging Face-compatible HTTP/1.1 server on loopback for the download tests: repo
//! listings with sizes and LFS sha256 (`/api/models/{repo}/revision/{rev}`), search
//! (`/api/models?search=`), files with `Range` (`/{repo}/resolve/{rev}/{file}`), gated repos
//! (401 without a token, 403 with a wrong one), throttling, and injected faults (corrupted
//! bytes, a connection cut mid-file, a stall the test releases, an error status). It counts
//! the body bytes it serves per file, so a test can say exactly what was fetched again.

pub mod http;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

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

struct Repo {
    files: BTreeMap<String, HubFile>,
    gated: bool,
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
}

#[derive(Default)]
struct State {
    repos: Mutex<BTreeMap<String, Repo>>,
    token: Option<String>,
    served: Mutex<BTreeMap<String, u64>>,
    /// Range start of every file request.
    starts: Mutex<BTreeMap<String, Vec<u64>>>,
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

fn key(repo: &str, file: &str) -> String {
    format!("{repo}/{file}")
}

impl HfServer {
    /// Start on 127.0.0.1 on a free port; `token` is what gated repos require.
    pub fn start(token: Option<&str>) -> HfServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the test hub");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            token: token.map(str::to_string),
            ..State::default()
        });
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

    /// The base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Add (or replace) a repo: each file with its bytes; `lfs` files list their sha256.
    pub fn add_repo(&self, repo: &str, files: Vec<(&str, Vec<u8>, bool)>, gated: bool) {
        let files = files
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
            .collect();
        self.state
            .repos
            .lock()
            .unwrap()
            .insert(repo.to_string(), Repo { files, gated });
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
            .get(&key(repo, file))
            .unwrap_or(&0)
    }

    /// The range start of every request for `file` so far (0 for a whole-file request).
    pub fn starts(&self, repo: &str, file: &str) -> Vec<u64> {
        self.state
            .starts
            .lock()
            .unwrap()
            .get(&key(repo, file))
            .cloned()
            .unwrap_or_default()
    }

    fn fault(&self, repo: &str, file: &str, f: impl FnOnce(&mut Faults)) {
        f(self
            .state
            .faults
            .lock()
            .unwrap()
            .entry(key(repo, file))
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

    pub fn misrange_next(&self, repo: &str, file: &str) {
        self.fault(repo, file, |f| f.misrange = true);
    }

    pub fn status_next(&self, repo: &str, file: &str, status: u16) {
        self.fault(repo, file, |f| f.status = Some(status));
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

    /// Body bytes per second per connection (0: unlimited).
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

fn respond(conn: &mut TcpStream, status: u16, body: &[u8], ctype: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        _ => "Error",
    };
    write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body)
}

fn serve(st: &State, mut conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let target = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut range_start = 0u64;
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
                range_start = value
                    .strip_prefix("bytes=")
                    .and_then(|r| r.strip_suffix('-'))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            }
            "authorization" => auth = value.strip_prefix("Bearer ").map(str::to_string),
            _ => {}
        }
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let authorized = |repo: &Repo| -> Result<(), u16> {
        if !repo.gated {
            return Ok(());
        }
        match (&auth, &st.token) {
            (None, _) => Err(401),
            (Some(a), Some(t)) if a == t => Ok(()),
            _ => Err(403),
        }
    };
    if path == "/api/models" {
        let mut search = String::new();
        let mut limit = usize::MAX;
        for kv in query.split('&') {
            match kv.split_once('=') {
                Some(("search", v)) => search = decode(v),
                Some(("limit", v)) => limit = v.parse().unwrap_or(usize::MAX),
                _ => {}
            }
        }
        let repos = st.repos.lock().unwrap();
        // Like the real hub, search lists file names only; sizes come from the repo listing.
        let hits: Vec<serde_json::Value> = repos
            .iter()
            .filter(|(id, _)| id.to_lowercase().contains(&search.to_lowercase()))
            .take(limit)
            .map(|(id, r)| {
                serde_json::json!({"id": id, "downloads": 7,
                    "siblings": r.files.keys().map(|n| serde_json::json!({"rfilename": n})).collect::<Vec<_>>()})
            })
            .collect();
        return respond(
            &mut conn,
            200,
            serde_json::to_string(&hits).unwrap().as_bytes(),
            "application/json",
        );
    }
    if let Some(rest) = path.strip_prefix("/api/models/") {
        let Some((repo, rev)) = rest.split_once("/revision/") else {
            return respond(&mut conn, 404, b"{}", "application/json");
        };
        let repos = st.repos.lock().unwrap();
        let Some(r) = repos.get(repo).filter(|_| rev == "main") else {
            return respond(
                &mut conn,
                404,
                br#"{"error":"Repository not found"}"#,
                "application/json",
            );
        };
        if let Err(s) = authorized(r) {
            return respond(&mut conn, s, br#"{"error":"gated"}"#, "application/json");
        }
        let siblings: Vec<serde_json::Value> = r
            .files
            .iter()
            .map(|(n, f)| {
                let size = f.listed_size.unwrap_or(f.bytes.len() as u64);
                if f.lfs {
                    serde_json::json!({"rfilename": n, "size": size, "lfs": {"sha256": f.sha256, "size": size}})
                } else {
                    serde_json::json!({"rfilename": n, "size": size})
                }
            })
            .collect();
        let body = serde_json::json!({"id": repo, "sha": "0123456789abcdef0123456789abcdef01234567", "siblings": siblings});
        return respond(
            &mut conn,
            200,
            body.to_string().as_bytes(),
            "application/json",
        );
    }
    // /{owner}/{name}/resolve/{rev}/{file...}
    let parts: Vec<&str> = path.trim_start_matches('/').splitn(5, '/').collect();
    if parts.len() != 5 || parts[2] != "resolve" {
        return respond(&mut conn, 404, b"not found", "text/plain");
    }
    let repo = format!("{}/{}", parts[0], parts[1]);
    let file_name = decode(parts[4]);
    let file = {
        let repos = st.repos.lock().unwrap();
        let Some(r) = repos.get(&repo).filter(|_| parts[3] == "main") else {
            return respond(&mut conn, 404, b"not found", "text/plain");
        };
        if let Err(s) = authorized(r) {
            return respond(&mut conn, s, b"gated", "text/plain");
        }
        match r.files.get(&file_name) {
            Some(f) => f.clone(),
            None => return respond(&mut conn, 404, b"no such file", "text/plain"),
        }
    };
    let k = key(&repo, &file_name);
    st.starts
        .lock()
        .unwrap()
        .entry(k.clone())
        .or_default()
        .push(range_start);
    let (corrupt, cut_at, stall_at, misrange) = {
        let mut faults = st.faults.lock().unwrap();
        let f = faults.entry(k.clone()).or_default();
        if let Some(s) = f.status.take() {
            drop(faults);
            return respond(&mut conn, s, b"injected", "text/plain");
        }
        let corrupt = f.corrupt > 0;
        if corrupt {
            f.corrupt -= 1;
        }
        let misrange = f.misrange && range_start > 0;
        if misrange {
            f.misrange = false;
        }
        (corrupt, f.cut_at, f.stall_at, misrange)
    };
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
    if range_start > 0 {
        write!(
            conn,
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {range_start}-{}/{len}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            len.saturating_sub(1),
            len - range_start
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
    while pos < len {
        let mut end = (pos + 64 * 1024).min(len);
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
