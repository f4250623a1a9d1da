//! A variant is one model's file set: two models of a repo with the same quantisation label
//! are two variants, a file name picks exactly its own set, and the label they share is
//! refused, listing them.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::hf::{HfServer, pseudo_random};
use toolvisor_tests::{TestDaemon, wait_for};

const REPO: &str = "tester/two-models";

fn gguf(seed: u64) -> Vec<u8> {
    let mut b = pseudo_random(seed, 50_000);
    b[..4].copy_from_slice(b"GGUF");
    b
}

#[test]
fn two_models_with_one_label_are_two_variants_and_the_label_alone_is_refused() {
    let hub = HfServer::start(None);
    hub.add_repo(
        REPO,
        vec![
            ("alpha-Q4_K_M.gguf", gguf(1), true),
            ("beta-Q4_K_M.gguf", gguf(2), true),
        ],
        false,
    );
    hub.stall_at(REPO, "alpha-Q4_K_M.gguf", 1_000);
    let d = TestDaemon::start(&format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\nretries = 2\n",
        hub.url()
    ));
    let alpha = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "alpha-Q4_K_M.gguf"}),
    );
    wait_for("alpha's transfer to stall", Duration::from_secs(30), || {
        hub.stalled().then_some(())
    });
    // Beta while alpha downloads: its own job with its own file.
    let beta = d.ok(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "beta-Q4_K_M.gguf"}),
    );
    assert!(beta.get("already_running").is_none(), "{beta}");
    assert_ne!(beta["job_id"], alpha["job_id"]);
    assert_eq!(beta["files"].as_array().unwrap().len(), 1, "{beta}");
    assert_eq!(beta["files"][0]["name"], "beta-Q4_K_M.gguf");
    assert_eq!(alpha["files"].as_array().unwrap().len(), 1, "{alpha}");
    // The label both share names neither.
    let e = match d.call(
        "c",
        "download_model",
        json!({"repo": REPO, "variant": "Q4_K_M"}),
    ) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("Q4_K_M should be refused, got {}", v.0),
    };
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(
        e.message.contains("alpha-Q4_K_M.gguf") && e.message.contains("beta-Q4_K_M.gguf"),
        "{e}"
    );
    hub.release();
}
