//! Memory given back after one big search: the daemon's RSS idle, right after one large
//! `ast_grep` and one large `grep` over a big tree, and through a minute of idleness after
//! them, against the goal "within 30 MiB of the idle baseline plus `[structural]
//! cache_bytes`". `cargo bench -p toolvisor --bench memory`.
//!
//! The tree is `TOOLVISOR_BENCH_CORPUS`, default `$CARGO_HOME/registry/src`; the idle wait
//! `TOOLVISOR_BENCH_IDLE_S` (default 60). Extra daemon configuration (TOML) may be given in
//! `TOOLVISOR_BENCH_CONFIG`, e.g. to compare settings.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;

fn corpus() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLVISOR_BENCH_CORPUS") {
        return PathBuf::from(p);
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    cargo_home.join("registry/src")
}

fn call(c: &mut Client, tool: &str, args: Json) -> (Duration, Json) {
    let started = Instant::now();
    let reply = c
        .call_with("bench", tool, args, |_| true)
        .unwrap_or_else(|e| panic!("{tool} call: {e}"));
    match reply.outcome {
        Outcome::Ok(v) => (started.elapsed(), v.0),
        Outcome::Err(e) => panic!("{tool} failed: {e}"),
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let root = corpus();
    let idle_s: u64 = std::env::var("TOOLVISOR_BENCH_IDLE_S")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut extra = std::env::var("TOOLVISOR_BENCH_CONFIG").unwrap_or_default();
    // eval work too, when the test venv's Python is there.
    let python =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps/venv/bin/python");
    let eval = python.exists();
    if eval {
        extra = format!(
            "{extra}\n[kernels]\npython = {:?}\n",
            python.display().to_string()
        );
    }
    let budget_kib: u64 = 32 * 1024; // `[structural] cache_bytes` default
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("toolvisor.sock");
    let mut daemon = common::start_daemon(dir.path(), &socket, &extra);
    common::wait_socket(&socket);
    let options = common::read_options(&root, "bench");
    let mut client = Client::connect(&socket, options).expect("connect");
    std::thread::sleep(Duration::from_secs(2));
    let pid = daemon.0.id();
    let idle = common::rss_kib(pid);
    println!(
        "corpus: {} ; load average: {}",
        root.display(),
        common::loadavg()
    );
    let (t_ast, v) = call(
        &mut client,
        "ast_grep",
        // No literal the prefilter could use (`+` is one character): every file is parsed.
        json!({"pattern": "$A + $B", "path": root, "language": "rust"}),
    );
    let after_ast = common::rss_kib(pid);
    println!(
        "ast_grep `$A + $B`: {:.1} s, {} files, {} matches; RSS {:.1} MiB",
        t_ast.as_secs_f64(),
        v["files_searched"],
        v["total"],
        mib(after_ast)
    );
    // A pattern found nowhere: the search reads every file of the tree.
    let (t_grep, _) = call(
        &mut client,
        "grep",
        json!({"pattern": "xyzzy_[0-9]+_plugh", "path": root, "max_results": 1000}),
    );
    let mut after = common::rss_kib(pid);
    println!(
        "grep `xyzzy_[0-9]+_plugh` (every file read): {:.1} s; RSS {:.1} MiB",
        t_grep.as_secs_f64(),
        mib(after)
    );
    if eval {
        // Cells whose output the daemon carries: 4 MB printed, and a large repr.
        let mut exec = common::client(&socket);
        let started = Instant::now();
        for code in [
            "print('x' * 4_000_000)",
            "list(range(300_000))",
            "import json; print(json.dumps({str(i): [i] * 10 for i in range(50_000)}))",
        ] {
            let reply = exec
                .call_with(
                    "bench",
                    "eval",
                    json!({"code": code, "language": "python", "description": "print a large output for the memory bench"}),
                    |_| true,
                )
                .expect("eval call");
            if let Outcome::Err(e) = reply.outcome {
                panic!("eval failed: {e}");
            }
        }
        after = common::rss_kib(pid);
        println!(
            "eval: 3 cells with large outputs: {:.1} s; RSS {:.1} MiB",
            started.elapsed().as_secs_f64(),
            mib(after)
        );
    } else {
        println!(
            "eval: skipped ({} missing: scripts/install-test-deps)",
            python.display()
        );
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    for s in [1, 5, 10, 20, 30, 45, 60, 90, 120] {
        if s > idle_s {
            break;
        }
        let at = started + Duration::from_secs(s);
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        samples.push((s, common::rss_kib(pid)));
    }
    let last = samples.last().map_or(after, |s| s.1);
    println!();
    println!("| figure | RSS |");
    println!("|---|---|");
    println!("| idle baseline | {:.1} MiB |", mib(idle));
    println!(
        "| right after the two searches{} | {:.1} MiB |",
        if eval { " and the eval cells" } else { "" },
        mib(after)
    );
    for (s, kib) in &samples {
        println!("| after {s} s idle | {:.1} MiB |", mib(*kib));
    }
    let goal = idle + budget_kib + 30 * 1024;
    println!(
        "| goal: baseline + budget (32 MiB) + 30 MiB | {:.1} MiB ({}) |",
        mib(goal),
        if last <= goal { "met" } else { "NOT met" }
    );
    if let Some((_, at_10)) = samples.iter().find(|(s, _)| *s == 10) {
        println!(
            "| goal: under 64 MiB 10 s after the last call | {:.1} MiB ({}) |",
            mib(*at_10),
            if *at_10 < 64 * 1024 { "met" } else { "NOT met" }
        );
    }
    println!("load average at the end: {}", common::loadavg());
    drop(client);
    daemon.stop();
}
