//! Fuzzing the frame boundary: arbitrary bytes, mutated valid frames (the handshake's
//! `Hello` included) and values around the nesting limit, in both codecs. Nothing panics,
//! nothing recurses past the limit, and every valid frame round-trips.
//!
//! The case count is `TOOLVISOR_FUZZ_CASES` per property (a bounded default for CI); run
//! e.g. `TOOLVISOR_FUZZ_CASES=200000 cargo test --release -p toolvisor-protocol --test
//! codec_fuzz` for a longer search.

use proptest::prelude::*;
use toolvisor_protocol::codec::{self, Codec, CodecError};
use toolvisor_protocol::value::{MAX_DEPTH, Value, too_deep};
use toolvisor_protocol::wire::*;

fn cases(default: u32) -> u32 {
    std::env::var("TOOLVISOR_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        (-1e12f64..1e12).prop_map(serde_json::Value::from),
        ".{0,16}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A chain of `depth` arrays and objects (chosen by `shape`'s bits) around `leaf`.
fn chain(depth: usize, shape: u128, leaf: serde_json::Value) -> serde_json::Value {
    let mut v = leaf;
    for level in 0..depth {
        v = if (shape >> (level % 128)) & 1 == 0 {
            serde_json::Value::Array(vec![v])
        } else {
            let mut m = serde_json::Map::new();
            m.insert("k".into(), v);
            serde_json::Value::Object(m)
        };
    }
    v
}

fn depth_of(v: &serde_json::Value) -> usize {
    // Iterative, like everything that meets an untrusted depth. `d` counts the arrays and
    // objects around a value; a container adds one for itself, even when empty.
    let mut max = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            serde_json::Value::Array(items) => {
                max = max.max(d + 1);
                stack.extend(items.iter().map(|i| (i, d + 1)));
            }
            serde_json::Value::Object(map) => {
                max = max.max(d + 1);
                stack.extend(map.values().map(|i| (i, d + 1)));
            }
            _ => max = max.max(d),
        }
    }
    max
}

fn arb_surface() -> impl Strategy<Value = Surface> {
    (
        prop_oneof![Just(Tier::Read), Just(Tier::Write), Just(Tier::Exec)],
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(".{0,8}", 0..3),
    )
        .prop_map(|(max_tier, approvals, questions, bridge_tools)| Surface {
            max_tier,
            approvals,
            questions,
            bridge_tools,
        })
}

fn arb_client_frame() -> impl Strategy<Value = ClientFrame> {
    prop_oneof![
        (
            any::<u32>(),
            prop_oneof![Just(Codec::Bincode), Just(Codec::Json)],
            prop_oneof![
                Just(ClientKind::Harness),
                Just(ClientKind::Ops),
                Just(ClientKind::Operator)
            ],
            ".{0,12}",
            ".{0,24}",
            arb_surface(),
            prop::option::of(".{0,16}"),
        )
            .prop_map(
                |(protocol_version, codec, client_kind, run_id, workdir, surface, run_token)| {
                    ClientFrame::Hello(Hello {
                        protocol_version,
                        codec,
                        client_kind,
                        run_id,
                        workdir,
                        surface,
                        run_token,
                    })
                }
            ),
        (any::<u64>(), ".{0,12}", ".{0,12}", arb_json()).prop_map(
            |(id, conversation, tool, args)| ClientFrame::Call(Call {
                id,
                conversation,
                tool,
                args: Value(args),
            })
        ),
        any::<u64>().prop_map(|id| ClientFrame::Cancel { id }),
        (any::<u64>(), any::<bool>(), prop::option::of(".{0,12}")).prop_map(
            |(request_id, approved, reason)| ClientFrame::ApprovalAnswer(ApprovalAnswer {
                request_id,
                approved,
                reason,
            })
        ),
        (any::<u64>(), arb_json()).prop_map(|(bridge_id, v)| ClientFrame::BridgeResult {
            bridge_id,
            outcome: Outcome::Ok(Value(v)),
        }),
        any::<bool>().prop_map(|all| ClientFrame::ListTools { all }),
        Just(ClientFrame::Tree),
        Just(ClientFrame::Status),
        any::<u64>().prop_map(|nonce| ClientFrame::Ping { nonce }),
        ".{0,40}".prop_map(|conversation| ClientFrame::EndConversation { conversation }),
    ]
}

/// One way to damage a payload.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(prop::sample::Index, u8),
    Set(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Remove(prop::sample::Index, prop::sample::Index),
    Truncate(prop::sample::Index),
    Duplicate(prop::sample::Index, prop::sample::Index),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    // Bytes that mean something to bincode's varints (251..=253 announce wider integers).
    let special = prop_oneof![
        Just(0u8),
        Just(6),
        Just(7),
        Just(0xfb),
        Just(0xfc),
        Just(0xfd),
        Just(0xff),
        any::<u8>()
    ];
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<prop::sample::Index>(), special.clone()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (
            any::<prop::sample::Index>(),
            prop::collection::vec(special, 1..10)
        )
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(i, j)| Mutation::Remove(i, j)),
        any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(i, j)| Mutation::Duplicate(i, j)),
    ]
}

fn mutate(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match m {
        Mutation::Flip(i, b) => bytes[i.index(len)] ^= b,
        Mutation::Set(i, b) => bytes[i.index(len)] = *b,
        Mutation::Insert(i, b) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, b.iter().copied());
        }
        Mutation::Remove(i, j) => {
            let (a, b) = (i.index(len), j.index(len));
            bytes.drain(a.min(b)..a.max(b));
        }
        Mutation::Truncate(i) => bytes.truncate(i.index(len)),
        Mutation::Duplicate(i, j) => {
            let (a, b) = (i.index(len), j.index(len));
            let piece = bytes[a.min(b)..a.max(b)].to_vec();
            bytes.splice(a.max(b)..a.max(b), piece);
        }
    }
}

/// What the daemon does with a first frame (sniff its codec, decode a `ClientFrame`) and
/// with every later one, and what a client does with the daemon's frames.
fn decode_everything(bytes: &[u8]) {
    let _ = codec::decode::<ClientFrame>(Codec::sniff(bytes), bytes);
    for c in [Codec::Bincode, Codec::Json] {
        let _ = codec::decode::<ClientFrame>(c, bytes);
        let _ = codec::decode::<DaemonFrame>(c, bytes);
    }
    // And as a length-prefixed frame off a stream, under a small cap.
    let _ = codec::read_frame(&mut &bytes[..], 1 << 16);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2000), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_everything(&bytes);
    }

    #[test]
    fn valid_frames_round_trip_and_mutated_ones_never_panic(
        frame in arb_client_frame(),
        mutations in prop::collection::vec(arb_mutation(), 1..6),
    ) {
        for c in [Codec::Bincode, Codec::Json] {
            let bytes = codec::encode(c, &frame).unwrap();
            let back: ClientFrame = codec::decode(c, &bytes).unwrap();
            prop_assert_eq!(&back, &frame);
            if matches!(frame, ClientFrame::Hello(_)) {
                prop_assert_eq!(Codec::sniff(&bytes), c, "a Hello's codec is sniffed right");
            }
            let mut damaged = bytes.clone();
            for m in &mutations {
                mutate(&mut damaged, m);
                decode_everything(&damaged);
            }
        }
    }

    #[test]
    fn values_around_the_limit_are_kept_or_refused_alike_in_both_codecs(
        depth in 0usize..MAX_DEPTH + 40,
        shape in any::<u128>(),
        leaf in arb_json(),
    ) {
        let v = chain(depth, shape, leaf);
        let deep = depth_of(&v) > MAX_DEPTH;
        let frame = ClientFrame::Call(Call {
            id: 1,
            conversation: "c".into(),
            tool: "t".into(),
            args: Value(v.clone()),
        });
        for c in [Codec::Bincode, Codec::Json] {
            match codec::encode(c, &frame) {
                Ok(bytes) => {
                    prop_assert!(!deep, "{} encoded a value of depth {}", c, depth_of(&v));
                    let back: ClientFrame = codec::decode(c, &bytes).unwrap();
                    prop_assert_eq!(&back, &frame);
                }
                Err(CodecError::Encode { message, .. }) => {
                    prop_assert!(deep, "{}: {}", c, message);
                    prop_assert!(message.contains(&too_deep()), "{}: {}", c, message);
                }
                Err(e) => prop_assert!(false, "{}: {}", c, e),
            }
        }
        // The JSON text of a too-deep value, written by serde_json itself (it nests up to
        // its own limit on output), is refused by the decoder with the same message.
        if deep {
            let text = format!(
                r#"{{"call":{{"id":1,"conversation":"c","tool":"t","args":{}}}}}"#,
                serde_json::to_string(&v).unwrap()
            );
            match codec::decode::<ClientFrame>(Codec::Json, text.as_bytes()) {
                Err(CodecError::Malformed { message, .. }) => {
                    prop_assert!(message.contains(&too_deep()), "{}", message)
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
