//! Model download figures: throughput of a 1 GiB, 4-shard model from a loopback
//! Hugging Face-compatible server through toolvisor against `curl` fetching the same files
//! (4 in parallel, like `parallel_transfers = 4`) in the same run; bytes fetched again after
//! a daemon SIGKILL at 50%; daemon RSS during downloads of 256 MiB and 1 GiB. Then
//! one large file on one connection, toolvisor and `curl -o` alternating round by round on
//! the same file of the same server: the median of the per-round time ratios and their range.
//! Then one large file from a hub limiting each connection, four ranges at once
//! against `curl -o`'s one connection, alternating.
//! `cargo bench -p toolvisor --bench downloads` (needs `curl` and `openssl`; `TOOLVISOR_BENCH_GIB` sets the
//! big model's size in GiB, default 1; `TOOLVISOR_BENCH_ONE_MIB` the single file's size in
//! MiB, default 512; `TOOLVISOR_BENCH_ROUNDS` the rounds, default 7, at least 3;
//! `TOOLVISOR_BENCH_RANGED_MIB` (256) and `TOOLVISOR_BENCH_LIMIT_MIB` (32 MiB/s per
//! connection) the ranged part's; `TOOLVISOR_BENCH_DOWNLOADS=one` or `=ranged` runs only that
//! part).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::{Guard, call, client, loadavg, rss_kib, start_daemon, summary, wait_socket};

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_tests::hf::HfServer;

/// Poll the job every 20 ms until it is done; the highest daemon RSS seen meanwhile, and
/// a hook called with each listing (to stop at some point).
fn follow(c: &mut Client, id: &str, pid: u32, mut stop: impl FnMut(&Json) -> bool) -> (bool, u64) {
    let mut peak = 0;
    loop {
        let job = call(c, "list_downloads", json!({"job_id": id}))["jobs"][0].clone();
        peak = peak.max(rss_kib(pid));
        match job["state"].as_str() {
            Some("done") => return (true, peak),
            Some("failed" | "cancelled") => panic!("job {id}: {job}"),
            _ => {}
        }
        if stop(&job) {
            return (false, peak);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Run {
    _dir: tempfile::TempDir,
    socket: std::path::PathBuf,
    daemon: Guard,
    config: String,
}

fn daemon(hub: &HfServer, extra: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let config = format!(
        "[models]\nendpoint = {:?}\nparallel_transfers = 4\n{extra}",
        hub.url()
    );
    let daemon = start_daemon(dir.path(), &socket, &config);
    wait_socket(&socket);
    Run {
        _dir: dir,
        socket,
        daemon,
        config,
    }
}

/// One file on one connection, toolvisor and `curl -o` alternating round by round (each
/// round's order flipped), the same file from the same server: the ratio of their times.
fn one_connection(hub: &HfServer) {
    let mib: usize = std::env::var("TOOLVISOR_BENCH_ONE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(3);
    let name = "one-F16.gguf";
    eprintln!("generating the single file ({mib} MiB)...");
    hub.add_repo(
        "bench/one",
        vec![(name, toolvisor_tests::hf::pseudo_random(7, mib << 20), true)],
        false,
    );
    let run = daemon(hub, "connections_per_file = 1\n");
    let mut c = client(&run.socket);
    let model = run._dir.path().join("state/models/bench--one/main");
    let out = tempfile::tempdir().unwrap();
    let url = format!("{}/bench/one/resolve/main/{name}", hub.url());
    let toolvisor = |c: &mut Client| timed_job(c, "bench/one", &model);
    let curl = || curl_o(&out.path().join(name), &url);
    // curl does not check what it fetched; toolvisor hashes every byte. The same check after
    // curl, for a second comparison: `curl -o`, then `openssl dgst -sha256` of the file (SHA-NI
    // like toolvisor's hash; coreutils' sha256sum is three times slower here).
    let curl_sha = || {
        let t = Instant::now();
        curl();
        let out = Command::new("openssl")
            .args(["dgst", "-sha256"])
            .arg(out.path().join(name))
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl dgst failed");
        t.elapsed().as_secs_f64()
    };
    // One of each first, not counted: the page cache and the allocator settle.
    toolvisor(&mut c);
    curl();
    let (mut ratios, mut checked) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (tv, cu) = if round % 2 == 0 {
            let tv = toolvisor(&mut c);
            (tv, curl())
        } else {
            let cu = curl();
            (toolvisor(&mut c), cu)
        };
        let cs = curl_sha();
        ratios.push(tv / cu);
        checked.push(tv / cs);
        println!(
            "round {round}: toolvisor {tv:.3} s ({:.0} MiB/s), curl -o {cu:.3} s ({:.0} MiB/s), ratio {:.2}x; curl -o + openssl dgst {cs:.3} s, ratio {:.2}x; load {}",
            mib as f64 / tv,
            mib as f64 / cu,
            tv / cu,
            tv / cs,
            loadavg()
        );
    }
    println!(
        "one connection, {mib} MiB, {rounds} alternating rounds: toolvisor/curl time {}; toolvisor/(curl + openssl dgst) {}",
        summary(&ratios),
        summary(&checked)
    );
}

/// `curl -s -f -o file url` (the file removed before); the seconds it took.
fn curl_o(file: &std::path::Path, url: &str) -> f64 {
    let _ = std::fs::remove_file(file);
    let t = Instant::now();
    let status = Command::new("curl")
        .args(["-s", "-f", "-o"])
        .arg(file)
        .arg(url)
        .status()
        .expect("run curl");
    let s = t.elapsed().as_secs_f64();
    assert!(status.success(), "curl failed");
    s
}

/// Download a repo through the daemon until done (its model directory removed before); the
/// seconds it took.
fn timed_job(c: &mut Client, repo: &str, model: &std::path::Path) -> f64 {
    let _ = std::fs::remove_dir_all(model);
    let t = Instant::now();
    let id = call(c, "download_model", json!({"repo": repo}))["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    loop {
        let job = call(c, "list_downloads", json!({"job_id": id}))["jobs"][0].clone();
        match job["state"].as_str() {
            Some("done") => break,
            Some("failed" | "cancelled") => panic!("job {id}: {job}"),
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    t.elapsed().as_secs_f64()
}

/// One large file from a hub that limits each connection (like the HF CDN),
/// toolvisor with `connections_per_file = 4` against `curl -o` (one connection), alternating
/// round by round: the speed-up over one connection, and toolvisor's throughput against the
/// sum of four connections' limits.
fn ranged(hub: &HfServer) {
    let mib: usize = std::env::var("TOOLVISOR_BENCH_RANGED_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let limit_mib: u64 = std::env::var("TOOLVISOR_BENCH_LIMIT_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(3);
    let name = "ranged-F16.gguf";
    eprintln!("generating the ranged file ({mib} MiB)...");
    hub.add_repo(
        "bench/ranged",
        vec![(
            name,
            toolvisor_tests::hf::pseudo_random(11, mib << 20),
            true,
        )],
        false,
    );
    hub.set_rate(limit_mib << 20);
    let run = daemon(hub, "connections_per_file = 4\n");
    let mut c = client(&run.socket);
    let model = run._dir.path().join("state/models/bench--ranged/main");
    let out = tempfile::tempdir().unwrap();
    let url = format!("{}/bench/ranged/resolve/main/{name}", hub.url());
    let curl = || curl_o(&out.path().join(name), &url);
    let (mut speedups, mut of_sum) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (tv, cu) = if round % 2 == 0 {
            let tv = timed_job(&mut c, "bench/ranged", &model);
            (tv, curl())
        } else {
            let cu = curl();
            (timed_job(&mut c, "bench/ranged", &model), cu)
        };
        let sum = 4.0 * limit_mib as f64;
        speedups.push(cu / tv);
        of_sum.push(mib as f64 / tv / sum);
        println!(
            "round {round}: toolvisor (4 ranges) {tv:.2} s ({:.1} MiB/s), curl -o {cu:.2} s ({:.1} MiB/s), speed-up {:.2}x, {:.2} of 4 x {limit_mib} MiB/s; load {}",
            mib as f64 / tv,
            mib as f64 / cu,
            cu / tv,
            mib as f64 / tv / sum,
            loadavg()
        );
    }
    println!(
        "ranged, {mib} MiB, {limit_mib} MiB/s per connection, {rounds} alternating rounds: speed-up over curl's one connection {}; throughput / (4 x limit) {}",
        summary(&speedups),
        summary(&of_sum)
    );
    hub.set_rate(0);
}

fn main() {
    let only = std::env::var("TOOLVISOR_BENCH_DOWNLOADS").unwrap_or_default();
    if only == "ranged" {
        let hub = HfServer::start(None);
        ranged(&hub);
        return;
    }
    let hub_one = HfServer::start(None);
    one_connection(&hub_one);
    drop(hub_one);
    if only == "one" {
        return;
    }
    let hub_ranged = HfServer::start(None);
    ranged(&hub_ranged);
    drop(hub_ranged);
    let gib: u64 = std::env::var("TOOLVISOR_BENCH_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let hub = HfServer::start(None);
    let big = (gib << 30) as usize / 4;
    let small = big / 4;
    eprintln!("generating the models ({} MiB shards)...", big >> 20);
    let big_names = hub.add_gguf_split("bench/big", big, 4);
    let small_names = hub.add_gguf_split("bench/small", small, 4);
    let kill_names = hub.add_gguf_split("bench/kill", big, 4);
    let total = (big * 4) as u64;

    // curl, 4 files in parallel, to disk, in the same run.
    let out = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec![
        "-s".into(),
        "-f".into(),
        "-Z".into(),
        "--parallel-max".into(),
        "4".into(),
    ];
    for n in &big_names {
        args.push("-o".into());
        args.push(out.path().join(n).display().to_string());
        args.push(format!("{}/bench/big/resolve/main/{n}", hub.url()));
    }
    let t = Instant::now();
    let status = Command::new("curl").args(&args).status().expect("run curl");
    let curl_s = t.elapsed().as_secs_f64();
    assert!(status.success(), "curl failed");
    drop(out);

    // toolvisor: the same files, one job; RSS at idle and at peak.
    let run = daemon(&hub, "");
    let pid = run.daemon.0.id();
    let mut c = client(&run.socket);
    std::thread::sleep(Duration::from_secs(1));
    let idle = rss_kib(pid);
    let t = Instant::now();
    let id = call(
        &mut c,
        "download_model",
        json!({"repo": "bench/big", "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, peak_big) = follow(&mut c, &id, pid, |_| false);
    let tv_s = t.elapsed().as_secs_f64();
    let id = call(
        &mut c,
        "download_model",
        json!({"repo": "bench/small", "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, peak_small) = follow(&mut c, &id, pid, |_| false);
    drop(c);
    drop(run);

    // SIGKILL at 50%, restart, resume: bytes fetched again.
    let mut run = daemon(&hub, "");
    let mut c = client(&run.socket);
    let id = call(
        &mut c,
        "download_model",
        json!({"repo": "bench/kill", "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let pid = run.daemon.0.id();
    let (finished, _) = follow(&mut c, &id, pid, |j| {
        j["bytes_done"].as_u64().unwrap_or(0) >= total / 2
    });
    assert!(!finished, "the job ended before 50%");
    let _ = run.daemon.0.kill();
    let _ = run.daemon.0.wait();
    drop(c);
    let served_at_kill: u64 = kill_names.iter().map(|n| hub.served("bench/kill", n)).sum();
    let dir = run._dir.path().to_path_buf();
    // What the killed daemon had on disk: whole files and `.part` files.
    let model = dir.join("state/models/bench--kill/main");
    let on_disk: u64 = kill_names
        .iter()
        .map(|n| {
            std::fs::metadata(model.join(n))
                .or_else(|_| std::fs::metadata(model.join(format!("{n}.part"))))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum();
    std::fs::remove_file(&run.socket).ok();
    run.daemon = start_daemon(&dir, &run.socket, &run.config);
    wait_socket(&run.socket);
    let mut c = client(&run.socket);
    let pid = run.daemon.0.id();
    follow(&mut c, &id, pid, |_| false);
    let served: Vec<u64> = kill_names
        .iter()
        .map(|n| hub.served("bench/kill", n))
        .collect();
    let refetched = served.iter().sum::<u64>() - total;

    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "model: {} files, {:.0} MiB total, loopback server, parallel_transfers = 4",
        big_names.len(),
        mib(total)
    );
    println!(
        "throughput: toolvisor {:.0} MiB/s ({:.2} s), curl -Z {:.0} MiB/s ({:.2} s), ratio {:.2}x",
        mib(total) / tv_s,
        tv_s,
        mib(total) / curl_s,
        curl_s,
        curl_s / tv_s
    );
    let after: u64 = served.iter().sum::<u64>() - served_at_kill;
    println!(
        "SIGKILL at 50%: {:.1} MiB served before the kill, {:.1} MiB on disk; after the restart {:.2} MiB fetched = what the disk lacked + {} bytes",
        mib(served_at_kill),
        mib(on_disk),
        mib(after),
        after as i64 - (total - on_disk) as i64
    );
    println!(
        "  bytes served twice: {:.2} MiB ({:.2} MiB per file): sent before the kill but not on disk (socket buffers, the blocks in flight: at most 8 MiB per file)",
        mib(refetched),
        mib(refetched) / kill_names.len() as f64
    );
    println!(
        "daemon RSS: idle {idle} KiB, peak during {:.0} MiB {} KiB, during {:.0} MiB {} KiB",
        mib(total),
        peak_big,
        mib(total / 4),
        peak_small
    );
    let _ = small_names;
}
