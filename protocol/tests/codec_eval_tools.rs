//! The typed arguments of `eval` survive both codecs, and parse from the JSON a client sends.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::tools::{EvalArgs, EvalLanguage};

fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, v).unwrap_or_else(|e| panic!("encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("decode {c}: {e}"));
        assert_eq!(&back, v, "round trip through {c}");
    }
}

#[test]
fn eval_args_round_trip() {
    both(&EvalArgs {
        code: "x = 1\n%pip install six\nprint('한글')".into(),
        description: "install a package and print a word".into(),
        language: Some(EvalLanguage::Python),
        reset: Some(true),
        timeout_s: Some(30),
    });
    both(&EvalArgs {
        code: "await 1".into(),
        description: "await a value in javascript now".into(),
        language: Some(EvalLanguage::Javascript),
        reset: None,
        timeout_s: None,
    });
}

#[test]
fn eval_args_parse_from_client_json() {
    let a: EvalArgs =
        serde_json::from_value(json!({"code": "1+1", "description": "add one and one together"}))
            .unwrap();
    assert_eq!(a.language.unwrap_or_default(), EvalLanguage::Python);
    let a: EvalArgs = serde_json::from_value(
        json!({"code": "1", "description": "d", "language": "javascript", "timeout_s": 5}),
    )
    .unwrap();
    assert_eq!(a.language, Some(EvalLanguage::Javascript));
    assert!(
        serde_json::from_value::<EvalArgs>(
            json!({"code": "1", "description": "d", "language": "ruby"})
        )
        .is_err()
    );
}
