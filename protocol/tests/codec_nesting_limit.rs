//! Both codecs stop at the same nesting limit, in both directions, without recursing past
//! it; hostile length prefixes cannot make bincode allocate beyond the payload's bound.

use serde_json::json;
use toolvisor_protocol::codec::{self, Codec, CodecError};
use toolvisor_protocol::value::{MAX_DEPTH, Value, too_deep};
use toolvisor_protocol::wire::{Call, ClientFrame, DaemonFrame, Outcome};

/// `depth` nested arrays around `leaf` (iterative: the test must not recurse either).
fn nest_arrays(depth: usize, leaf: serde_json::Value) -> serde_json::Value {
    let mut v = leaf;
    for _ in 0..depth {
        v = serde_json::Value::Array(vec![v]);
    }
    v
}

/// `depth` levels alternating objects and arrays.
fn nest_mixed(depth: usize) -> serde_json::Value {
    let mut v = json!("leaf");
    for level in 0..depth {
        v = if level % 2 == 0 {
            json!({ "k": v })
        } else {
            json!([1, v])
        };
    }
    v
}

/// The bincode payload of a `Call` whose args are `depth` nested lists, built by hand.
fn bincode_call(depth: usize) -> Vec<u8> {
    let mut payload = codec::encode(Codec::Bincode, &call(serde_json::Value::Null)).unwrap();
    assert_eq!(payload.pop(), Some(0));
    for _ in 0..depth.saturating_sub(1) {
        payload.extend_from_slice(&[6, 1]);
    }
    payload.extend_from_slice(&[6, 0]);
    payload
}

/// The bincode payload of a `Call` whose args are `depth` nested one-entry maps.
fn bincode_call_maps(depth: usize) -> Vec<u8> {
    let mut payload = codec::encode(Codec::Bincode, &call(serde_json::Value::Null)).unwrap();
    assert_eq!(payload.pop(), Some(0));
    for _ in 0..depth {
        // Map, one entry, key "k", then the value.
        payload.extend_from_slice(&[7, 1, 1, b'k']);
    }
    payload.push(0);
    payload
}

fn json_call(depth: usize) -> Vec<u8> {
    format!(
        r#"{{"call":{{"id":1,"conversation":"c","tool":"t","args":{}{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
    .into_bytes()
}

fn call(args: serde_json::Value) -> ClientFrame {
    ClientFrame::Call(Call {
        id: 1,
        conversation: "c".into(),
        tool: "t".into(),
        args: Value(args),
    })
}

/// Run `f` on a thread with half the stack of a tokio worker (2 MiB): a decoder that
/// recursed as deep as its input says would overflow it and abort the whole test binary,
/// while a value at the limit fits with room to spare even unoptimised.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn malformed_message(r: Result<ClientFrame, CodecError>) -> String {
    match r {
        Err(CodecError::Malformed { message, .. }) => message,
        other => panic!("expected a malformed-payload error, got {other:?}"),
    }
}

#[test]
fn a_value_at_the_limit_round_trips_in_both_codecs() {
    for v in [
        nest_arrays(MAX_DEPTH, json!(1)),
        nest_arrays(MAX_DEPTH - 1, json!({})),
        nest_mixed(MAX_DEPTH),
    ] {
        for c in [Codec::Bincode, Codec::Json] {
            let frame = call(v.clone());
            let bytes = codec::encode(c, &frame).unwrap_or_else(|e| panic!("{c}: {e}"));
            let back: ClientFrame = on_small_stack(move || codec::decode(c, &bytes).unwrap());
            assert_eq!(back, frame, "{c}");
            // Inside a result, whose envelope is deeper than a call's.
            let result = DaemonFrame::Result {
                id: 1,
                outcome: Outcome::Ok(Value(v.clone())),
            };
            let bytes = codec::encode(c, &result).unwrap();
            assert_eq!(codec::decode::<DaemonFrame>(c, &bytes).unwrap(), result);
        }
    }
}

#[test]
fn one_level_more_is_refused_with_the_same_message_in_both_codecs() {
    for c in [Codec::Bincode, Codec::Json] {
        for v in [
            nest_arrays(MAX_DEPTH + 1, json!(1)),
            nest_arrays(MAX_DEPTH, json!([])),
            nest_mixed(MAX_DEPTH + 1),
        ] {
            // The encoder refuses it, so the daemon never sends what a client cannot read.
            match codec::encode(c, &call(v)) {
                Err(CodecError::Encode { message, .. }) => {
                    assert!(message.contains(&too_deep()), "{c}: {message}")
                }
                other => panic!("{c}: expected an encode error, got {other:?}"),
            }
        }
    }
    for payload in [
        bincode_call(MAX_DEPTH + 1),
        bincode_call_maps(MAX_DEPTH + 1),
    ] {
        let message = malformed_message(codec::decode(Codec::Bincode, &payload));
        assert!(message.contains(&too_deep()), "{message}");
    }
    let message = malformed_message(codec::decode(Codec::Json, &json_call(MAX_DEPTH + 1)));
    assert!(message.contains(&too_deep()), "{message}");
    // The hand-built payloads are right: one level less decodes.
    for payload in [bincode_call(MAX_DEPTH), bincode_call_maps(MAX_DEPTH)] {
        codec::decode::<ClientFrame>(Codec::Bincode, &payload).unwrap();
    }
    codec::decode::<ClientFrame>(Codec::Json, &json_call(MAX_DEPTH)).unwrap();
}

#[test]
fn the_frame_of_the_issue_and_far_deeper_ones_fail_without_deep_recursion() {
    // 4,000 levels (an 8 KB frame) and a million, on a 1 MiB stack.
    for depth in [4000, 1_000_000] {
        let bin = bincode_call(depth);
        let json = json_call(depth);
        let (b, j) = on_small_stack(move || {
            (
                codec::decode::<ClientFrame>(Codec::Bincode, &bin),
                codec::decode::<ClientFrame>(Codec::Json, &json),
            )
        });
        assert!(malformed_message(b).contains(&too_deep()));
        assert!(malformed_message(j).contains(&too_deep()));
        let maps = bincode_call_maps(depth);
        let m = on_small_stack(move || codec::decode::<ClientFrame>(Codec::Bincode, &maps));
        assert!(malformed_message(m).contains(&too_deep()));
    }
}

#[test]
fn a_hostile_string_length_is_refused_before_it_is_allocated() {
    // A `Call` whose conversation claims 15 MiB in a 20-byte payload. bincode claims a
    // string's length against its limit before it allocates the bytes; the limit follows
    // the payload's size, so the claim fails (`LimitExceeded`) instead of allocating 15 MiB
    // and then finding the payload short (`UnexpectedEnd`).
    let claimed: u32 = 15 << 20;
    let mut payload = vec![1u8, 1]; // ClientFrame::Call, id 1
    payload.push(0xfc); // varint: a u32 follows, little-endian
    payload.extend_from_slice(&claimed.to_le_bytes());
    payload.extend_from_slice(b"0123456789abc");
    let message = malformed_message(codec::decode(Codec::Bincode, &payload));
    assert!(message.contains("LimitExceeded"), "{message}");
    // The bound itself: room for every claim a legitimate payload makes (integers count at
    // full width: up to eight times the payload), never more than sixteen times the payload
    // (at least 64 KiB).
    for len in [
        0usize,
        1,
        20,
        65_536,
        65_537,
        1 << 20,
        (1 << 20) + 1,
        16 << 20,
    ] {
        let limit = codec::bincode_limit(len);
        assert!(
            limit >= codec::CLAIM_FACTOR * len,
            "{len}: the limit must hold every claim of the payload"
        );
        assert!(limit <= (16 * len).max(1 << 16), "{len}: limit {limit}");
    }
    assert_eq!(
        codec::bincode_limit(toolvisor_protocol::DEFAULT_MAX_FRAME as usize),
        codec::CLAIM_FACTOR * toolvisor_protocol::DEFAULT_MAX_FRAME as usize
    );
    // A payload that uses most of its limit still decodes: 1 MiB of arguments.
    let big = call(json!({"text": "x".repeat(1 << 20)}));
    let bytes = codec::encode(Codec::Bincode, &big).unwrap();
    assert_eq!(
        codec::decode::<ClientFrame>(Codec::Bincode, &bytes).unwrap(),
        big
    );
}

fn tree_leaf() -> toolvisor_protocol::tree::TreeNode {
    toolvisor_protocol::tree::TreeNode {
        kind: "process".into(),
        id: "p".into(),
        pid: Some(1),
        state: toolvisor_protocol::tree::NodeState::Ready,
        uptime_ms: 1,
        ttl_left_ms: None,
        restarts: 0,
        mailbox: 0,
        rss_bytes: None,
        detail: String::new(),
        conversation: None,
        last_error: None,
        children: vec![],
    }
}

/// The bincode payload of a `Tree` frame whose root is a chain of `depth` nodes, built by
/// repeating one node's bytes (its children count last: 1, and 0 for the last node).
fn bincode_tree_chain(depth: usize) -> Vec<u8> {
    let leaf = codec::encode(Codec::Bincode, &tree_leaf()).unwrap();
    let frame = DaemonFrame::Tree(toolvisor_protocol::tree::TreeSnapshot {
        generation: 1,
        taken_at_ms: 2,
        root: tree_leaf(),
    });
    let whole = codec::encode(Codec::Bincode, &frame).unwrap();
    let header = &whole[..whole.len() - leaf.len()];
    let node = &leaf[..leaf.len() - 1];
    assert_eq!(
        leaf.last(),
        Some(&0),
        "a leaf ends with its empty children list"
    );
    let mut out = header.to_vec();
    for _ in 0..depth - 1 {
        out.extend_from_slice(node);
        out.push(1);
    }
    out.extend_from_slice(node);
    out.push(0);
    out
}

#[test]
fn a_tree_deeper_than_the_limit_is_refused_without_deep_recursion() {
    // A client decodes trees from the daemon; a tree node holds its children, so the same
    // limit guards that recursion.
    assert!(matches!(
        codec::decode::<DaemonFrame>(Codec::Bincode, &bincode_tree_chain(MAX_DEPTH)),
        Ok(DaemonFrame::Tree(_))
    ));
    for depth in [MAX_DEPTH + 1, 100_000] {
        let bytes = bincode_tree_chain(depth);
        let r = on_small_stack(move || codec::decode::<DaemonFrame>(Codec::Bincode, &bytes));
        match r {
            Err(CodecError::Malformed { message, .. }) => {
                assert!(message.contains("tree nests deeper than"), "{message}")
            }
            other => panic!("expected a malformed payload, got {other:?}"),
        }
    }
    // In JSON a node costs serde_json two of its 128 levels (an object and the children
    // array), so its own limit trips first; either way the frame is malformed, not a crash.
    let chain = |depth: usize| {
        let mut node = serde_json::to_value(tree_leaf()).unwrap();
        for _ in 1..depth {
            let mut parent = serde_json::to_value(tree_leaf()).unwrap();
            parent["children"] = json!([node]);
            node = parent;
        }
        json!({"tree": {"generation": 1, "taken_at_ms": 2, "root": node}}).to_string()
    };
    codec::decode::<DaemonFrame>(Codec::Json, chain(50).as_bytes()).unwrap();
    assert!(matches!(
        codec::decode::<DaemonFrame>(Codec::Json, chain(MAX_DEPTH + 1).as_bytes()),
        Err(CodecError::Malformed { .. })
    ));
    // The counter is per thread and given back: a normal tree decodes right after.
    let ok = codec::encode(
        Codec::Json,
        &DaemonFrame::Tree(toolvisor_protocol::tree::TreeSnapshot {
            generation: 1,
            taken_at_ms: 2,
            root: tree_leaf(),
        }),
    )
    .unwrap();
    codec::decode::<DaemonFrame>(Codec::Json, &ok).unwrap();
}
