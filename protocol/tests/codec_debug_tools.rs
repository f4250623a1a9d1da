//! The typed arguments of `debug` survive both codecs, and their JSON spelling is what
//! docs/TOOLS.md shows.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::tools::{DebugArgs, DebugBreakpoint, DebugOp};

fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, v).unwrap_or_else(|e| panic!("encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("decode {c}: {e}"));
        assert_eq!(&back, v, "round trip through {c}");
    }
}

#[test]
fn debug_args_round_trip_and_read_like_the_docs() {
    both(&DebugArgs {
        op: DebugOp::StepOver,
        file: Some("src/한.py".into()),
        line: Some(12),
        lines: Some(vec![4, 9]),
        points: Some(vec![DebugBreakpoint {
            line: 5,
            condition: Some("i == 3".into()),
            hit_condition: Some("2".into()),
            log_message: Some("i={i}".into()),
        }]),
        functions: Some(vec!["f".into()]),
        exceptions: Some(vec!["raised".into()]),
        program: Some("prog.py".into()),
        args: Some(vec!["--n".into(), "3".into()]),
        adapter: Some("debugpy".into()),
        cwd: Some("sub".into()),
        env: Some([("K".to_string(), "v".to_string())].into()),
        module: Some("pkg.mod".into()),
        just_my_code: Some(false),
        port: Some(5678),
        pid: Some(4242),
        thread_id: Some(-1),
        frame_id: Some(2),
        reference: Some(7),
        expression: Some("n * 10".into()),
        name: Some("n".into()),
        value: Some("7".into()),
        offset: Some(0),
        limit: Some(100),
    });
    let parsed: DebugArgs =
        serde_json::from_value(json!({"op": "breakpoints", "file": "prog.py", "lines": [4, 9]}))
            .unwrap();
    assert_eq!(parsed.op, DebugOp::Breakpoints);
    assert_eq!(parsed.lines, Some(vec![4, 9]));
    assert!(parsed.program.is_none());
    let parsed: DebugArgs = serde_json::from_value(json!({"op": "breakpoints", "file": "p.py",
        "points": [{"line": 5, "condition": "i == 3"}, {"line": 7, "log_message": "i={i}"}]}))
    .unwrap();
    let points = parsed.points.unwrap();
    assert_eq!(points[0].condition.as_deref(), Some("i == 3"));
    assert_eq!(points[1].log_message.as_deref(), Some("i={i}"));
    assert!(points[1].hit_condition.is_none());
    for op in [
        "adapters",
        "status",
        "launch",
        "attach",
        "continue",
        "pause",
        "step_over",
        "step_in",
        "step_out",
        "threads",
        "stack",
        "scopes",
        "variables",
        "evaluate",
        "output",
        "terminate",
        "restart",
        "set_variable",
        "run_to",
        "watch",
    ] {
        let parsed: DebugArgs = serde_json::from_value(json!({ "op": op })).unwrap();
        both(&parsed);
    }
}
