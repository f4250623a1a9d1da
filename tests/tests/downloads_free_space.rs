//! The free-space check of `download_model` counts the bytes the jobs already running still
//! have to write as taken: two jobs that do not fit together are not both accepted. The free
//! figure comes from `[testing] store_free_bytes`, so the sizes stay small.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::hf::{HfServer, pseudo_random, wait_download_done};
use toolvisor_tests::{TestDaemon, wait_for};

const SIZE: usize = 100_000;
const FREE: u64 = 120_000;

fn gguf(seed: u64) -> Vec<u8> {
    let mut b = pseudo_random(seed, SIZE);
    b[..4].copy_from_slice(b"GGUF");
    b
}

#[test]
fn a_second_job_that_does_not_fit_beside_a_running_one_is_refused_naming_both() {
    let hub = HfServer::start(None);
    hub.add_repo(
        "tester/alpha",
        vec![("alpha-Q8_0.gguf", gguf(1), true)],
        false,
    );
    hub.add_repo(
        "tester/beta",
        vec![("beta-Q8_0.gguf", gguf(2), true)],
        false,
    );
    hub.stall_at("tester/alpha", "alpha-Q8_0.gguf", 10_000);
    let d = TestDaemon::start(&format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 2\n[testing]\nstore_free_bytes = {FREE}\n",
        hub.url()
    ));
    let alpha = d.ok("c", "download_model", json!({"repo": "tester/alpha"}));
    let alpha_id = alpha["job_id"].as_str().unwrap().to_string();
    wait_for("alpha's transfer to stall", Duration::from_secs(30), || {
        hub.stalled().then_some(())
    });
    let e = match d.call("c", "download_model", json!({"repo": "tester/beta"})) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("beta should not fit beside alpha, got {}", v.0),
    };
    assert_eq!(e.kind, ErrorKind::Io, "{e}");
    for part in [
        format!("{SIZE} bytes still to fetch"),
        format!("{FREE} available"),
        "reserved".to_string(),
        alpha_id.clone(),
    ] {
        assert!(e.message.contains(&part), "{part:?} in {e}");
    }
    assert!(e.hint.contains("list_downloads"), "{e}");
    assert_eq!(hub.served("tester/beta", "beta-Q8_0.gguf"), 0);
    // Once alpha has its bytes, nothing is reserved: beta is accepted.
    hub.release();
    wait_download_done(&d, &alpha_id);
    let beta = d.ok("c", "download_model", json!({"repo": "tester/beta"}));
    wait_download_done(&d, beta["job_id"].as_str().unwrap());
}
