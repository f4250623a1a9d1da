//! A bincode frame made of many small numbers and short strings decodes: bincode counts
//! every decoded integer at its full width (8 bytes for a one-byte varint) against its
//! allocation limit, so a limit sized to the payload alone refused legitimate frames — a
//! `process list` of a busy conversation came back to the client as "malformed bincode
//! payload: LimitExceeded" (found by the chaos runner).

use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::value::Value;
use toolvisor_protocol::wire::{Call, ClientFrame, DaemonFrame, Outcome};

/// A `process list` answer with `n` processes, each with the fields of a process's info.
fn process_list(n: u64) -> DaemonFrame {
    let processes: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            json!({
                "id": format!("p{i}"), "label": "seq", "command": "seq 3",
                "pid": null, "state": "exited", "exit_code": 0, "signal": null,
                "restarts": 0, "last_error": null, "uptime_ms": 3, "ttl_left_ms": 0,
                "output_bytes": 6,
            })
        })
        .collect();
    DaemonFrame::Result {
        id: 1,
        outcome: Outcome::Ok(Value(json!({ "processes": processes }))),
    }
}

#[test]
fn a_long_process_list_decodes_in_bincode() {
    for n in [1u64, 10, 100, 400, 1000, 5000] {
        let frame = process_list(n);
        let bytes = codec::encode(Codec::Bincode, &frame).unwrap();
        let back: DaemonFrame = codec::decode(Codec::Bincode, &bytes)
            .unwrap_or_else(|e| panic!("{n} processes ({} bytes): {e}", bytes.len()));
        assert_eq!(back, frame, "{n} processes");
    }
}

#[test]
fn arguments_of_many_small_numbers_decode_in_bincode() {
    for n in [10usize, 1000, 30_000, 200_000] {
        let frame = ClientFrame::Call(Call {
            id: 1,
            conversation: "c".into(),
            tool: "debug".into(),
            args: Value(json!({ "op": "breakpoints", "file": "a.py", "lines": vec![1; n] })),
        });
        let bytes = codec::encode(Codec::Bincode, &frame).unwrap();
        let back: ClientFrame = codec::decode(Codec::Bincode, &bytes)
            .unwrap_or_else(|e| panic!("{n} numbers ({} bytes): {e}", bytes.len()));
        assert_eq!(back, frame, "{n} numbers");
    }
}
