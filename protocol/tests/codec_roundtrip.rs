//! Every wire type survives a round trip through both codecs, and bad bytes are errors.

use proptest::prelude::*;
use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use toolvisor_protocol::codec::{self, Codec, CodecError};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::*;
use toolvisor_protocol::tree::{NodeState, TreeNode, TreeSnapshot};
use toolvisor_protocol::value::Value;
use toolvisor_protocol::wire::*;

fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, v).unwrap_or_else(|e| panic!("encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("decode {c}: {e}"));
        assert_eq!(&back, v, "round trip through {c}");
        let framed = codec::encode_frame(c, v, 1 << 20).unwrap();
        let payload = codec::read_frame(&mut framed.as_slice(), 1 << 20).unwrap();
        assert_eq!(payload, bytes);
    }
}

fn sample_value() -> Value {
    Value(json!({
        "s": "héllo 한국어 🦀", "n": -5, "u": u64::MAX, "f": 1.5, "b": true, "z": null,
        "list": [1, "two", [3], {"four": 4}], "empty": {}
    }))
}

fn err() -> ToolError {
    ToolError::new(
        ErrorKind::PolicyDenied,
        "tool `bash` is denied",
        "ask the operator",
    )
}

fn surface() -> Surface {
    Surface {
        max_tier: Tier::Write,
        approvals: true,
        questions: false,
        bridge_tools: vec!["read".into()],
    }
}

fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "bash".into(),
        description: "run a command".into(),
        tier: Tier::Exec,
        parallel_safe: true,
        requires_approval: true,
        resource: "processes".into(),
        schema: sample_value(),
        available: false,
        unavailable_reason: Some("not built".into()),
        destructive: true,
        idempotent: false,
        open_world: true,
        output_schema: Some(sample_value()),
        follow: Some(toolvisor_protocol::wire::JobFollow {
            id: "job_id".into(),
            poll: "list_downloads".into(),
            poll_args: sample_value(),
            stop: "cancel_download".into(),
            stop_args: sample_value(),
            entries: Some("jobs".into()),
            ended: vec!["done".into(), "failed".into()],
            ok: "done".into(),
        }),
        long_running: true,
    }
}

fn tree() -> TreeSnapshot {
    let leaf = TreeNode {
        kind: "process".into(),
        id: "p1".into(),
        pid: Some(42),
        state: NodeState::Backoff,
        uptime_ms: 10,
        ttl_left_ms: None,
        restarts: 3,
        mailbox: 1,
        rss_bytes: Some(1 << 20),
        detail: "sleep 1".into(),
        conversation: Some("c1".into()),
        last_error: Some("exit code 1".into()),
        children: vec![],
    };
    let mut root = leaf.clone();
    root.kind = "root".into();
    root.pid = None;
    root.state = NodeState::Ready;
    root.children = vec![leaf];
    TreeSnapshot {
        generation: 7,
        taken_at_ms: 1_700_000_000_000,
        root,
    }
}

#[test]
fn every_client_frame_round_trips() {
    let frames = vec![
        ClientFrame::Hello(Hello {
            protocol_version: 1,
            codec: Codec::Json,
            client_kind: ClientKind::Harness,
            run_id: "run".into(),
            workdir: "/tmp".into(),
            surface: surface(),
            run_token: Some("0123abcd".into()),
        }),
        ClientFrame::Call(Call {
            id: 9,
            conversation: "c".into(),
            tool: "bash".into(),
            args: sample_value(),
        }),
        ClientFrame::Cancel { id: 9 },
        ClientFrame::ApprovalAnswer(ApprovalAnswer {
            request_id: 1,
            approved: false,
            reason: None,
        }),
        ClientFrame::QuestionAnswer(QuestionAnswer {
            question_id: 2,
            selected: vec!["a".into()],
            text: Some("free".into()),
            skipped: false,
            no_person: None,
        }),
        ClientFrame::BridgeResult {
            bridge_id: 3,
            outcome: Outcome::Err(err()),
        },
        ClientFrame::ListTools { all: true },
        ClientFrame::Tree,
        ClientFrame::Subscribe { topic: Topic::Tree },
        ClientFrame::Unsubscribe { topic: Topic::Tree },
        ClientFrame::Status,
        ClientFrame::Ping { nonce: u64::MAX },
        ClientFrame::EndConversation {
            conversation: "mcp-1-ä".into(),
        },
    ];
    for f in &frames {
        both(f);
    }
}

#[test]
fn every_daemon_frame_round_trips() {
    let frames = vec![
        DaemonFrame::Welcome(Welcome {
            protocol_version: 1,
            daemon_version: "0.1.0".into(),
            daemon_pid: 1,
            session_id: 2,
            codec: Codec::Bincode,
            max_frame: 16,
            tools: vec![tool_info()],
        }),
        DaemonFrame::Refused(err()),
        DaemonFrame::Event {
            id: 1,
            event: Event::Progress {
                message: "half".into(),
                fraction: Some(0.5),
            },
        },
        DaemonFrame::Event {
            id: 1,
            event: Event::Output {
                stream: Stream::Stderr,
                text: "x".into(),
            },
        },
        DaemonFrame::Result {
            id: 1,
            outcome: Outcome::Ok(sample_value()),
        },
        DaemonFrame::Result {
            id: 1,
            outcome: Outcome::Err(err()),
        },
        DaemonFrame::ApprovalRequest(ApprovalRequest {
            request_id: 1,
            call_id: 2,
            conversation: "c".into(),
            tool: "write".into(),
            tier: Tier::Write,
            summary: "write a.txt".into(),
            args: sample_value(),
        }),
        DaemonFrame::Question(Question {
            question_id: 1,
            run_id: "r".into(),
            conversation: "c".into(),
            question: "which?".into(),
            context: None,
            options: vec![QuestionOption {
                label: "a".into(),
                description: Some("first".into()),
            }],
            allow_free_text: true,
            multi_select: false,
        }),
        DaemonFrame::BridgeCall(BridgeCall {
            bridge_id: 1,
            call_id: 2,
            conversation: "c".into(),
            tool: "read".into(),
            args: Value::null(),
        }),
        DaemonFrame::Tools {
            tools: vec![tool_info()],
        },
        DaemonFrame::Tree(tree()),
        DaemonFrame::TreeUpdate(tree()),
        DaemonFrame::Status(StatusReport {
            daemon_version: "0.1.0".into(),
            protocol_version: 1,
            pid: 3,
            uptime_ms: 4,
            socket: "/s".into(),
            state_dir: "/d".into(),
            config: "embedded defaults".into(),
            sessions: 1,
            conversations: 2,
            lanes: 1,
            resources: 3,
            rss_bytes: 4,
            calls_total: 5,
            calls_failed: 6,
        }),
        DaemonFrame::Pong { nonce: 0 },
        DaemonFrame::Error(err()),
    ];
    for f in &frames {
        both(f);
    }
}

#[test]
fn every_error_kind_round_trips() {
    use ErrorKind::*;
    for kind in [
        InvalidArgs,
        UnknownTool,
        NotAvailable,
        PolicyDenied,
        ApprovalDenied,
        SurfaceDenied,
        Timeout,
        Cancelled,
        ResourceFailed,
        NotReady,
        Busy,
        NotFound,
        OutOfScope,
        InvalidRef,
        Protocol,
        VersionMismatch,
        Refused,
        Io,
        NoHuman,
        KernelDied,
        Expired,
        Conflict,
        NetworkUnavailable,
        Internal,
    ] {
        both(&ToolError::new(kind, "m", "h"));
        let json = codec::encode(Codec::Json, &kind).unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            format!("\"{}\"", kind.as_str())
        );
    }
}

#[test]
fn tool_types_round_trip() {
    both(&BashArgs {
        command: "ls".into(),
        timeout_s: Some(3),
    });
    for op in [
        ProcessOp::Start,
        ProcessOp::List,
        ProcessOp::Read,
        ProcessOp::Write,
        ProcessOp::Kill,
        ProcessOp::Resize,
    ] {
        both(&ProcessArgs {
            op,
            command: Some("sleep 1".into()),
            label: None,
            restart: Some(RestartMode::OnFailure),
            ttl_s: Some(60),
            id: Some("p1".into()),
            offset: Some(0),
            limit: None,
            data: Some("x\n".into()),
            eof: Some(true),
            pty: Some(true),
            cols: Some(80),
            rows: None,
        });
    }
    for mode in [RestartMode::No, RestartMode::OnFailure, RestartMode::Always] {
        both(&mode);
    }
    for s in [
        NodeState::Starting,
        NodeState::Ready,
        NodeState::Busy,
        NodeState::Backoff,
        NodeState::Failed,
        NodeState::Stopping,
        NodeState::Exited,
    ] {
        both(&s);
    }
}

#[test]
fn a_hello_without_run_token_still_decodes_in_both_codecs() {
    // A bincode client built before `run_token` sends one field fewer.
    let old = FirstFrameV1::Hello(HelloV1 {
        protocol_version: 1,
        codec: Codec::Bincode,
        client_kind: ClientKind::Harness,
        run_id: "run".into(),
        workdir: "/tmp".into(),
        surface: surface(),
    });
    both(&old);
    let bytes = codec::encode(Codec::Bincode, &old).unwrap();
    assert!(codec::decode::<ClientFrame>(Codec::Bincode, &bytes).is_err());
    match decode_first(Codec::Bincode, &bytes).unwrap() {
        ClientFrame::Hello(h) => {
            assert_eq!(h.run_id, "run");
            assert_eq!(h.surface, surface());
            assert_eq!(h.run_token, None);
        }
        other => panic!("not a hello: {other:?}"),
    }
    // A current Hello with a token decodes as itself.
    let new = ClientFrame::Hello(Hello {
        protocol_version: 1,
        codec: Codec::Bincode,
        client_kind: ClientKind::Harness,
        run_id: "run".into(),
        workdir: "/tmp".into(),
        surface: surface(),
        run_token: Some("t".into()),
    });
    let bytes = codec::encode(Codec::Bincode, &new).unwrap();
    assert_eq!(decode_first(Codec::Bincode, &bytes).unwrap(), new);
    // Garbage is still an error.
    assert!(decode_first(Codec::Bincode, &[0xff, 0xff, 0xff]).is_err());
}

#[test]
fn json_frames_look_like_the_protocol_doc() {
    let call: ClientFrame = serde_json::from_str(
        r#"{"call":{"id":1,"conversation":"c1","tool":"bash","args":{"command":"echo hi"}}}"#,
    )
    .unwrap();
    assert!(matches!(call, ClientFrame::Call(Call { id: 1, .. })));
    // Optional and defaulted fields may be left out by a JSON client.
    let hello: ClientFrame = serde_json::from_str(
        r#"{"hello":{"protocol_version":1,"codec":"json","client_kind":"harness","surface":{"max_tier":"read"}}}"#,
    )
    .unwrap();
    match hello {
        ClientFrame::Hello(h) => {
            assert_eq!(h.surface.max_tier, Tier::Read);
            assert!(!h.surface.approvals);
            assert_eq!(h.run_token, None);
        }
        other => panic!("not a hello: {other:?}"),
    }
    let tree: ClientFrame = serde_json::from_str(r#""tree""#).unwrap();
    assert_eq!(tree, ClientFrame::Tree);
    assert_eq!(Codec::sniff(br#" {"hello":{}}"#), Codec::Json);
    assert_eq!(Codec::sniff(&[0, 1, 2]), Codec::Bincode);
}

#[test]
fn garbage_and_oversized_frames_are_errors_not_panics() {
    for c in [Codec::Bincode, Codec::Json] {
        for junk in [
            &b""[..],
            b"\xff\xff\xff\xff",
            b"{not json",
            b"\x00\x00",
            b"\x0b\xff",
        ] {
            assert!(
                codec::decode::<ClientFrame>(c, junk).is_err(),
                "{c} accepted {junk:?}"
            );
        }
    }
    // A bincode frame with trailing bytes is refused.
    let mut bytes = codec::encode(Codec::Bincode, &ClientFrame::Tree).unwrap();
    bytes.push(0);
    assert!(codec::decode::<ClientFrame>(Codec::Bincode, &bytes).is_err());
    // A header claiming more than the cap is refused before any allocation.
    let header = (17u32 << 20).to_be_bytes();
    assert!(matches!(
        codec::read_frame(&mut header.as_slice(), 16 << 20),
        Err(CodecError::Oversized { .. })
    ));
    // A frame cut short is Truncated; nothing at all is Closed.
    let mut cut = 10u32.to_be_bytes().to_vec();
    cut.extend_from_slice(b"abc");
    assert!(matches!(
        codec::read_frame(&mut cut.as_slice(), 100),
        Err(CodecError::Truncated { got: 3, want: 10 })
    ));
    assert!(matches!(
        codec::read_frame(&mut &b""[..], 100),
        Err(CodecError::Closed)
    ));
    // A hostile bincode length prefix cannot make the decoder allocate gigabytes.
    let hostile = [5u8, 0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    assert!(codec::decode::<ClientFrame>(Codec::Bincode, &hostile).is_err());
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        (-1e12f64..1e12).prop_map(serde_json::Value::from),
        ".*".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(".*", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_json_value_round_trips_in_both_codecs(v in arb_json()) {
        both(&Value(v));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = codec::decode::<ClientFrame>(Codec::Bincode, &bytes);
        let _ = codec::decode::<ClientFrame>(Codec::Json, &bytes);
    }
}
