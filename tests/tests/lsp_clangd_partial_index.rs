//! clangd with only `compile_flags.txt` indexes nothing in the background,
//! so `references` lists only what the files open in it show (here 1 file of 4 that call the
//! function), while the server is ready. The answer must say so: `complete: false`, the
//! reason and the fix (a `compile_commands.json`) in the text and as `partial_reason`. With a
//! `compile_commands.json`, the same question is answered in full and `complete: true`.

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const FILES: &[(&str, &str)] = &[
    ("util.h", "int scale(int x);\n"),
    (
        "util.c",
        "#include \"util.h\"\n\nint scale(int x) { return x * 3; }\n",
    ),
    (
        "a.c",
        "#include \"util.h\"\n\nint a(void) { return scale(1); }\n",
    ),
    (
        "b.c",
        "#include \"util.h\"\n\nint b(void) { return scale(2) + scale(3); }\n",
    ),
    (
        "main.c",
        "#include \"util.h\"\n\nint main(void) {\n    return scale(4);\n}\n",
    ),
];

fn references(d: &TestDaemon, w: &std::path::Path) -> Value {
    ok_in(
        d,
        w,
        "lsp",
        json!({"op": "references", "file": "main.c", "line": 4, "symbol": "scale"}),
    )
}

#[test]
fn clangd_without_a_compilation_database_marks_references_partial() {
    require("clangd");
    let mut files = FILES.to_vec();
    files.push(("compile_flags.txt", "-std=c11\n"));
    let p = project(&files);
    let d = TestDaemon::start(&lsp_config(""));
    let v = references(&d, p.path());
    assert_eq!(v["server"]["state"], "ready", "{v}");
    assert_eq!(v["complete"], false, "a partial list marked complete: {v}");
    let reason = v["partial_reason"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"));
    assert!(reason.contains("compile_commands.json"), "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("(partial: ") && text.contains("compile_commands.json"),
        "the text does not say the list is partial: {text}"
    );
}

#[test]
fn clangd_with_a_compilation_database_answers_in_full() {
    require("clangd");
    let p = project(FILES);
    let dir = std::fs::canonicalize(p.path()).unwrap();
    let entries: Vec<Value> = ["util.c", "a.c", "b.c", "main.c"]
        .iter()
        .map(|f| json!({"directory": dir.display().to_string(), "file": dir.join(f).display().to_string(), "arguments": ["cc", "-c", f]}))
        .collect();
    std::fs::write(
        dir.join("compile_commands.json"),
        serde_json::to_string(&entries).unwrap(),
    )
    .unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = references(&d, &dir);
    assert_eq!(v["complete"], true, "{v}");
    assert!(v.get("partial_reason").is_none(), "{v}");
    let text = v["text"].as_str().unwrap();
    for want in ["util.h:1:", "util.c:3:", "a.c:3:", "b.c:3:", "main.c:4:"] {
        assert!(text.contains(want), "missing {want} in {text}");
    }
    // Item 7: what clangd writes into the root (its background index) is said in `lsp status`.
    let v = ok_in(&d, &dir, "lsp", json!({"op": "status"}));
    assert_eq!(v["servers"][0]["writes"], json!([".cache/clangd/"]), "{v}");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("writes into its root: .cache/clangd/"),
        "{v}"
    );
}
