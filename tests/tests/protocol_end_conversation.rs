//! `end_conversation` ends only a conversation the connection made calls in: another
//! connection's is refused `not_found` and keeps running; its own ends, processes and all.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_tests::{TestDaemon, wait_for};

fn state(d: &TestDaemon) -> String {
    let v = d.ok("ends", "process", json!({"op": "list"}));
    v["processes"][0]["state"].as_str().unwrap().to_string()
}

#[test]
fn only_the_connection_that_called_in_a_conversation_can_end_it() {
    let d = TestDaemon::start("");
    let mut owner = d.client(Codec::Json, Tier::Exec, true);
    let reply = owner
        .call_with(
            "ends",
            "process",
            json!({"op": "start", "command": "sleep 600"}),
            |_| true,
        )
        .unwrap();
    assert!(
        matches!(reply.outcome, Outcome::Ok(_)),
        "{:?}",
        reply.outcome
    );

    let mut other = d.client(Codec::Bincode, Tier::Exec, true);
    let frame = ClientFrame::EndConversation {
        conversation: "ends".into(),
    };
    match other.request(&frame).unwrap() {
        DaemonFrame::Error(e) => {
            assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
            assert!(
                e.message
                    .contains("\"ends\" made no call on this connection"),
                "{e}"
            );
        }
        f => panic!("expected an error, got {f:?}"),
    }
    assert_eq!(state(&d), "running");

    owner.send(&frame).unwrap();
    drop(owner);
    wait_for(
        "the conversation's process to be killed",
        Duration::from_secs(10),
        || (state(&d) == "killed").then_some(()),
    );
}
