//! Figures of the daemon's spine, measured against a raw Unix-socket echo in the same run:
//! round-trip latency of a trivial call, throughput with 16 concurrent clients, idle RSS, and
//! 64 clients × 1000 calls with no error. `cargo bench -p toolvisor --bench roundtrip`.
//!
//! The echo peer (B) is this binary re-executed in echo mode (a tokio server in its own
//! process, like the daemon, A). Both sides are driven by the same client code: a blocking
//! loop that encodes a `Call` frame with a fresh id, writes it, reads one length-prefixed
//! frame and decodes it (the daemon's `Result`, or the echo's copy of the call). The daemon's
//! connections say Hello first through `protocol::client` and are then driven raw.
//!
//! The machine is shared, so the sides alternate round by round (A then B, then B then A),
//! `TOOLVISOR_BENCH_ROUNDS` rounds (default 5, at least 3); each figure is the median of the
//! per-round ratios with their spread (min–max), and every round prints the load average.
//! The latency rounds pin the client thread, the daemon and the echo to one CPU (`taskset`),
//! so a round trip is the same context switches on both sides; the same latency is measured
//! again unpinned (where the daemon's wakeups of its other threads show), and throughput runs
//! unpinned. `TOOLVISOR_BENCH_SOAK_S=<s>` runs only the daemon's throughput phase for that long,
//! for a profiler. `TOOLVISOR_BENCH_CONNECT_ONLY=1` measures only a connection's start, with and
//! without `list_tools`.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::Guard;
use common::{loadavg, rss_kib, summary, wait_socket};

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{
    Call, ClientFrame, ClientKind, DaemonFrame, Outcome, Surface, Tier,
};

const ECHO_ENV: &str = "TOOLVISOR_BENCH_ECHO";
const LATENCY_CALLS: usize = 5_000;
const CLIENTS: usize = 16;
const PER_CLIENT: usize = 2_000;

fn main() {
    if let Ok(path) = std::env::var(ECHO_ENV) {
        echo_server(Path::new(&path));
        return;
    }
    // `cargo bench` passes `--bench`; ignore arguments.
    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(3);
    let dir = tempfile::tempdir().expect("temp dir");
    let daemon_sock = dir.path().join("toolvisor.sock");
    let echo_sock = dir.path().join("echo.sock");
    let mut daemon = common::start_daemon(dir.path(), &daemon_sock, "");
    let echo = Guard(
        Command::new(std::env::current_exe().unwrap())
            .env(ECHO_ENV, &echo_sock)
            .spawn()
            .expect("start the echo server"),
    );
    wait_socket(&daemon_sock);
    wait_socket(&echo_sock);
    std::thread::sleep(Duration::from_millis(500));
    let idle_rss = rss_kib(daemon.0.id());
    let (daemon_pid, echo_pid) = (daemon.0.id(), echo.0.id());
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;

    // `TOOLVISOR_BENCH_CONNECT_ONLY=1`: only a connection's start, with and without the tool
    // list's schemas, alternating, `rounds` × 100 of each.
    if std::env::var_os("TOOLVISOR_BENCH_CONNECT_ONLY").is_some() {
        connect_only(&daemon_sock, rounds);
        return;
    }

    // Warm both.
    latency(&mut Side::Daemon.connect(&daemon_sock, &echo_sock), 2_000);
    latency(&mut Side::Echo.connect(&daemon_sock, &echo_sock), 2_000);

    // `TOOLVISOR_BENCH_SOAK_S=<s>`: only the daemon's throughput phase, over and over for that
    // long, for a profiler to attach to (`perf record -p <pid>`); no figures.
    if let Some(secs) = std::env::var("TOOLVISOR_BENCH_SOAK_S")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        println!("daemon pid {daemon_pid}, echo pid {echo_pid}: throughput soak for {secs} s");
        println!(
            "| side | calls/s | server CPU per call | clients' CPU per call | server context switches per call |"
        );
        println!("|---|---|---|---|---|");
        let me = std::process::id();
        // Connected once: a connection's start (the Welcome with every schema) is not a call's.
        let mut clients = [Side::Daemon, Side::Echo].map(|side| {
            Some(
                (0..CLIENTS)
                    .map(|_| side.connect(&daemon_sock, &echo_sock))
                    .collect(),
            )
        });
        let end = Instant::now() + Duration::from_secs(secs);
        // `TOOLVISOR_BENCH_SOAK_SIDE=daemon|echo`: that side alone (to profile the clients).
        let only = std::env::var("TOOLVISOR_BENCH_SOAK_SIDE").ok();
        let sides: Vec<Side> = [Side::Daemon, Side::Echo]
            .into_iter()
            .filter(|s| {
                only.as_deref()
                    .is_none_or(|o| format!("{s:?}").eq_ignore_ascii_case(o))
            })
            .collect();
        while Instant::now() < end {
            for &side in &sides {
                let server = [daemon_pid, echo_pid][side as usize];
                let (cpu0, cs0, mine0) = (cpu_ns(server), switches(server), process_cpu_ns(me));
                let (rate, back) = calls_from(clients[side as usize].take().unwrap());
                clients[side as usize] = Some(back);
                let calls = (CLIENTS * PER_CLIENT) as f64;
                println!(
                    "| {side:?} | {rate:.0} | {:.1} µs | {:.1} µs | {:.2} |",
                    (cpu_ns(server) - cpu0) as f64 / 1000.0 / calls,
                    (process_cpu_ns(me) - mine0) as f64 / 1000.0 / calls,
                    (switches(server) - cs0) as f64 / calls
                );
            }
        }
        daemon.stop();
        return;
    }

    println!(
        "rounds: {rounds}; latency: {LATENCY_CALLS} calls per side per round, pinned to CPU {cpu}; throughput: {CLIENTS} clients × {PER_CLIENT} calls per side per round, unpinned"
    );
    println!();
    println!(
        "| round | order | p50 daemon / echo | ratio | p99 ratio | server CPU per call daemon / echo | unpinned p50 daemon / echo | ratio | throughput daemon / echo | ratio | load average |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let (mut p50s, mut p99s, mut tputs) = (Vec::new(), Vec::new(), Vec::new());
    let mut cpus = Vec::new();
    let mut unpinned = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Side::Daemon, Side::Echo]
        } else {
            [Side::Echo, Side::Daemon]
        };
        let load = loadavg();
        // Latency: every party on one CPU.
        pin(daemon_pid, echo_pid, Some(cpu));
        let mut lat = [Vec::new(), Vec::new()];
        let mut cpu_per_call = [0.0; 2];
        for side in order {
            let mut c = side.connect(&daemon_sock, &echo_sock);
            let server = [daemon_pid, echo_pid][side as usize];
            let before = cpu_ns(server);
            lat[side as usize] = latency(&mut c, LATENCY_CALLS);
            cpu_per_call[side as usize] =
                (cpu_ns(server) - before) as f64 / 1000.0 / LATENCY_CALLS as f64;
        }
        cpus.push(cpu_per_call[0] / cpu_per_call[1]);
        pin(daemon_pid, echo_pid, None);
        // The same sequential calls unpinned: the scheduler may put the client, the daemon's
        // reader and its other threads on different CPUs, so wakeups cost what they cost.
        let mut free = [Vec::new(), Vec::new()];
        for side in order {
            let mut c = side.connect(&daemon_sock, &echo_sock);
            free[side as usize] = latency(&mut c, LATENCY_CALLS);
        }
        let (f0, f1) = (percentile(&free[0], 50), percentile(&free[1], 50));
        unpinned.push(f0 / f1);
        let mut tput = [0.0; 2];
        for side in order {
            tput[side as usize] = throughput(side, &daemon_sock, &echo_sock);
        }
        let (d50, e50) = (percentile(&lat[0], 50), percentile(&lat[1], 50));
        let (d99, e99) = (percentile(&lat[0], 99), percentile(&lat[1], 99));
        p50s.push(d50 / e50);
        p99s.push(d99 / e99);
        tputs.push(tput[0] / tput[1]);
        println!(
            "| {} | {} | {d50:.1} / {e50:.1} µs | {:.2}× | {:.2}× | {:.1} / {:.1} µs | {f0:.1} / {f1:.1} µs | {:.2}× | {:.0} / {:.0} /s | {:.2}× | {load} |",
            round + 1,
            if order[0] == Side::Daemon {
                "daemon first"
            } else {
                "echo first"
            },
            d50 / e50,
            d99 / e99,
            cpu_per_call[0],
            cpu_per_call[1],
            f0 / f1,
            tput[0],
            tput[1],
            tput[0] / tput[1],
        );
    }

    // A connection's start: Hello → Welcome (the tools without their schemas), then closed.
    let mut connects: Vec<f64> = (0..100)
        .map(|_| {
            let t = Instant::now();
            drop(connect(&daemon_sock, Codec::Bincode));
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    connects.sort_by(f64::total_cmp);
    let connect_p50 = connects[connects.len() / 2];

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

    println!();
    println!("| figure | median ratio (spread over {rounds} rounds) | target | load average |");
    println!("|---|---|---|---|");
    let load = loadavg();
    println!(
        "| round trip, median (pinned) | {} | ≤ 1.3× | {load} |",
        summary(&p50s)
    );
    println!(
        "| round trip, median (unpinned) | {} | ≤ 2.0× | {load} |",
        summary(&unpinned)
    );
    println!("| round trip, p99 | {} | — | {load} |", summary(&p99s));
    println!(
        "| server CPU per call (pinned rounds) | {} | — | {load} |",
        summary(&cpus)
    );
    println!(
        "| throughput, {CLIENTS} clients | {} | ≥ 0.8× | {load} |",
        summary(&tputs)
    );
    println!("| idle RSS | {idle_rss} KiB | ≤ 15 MiB | {load} |");
    println!(
        "| connect (Hello → Welcome), median of 100 | {connect_p50:.0} µs | ≤ 500 µs | {load} |"
    );
    println!(
        "| 64 clients × 1000 calls | {errors} errors in {many_secs:.1} s, RSS after {loaded_rss} KiB | 0 errors | {load} |"
    );
}

/// Nanoseconds `pid`'s threads have run on a CPU (the first field of each thread's
/// `schedstat`, summed).
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// The CPU time of `pid`, its ended threads included (`/proc/<pid>/stat`, in clock ticks of
/// 10 ms: meaningful over phases of a second or so).
fn process_cpu_ns(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse::<u64>().ok())
        .sum();
    ticks * 10_000_000
}

/// Context switches of every thread of `pid` so far, voluntary and not.
fn switches(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
                .flat_map(|s| {
                    s.lines()
                        .filter(|l| l.contains("ctxt_switches:"))
                        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                        .collect::<Vec<_>>()
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Pin the daemon's and the echo's threads and this thread to `cpu`, or to every CPU.
fn pin(daemon: u32, echo: u32, cpu: Option<usize>) {
    let all = format!(
        "0-{}",
        std::thread::available_parallelism().map_or(1, |n| n.get()) - 1
    );
    let list = cpu.map_or(all, |c| c.to_string());
    let me = std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse::<u32>().ok())
        .expect("this thread's id");
    for (all_threads, pid) in [(true, daemon), (true, echo), (false, me)] {
        let mut cmd = Command::new("taskset");
        if all_threads {
            cmd.arg("-a");
        }
        let ok = cmd
            .args(["-p", "-c", &list])
            .arg(pid.to_string())
            .stdout(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "taskset -p -c {list} {pid} failed (is util-linux installed?)"
        );
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Daemon = 0,
    Echo = 1,
}

impl Side {
    fn connect(self, daemon: &Path, echo: &Path) -> Framed {
        match self {
            Side::Daemon => {
                let client = connect(daemon, Codec::Bincode);
                Framed {
                    stream: client.raw().expect("the daemon connection's socket"),
                    _client: Some(client),
                    side: self,
                    next_id: 1_000_000,
                }
            }
            Side::Echo => Framed {
                stream: UnixStream::connect(echo).expect("connect to the echo"),
                _client: None,
                side: self,
                next_id: 1_000_000,
            },
        }
    }
}

/// The one client both sides are driven by: a `Call` frame with a fresh id out, one frame in,
/// decoded and checked.
struct Framed {
    stream: UnixStream,
    /// The daemon connection's Hello was said through it; kept so the socket stays open.
    _client: Option<Client>,
    side: Side,
    next_id: u64,
}

impl Framed {
    fn round_trip(&mut self) {
        self.next_id += 1;
        let id = self.next_id;
        let call = ClientFrame::Call(Call {
            id,
            conversation: "bench".into(),
            tool: "process".into(),
            args: toolvisor_protocol::Value(json!({"op": "list"})),
        });
        let frame = toolvisor_protocol::codec::encode_frame(Codec::Bincode, &call, 1 << 20)
            .expect("encode");
        self.stream.write_all(&frame).expect("write a call");
        let mut header = [0u8; 4];
        self.stream.read_exact(&mut header).expect("read a header");
        let mut body = vec![0u8; u32::from_be_bytes(header) as usize];
        self.stream.read_exact(&mut body).expect("read a frame");
        match self.side {
            Side::Daemon => match toolvisor_protocol::codec::decode(Codec::Bincode, &body) {
                Ok(DaemonFrame::Result {
                    id: got,
                    outcome: Outcome::Ok(_),
                }) if got == id => {}
                other => panic!("trivial call failed: {other:?}"),
            },
            Side::Echo => match toolvisor_protocol::codec::decode(Codec::Bincode, &body) {
                Ok(ClientFrame::Call(c)) if c.id == id => {}
                other => panic!("the echo answered {other:?}"),
            },
        }
    }
}

/// Medians in µs of 100 connection starts per round: Hello → Welcome, and Hello → Welcome →
/// `list_tools` (what a client that builds calls from the schemas pays), alternating.
fn connect_only(sock: &Path, rounds: usize) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let start = |with_schemas: bool| -> f64 {
        let t = Instant::now();
        let mut c = connect(sock, Codec::Bincode);
        if with_schemas {
            match c.request(&ClientFrame::ListTools { all: false }) {
                Ok(DaemonFrame::Tools { tools }) => assert!(!tools.is_empty()),
                other => panic!("list_tools answered {other:?}"),
            }
        }
        drop(c);
        t.elapsed().as_secs_f64() * 1e6
    };
    for _ in 0..20 {
        start(true);
    }
    println!("| round | Hello → Welcome | + list_tools (schemas) | load |\n|---|---|---|---|");
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut medians = [0.0; 2];
        for with in order {
            medians[with as usize] = median((0..100).map(|_| start(with)).collect());
        }
        println!(
            "| {} | {:.0} µs | {:.0} µs | {} |",
            round + 1,
            medians[0],
            medians[1],
            loadavg()
        );
    }
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

/// Round-trip times in µs of `n` sequential calls on one connection.
fn latency(c: &mut Framed, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            c.round_trip();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

fn percentile(samples: &[f64], p: usize) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[(v.len() * p / 100).min(v.len() - 1)]
}

/// Calls per second of [`CLIENTS`] threads, each with its own connection, [`PER_CLIENT`] calls
/// each, started together.
fn throughput(side: Side, daemon: &Path, echo: &Path) -> f64 {
    let clients: Vec<Framed> = (0..CLIENTS).map(|_| side.connect(daemon, echo)).collect();
    calls_from(clients).0
}

/// [`PER_CLIENT`] calls from each of `clients` at once: calls per second, and the clients.
fn calls_from(clients: Vec<Framed>) -> (f64, Vec<Framed>) {
    let n = clients.len();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n + 1));
    let handles: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for _ in 0..PER_CLIENT {
                    c.round_trip();
                }
                c
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let back: Vec<Framed> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    (
        (n * PER_CLIENT) as f64 / start.elapsed().as_secs_f64(),
        back,
    )
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
