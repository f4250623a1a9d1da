//! `toolvisor downloads [--watch]`: an operator sees each job and its files with progress;
//! `--watch` follows a running job until it has ended.

use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::hf::HfServer;
use toolvisor_tests::{TestDaemon, bin, wait_for};

#[test]
fn downloads_lists_jobs_and_watch_follows_one_to_its_end() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard("tester/tiny-gguf", 800_000);
    // Slow enough that the watch starts before the job ends.
    hub.set_rate(400_000);
    let d = TestDaemon::start(&format!("[models]\nendpoint = {:?}\n", hub.url()));
    let sock = d.socket.display().to_string();
    let empty = Command::new(bin())
        .args(["downloads", "--socket", &sock])
        .output()
        .unwrap();
    assert!(empty.status.success());
    assert_eq!(String::from_utf8_lossy(&empty.stdout), "no download jobs\n");
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": "tester/tiny-gguf", "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let watch = Command::new(bin())
        .args(["downloads", "--watch", "--socket", &sock])
        .output()
        .unwrap();
    assert!(watch.status.success());
    let text = String::from_utf8_lossy(&watch.stdout);
    // Not a terminal: a table on every change, the last one with the job done.
    let last = text.rsplit_once(&format!("{id} ")).unwrap().1;
    assert!(
        last.starts_with("tester/tiny-gguf@main [Q4_K_M] done 100.0%"),
        "{text}"
    );
    for s in &shards {
        assert!(last.contains(s.as_str()), "{s} in {text}");
    }
    assert!(
        text.contains("downloading"),
        "the watch saw the job running: {text}"
    );
    let once = wait_for("the job listed as done", Duration::from_secs(10), || {
        let out = Command::new(bin())
            .args(["downloads", "--json", "--socket", &sock])
            .output()
            .unwrap();
        let jobs: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        (jobs[0]["state"] == "done").then_some(jobs)
    });
    assert_eq!(once[0]["job_id"], id.as_str());
}

/// Every rate `text` shows (`1.5 MiB/s`, `12 B/s`), in bytes per second.
fn rates(text: &str) -> Vec<f64> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',')
        .collect();
    words
        .windows(2)
        .filter_map(|w| {
            let unit = match w[1].trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '/')
            {
                "B/s" => 1.0,
                "KiB/s" => 1024.0,
                "MiB/s" => 1024.0 * 1024.0,
                "GiB/s" => 1024.0 * 1024.0 * 1024.0,
                "TiB/s" => 1024.0f64.powi(4),
                _ => return None,
            };
            // The number may follow an escape sequence of the terminal drawing.
            let digits = w[0]
                .rsplit(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()?;
            digits.parse::<f64>().ok().map(|n| n * unit)
        })
        .collect()
}

#[test]
fn a_resumed_job_on_a_terminal_shows_the_daemons_rate_never_a_burst_of_terabytes() {
    let hub = HfServer::start(None);
    let shards = hub.add_gguf_3shard("tester/tiny-gguf", 800_000);
    // 100 kB/s per connection, three at once: nothing can go faster than 300 kB/s.
    hub.set_rate(100_000);
    let mut d = TestDaemon::start(&format!("[models]\nendpoint = {:?}\n", hub.url()));
    let id = d.ok(
        "c",
        "download_model",
        json!({"repo": "tester/tiny-gguf", "variant": "Q4_K_M"}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for(
        "a third of the job on disk",
        Duration::from_secs(60),
        || {
            let j = d.ok("c", "list_downloads", json!({"job_id": id}))["jobs"][0].clone();
            (j["bytes_done"].as_u64()? >= 800_000).then_some(())
        },
    );
    d.kill_hard();
    let cfg = std::fs::read_to_string(d.config_path()).unwrap();
    d.spawn(cfg.split_once('\n').unwrap().1);
    // The watch on a terminal (script's pty): the resumed bar starts at the bytes on disk.
    let sock = d.socket.display().to_string();
    let watch = Command::new("script")
        .args(["-q", "-e", "-c"])
        .arg(format!(
            "{} downloads --watch --socket {sock}",
            bin().display()
        ))
        .arg("/dev/null")
        .env("TERM", "xterm")
        .output()
        .expect("run script(1)");
    assert!(watch.status.success(), "{watch:?}");
    let text = String::from_utf8_lossy(&watch.stdout);
    assert!(
        text.contains("done"),
        "the watch followed the job to its end: {text}"
    );
    let shown = rates(&text);
    assert!(
        !shown.is_empty(),
        "the watch showed a rate while the job ran: {text}"
    );
    let fastest = shown.iter().cloned().fold(0.0, f64::max);
    assert!(
        fastest < 10.0 * 300_000.0,
        "a rate of {fastest} B/s shown for a download throttled to 300 kB/s: {text}"
    );
    for s in &shards {
        assert!(text.contains(s.as_str()), "{s} in {text}");
    }
}

#[test]
fn jobs_are_listed_in_the_order_of_their_numbers() {
    let hub = HfServer::start(None);
    for i in 0..11 {
        hub.add_repo(
            &format!("tester/m{i}"),
            vec![("m-Q4_0.gguf", vec![i as u8; 1000], true)],
            false,
        );
    }
    let d = TestDaemon::start(&format!("[models]\nendpoint = {:?}\n", hub.url()));
    let ids: Vec<String> = (0..11)
        .map(|i| {
            d.ok(
                "c",
                "download_model",
                json!({"repo": format!("tester/m{i}")}),
            )["job_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids.last().unwrap(), "dl11");
    let listed: Vec<String> = d.ok("c", "list_downloads", json!({}))["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["job_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, ids, "list_downloads in id order");
    let out = Command::new(bin())
        .args(["downloads", "--socket", &d.socket.display().to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let shown: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("dl"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(shown, ids, "{text}");
}
