//! Inference pool figures: load-to-ready of the tiny model through toolvisor
//! (`load_model` until `get_inference_status` says `ready`) against the same server command
//! started by hand (until it answers `GET /v1/models`), alternating call by call; the latency
//! a completion gains through the routing endpoint against calling the server directly,
//! alternating request by request; and, for a long stream, when the first and last chunks
//! arrive through the endpoint and directly (no buffering of the whole response).
//! Each figure for both servers: llama-cpp-python's and llama.cpp's own `llama-server` (when
//! built into `.test-deps/llama-server`; `TOOLVISOR_BENCH_SERVER=llama-server` picks one).
//! `cargo bench -p toolvisor --bench inference` (needs `.test-deps/inference-venv`, made by
//! scripts/install-test-deps; `TOOLVISOR_BENCH_LOADS` and `TOOLVISOR_BENCH_REQUESTS` set the
//! rounds, default 5 and 60).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::{Guard, call, client, loadavg, start_daemon, wait_socket};

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_inference::config::{llama_cpp_python, llama_server, render};
use toolvisor_tests::inference::{config, make_gguf, put_in_store, python};

/// How often both sides of the load figure look for readiness (the daemon's own first polls
/// are 2 ms apart too).
const POLL_MS: u64 = 2;

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn p90(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[(v.len() * 9 / 10).min(v.len() - 1)]
}

/// One HTTP/1.1 request on a fresh connection; the body, and the instants the first and the
/// last body bytes arrived.
fn http<S: Read + Write>(mut s: S, path: &str, body: &Json) -> (String, Instant, Instant) {
    let body = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains(" 200 "), "status {line}");
    let mut chunked = false;
    let mut length = None;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
        if let Some(n) = l.strip_prefix("content-length:") {
            length = n.trim().parse::<usize>().ok();
        }
    }
    let mut out = Vec::new();
    let mut first = None;
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            let n = usize::from_str_radix(line.trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            first.get_or_insert_with(Instant::now);
            out.extend_from_slice(&chunk[..n]);
        }
    } else {
        let mut b = vec![0; length.unwrap_or(0)];
        r.read_exact(&mut b).unwrap();
        first = Some(Instant::now());
        out = b;
    }
    let last = Instant::now();
    (
        String::from_utf8_lossy(&out).into_owned(),
        first.unwrap_or(last),
        last,
    )
}

fn answers_models(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).is_ok() && line.contains(" 200 ")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The model server a run measures: its `[inference]` table for the daemon, and the same
/// server's command line by hand (the daemon's default for it, with `{path}` and `{port}` left
/// to fill in).
struct Server {
    name: &'static str,
    config: String,
    by_hand: Vec<String>,
}

impl Server {
    fn command(&self, model: &std::path::Path, port: u16) -> Command {
        let args = render(
            &self.by_hand,
            &[
                ("path", model.display().to_string()),
                ("port", port.to_string()),
            ],
        );
        let mut c = Command::new(&args[0]);
        c.args(&args[1..]);
        c
    }
}

/// A default server command with the bench's context and alias filled in.
fn by_hand(template: &[String]) -> Vec<String> {
    render(
        template,
        &[("context", "512".into()), ("alias", "hand".into())],
    )
}

fn servers() -> Vec<Server> {
    // `python3 -m llama_cpp.server …`, by the venv's python.
    let mut py = llama_cpp_python();
    py[0] = python().display().to_string();
    let mut out = vec![Server {
        name: "llama-cpp-python 0.3 (python -m llama_cpp.server)",
        config: config("idle_ttl_s = 0", ""),
        by_hand: by_hand(&py),
    }];
    let bin = toolvisor_tests::lsp::test_deps().join("llama-server/bin/llama-server");
    if bin.is_file() {
        let mut command = llama_server();
        command[0] = bin.display().to_string();
        out.push(Server {
            name: "llama.cpp's llama-server",
            config: format!("[inference]\nidle_ttl_s = 0\ncommands.gguf = {command:?}\n"),
            by_hand: by_hand(&command),
        });
    } else {
        println!("{bin:?} not built (scripts/install-test-deps): measuring llama-cpp-python only");
    }
    out
}

fn main() {
    // `TOOLVISOR_BENCH_SERVER=llama-server` (a part of the name) measures only that one.
    let only = std::env::var("TOOLVISOR_BENCH_SERVER").unwrap_or_default();
    for server in servers().into_iter().filter(|s| s.name.contains(&only)) {
        println!("== {}", server.name);
        run(&server);
    }
}

fn run(server: &Server) {
    let loads = env_n("TOOLVISOR_BENCH_LOADS", 5);
    let requests = env_n("TOOLVISOR_BENCH_REQUESTS", 60);
    println!("load average at start: {}", loadavg());
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    let gguf = dir.path().join("tiny.gguf");
    make_gguf(&gguf, 1);
    let model = put_in_store(
        &store,
        "bench/tiny",
        "F32",
        "tiny-f32.gguf",
        &std::fs::read(&gguf).unwrap(),
    );
    let socket = dir.path().join("s.sock");
    let cfg = format!(
        "[models]\nstore = {:?}\n{}",
        store.display().to_string(),
        server.config
    );
    let mut daemon = start_daemon(dir.path(), &socket, &cfg);
    wait_socket(&socket);
    let endpoint = std::path::PathBuf::from(format!("{}.inference", socket.display()));
    let mut c = client(&socket);

    // Load to ready, alternating toolvisor and by hand.
    let (mut tv, mut hand) = (Vec::new(), Vec::new());
    let mut parts = Vec::new();
    for round in 0..loads {
        let alias = format!("b{round}");
        let t0 = Instant::now();
        call(
            &mut c,
            "load_model",
            json!({"model": "bench/tiny", "alias": alias, "context": 512}),
        );
        let answered = t0.elapsed();
        let mut direct = None;
        let spawn_to_ready = loop {
            let s = call(&mut c, "get_inference_status", json!({}));
            let m = s["models"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["alias"] == alias)
                .cloned()
                .unwrap();
            if m["state"] == "ready" {
                break m["load_ms"].as_u64().unwrap_or(0);
            }
            if direct.is_none()
                && let Some(port) = m["port"].as_u64()
                && answers_models(port as u16)
            {
                direct = Some(t0.elapsed());
            }
            assert_ne!(m["state"], "failed", "{m}");
            std::thread::sleep(Duration::from_millis(POLL_MS));
        };
        tv.push(t0.elapsed().as_secs_f64() * 1000.0);
        parts.push(format!(
            "load_model answered {:.0} ms, the server answered the bench at {:.0?} ms, the daemon saw it ready {spawn_to_ready} ms after its spawn",
            answered.as_secs_f64() * 1000.0,
            direct.map(|d| d.as_secs_f64() * 1000.0)
        ));
        call(&mut c, "unload_model", json!({"alias": alias}));

        let port = free_port();
        let t0 = Instant::now();
        let child = server
            .command(&model, port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut child = Guard(child);
        while !answers_models(port) {
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        hand.push(t0.elapsed().as_secs_f64() * 1000.0);
        child.stop();
    }
    let (tv_med, hand_med) = (median(&mut tv), median(&mut hand));
    println!(
        "load to ready ({loads} each, alternating): toolvisor median {tv_med:.0} ms, by hand {hand_med:.0} ms, ratio {:.2}x (goal <= 1.1x)",
        tv_med / hand_med
    );
    println!("  toolvisor {tv:.0?}\n  by hand   {hand:.0?}");
    println!("  toolvisor, in order: {}", parts.join("; "));

    // Added latency of a short completion, alternating endpoint and direct.
    call(
        &mut c,
        "load_model",
        json!({"model": "bench/tiny", "alias": "lat", "context": 512}),
    );
    let port = loop {
        let s = call(&mut c, "get_inference_status", json!({}));
        let m = s["models"][0].clone();
        if m["state"] == "ready" {
            break m["port"].as_u64().unwrap() as u16;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let short = json!({
        "model": "lat",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
        "temperature": 0,
    });
    let (mut via, mut direct) = (Vec::new(), Vec::new());
    for i in 0..requests + 5 {
        let t0 = Instant::now();
        let s = std::os::unix::net::UnixStream::connect(&endpoint).unwrap();
        let (body, _, last) = http(s, "/v1/chat/completions", &short);
        let through = last - t0;
        assert!(body.contains("usage"), "{body}");
        let t0 = Instant::now();
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_nodelay(true).unwrap();
        let (body, _, last) = http(s, "/v1/chat/completions", &short);
        assert!(body.contains("usage"), "{body}");
        if i >= 5 {
            via.push(through.as_secs_f64() * 1000.0);
            direct.push((last - t0).as_secs_f64() * 1000.0);
        }
    }
    let (vm, dm) = (median(&mut via), median(&mut direct));
    println!(
        "completion, max_tokens 1 ({requests} each, alternating): through the endpoint median {vm:.2} ms (p90 {:.2}), direct {dm:.2} ms (p90 {:.2}); added {:.2} ms (goal < 1 ms)",
        p90(&mut via),
        p90(&mut direct),
        vm - dm
    );

    // A long stream: first and last chunk through the endpoint and directly.
    let long = json!({
        "model": "lat",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 400,
        "temperature": 0,
        "stream": true,
        "logit_bias": {"2": -100},
    });
    for _ in 0..2 {
        let t0 = Instant::now();
        let s = std::os::unix::net::UnixStream::connect(&endpoint).unwrap();
        let (_, first, last) = http(s, "/v1/chat/completions", &long);
        println!(
            "stream of 400 tokens through the endpoint: first chunk at {:.1} ms, last at {:.1} ms",
            (first - t0).as_secs_f64() * 1000.0,
            (last - t0).as_secs_f64() * 1000.0
        );
        let t0 = Instant::now();
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_, first, last) = http(s, "/v1/chat/completions", &long);
        println!(
            "stream of 400 tokens directly:           first chunk at {:.1} ms, last at {:.1} ms",
            (first - t0).as_secs_f64() * 1000.0,
            (last - t0).as_secs_f64() * 1000.0
        );
    }
    println!("load average at end: {}", loadavg());
    daemon.stop();
}
