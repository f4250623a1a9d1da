//! The typed arguments and results of `ask_user` and `vibe_*` survive both codecs, and their
//! JSON spelling is what docs/TOOLS.md shows.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::tools::*;
use toolvisor_protocol::wire::QuestionOption;

fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, v).unwrap_or_else(|e| panic!("encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("decode {c}: {e}"));
        assert_eq!(&back, v, "round trip through {c}");
    }
}

fn info() -> VibeInfo {
    VibeInfo {
        worker_id: "w1".into(),
        label: "rename".into(),
        tier: VibeTier::Good,
        state: VibeState::Failed,
        elapsed_ms: 1234,
        attempts: 2,
        messages: 1,
        pid: None,
        exit_code: Some(3),
        signal: None,
        error: Some("the worker ended with exit code 3".into()),
        stderr_tail: Some("boom\n".into()),
        result: Some("summary 한국어 🦀".into()),
        result_chars: 14,
        result_truncated: false,
        timed_out: false,
        note: None,
    }
}

#[test]
fn human_tool_types_round_trip() {
    both(&AskUserArgs {
        question: "which?".into(),
        context: Some("ctx".into()),
        options: vec![QuestionOption {
            label: "a".into(),
            description: None,
        }],
        allow_free_text: Some(false),
        multi_select: true,
    });
    both(&AskUserOutput {
        question_id: 9,
        selected: vec!["a".into()],
        text: None,
        skipped: false,
        guidance: None,
    });
    for tier in [VibeTier::Fast, VibeTier::Good] {
        both(&VibeSpawnArgs {
            brief: "do it".into(),
            label: "l".into(),
            tier: Some(tier),
        });
    }
    both(&VibeSendArgs {
        worker_id: "w1".into(),
        message: "more".into(),
    });
    both(&VibeWaitArgs {
        worker_id: "w1".into(),
        timeout_seconds: Some(0),
    });
    both(&VibeKillArgs {
        worker_id: "w1".into(),
    });
    for state in [
        VibeState::Queued,
        VibeState::Running,
        VibeState::Done,
        VibeState::Failed,
        VibeState::Killed,
    ] {
        both(&VibeInfo { state, ..info() });
    }
}

#[test]
fn json_spelling_of_args_and_results() {
    let a: AskUserArgs = serde_json::from_value(json!({"question": "q?"})).unwrap();
    assert_eq!(
        (a.options.len(), a.allow_free_text, a.multi_select),
        (0, None, false),
        "options, allow_free_text and multi_select are optional"
    );
    let s: VibeSpawnArgs =
        serde_json::from_value(json!({"brief": "b", "label": "l", "tier": "good"})).unwrap();
    assert_eq!(s.tier, Some(VibeTier::Good));
    let v = serde_json::to_value(info()).unwrap();
    assert_eq!(v["state"], "failed");
    assert_eq!(v["tier"], "good");
    assert!(VibeState::Killed.is_final() && !VibeState::Queued.is_final());
}
