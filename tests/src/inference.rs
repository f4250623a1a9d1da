//! Helpers of the inference pool's tests: the venv with llama-cpp-python and gguf that
//! `scripts/install-test-deps` makes (panics, never skips, when it is missing), the tiny
//! llama GGUF that `tests/inference/make_tiny_gguf.py` writes, a model store entry for it,
//! and a small HTTP/1.1 client for the daemon's inference endpoint on its Unix socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::lsp::test_deps;
use crate::{TestDaemon, wait_for};

const MISSING: &str = "run scripts/install-test-deps (it makes .test-deps/inference-venv with llama-cpp-python[server] and gguf)";

/// The inference venv's Python, which must import `llama_cpp.server` and `gguf`.
pub fn python() -> PathBuf {
    let python = test_deps().join("inference-venv/bin/python");
    let ok = Command::new(&python)
        .args(["-c", "import llama_cpp.server, gguf"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} cannot import llama_cpp.server and gguf: {MISSING}",
        python.display()
    );
    python
}

/// Write the tiny model to `out` (a different `seed` gives different weights); its size.
pub fn make_gguf(out: &Path, seed: u32) -> u64 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("inference/make_tiny_gguf.py");
    let o = Command::new(python())
        .arg(&script)
        .arg(out)
        .args(["--seed", &seed.to_string()])
        .output()
        .expect("run make_tiny_gguf.py");
    assert!(
        o.status.success(),
        "make_tiny_gguf.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::metadata(out).unwrap().len()
}

/// Put `bytes` into the model store at `store` as `repo` (revision `main`), one file of
/// `variant`, with the manifest download_model would have written; returns the file's path.
pub fn put_in_store(store: &Path, repo: &str, variant: &str, file: &str, bytes: &[u8]) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let dir = store.join(repo.replace('/', "--")).join("main");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .unwrap();
    for d in [store, &store.join(repo.replace('/', "--"))] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    let path = dir.join(file);
    std::fs::write(&path, bytes).unwrap();
    let manifest = json!({
        "repo": repo,
        "revision": "main",
        "variant": variant,
        "files": [{"name": file, "size": bytes.len(), "sha256": null}],
        "complete": true,
    });
    std::fs::write(
        dir.join(format!(".toolvisor-model-{variant}.json")),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    path
}

/// `[inference]` with the venv's llama-cpp-python as the gguf server, plus `extra` lines of
/// that table; then `rest` (other tables).
pub fn config(extra: &str, rest: &str) -> String {
    let py = python().display().to_string();
    format!(
        "[inference]\ncommands.gguf = [{py:?}, \"-m\", \"llama_cpp.server\", \"--model\", \"{{path}}\", \"--host\", \"127.0.0.1\", \"--port\", \"{{port}}\", \"--n_ctx\", \"{{context}}\", \"--model_alias\", \"{{alias}}\"]\n{extra}\n{rest}"
    )
}

/// The daemon's inference endpoint socket.
pub fn endpoint(d: &TestDaemon) -> PathBuf {
    PathBuf::from(format!("{}.inference", d.socket.display()))
}

/// A response: status, headers (lowercased names), body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Json {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

fn write_request(s: &mut UnixStream, method: &str, path: &str, body: Option<&Json>) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
}

fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    (status, headers)
}

/// Read a chunked body chunk by chunk, calling `each` with every chunk as it arrives.
fn read_chunked(r: &mut impl BufRead, mut each: impl FnMut(&[u8])) {
    loop {
        let mut size = String::new();
        r.read_line(&mut size).unwrap();
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size:?}"));
        if n == 0 {
            let mut end = String::new();
            let _ = r.read_line(&mut end);
            return;
        }
        let mut chunk = vec![0; n];
        r.read_exact(&mut chunk).unwrap();
        let mut crlf = [0; 2];
        r.read_exact(&mut crlf).unwrap();
        each(&chunk);
    }
}

/// One request to the endpoint at `socket`.
pub fn request(socket: &Path, method: &str, path: &str, body: Option<&Json>) -> Reply {
    let mut s =
        UnixStream::connect(socket).unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write_request(&mut s, method, path, body);
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        read_chunked(&mut r, |c| body.extend_from_slice(c));
    } else if let Some(n) = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.resize(n, 0);
        r.read_exact(&mut body).unwrap();
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A streamed request: the chunks with the instant each arrived.
pub fn stream(socket: &Path, path: &str, body: &Json) -> (u16, Vec<(Instant, String)>) {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write_request(&mut s, "POST", path, Some(body));
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let mut chunks = Vec::new();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        read_chunked(&mut r, |c| {
            chunks.push((Instant::now(), String::from_utf8_lossy(c).into_owned()))
        });
    } else {
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        chunks.push((Instant::now(), rest));
    }
    (status, chunks)
}

/// A chat completion of `alias` through the endpoint.
pub fn chat(d: &TestDaemon, alias: &str, max_tokens: u32) -> Reply {
    request(
        &endpoint(d),
        "POST",
        "/v1/chat/completions",
        Some(&json!({
            "model": alias,
            "messages": [{"role": "user", "content": "say hello world"}],
            "max_tokens": max_tokens,
            "temperature": 0,
        })),
    )
}

/// `get_inference_status`'s entry for `alias`.
pub fn status_of(d: &TestDaemon, alias: &str) -> Option<Json> {
    d.ok("c", "get_inference_status", json!({}))["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["alias"] == alias)
        .cloned()
}

/// Wait until `alias` is in `state` (failing at once, with the status, if it failed when
/// that was not asked for).
pub fn wait_state(d: &TestDaemon, alias: &str, state: &str, timeout: Duration) -> Json {
    wait_for(&format!("model {alias} to be {state}"), timeout, || {
        let s = status_of(d, alias)?;
        if s["state"] == "failed" && state != "failed" {
            panic!(
                "model {alias} failed: {s:#}\n--- daemon log ---\n{}",
                d.log_text()
            );
        }
        (s["state"] == state).then_some(s)
    })
}
