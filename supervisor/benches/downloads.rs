//! Model download figures (issue 17): throughput of a 1 GiB, 4-shard model from a loopback
//! Hugging Face-compatible server through toolvisor against `curl` fetching the same files
//! (4 in parallel, like `parallel_transfers = 4`) in the same run; bytes fetched again after
//! a daemon SIGKILL at 50%; daemon RSS during downloads of 256 MiB and 1 GiB.
//! `cargo bench -p toolvisor --bench downloads` (needs `curl`; `TOOLVISOR_BENCH_GIB` sets the
//! big model's size in GiB, default 1).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::{Guard, call, client, rss_kib, start_daemon, wait_socket};

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

fn daemon(hub: &HfServer) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let config = format!(
        "[models]\nendpoint = {:?}\nparallel_transfers = 4\n",
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

fn main() {
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
    let run = daemon(&hub);
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
    let mut run = daemon(&hub);
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
        "  bytes served twice: {:.2} MiB ({:.2} MiB per file): sent before the kill but not on disk (socket buffers, the 1 MiB write buffer)",
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
