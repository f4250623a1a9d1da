//! `eval`'s figures against ipykernel driven by jupyter_client, in the same run on the same
//! interpreter: the round trip of `1+1` on a warm kernel, and a cold start to the first
//! result. `cargo bench -p toolvisor --bench eval` (release build).
//!
//! The two sides alternate round by round (toolvisor then ipykernel, then the other way
//! round), `TOOLVISOR_BENCH_ROUNDS` rounds (default 3, at least 3), each round
//! [`WARM`] warm round trips and [`COLD`] cold starts per side; every round prints its ratios
//! and the load average, and the figures are the medians over all rounds' samples next to the
//! median of the per-round ratios with their spread.
//!
//! Uses the test venv (`scripts/install-test-deps`); installs ipykernel and jupyter_client
//! into it for this benchmark only. Prints a Markdown table for docs/BENCHMARKS.md.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};

/// Warm round trips per side per round.
const WARM: usize = 100;
/// Cold starts per side per round.
const COLD: usize = 3;

/// The jupyter_client side: prints one JSON object with both figures, in microseconds.
const IPYKERNEL_BENCH: &str = r#"
import json, sys, time
from jupyter_client.manager import start_new_kernel

def run(kc, code):
    msg_id = kc.execute(code)
    result = None
    while True:
        msg = kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        t = msg["msg_type"]
        if t == "execute_result":
            result = msg["content"]["data"]["text/plain"]
        elif t == "status" and msg["content"]["execution_state"] == "idle":
            break
    kc.get_shell_msg(timeout=30)
    return result

warm, cold = int(sys.argv[1]), int(sys.argv[2])
cold_us = []
for _ in range(cold):
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3")
    assert run(kc, "1+1") == "2"
    cold_us.append((time.perf_counter() - t0) * 1e6)
    kc.stop_channels()
    km.shutdown_kernel(now=True)
km, kc = start_new_kernel(kernel_name="python3")
for _ in range(30):
    run(kc, "1+1")
rt_us = []
for _ in range(warm):
    t0 = time.perf_counter()
    assert run(kc, "1+1") == "2"
    rt_us.append((time.perf_counter() - t0) * 1e6)
kc.stop_channels()
km.shutdown_kernel(now=True)
print(json.dumps({"cold_us": cold_us, "rt_us": rt_us}))
"#;

fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLVISOR_BENCH_PYTHON") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps/venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/install-test-deps first",
        p.display()
    );
    p
}

fn ensure_ipykernel(python: &Path) {
    let ok = Command::new(python)
        .args(["-c", "import ipykernel, jupyter_client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("installing ipykernel and jupyter_client into the bench venv ...");
        let status = Command::new(python)
            .args(["-m", "pip", "install", "-q", "ipykernel", "jupyter_client"])
            .status()
            .expect("pip");
        assert!(
            status.success(),
            "pip install ipykernel jupyter_client failed"
        );
    }
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn eval(c: &mut Client, conversation: &str, code: &str) -> Json {
    let reply = c
        .call_with(
            conversation,
            "eval",
            json!({"code": code, "description": "add one and one for the benchmark"}),
            |_| true,
        )
        .expect("eval call");
    match reply.outcome {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!("eval failed: {e}"),
    }
}

fn main() {
    let python = python();
    ensure_ipykernel(&python);
    let dir = tempfile::tempdir().expect("temp dir");
    let sock = dir.path().join("toolvisor.sock");
    let _daemon = common::start_daemon(
        dir.path(),
        &sock,
        &format!("[kernels]\npython = {:?}\n", python.display().to_string()),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let options = ClientOptions {
        codec: Codec::Bincode,
        client_kind: ClientKind::Harness,
        run_id: "bench".into(),
        workdir: dir.path().display().to_string(),
        surface: Surface {
            max_tier: Tier::Exec,
            approvals: true,
            questions: false,
            bridge_tools: vec![],
        },
        ..ClientOptions::default()
    };
    let mut c = Client::connect(&sock, options).expect("connect");

    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(3);
    // Warm toolvisor's kernel once (ipykernel's is warmed in each round's script).
    for _ in 0..30 {
        eval(&mut c, "warm", "1+1");
    }
    let (mut tv_rt, mut tv_cold, mut ip_rt, mut ip_cold) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut rt_ratios, mut cold_ratios) = (Vec::new(), Vec::new());
    let mut per_round = Vec::new();
    for round in 0..rounds {
        let load = common::loadavg();
        let toolvisor_first = round % 2 == 0;
        let mut tv = (Vec::new(), Vec::new());
        let mut ip = (Vec::new(), Vec::new());
        for side in [toolvisor_first, !toolvisor_first] {
            if side {
                tv = toolvisor_round(&mut c, round);
            } else {
                ip = ipykernel_round(&python, dir.path());
            }
        }
        let (tv_rt_r, tv_cold_r) = (sorted(tv.0), sorted(tv.1));
        let (ip_rt_r, ip_cold_r) = (sorted(ip.0), sorted(ip.1));
        let rt = percentile(&tv_rt_r, 50) / percentile(&ip_rt_r, 50);
        let cold = percentile(&tv_cold_r, 50) / percentile(&ip_cold_r, 50);
        per_round.push(format!(
            "| {} | {} | {} / {} | {rt:.2}× | {} / {} | {cold:.2}× | {load} |",
            round + 1,
            if toolvisor_first {
                "toolvisor first"
            } else {
                "ipykernel first"
            },
            fmt_us(percentile(&tv_rt_r, 50)),
            fmt_us(percentile(&ip_rt_r, 50)),
            fmt_us(percentile(&tv_cold_r, 50)),
            fmt_us(percentile(&ip_cold_r, 50)),
        ));
        rt_ratios.push(rt);
        cold_ratios.push(cold);
        tv_rt.extend(tv_rt_r);
        tv_cold.extend(tv_cold_r);
        ip_rt.extend(ip_rt_r);
        ip_cold.extend(ip_cold_r);
    }
    let (tv_rt, tv_cold) = (sorted(tv_rt), sorted(tv_cold));
    let (ip_rt, ip_cold) = (sorted(ip_rt), sorted(ip_cold));
    let version = Command::new(&python)
        .args(["-c", "import sys, ipykernel, jupyter_client; print(sys.version.split()[0], ipykernel.__version__, jupyter_client.__version__)"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("python, ipykernel, jupyter_client: {version}; rounds: {rounds}\n");
    println!(
        "| round | order | `1+1` median, toolvisor / ipykernel | ratio | cold start median, toolvisor / ipykernel | ratio | load average |"
    );
    println!("|---|---|---|---|---|---|---|");
    for line in &per_round {
        println!("{line}");
    }
    println!();
    let load = common::loadavg();
    println!(
        "| figure | toolvisor | ipykernel + jupyter_client | ratio | median of round ratios (spread) | target | load average |"
    );
    println!("|---|---|---|---|---|---|---|");
    let row = |name: &str, a: f64, b: f64, target: &str| {
        let rounds = if name.contains("cold") {
            common::summary(&cold_ratios)
        } else if name.contains("median") {
            common::summary(&rt_ratios)
        } else {
            "—".to_string()
        };
        println!(
            "| {name} | {} | {} | {:.2}× | {rounds} | {target} | {load} |",
            fmt_us(a),
            fmt_us(b),
            a / b
        );
    };
    row(
        &format!("`1+1` round trip, median (n={})", tv_rt.len()),
        percentile(&tv_rt, 50),
        percentile(&ip_rt, 50),
        "≤ 1.0×",
    );
    row(
        "`1+1` round trip, p99",
        percentile(&tv_rt, 99),
        percentile(&ip_rt, 99),
        "—",
    );
    row(
        &format!("cold start to first result, median (n={})", tv_cold.len()),
        percentile(&tv_cold, 50),
        percentile(&ip_cold, 50),
        "≤ 1.0×",
    );
}

/// One round of toolvisor's side: [`COLD`] cold starts (a new conversation is a new kernel),
/// then [`WARM`] round trips on the warm kernel; (warm µs, cold µs).
fn toolvisor_round(c: &mut Client, round: usize) -> (Vec<f64>, Vec<f64>) {
    let mut cold = Vec::new();
    for i in 0..COLD {
        let t0 = Instant::now();
        let v = eval(c, &format!("cold-{round}-{i}"), "1+1");
        cold.push(t0.elapsed().as_secs_f64() * 1e6);
        assert_eq!(v["text"], "2\n");
        assert_eq!(v["kernel"]["fresh"], true);
    }
    let mut warm = Vec::new();
    for _ in 0..WARM {
        let t0 = Instant::now();
        let v = eval(c, "warm", "1+1");
        warm.push(t0.elapsed().as_secs_f64() * 1e6);
        assert_eq!(v["text"], "2\n");
    }
    (warm, cold)
}

/// One round of ipykernel's side, in a fresh Python process; (warm µs, cold µs).
fn ipykernel_round(python: &Path, dir: &Path) -> (Vec<f64>, Vec<f64>) {
    let out = Command::new(python)
        .args(["-c", IPYKERNEL_BENCH, &WARM.to_string(), &COLD.to_string()])
        .current_dir(dir)
        .output()
        .expect("run the jupyter_client benchmark");
    assert!(
        out.status.success(),
        "the jupyter_client benchmark failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ipy: Json = serde_json::from_slice(&out.stdout).expect("its JSON");
    let nums = |k: &str| -> Vec<f64> {
        ipy[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect()
    };
    (nums("rt_us"), nums("cold_us"))
}
