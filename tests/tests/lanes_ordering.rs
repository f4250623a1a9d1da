//! Per-conversation lanes: calls to a tool that is not parallel-safe run one after another in
//! arrival order within a conversation; other conversations and parallel-safe tools overlap.

use std::collections::HashMap;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{DaemonFrame, Outcome, Tier};
use toolvisor_tests::TestDaemon;

fn span(v: &serde_json::Value) -> (u64, u64) {
    (
        v["start_us"].as_u64().unwrap(),
        v["end_us"].as_u64().unwrap(),
    )
}

#[test]
fn serial_calls_keep_order_per_conversation_and_others_overlap() {
    let d = TestDaemon::start("[testing]\nprobe_tools = true\n");
    let mut c = d.client(Codec::Bincode, Tier::Read, false);
    // Pipelined on one connection: a long call first (held until the test has seen b1 and p1
    // answered, or 60 s), then short ones behind it.
    let release_name = format!("toolvisor-lanes-{}-{}", std::process::id(), d.pid());
    let release = std::env::temp_dir().join(&release_name);
    let mut ids = HashMap::new();
    for (conv, tool, tag, ms) in [
        ("one", "_probe_serial", "a1", 0),
        ("one", "_probe_serial", "a2", 0),
        ("one", "_probe_serial", "a3", 50),
        ("two", "_probe_serial", "b1", 0),
        ("one", "_probe_parallel", "p1", 0),
    ] {
        let mut args = json!({"tag": tag, "sleep_ms": ms});
        if tag == "a1" {
            args["hold_until"] = json!(release_name);
        }
        let id = c.start_call(conv, tool, args).unwrap();
        ids.insert(id, tag);
    }
    let mut results = HashMap::new();
    let mut finished = Vec::new();
    while results.len() < ids.len() {
        match c.recv().unwrap() {
            DaemonFrame::Result {
                id,
                outcome: Outcome::Ok(v),
            } => {
                finished.push(ids[&id]);
                results.insert(ids[&id], v.0);
                if results.contains_key("b1") && results.contains_key("p1") {
                    std::fs::write(&release, "").unwrap();
                }
            }
            DaemonFrame::Result {
                outcome: Outcome::Err(e),
                ..
            } => panic!("probe failed: {e}"),
            _ => {}
        }
    }
    let _ = std::fs::remove_file(&release);
    let (a1, a2, a3) = (
        span(&results["a1"]),
        span(&results["a2"]),
        span(&results["a3"]),
    );
    assert!(
        a1.1 <= a2.0 && a2.1 <= a3.0,
        "conversation one ran out of order or overlapped: {a1:?} {a2:?} {a3:?}"
    );
    // b1 (another conversation) and p1 (parallel-safe) did not wait for a1.
    let pos = |t: &str| finished.iter().position(|f| *f == t).unwrap();
    assert!(
        pos("b1") < pos("a1"),
        "b1 waited behind another conversation: {finished:?}"
    );
    assert!(
        pos("p1") < pos("a1"),
        "a parallel-safe call waited in the lane: {finished:?}"
    );
}
