//! `lsp inlay_hints` against real servers: inferred types and parameter names shown in
//! their lines, for a range or the whole file (rust-analyzer, typescript-language-server,
//! clangd 14's own protocol); pyright has none and is `not_available` naming it. The
//! rust-analyzer test also covers its `signature_help`, `completions` and `type_hierarchy`
//! refusal, on the same server.

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

fn hints(v: &Value) -> Vec<String> {
    v["hints"]
        .as_array()
        .unwrap_or_else(|| panic!("no hints: {v}"))
        .iter()
        .map(|h| {
            format!(
                "{}:{}:{}",
                h["line"],
                h["kind"].as_str().unwrap(),
                h["label"].as_str().unwrap()
            )
        })
        .collect()
}

const RS_LIB: &str = "pub struct Counter {\n    pub count: u32,\n}\n\nimpl Counter {\n    /// Adds `by` to the count.\n    pub fn bump(&mut self, by: u32) -> u32 {\n        self.count += by;\n        self.count\n    }\n}\n\npub fn make(start: u32) -> Counter {\n    Counter { count: start }\n}\n\npub fn run() -> u32 {\n    let mut c = make(1);\n    c.bump(2)\n}\n";

#[test]
fn rust_analyzer_types_and_parameter_names_and_its_other_ops() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"hints\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        ("src/lib.rs", RS_LIB),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "inlay_hints", "file": "src/lib.rs", "line": 18, "end_line": 19}),
    );
    let got = hints(&v);
    for want in [
        "18:type:: Counter",
        "18:parameter:start:",
        "19:parameter:by:",
    ] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("18: let mut c⟨: Counter⟩ = make(⟨start: ⟩1);"),
        "{text}"
    );
    // The whole file: the same hints, and nothing outside the range asked before.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "inlay_hints", "file": "src/lib.rs"}),
    );
    assert!(hints(&v).contains(&"18:type:: Counter".to_string()), "{v}");
    assert_eq!(v["truncated"], 0, "{v}");
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "inlay_hints", "file": "src/lib.rs", "line": 1}),
    );
    assert_eq!(v["total"], 0, "{v}");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("no inlay hints in src/lib.rs:1"),
        "{v}"
    );
    // A range the wrong way round says so.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "inlay_hints", "file": "src/lib.rs", "line": 9, "end_line": 3}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("`end_line` 3 is before `line` 9"), "{e}");
    // Signature help, with its docs.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "signature_help", "file": "src/lib.rs", "line": 19, "symbol": "bump"}),
    );
    let sig = &v["signatures"][0];
    assert!(sig["label"].as_str().unwrap().contains("by: u32"), "{v}");
    assert!(
        sig["documentation"]
            .as_str()
            .unwrap()
            .contains("Adds `by` to the count."),
        "{v}"
    );
    // Completions of a typed prefix.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "src/lib.rs", "line": 19, "symbol": "c.bu"}),
    );
    let item = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"].as_str().unwrap().starts_with("bump"))
        .unwrap_or_else(|| panic!("no bump: {v}"));
    assert_eq!(item["kind"], "method", "{v}");
    assert!(item["detail"].as_str().unwrap().contains("u32"), "{v}");
    // No type hierarchy in rust-analyzer: refused naming it and the capability.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "type_hierarchy", "file": "src/lib.rs", "line": 1, "symbol": "Counter"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("rust-analyzer"), "{e}");
    assert!(e.message.contains("typeHierarchyProvider"), "{e}");
}

#[test]
fn typescript_parameter_names_and_variable_types() {
    require("typescript-language-server");
    let p = project(&[
        ("tsconfig.json", "{}\n"),
        (
            "src/util.ts",
            "export function area(width: number, height: number) {\n  return width * height;\n}\n",
        ),
        (
            "src/main.ts",
            "import { area } from \"./util\";\n\nexport const size = area(3, 4);\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "inlay_hints", "file": "src/main.ts"}),
    );
    let got = hints(&v);
    for want in [
        "3:parameter:width:",
        "3:parameter:height:",
        "3:type:: number",
    ] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
}

#[test]
fn clangd_parameter_names() {
    require("clangd");
    let p = project(&[
        ("compile_flags.txt", "-std=c++17\n"),
        (
            "main.cpp",
            "int scale(int factor, int offset) { return factor + offset; }\n\nint main() {\n    auto r = scale(2, 3);\n    return r;\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "inlay_hints", "file": "main.cpp", "line": 4}),
    );
    let got = hints(&v);
    for want in ["4:parameter:factor:", "4:parameter:offset:"] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("scale(⟨factor: ⟩2, ⟨offset: ⟩3)"),
        "{v}"
    );
}

#[test]
fn pyright_has_no_inlay_hints_and_says_so() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        (
            "main.py",
            "def f(a: int) -> int:\n    return a\n\n\nx = f(1)\n",
        ),
    ]);
    let e = err_in(
        &TestDaemon::start(&lsp_config("")),
        p.path(),
        "lsp",
        json!({"op": "inlay_hints", "file": "main.py"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("pyright"), "{e}");
    assert!(e.message.contains("inlayHintProvider"), "{e}");
}
