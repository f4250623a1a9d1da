//! A frame whose arguments nest deeper than the protocol's limit gets an `error` frame in
//! both codecs; the connection and the daemon live on (one 8 KB bincode frame
//! nesting 4,000 lists overflowed a worker's stack and aborted the daemon).

use std::io::Write;

use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::value::MAX_DEPTH;
use toolvisor_protocol::wire::{Call, ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_protocol::{DEFAULT_MAX_FRAME, Value};
use toolvisor_tests::{TestDaemon, alive, err_of, ok_of};

/// Levels of nesting in the frame of the issue.
const ISSUE_DEPTH: usize = 4000;

/// The payload of a `bash` call whose `args` are `depth` nested lists, built byte by byte
/// (the encoder itself refuses such a value). bincode writes a `Value` as its variant index
/// (List = 6) and a list as its length, both varints: one level is the two bytes `6, 1`.
fn bincode_call(depth: usize) -> Vec<u8> {
    let template = ClientFrame::Call(Call {
        id: 7,
        conversation: "c".into(),
        tool: "bash".into(),
        args: Value(serde_json::Value::Null),
    });
    let mut payload = codec::encode(Codec::Bincode, &template).unwrap();
    assert_eq!(
        payload.pop(),
        Some(0),
        "a null Value is the variant index 0, last"
    );
    for _ in 0..depth - 1 {
        payload.extend_from_slice(&[6, 1]);
    }
    payload.extend_from_slice(&[6, 0]);
    payload
}

/// The same call in JSON: `depth` nested arrays.
fn json_call(depth: usize) -> Vec<u8> {
    format!(
        r#"{{"call": {{"id": 7, "conversation": "c", "tool": "bash", "args": {}{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

fn call_payload(codec: Codec, depth: usize) -> Vec<u8> {
    match codec {
        Codec::Bincode => bincode_call(depth),
        Codec::Json => json_call(depth),
    }
}

fn send_raw(c: &toolvisor_protocol::client::Client, payload: &[u8]) {
    let mut stream = c.raw().expect("clone the client's socket");
    stream
        .write_all(&(payload.len() as u32).to_be_bytes())
        .unwrap();
    stream.write_all(payload).unwrap();
}

#[test]
fn the_8_kb_frame_of_the_issue_gets_an_error_frame_in_both_codecs_and_the_daemon_lives_on() {
    let d = TestDaemon::start("");
    let pid = d.pid();
    for codec in [Codec::Bincode, Codec::Json] {
        let payload = call_payload(codec, ISSUE_DEPTH);
        assert!(
            (8000..=8200).contains(&payload.len()),
            "{codec}: the frame of the issue is about 8 KB, this one is {} bytes",
            payload.len()
        );
        assert!(payload.len() < DEFAULT_MAX_FRAME as usize);
        let mut c = d.client(codec, Tier::Exec, true);
        send_raw(&c, &payload);
        match c.recv().expect("an answer to the deep frame") {
            DaemonFrame::Error(e) => {
                assert_eq!(e.kind, ErrorKind::Protocol, "{e}");
                assert!(
                    e.message
                        .contains(&format!("deeper than {MAX_DEPTH} levels")),
                    "{codec}: the error names the limit: {e}"
                );
            }
            other => panic!("{codec}: expected an Error frame, got {other:?}"),
        }
        assert!(alive(pid), "{codec}: the daemon died on the deep frame");
        // The same connection still serves calls.
        let reply = c
            .call_with("c", "bash", json!({"command": "echo still here"}), |_| true)
            .unwrap();
        assert_eq!(ok_of(&reply)["stdout"], "still here\n", "{codec}");
    }
    // And a fresh connection too.
    assert_eq!(
        d.ok("c", "bash", json!({"command": "echo alive"}))["stdout"],
        "alive\n"
    );
}

#[test]
fn arguments_at_the_limit_are_decoded_and_one_level_more_is_refused() {
    let d = TestDaemon::start("");
    for codec in [Codec::Bincode, Codec::Json] {
        let mut c = d.client(codec, Tier::Exec, true);
        // At the limit the frame decodes: the call reaches the argument check, which names
        // the wrong type; it is a result of call 7, not a protocol error.
        send_raw(&c, &call_payload(codec, MAX_DEPTH));
        match c.recv().expect("an answer at the limit") {
            DaemonFrame::Result {
                id: 7,
                outcome: Outcome::Err(e),
            } => {
                assert_eq!(e.kind, ErrorKind::InvalidArgs, "{codec}: {e}");
                assert!(e.message.contains("must be a JSON object"), "{e}");
            }
            other => panic!("{codec}: expected the result of call 7, got {other:?}"),
        }
        // One level deeper the frame is refused, with the message of the limit.
        send_raw(&c, &call_payload(codec, MAX_DEPTH + 1));
        let e = match c.recv().expect("an answer past the limit") {
            DaemonFrame::Error(e) => e,
            // A JSON call whose id is still readable is answered as that call's result.
            DaemonFrame::Result {
                id: 7,
                outcome: Outcome::Err(e),
            } if codec == Codec::Json => e,
            other => panic!("{codec}: expected a refusal, got {other:?}"),
        };
        assert_eq!(e.kind, ErrorKind::Protocol, "{codec}: {e}");
        assert!(
            e.message
                .contains(&format!("deeper than {MAX_DEPTH} levels")),
            "{codec}: {e}"
        );
        let reply = c
            .call_with("c", "bash", json!({"command": "echo next"}), |_| true)
            .unwrap();
        assert_eq!(ok_of(&reply)["stdout"], "next\n", "{codec}");
        // Deep but allowed arguments inside an object reach the argument check too.
        let mut deep = json!("x");
        for _ in 0..MAX_DEPTH - 1 {
            deep = json!([deep]);
        }
        let reply = c.call("c", "bash", json!({"command": deep})).unwrap();
        assert_eq!(err_of(&reply).kind, ErrorKind::InvalidArgs, "{codec}");
    }
}
