//! Figures of the daemon's spine, measured against a raw Unix-socket echo in the same run:
//! round-trip latency of a trivial call, throughput with 16 concurrent clients, idle RSS, and
//! 64 clients × 1000 calls with no error. `cargo bench -p toolvisor --bench roundtrip`.
//!
//! The echo peer is this binary re-executed in echo mode (a tokio server in its own process,
//! like the daemon), and both are driven by the same blocking length-prefixed client code.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::Guard;
use common::{rss_kib, wait_socket};

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};

const ECHO_ENV: &str = "TOOLVISOR_BENCH_ECHO";

fn main() {
    if let Ok(path) = std::env::var(ECHO_ENV) {
        echo_server(Path::new(&path));
        return;
    }
    // `cargo bench` passes `--bench`; ignore arguments.
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon_sock = dir.path().join("toolvisor.sock");
    let echo_sock = dir.path().join("echo.sock");
    let mut daemon = common::start_daemon(dir.path(), &daemon_sock, "");
    let _echo = Guard(
        Command::new(std::env::current_exe().unwrap())
            .env(ECHO_ENV, &echo_sock)
            .spawn()
            .expect("start the echo server"),
    );
    wait_socket(&daemon_sock);
    wait_socket(&echo_sock);
    std::thread::sleep(Duration::from_millis(500));
    let idle_rss = rss_kib(daemon.0.id());

    let payload = trivial_call_frame();
    let n = 20_000;
    // Warm both.
    latency_echo(&echo_sock, &payload, 2_000);
    latency_daemon(&daemon_sock, 2_000);
    let echo_lat = latency_echo(&echo_sock, &payload, n);
    let daemon_lat = latency_daemon(&daemon_sock, n);
    let (echo_p50, daemon_p50) = (percentile(&echo_lat, 50), percentile(&daemon_lat, 50));

    let clients = 16;
    let per_client = 5_000;
    let echo_tput = throughput(clients, per_client, |_| {
        let mut s = UnixStream::connect(&echo_sock).unwrap();
        let payload = payload.clone();
        move || echo_once(&mut s, &payload)
    });
    let daemon_tput = throughput(clients, per_client, |_| {
        let mut c = connect(&daemon_sock, Codec::Bincode);
        move || call_list(&mut c)
    });

    // 64 concurrent clients × 1000 calls each, every one must succeed.
    let errors = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let start = Instant::now();
    let handles: Vec<_> = (0..64)
        .map(|i| {
            let sock = daemon_sock.clone();
            let errors = errors.clone();
            std::thread::spawn(move || {
                let codec = if i % 2 == 0 {
                    Codec::Bincode
                } else {
                    Codec::Json
                };
                let mut c = connect(&sock, codec);
                for _ in 0..1000 {
                    let ok = matches!(
                        c.call(&format!("bench-{i}"), "process", json!({"op": "list"}))
                            .map(|r| r.outcome),
                        Ok(Outcome::Ok(_))
                    );
                    if !ok {
                        errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let many_secs = start.elapsed().as_secs_f64();
    let loaded_rss = rss_kib(daemon.0.id());
    let errors = errors.load(std::sync::atomic::Ordering::Relaxed);
    daemon.stop();

    println!("| figure | toolvisor | raw UDS echo | ratio | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| round trip, median (n={n}) | {:.1} µs | {:.1} µs | {:.2}× | ≤ 2.0× |",
        daemon_p50,
        echo_p50,
        daemon_p50 / echo_p50
    );
    println!(
        "| round trip, p99 | {:.1} µs | {:.1} µs | {:.2}× | — |",
        percentile(&daemon_lat, 99),
        percentile(&echo_lat, 99),
        percentile(&daemon_lat, 99) / percentile(&echo_lat, 99)
    );
    println!(
        "| throughput, {clients} clients × {per_client} | {:.0} /s | {:.0} /s | {:.2}× | ≥ 0.5× |",
        daemon_tput,
        echo_tput,
        daemon_tput / echo_tput
    );
    println!("| idle RSS | {idle_rss} KiB | — | — | ≤ 15 MiB |");
    println!(
        "| 64 clients × 1000 calls | {errors} errors in {many_secs:.1} s, RSS after {loaded_rss} KiB | — | — | 0 errors |"
    );
}

/// The bytes of the trivial call as the daemon receives it (same size for the echo).
fn trivial_call_frame() -> Vec<u8> {
    let call = toolvisor_protocol::wire::ClientFrame::Call(toolvisor_protocol::wire::Call {
        id: 1,
        conversation: "bench".into(),
        tool: "process".into(),
        args: toolvisor_protocol::Value(json!({"op": "list"})),
    });
    toolvisor_protocol::codec::encode_frame(Codec::Bincode, &call, 1 << 20).unwrap()
}

fn connect(path: &Path, codec: Codec) -> Client {
    Client::connect(
        path,
        ClientOptions {
            codec,
            client_kind: ClientKind::Harness,
            surface: Surface {
                max_tier: Tier::Exec,
                approvals: false,
                questions: false,
                bridge_tools: vec![],
            },
            ..ClientOptions::default()
        },
    )
    .expect("connect to the daemon")
}

fn call_list(c: &mut Client) {
    match c
        .call("bench", "process", json!({"op": "list"}))
        .map(|r| r.outcome)
    {
        Ok(Outcome::Ok(_)) => {}
        other => panic!("trivial call failed: {other:?}"),
    }
}

fn echo_once(s: &mut UnixStream, frame: &[u8]) {
    s.write_all(frame).unwrap();
    let mut header = [0u8; 4];
    s.read_exact(&mut header).unwrap();
    let mut buf = vec![0u8; u32::from_be_bytes(header) as usize];
    s.read_exact(&mut buf).unwrap();
}

fn latency_echo(path: &PathBuf, frame: &[u8], n: usize) -> Vec<f64> {
    let mut s = UnixStream::connect(path).unwrap();
    (0..n)
        .map(|_| {
            let t = Instant::now();
            echo_once(&mut s, frame);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

fn latency_daemon(path: &Path, n: usize) -> Vec<f64> {
    let mut c = connect(path, Codec::Bincode);
    (0..n)
        .map(|_| {
            let t = Instant::now();
            call_list(&mut c);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

fn percentile(samples: &[f64], p: usize) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn throughput<F, G>(clients: usize, per_client: usize, make: F) -> f64
where
    F: Fn(usize) -> G,
    G: FnMut() + Send + 'static,
{
    let workers: Vec<G> = (0..clients).map(&make).collect();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(clients + 1));
    let handles: Vec<_> = workers
        .into_iter()
        .map(|mut f| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_client {
                    f();
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    (clients * per_client) as f64 / start.elapsed().as_secs_f64()
}

/// A tokio Unix-socket echo of length-prefixed frames: the floor any daemon round trip sits on.
fn echo_server(path: &Path) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::UnixListener::bind(path).unwrap();
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut header = [0u8; 4];
                loop {
                    if s.read_exact(&mut header).await.is_err() {
                        return;
                    }
                    let mut buf = vec![0u8; u32::from_be_bytes(header) as usize];
                    if s.read_exact(&mut buf).await.is_err() {
                        return;
                    }
                    let mut out = Vec::with_capacity(4 + buf.len());
                    out.extend_from_slice(&header);
                    out.extend_from_slice(&buf);
                    if s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}
