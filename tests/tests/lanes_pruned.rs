//! A long-lived daemon that sees many conversations come and go returns to its baseline:
//! once they are idle, no lane and no roster entry of theirs is left. The idle
//! windows are shortened through `[testing]`; `status` reports both counts.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Outcome, StatusReport, Tier};
use toolvisor_tests::{TestDaemon, wait_for};

const CONVERSATIONS: usize = 2000;
/// Calls sent before reading their results: at most `[limits] max_calls_in_flight` (16).
const BATCH: usize = 16;

fn status(c: &mut toolvisor_protocol::client::Client) -> StatusReport {
    match c.request(&ClientFrame::Status).expect("status") {
        DaemonFrame::Status(s) => s,
        other => panic!("expected status, got {other:?}"),
    }
}

#[test]
fn many_conversations_coming_and_going_leave_no_lanes_or_roster_entries() {
    let d = TestDaemon::start(
        "[testing]\nprobe_tools = true\nlane_idle_ms = 200\nconversation_idle_ms = 200\n",
    );
    let mut c = d.client(Codec::Bincode, Tier::Read, false);
    let baseline = status(&mut c);
    assert_eq!((baseline.lanes, baseline.conversations), (0, 0));
    let mut done = 0;
    for batch in 0..CONVERSATIONS / BATCH {
        for i in 0..BATCH {
            c.start_call(
                &format!("conv-{batch}-{i}"),
                "_probe_serial",
                json!({"tag": "t", "sleep_ms": 0}),
            )
            .unwrap();
        }
        let mut results = 0;
        while results < BATCH {
            match c.recv().unwrap() {
                DaemonFrame::Result {
                    outcome: Outcome::Ok(_),
                    ..
                } => results += 1,
                DaemonFrame::Result {
                    outcome: Outcome::Err(e),
                    ..
                } => panic!("probe failed: {e}"),
                _ => {}
            }
        }
        done += results;
    }
    assert_eq!(done, CONVERSATIONS);
    let after = wait_for(
        "every idle lane and roster entry to be pruned",
        Duration::from_secs(60),
        || {
            let s = status(&mut c);
            (s.lanes == 0 && s.conversations == 0).then_some(s)
        },
    );
    assert_eq!(
        (after.lanes, after.conversations),
        (baseline.lanes, baseline.conversations)
    );
    // The daemon still serves a conversation that comes back.
    let mut again = d.client(Codec::Bincode, Tier::Read, false);
    match again
        .call(
            "conv-0-0",
            "_probe_serial",
            json!({"tag": "back", "sleep_ms": 0}),
        )
        .unwrap()
        .outcome
    {
        Outcome::Ok(_) => {}
        Outcome::Err(e) => panic!("a returning conversation failed: {e}"),
    }
}
