//! Per-connection costs under abuse: RSS per idle session, RSS after 10,000
//! sessions open and close (three rounds), RSS growth of a client that never reads its
//! results, and the time to answer a new client when the fd limit is nearly exhausted.
//! `cargo bench -p toolvisor --bench limits` (needs `ulimit -n` above 20,000 for the first
//! figure at full size, and `prlimit` from util-linux for the last).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::{Guard, rss_kib, wait_socket};

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolvisor_protocol::client::{Client, ClientError, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientFrame, ClientKind, DaemonFrame, Surface, Tier};

fn options(codec: Codec) -> ClientOptions {
    ClientOptions {
        codec,
        client_kind: ClientKind::Harness,
        run_id: String::new(),
        workdir: std::env::temp_dir().display().to_string(),
        surface: Surface {
            max_tier: Tier::Exec,
            approvals: false,
            questions: false,
            bridge_tools: vec![],
        },
        ..ClientOptions::default()
    }
}

/// The soft open-file limit of this process.
fn nofile() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines()
                .find(|l| l.starts_with("Max open files"))?
                .split_whitespace()
                .nth(3)?
                .parse()
                .ok()
        })
        .unwrap_or(1024)
}

fn sessions_now(socket: &Path) -> u32 {
    let mut c = Client::connect(socket, options(Codec::Json)).unwrap();
    match c.request(&ClientFrame::Status).unwrap() {
        DaemonFrame::Status(s) => s.sessions - 1,
        other => panic!("expected status, got {other:?}"),
    }
}

/// Wait (at most 30 s) until the daemon counts `n` sessions besides the asking one.
fn wait_sessions(socket: &Path, n: u32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while sessions_now(socket) != n {
        assert!(Instant::now() < deadline, "sessions never settled at {n}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Let RSS settle after a change (the allocator returns memory lazily).
fn settled_rss(pid: u32) -> u64 {
    std::thread::sleep(Duration::from_secs(2));
    rss_kib(pid)
}

/// A `w` x `h` BMP of noise: `read` converts it to a PNG that does not compress.
fn noise_bmp(w: u32, h: u32) -> Vec<u8> {
    let row = (w * 3).div_ceil(4) * 4;
    let size = 54 + row * h;
    let mut out = Vec::with_capacity(size as usize);
    out.extend_from_slice(b"BM");
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&54u32.to_le_bytes());
    out.extend_from_slice(&40u32.to_le_bytes());
    out.extend_from_slice(&(w as i32).to_le_bytes());
    out.extend_from_slice(&(h as i32).to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&24u16.to_le_bytes());
    out.extend_from_slice(&[0; 24]);
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for _ in 0..h {
        for _ in 0..row {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.push(state as u8);
        }
    }
    out
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("toolvisor.sock");
    // Each session is an fd in this process and one in the daemon.
    let n = std::env::var("TOOLVISOR_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000)
        .min(nofile().saturating_sub(200) / 2);
    let codec = match std::env::var("TOOLVISOR_BENCH_CODEC").as_deref() {
        Ok("json") => Codec::Json,
        _ => Codec::Bincode,
    };
    // The never-reading client's figure depends on the calls it may have in flight.
    let in_flight: usize = std::env::var("TOOLVISOR_BENCH_IN_FLIGHT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(16);
    let daemon = common::start_daemon(
        dir.path(),
        &socket,
        &format!(
            "[limits]\nmax_sessions = {}\nmax_calls_in_flight = {in_flight}\n",
            n + 16
        ),
    );
    let pid = daemon.0.id();
    wait_socket(&socket);
    let baseline = settled_rss(pid);
    println!("idle daemon: {} MiB RSS", baseline / 1024);

    // 1 and 2: idle sessions, three rounds of open and close.
    let rounds = if std::env::var_os("TOOLVISOR_BENCH_QUICK").is_some() {
        1
    } else {
        3
    };
    for round in 1..=rounds {
        let t = Instant::now();
        let clients: Vec<Client> = (0..n)
            .map(|_| Client::connect(&socket, options(codec)).expect("connect"))
            .collect();
        let open_s = t.elapsed().as_secs_f64();
        wait_sessions(&socket, n as u32);
        let open = settled_rss(pid);
        drop(clients);
        wait_sessions(&socket, 0);
        let closed = settled_rss(pid);
        println!(
            "round {round}: {n} idle sessions opened in {open_s:.1} s: {} MiB RSS ({:.1} KiB per session); all closed: {} MiB ({:+} MiB from the idle baseline)",
            open / 1024,
            open.saturating_sub(baseline) as f64 / n as f64,
            closed / 1024,
            (closed as i64 - baseline as i64) / 1024,
        );
    }

    if rounds == 1 {
        return;
    }
    // 3: a client that never reads its results: 150 reads of a 3 MB image.
    let image = dir.path().join("noise.bmp");
    std::fs::write(&image, noise_bmp(1000, 1000)).unwrap();
    let before = settled_rss(pid);
    let mut lazy = Client::connect(&socket, options(Codec::Bincode)).unwrap();
    lazy.raw()
        .unwrap()
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut sent = 0;
    for _ in 0..150 {
        if lazy
            .start_call("lazy", "read", json!({"path": image.display().to_string()}))
            .is_err()
        {
            break;
        }
        sent += 1;
    }
    // Give every call time to run and queue; sample the peak.
    let mut peak = before;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    let steady = rss_kib(pid);
    println!(
        "never-reading client, {sent} reads of a 3 MB image sent: RSS {} MiB before, peak +{} MiB while its calls ran, +{} MiB once they wait for it to read (limits.max_queued_output_bytes = 16 MiB, max_calls_in_flight = {in_flight})",
        before / 1024,
        peak.saturating_sub(before) / 1024,
        steady.saturating_sub(before) / 1024
    );
    drop(lazy);
    drop(daemon);

    // 4: a new client while the fd limit is nearly exhausted by idle connections.
    fd_starved(dir.path());
}

fn fd_starved(dir: &Path) {
    let socket = dir.join("starved.sock");
    let config = dir.join("starved.toml");
    std::fs::write(
        &config,
        format!("state_dir = {:?}\n", dir.join("state2").display()),
    )
    .unwrap();
    let _daemon = Guard(
        Command::new("prlimit")
            .arg("--nofile=256")
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_toolvisor"))
            .args(["serve", "--socket"])
            .arg(&socket)
            .arg("--config")
            .arg(&config)
            .env("TOOLVISOR_LOG", "warn")
            .stderr(Stdio::null())
            .spawn()
            .expect("prlimit (util-linux) runs the daemon"),
    );
    wait_socket(&socket);
    // Silent connections (no Hello) and idle sessions, more than 256 fds can hold.
    let silent: Vec<UnixStream> = (0..150)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    let mut idle = Vec::new();
    for _ in 0..150 {
        if let Ok(c) = Client::connect(&socket, options(Codec::Bincode)) {
            idle.push(c);
        }
    }
    let (what, ms) = time_a_new_client(&socket);
    println!(
        "nofile=256, 150 silent connections + {} idle sessions: a new client was {what} in {ms:.1} ms",
        idle.len()
    );
    // Every place held by a client that said Hello: nothing to shed, `busy` at once.
    while let Ok(c) = Client::connect(&socket, options(Codec::Bincode)) {
        idle.push(c);
    }
    let (what, ms) = time_a_new_client(&socket);
    println!(
        "nofile=256, every place held by {} idle sessions: a new client was {what} in {ms:.1} ms",
        idle.len()
    );
    drop(silent);
}

/// How a new client fares on `socket` (welcomed, refused and why, failed) and how long the
/// answer took, in milliseconds.
fn time_a_new_client(socket: &std::path::Path) -> (String, f64) {
    let t = Instant::now();
    let answer = Client::connect(socket, options(Codec::Json));
    let took = t.elapsed();
    let what = match answer {
        Ok(_) => "welcomed".to_string(),
        Err(ClientError::Refused(e)) => format!("refused `{:?}`", e.kind),
        Err(e) => format!("failed: {e}"),
    };
    (what, took.as_secs_f64() * 1000.0)
}
