//! The typed arguments of `ast_grep`, `ast_edit` and `resolve` survive both codecs, and parse
//! from the JSON a client sends.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::tools::{AstEditArgs, AstGrepArgs, ResolveAction, ResolveArgs};

fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, v).unwrap_or_else(|e| panic!("encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("decode {c}: {e}"));
        assert_eq!(&back, v, "round trip through {c}");
    }
}

#[test]
fn structural_tool_types_round_trip() {
    both(&AstGrepArgs {
        pattern: "if ($X != null) $X.dispose()".into(),
        path: Some("lib/한글".into()),
        language: Some("dart".into()),
        max_results: Some(10),
    });
    both(&AstGrepArgs {
        pattern: "$A".into(),
        path: None,
        language: None,
        max_results: None,
    });
    both(&AstEditArgs {
        pattern: "dispose($X)".into(),
        rewrite: "$X.dispose()".into(),
        path: None,
        language: Some("dart".into()),
        max_results: Some(500),
    });
    for action in [ResolveAction::Accept, ResolveAction::Discard] {
        both(&ResolveArgs {
            edit_id: "edit_1".into(),
            action,
        });
    }
}

#[test]
fn structural_args_parse_from_client_json() {
    let a: AstGrepArgs = serde_json::from_value(json!({"pattern": "print($A)"})).unwrap();
    assert_eq!(a.max_results, None);
    let r: ResolveArgs =
        serde_json::from_value(json!({"edit_id": "edit_3", "action": "discard"})).unwrap();
    assert_eq!(r.action, ResolveAction::Discard);
    assert!(
        serde_json::from_value::<ResolveArgs>(json!({"edit_id": "e", "action": "apply"})).is_err()
    );
}
