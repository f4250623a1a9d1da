//! The two ways a call runs and the two ways a frame leaves: a call that waits on
//! nothing ends on the connection's reader, one that waits goes on in its own task; a frame
//! is written straight to the socket while nothing is queued, and queued behind what is.
//! Whichever way, every call gets its one answer, frames arrive whole and in order, and a
//! handler that panics fails its call only.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::Value;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{Call, ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_tests::TestDaemon;

/// A handler that panicked left its call without an answer (the client waited for ever) and
/// its id taken; now the call fails `internal`, on either path, and the connection goes on.
#[test]
fn a_handler_that_panics_fails_its_call_and_the_connection_goes_on() {
    let d = TestDaemon::start("[testing]\nprobe_tools = true\n");
    for codec in [Codec::Bincode, Codec::Json] {
        let mut c = d.client(codec, Tier::Read, false);
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        // sleep 0: it panics in its first poll, on the reader; sleep 50: in its own task.
        for sleep_ms in [0, 50] {
            let id = c
                .start_call(
                    "conv",
                    "_probe_parallel",
                    json!({"tag": "boom", "sleep_ms": sleep_ms, "panic": true}),
                )
                .unwrap();
            let err = loop {
                match c.recv().expect("an answer to the panicking call") {
                    DaemonFrame::Result {
                        id: got,
                        outcome: Outcome::Err(e),
                    } if got == id => break e,
                    DaemonFrame::Result { id: got, outcome } if got == id => {
                        panic!("a panicking handler answered {outcome:?}")
                    }
                    _ => {}
                }
            };
            assert_eq!(err.kind, ErrorKind::Internal, "{err}");
            assert!(err.message.contains("panicked"), "{err}");
            // The same id is free again, and the connection still serves.
            c.send(&ClientFrame::Call(Call {
                id,
                conversation: "conv".into(),
                tool: "_probe_parallel".into(),
                args: Value(json!({"tag": "after", "sleep_ms": sleep_ms})),
            }))
            .unwrap();
            match c.recv().expect("an answer to the call after the panic") {
                DaemonFrame::Result {
                    id: got,
                    outcome: Outcome::Ok(v),
                } if got == id => assert_eq!(v.0["tag"], "after"),
                other => panic!("the call after the panic got {other:?}"),
            }
        }
    }
    assert!(
        d.log_text().contains("a tool's handler panicked"),
        "the panic is not in the daemon's log"
    );
}

/// Pipelined without reading: a tool list larger than the socket's buffer (written partly
/// straight, the rest queued), then calls that end at once and calls that wait, then pings.
/// Every frame arrives whole, each call answered once, the pings in the order sent and after
/// the tool list.
#[test]
fn pipelined_frames_arrive_whole_and_in_order_whichever_way_they_leave() {
    let d = TestDaemon::start("[testing]\nprobe_tools = true\n");
    let mut c = d.client(Codec::Bincode, Tier::Read, false);
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut calls = HashMap::new();
    for round in 0..20u64 {
        c.send(&ClientFrame::ListTools { all: true }).unwrap();
        for (i, ms) in [0u64, 30, 0, 0, 5].into_iter().enumerate() {
            let tag = format!("r{round}-{i}");
            let id = c
                .start_call(
                    "conv",
                    "_probe_parallel",
                    json!({"tag": tag, "sleep_ms": ms}),
                )
                .unwrap();
            calls.insert(id, tag);
        }
        c.send(&ClientFrame::Ping { nonce: round }).unwrap();
    }
    let (mut lists, mut pongs, mut answered) = (0u64, Vec::new(), HashMap::new());
    while answered.len() < calls.len() || pongs.len() < 20 {
        match c.recv().expect("a frame") {
            DaemonFrame::Tools { tools } => {
                assert!(tools.len() > 10, "a tool list came back cut");
                lists += 1;
            }
            DaemonFrame::Pong { nonce } => {
                assert!(
                    lists > nonce,
                    "pong {nonce} overtook the tool list sent before it"
                );
                pongs.push(nonce);
            }
            DaemonFrame::Result { id, outcome } => {
                let tag = calls.get(&id).expect("a result for a call not made");
                match outcome {
                    Outcome::Ok(v) => assert_eq!(&v.0["tag"], tag.as_str()),
                    Outcome::Err(e) => panic!("call {tag} failed: {e}"),
                }
                assert!(
                    answered.insert(id, ()).is_none(),
                    "call {tag} answered twice"
                );
            }
            other => panic!("unexpected frame {other:?}"),
        }
    }
    assert_eq!(lists, 20);
    assert_eq!(pongs, (0..20).collect::<Vec<_>>(), "pongs out of order");
}
