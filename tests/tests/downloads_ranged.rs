//! Large files over several connections (`[models] connections_per_file`) against the
//! loopback hub: a file is fetched as byte ranges, four at once, into one `.part` and
//! verified; a
//! daemon SIGKILL mid-transfer resumes every range where its synced bytes end (the range
//! map); a stalled range is asked for again alone while the others go on; a hub that ignores
//! ranges gets the file over one connection.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_tests::hf::{HfServer, pseudo_random, sha256_hex};
use toolvisor_tests::{TestDaemon, wait_for};

const REPO: &str = "tester/big-gguf";
const FILE: &str = "big-Q4_K_M.gguf";
/// 24 MiB: six ranges of 4 MiB (four per connection would be 1.5 MiB, below the 4 MiB a
/// range has at least).
const SIZE: usize = 24 << 20;
const RANGE: u64 = 4 << 20;
const RANGES: u64 = SIZE as u64 / RANGE;

fn hub_with_file() -> (HfServer, Vec<u8>) {
    let hub = HfServer::start(None);
    let mut bytes = pseudo_random(7, SIZE);
    bytes[..4].copy_from_slice(b"GGUF");
    hub.add_repo(REPO, vec![(FILE, bytes.clone(), true)], false);
    (hub, bytes)
}

fn config(hub: &HfServer, extra: &str) -> String {
    format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 3\nconnections_per_file = 4\nranged_min_bytes = 8388608\n{extra}\n",
        hub.url()
    )
}

fn start(hub: &HfServer, extra: &str) -> TestDaemon {
    TestDaemon::start(&config(hub, extra))
}

fn job(d: &TestDaemon, id: &str) -> Json {
    d.ok("c", "list_downloads", json!({"job_id": id}))["jobs"][0].clone()
}

fn wait_done(d: &TestDaemon, id: &str) -> Json {
    wait_for(
        &format!("download job {id} to be done"),
        Duration::from_secs(120),
        || {
            let j = job(d, id);
            if j["state"] == "failed" {
                panic!("job {id} failed: {j}\n{}", d.log_text());
            }
            (j["state"] == "done").then_some(j)
        },
    )
}

fn model_dir(d: &TestDaemon) -> PathBuf {
    toolvisor_tests::inference::main_snapshot(&d.state_dir().join("models"), REPO)
}

fn download(d: &TestDaemon) -> String {
    d.ok("c", "download_model", json!({"repo": REPO}))["job_id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn assert_in_place(d: &TestDaemon, bytes: &[u8]) {
    let dir = model_dir(d);
    let got = std::fs::read(dir.join(FILE)).unwrap();
    assert_eq!(got.len(), bytes.len());
    assert_eq!(sha256_hex(&got), sha256_hex(bytes));
    assert!(!dir.join(format!("{FILE}.part")).exists());
    assert!(!dir.join(format!("{FILE}.part.ranges")).exists());
}

#[test]
fn a_large_file_comes_as_ranges_four_at_once_into_one_verified_file() {
    let (hub, bytes) = hub_with_file();
    // Slow enough per connection that the ranges overlap in time.
    hub.set_rate(8 << 20);
    let d = start(&hub, "");
    let id = download(&d);
    let done = wait_done(&d, &id);
    assert_eq!(done["bytes_done"], SIZE as u64);
    assert_in_place(&d, &bytes);
    let mut starts = hub.starts(REPO, FILE);
    starts.sort();
    let expected: Vec<u64> = (0..RANGES).map(|i| i * RANGE).collect();
    assert_eq!(starts, expected, "one request per range");
    assert_eq!(hub.served(REPO, FILE), SIZE as u64, "every byte once");
}

#[test]
fn a_daemon_killed_mid_transfer_resumes_each_range_from_its_synced_bytes() {
    let (hub, bytes) = hub_with_file();
    hub.set_rate(1 << 20);
    let mut d = start(&hub, "");
    let id = download(&d);
    // Past two checkpoints (one a second), well before the end (4 × 1 MiB/s of 24 MiB).
    wait_for("half of the file", Duration::from_secs(60), || {
        (job(&d, &id)["bytes_done"].as_u64().unwrap() >= (SIZE / 2) as u64).then_some(())
    });
    d.kill_hard();
    let map_file = model_dir(&d).join(format!("{FILE}.part.ranges"));
    let map: Json = serde_json::from_slice(&std::fs::read(&map_file).unwrap()).unwrap();
    let done: Vec<u64> = map["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["done"].as_u64().unwrap())
        .collect();
    assert_eq!(done.len(), RANGES as usize, "{map}");
    let begun = done.iter().filter(|n| **n > 0).count();
    assert!(begun >= 4, "four ranges at once had synced bytes: {map}");
    assert!(done.iter().any(|n| *n < RANGE), "not all done yet: {map}");
    hub.set_rate(0);
    let cfg = std::fs::read_to_string(d.config_path()).unwrap();
    let cfg = cfg.split_once('\n').unwrap().1.to_string();
    d.spawn(&cfg);
    let finished = wait_done(&d, &id);
    assert_eq!(finished["bytes_done"], SIZE as u64);
    assert_in_place(&d, &bytes);
    // Each begun range asked again exactly where its synced bytes ended, never from its start;
    // one not begun or finished before, once.
    let starts = hub.starts(REPO, FILE);
    for (i, n) in done.iter().enumerate() {
        let start = i as u64 * RANGE;
        let asked = starts
            .iter()
            .filter(|s| **s >= start && **s < start + RANGE)
            .count();
        if *n == 0 || *n == RANGE {
            assert_eq!(asked, 1, "range {i} once: {starts:?}");
        } else {
            assert!(
                starts.contains(&(start + n)),
                "range {i} resumed at {}: {starts:?}",
                start + n
            );
            assert_eq!(asked, 2, "range {i} asked twice: {starts:?}");
        }
    }
    // What was fetched twice is at most what arrived after the last checkpoint.
    let again = hub.served(REPO, FILE) - SIZE as u64;
    assert!(again < (SIZE / 2) as u64, "{again} bytes fetched twice");
}

#[test]
fn a_stalled_range_is_asked_for_again_alone_while_the_others_finish() {
    let (hub, bytes) = hub_with_file();
    let stall = 3 * RANGE + 1_000_000;
    hub.stall_at(REPO, FILE, stall);
    let d = start(&hub, "stall_timeout_s = 2\n");
    let id = download(&d);
    let done = wait_done(&d, &id);
    assert_eq!(done["bytes_done"], SIZE as u64);
    assert_in_place(&d, &bytes);
    let mut starts = hub.starts(REPO, FILE);
    starts.sort();
    // Every range once, and the stalled one again from where its bytes stopped.
    assert_eq!(starts.len(), RANGES as usize + 1, "{starts:?}");
    assert_eq!(starts[..4], [0, RANGE, 2 * RANGE, 3 * RANGE]);
    assert!(
        starts[4] > 3 * RANGE && starts[4] <= stall,
        "the fourth range again, from its bytes: {starts:?}"
    );
    assert_eq!(starts[5], 4 * RANGE);
    assert!(
        d.log_text().contains("a range of a download failed"),
        "the stall is logged"
    );
    hub.release();
}

#[test]
fn a_hub_that_ignores_ranges_gets_the_file_over_one_connection() {
    let (hub, bytes) = hub_with_file();
    hub.ignore_ranges(REPO, FILE);
    let d = start(&hub, "");
    let id = download(&d);
    let done = wait_done(&d, &id);
    assert_eq!(done["bytes_done"], SIZE as u64);
    assert_in_place(&d, &bytes);
    assert!(
        d.log_text().contains("ignores byte ranges"),
        "the fallback is said"
    );
}
