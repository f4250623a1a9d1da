//! The typed arguments of `lsp`, `lsp_rename`, `lsp_edit` and `synced_write` survive both codecs, and a
//! harness's plain JSON (optional fields left out) parses into them.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::json;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::tools::{
    LspArgs, LspEditArgs, LspEditOp, LspOp, LspRenameArgs, SyncedWriteArgs,
};

fn both<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &T) {
    for c in [Codec::Bincode, Codec::Json] {
        let bytes = codec::encode(c, v).unwrap_or_else(|e| panic!("encode {c}: {e}"));
        let back: T = codec::decode(c, &bytes).unwrap_or_else(|e| panic!("decode {c}: {e}"));
        assert_eq!(&back, v, "round trip through {c}");
    }
}

#[test]
fn lsp_tool_types_round_trip() {
    both(&LspArgs {
        op: LspOp::Definition,
        file: Some("app/한글.py".into()),
        line: Some(2),
        end_line: None,
        symbol: Some("make".into()),
        query: None,
        occurrence: Some(1),
        old_text: None,
        new_text: None,
        offset: None,
        depth: None,
    });
    both(&LspArgs {
        op: LspOp::CheckEdit,
        file: Some("a.py".into()),
        line: None,
        end_line: None,
        symbol: None,
        query: None,
        occurrence: None,
        old_text: Some("x = 1\n".into()),
        new_text: Some("x = '한글'\n".into()),
        offset: None,
        depth: None,
    });
    both(&LspArgs {
        op: LspOp::InlayHints,
        file: Some("src/lib.rs".into()),
        line: Some(3),
        end_line: Some(9),
        symbol: None,
        query: None,
        occurrence: None,
        old_text: None,
        new_text: None,
        offset: None,
        depth: None,
    });
    for op in [
        LspEditOp::ApplyCodeAction,
        LspEditOp::ReplaceSymbolBody,
        LspEditOp::InsertBeforeSymbol,
        LspEditOp::InsertAfterSymbol,
        LspEditOp::Format,
    ] {
        both(&LspEditArgs {
            op,
            file: Some("a.py".into()),
            symbol_path: Some("Greeter/greet".into()),
            text: Some("def greet(self):\n    pass\n".into()),
            index: Some(3),
        });
    }
    both(&LspRenameArgs {
        file: "main.c".into(),
        line: 4,
        symbol: "add".into(),
        new_name: "sum 🦀".into(),
        occurrence: None,
        dry_run: Some(true),
    });
    both(&SyncedWriteArgs {
        path: "m.py".into(),
    });
}

#[test]
fn plain_json_parses() {
    let a: LspArgs = serde_json::from_value(json!({"op": "status"})).unwrap();
    assert_eq!((a.op.as_str(), a.file, a.line), ("status", None, None));
    let r: LspRenameArgs =
        serde_json::from_value(json!({"file": "a.py", "line": 1, "symbol": "x", "new_name": "y"}))
            .unwrap();
    assert_eq!(r.occurrence, None);
}
