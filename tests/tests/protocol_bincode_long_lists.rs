//! A bincode client reads a long `process list`: bincode counts every decoded integer at its
//! full width against its allocation limit, and a limit sized to the payload alone made a
//! busy conversation's list (a few hundred processes, tens of KB) arrive as "malformed
//! bincode payload: LimitExceeded" — found by the chaos runner (seed 20261201,
//! 30 minutes); `protocol/tests/codec_bincode_many_numbers.rs` pins the codec itself.

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::TestDaemon;

/// Processes started, listed every ten: the lists grow to about the result store's inline
/// bound (48,000 characters) and travel whole; the old limit refused them from about 200.
const PROCESSES: usize = 250;

#[test]
fn a_bincode_client_reads_a_list_of_hundreds_of_processes() {
    let d = TestDaemon::start("");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    for i in 1..=PROCESSES {
        let reply = c
            .call_with(
                "c",
                "process",
                json!({"op": "start", "command": "true", "label": "t"}),
                |_| true,
            )
            .unwrap_or_else(|e| panic!("start {i}: {e}"));
        assert!(
            matches!(reply.outcome, Outcome::Ok(_)),
            "start {i}: {:?}",
            reply.outcome
        );
        // List at every size on the way: each must arrive and decode.
        if i % 10 == 0 {
            let reply = c
                .call_with("c", "process", json!({"op": "list"}), |_| true)
                .unwrap_or_else(|e| panic!("the list of {i} processes did not decode: {e}"));
            let Outcome::Ok(v) = reply.outcome else {
                panic!("list of {i} failed: {:?}", reply.outcome)
            };
            let listed = v.0["processes"].as_array().map_or(0, Vec::len);
            assert!(
                listed == i || v.0.get("projected").is_some(),
                "every process is listed, or the list says it was projected: {listed} of {i}"
            );
        }
    }
}
