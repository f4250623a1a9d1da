//! `lsp check_edit` against real servers on multi-file projects: the diagnostics a proposed
//! edit would bring, each marked new or not, with nothing written; afterwards the server is
//! back on the disk text (its diagnostics and hover answer for the disk, not the proposal).

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

const UTIL: &str = "def helper(x: int) -> int:\n    return x * 2\n";
const MAIN: &str = "from app.util import helper\n\n\ndef run() -> int:\n    return helper(3)\n";

#[test]
fn pyright_check_edit_reports_without_writing_and_restores_the_disk_text() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/util.py", UTIL),
        ("app/main.py", MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "check_edit", "file": "app/main.py",
               "old_text": "    return helper(3)\n", "new_text": "    return helper(\"three\")\n"}),
    );
    assert_eq!(v["new"], 1, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("app/main.py:5:19: error:") && text.contains("Literal['three']"),
        "{text}"
    );
    assert_eq!(v["diagnostics"][0]["new"], true, "{v}");
    assert_eq!(
        std::fs::read_to_string(w.join("app/main.py")).unwrap(),
        MAIN
    );

    // The server has the disk text again: no diagnostics, and hover shows the disk's call.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "app/main.py"}),
    );
    assert_eq!(v["diagnostics"], json!([]), "{v}");
    // A whole proposed file that changes the signature: hover afterwards is the disk's.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "check_edit", "file": "app/util.py",
               "new_text": "def helper(x: str) -> str:\n    return x * 2\n"}),
    );
    assert_eq!(v["new"], 0, "util.py itself stays clean: {v}");
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "app/main.py", "line": 5, "symbol": "helper"}),
    );
    let md = v["markdown"].as_str().unwrap();
    assert!(
        md.contains("(x: int) -> int"),
        "hover shows the disk's signature: {md}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "app/main.py"}),
    );
    assert_eq!(v["diagnostics"], json!([]), "{v}");

    // An edit that fixes something clears it; old_text must be there once.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "check_edit", "file": "app/main.py", "old_text": "nope", "new_text": "x"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
}

#[test]
fn clangd_check_edit_reports_a_missing_declaration_and_restores() {
    require("clangd");
    let main = "#include \"util.h\"\n\nint main(void) {\n    return add(1, 2);\n}\n";
    let p = project(&[
        ("compile_commands.json", "[]"),
        ("util.h", "int add(int a, int b);\n"),
        (
            "util.c",
            "#include \"util.h\"\n\nint add(int a, int b) {\n    return a + b;\n}\n",
        ),
        ("main.c", main),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "check_edit", "file": "main.c",
               "old_text": "add(1, 2)", "new_text": "sub(1, 2)"}),
    );
    assert!(v["new"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["text"].as_str().unwrap().contains("sub"), "{v}");
    assert_eq!(std::fs::read_to_string(w.join("main.c")).unwrap(), main);
    let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "main.c"}));
    assert_eq!(
        v["diagnostics"],
        json!([]),
        "the server is back on the disk text: {v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "main.c", "line": 4, "symbol": "add"}),
    );
    assert!(v["text"].as_str().unwrap().contains("util"), "{v}");
}

#[test]
fn typescript_check_edit_reports_and_restores() {
    require("typescript-language-server");
    let main = "import { helper } from \"./util\";\n\nexport const y: number = helper(1);\n";
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        (
            "src/util.ts",
            "export function helper(x: number): number {\n    return x * 2;\n}\n",
        ),
        ("src/main.ts", main),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "check_edit", "file": "src/main.ts",
               "old_text": "helper(1)", "new_text": "helper(\"one\")"}),
    );
    assert_eq!(v["new"], 1, "{v}");
    assert!(
        v["text"].as_str().unwrap().contains("src/main.ts:3:"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("src/main.ts")).unwrap(),
        main
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "src/main.ts"}),
    );
    assert_eq!(
        v["diagnostics"],
        json!([]),
        "the server is back on the disk text: {v}"
    );
}

#[test]
fn rust_analyzer_check_edit_reports_and_restores() {
    require("rust-analyzer");
    let lib = "pub mod util;\n\npub fn run() -> i32 {\n    util::helper(1)\n}\n";
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"chk\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        ("src/lib.rs", lib),
        (
            "src/util.rs",
            "pub fn helper(x: i32) -> i32 {\n    x * 2\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "check_edit", "file": "src/lib.rs",
               "old_text": "util::helper(1)", "new_text": "util::helper(1, 2)"}),
    );
    assert!(v["new"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["text"].as_str().unwrap().contains("src/lib.rs:4:"), "{v}");
    assert_eq!(std::fs::read_to_string(w.join("src/lib.rs")).unwrap(), lib);
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "src/lib.rs"}),
    );
    assert_eq!(
        v["diagnostics"],
        json!([]),
        "the server is back on the disk text: {v}"
    );
}
