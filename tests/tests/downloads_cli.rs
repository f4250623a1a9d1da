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
