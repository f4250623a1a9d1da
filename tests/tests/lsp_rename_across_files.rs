//! `lsp_rename` with real servers: pyright and clangd rename a symbol across files, every file
//! written, edit counts reported; clangd also answers definition and references across files
//! and offers a code action for a missing semicolon. A preview (`dry_run`) writes nothing and
//! asks no approval, and the real rename afterwards writes exactly the preview or is refused.

use serde_json::json;
use toolvisor_protocol::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{client_in, lsp_config, ok_in, project, require};

/// Call `tool` in the run `test-run`, answering approvals with `approve`; the outcome and the
/// summaries the user was asked to approve.
fn call_counting(
    d: &TestDaemon,
    w: &std::path::Path,
    tool: &str,
    args: serde_json::Value,
    approve: bool,
) -> (Outcome, Vec<String>) {
    let mut asked = Vec::new();
    let mut c = client_in(d, w, "test-run");
    let reply = c
        .call_with("c", tool, args, |req| {
            asked.push(req.summary.clone());
            approve
        })
        .expect("call");
    (reply.outcome, asked)
}

#[test]
fn pyright_previews_a_rename_and_the_rename_writes_exactly_the_preview() {
    require("pyright-langserver");
    let shapes = "class Box:\n    pass\n\n\ndef make() -> Box:\n    return Box()\n";
    let uses = "from shapes import Box\n\nb: Box = Box()\n";
    let p = project(&[
        ("pyproject.toml", ""),
        ("shapes.py", shapes),
        ("use.py", uses),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let rename = json!({"file": "use.py", "line": 3, "symbol": "Box", "occurrence": 1,
        "new_name": "Crate"});
    let mut preview = rename.clone();
    preview["dry_run"] = json!(true);

    // The preview: no approval asked, the whole edit listed, nothing written.
    let (out, asked) = call_counting(&d, w, "lsp_rename", preview.clone(), false);
    let Outcome::Ok(v) = out else {
        panic!("preview failed: {out:?}")
    };
    let v = v.0;
    assert!(asked.is_empty(), "a preview asked for approval: {asked:?}");
    assert_eq!(
        (&v["dry_run"], &v["written"], &v["edits"]),
        (&json!(true), &json!(false), &json!(6)),
        "{v}"
    );
    let text = v["text"].as_str().unwrap();
    // A line where only the name changes reads once, as it would read.
    assert!(text.contains("shapes.py:1: → class Crate:\n"), "{text}");
    assert!(!text.contains("shapes.py:1: class Box:"), "{text}");
    assert!(text.contains("use.py:3: → b: Crate = Crate()"), "{text}");
    assert_eq!(
        std::fs::read_to_string(w.join("shapes.py")).unwrap(),
        shapes
    );
    assert_eq!(std::fs::read_to_string(w.join("use.py")).unwrap(), uses);

    // A name that cannot be renamed is refused by prepareRename, naming why.
    let (out, _) = call_counting(
        &d,
        w,
        "lsp_rename",
        json!({"file": "shapes.py", "line": 2, "symbol": "pass", "new_name": "x", "dry_run": true}),
        false,
    );
    let Outcome::Err(e) = out else {
        panic!("renaming a keyword was previewed: {out:?}")
    };
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("cannot be renamed"), "{e}");

    // A file changed since the preview: the rename would differ from it, so it is refused
    // and nothing is written.
    let changed = format!("{uses}c = Box()\n");
    std::fs::write(w.join("use.py"), &changed).unwrap();
    let (out, asked) = call_counting(&d, w, "lsp_rename", rename.clone(), true);
    let Outcome::Err(e) = out else {
        panic!("a rename that differs from its preview was written: {out:?}")
    };
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(e.message.contains("differs from its preview"), "{e}");
    assert!(asked[0].contains("as previewed"), "{asked:?}");
    assert_eq!(std::fs::read_to_string(w.join("use.py")).unwrap(), changed);
    assert_eq!(
        std::fs::read_to_string(w.join("shapes.py")).unwrap(),
        shapes
    );

    // Previewed again, the rename writes exactly that; the approval says what it will do.
    let v = ok_in(&d, w, "lsp_rename", preview);
    assert_eq!(v["edits"], 7, "{v}");
    let (out, asked) = call_counting(&d, w, "lsp_rename", rename, true);
    assert!(matches!(out, Outcome::Ok(_)), "{out:?}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains("7 edits in 2 files, as previewed"),
        "{asked:?}"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("use.py")).unwrap(),
        "from shapes import Crate\n\nb: Crate = Crate()\nc = Crate()\n"
    );
}

#[test]
fn pyright_renames_a_class_in_every_file() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        (
            "shapes.py",
            "class Box:\n    pass\n\n\ndef make() -> Box:\n    return Box()\n",
        ),
        ("use.py", "from shapes import Box\n\nb: Box = Box()\n"),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp_rename",
        json!({"file": "use.py", "line": 3, "symbol": "Box", "occurrence": 1, "new_name": "Crate"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("renamed `Box` to `Crate`"), "{text}");
    assert_eq!(v["files"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["edits"], 6, "{v}");
    let shapes = std::fs::read_to_string(w.join("shapes.py")).unwrap();
    let uses = std::fs::read_to_string(w.join("use.py")).unwrap();
    assert_eq!(
        shapes,
        "class Crate:\n    pass\n\n\ndef make() -> Crate:\n    return Crate()\n"
    );
    assert_eq!(uses, "from shapes import Crate\n\nb: Crate = Crate()\n");
    // The server sees the renamed files: the new name resolves.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "use.py", "line": 3, "symbol": "Crate", "occurrence": 2}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("shapes.py:1: class Crate:"),
        "{v}"
    );
}

fn c_project() -> tempfile::TempDir {
    let p = project(&[
        ("util.h", "int add_numbers(int a, int b);\n"),
        (
            "util.c",
            "#include \"util.h\"\n\nint add_numbers(int a, int b) { return a + b; }\n",
        ),
        (
            "main.c",
            "#include \"util.h\"\n\nint main(void) {\n    /* 한글😀 */ int s = add_numbers(1, 2);\n    return add_numbers(s, 3);\n}\n",
        ),
        ("broken.c", "int f(void) {\n    return 1\n}\n"),
    ]);
    let dir = std::fs::canonicalize(p.path()).unwrap();
    let entries: Vec<_> = ["main.c", "util.c", "broken.c"]
        .iter()
        .map(|f| json!({"directory": dir.display().to_string(), "file": dir.join(f).display().to_string(), "arguments": ["cc", "-c", f]}))
        .collect();
    std::fs::write(
        dir.join("compile_commands.json"),
        serde_json::to_string_pretty(&entries).unwrap(),
    )
    .unwrap();
    p
}

#[test]
fn clangd_navigates_renames_and_offers_fixes_across_files() {
    require("clangd");
    let p = c_project();
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "main.c", "line": 4, "symbol": "add_numbers"}),
    );
    // clangd negotiates UTF-8 columns; the Korean and emoji before the symbol count in bytes.
    assert_eq!(v["server"]["position_encoding"], "utf-8", "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("util.h:1:") || text.contains("util.c:3:"),
        "{v}"
    );

    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "util.h", "line": 1, "symbol": "add_numbers"}),
    );
    let text = v["text"].as_str().unwrap();
    for want in ["main.c:4:", "main.c:5:", "util.h:1:", "util.c:3:"] {
        assert!(text.contains(want), "missing {want} in {text}");
    }

    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "code_actions", "file": "broken.c", "line": 2, "symbol": "return"}),
    );
    assert!(v["text"].as_str().unwrap().contains("insert ';'"), "{v}");

    let v = ok_in(
        &d,
        w,
        "lsp_rename",
        json!({"file": "main.c", "line": 4, "symbol": "add_numbers", "new_name": "sum_two"}),
    );
    assert_eq!(v["edits"], 4, "{v}");
    assert_eq!(v["files"].as_array().unwrap().len(), 3, "{v}");
    assert!(
        std::fs::read_to_string(w.join("util.h"))
            .unwrap()
            .contains("int sum_two(int a, int b);")
    );
    assert!(
        std::fs::read_to_string(w.join("util.c"))
            .unwrap()
            .contains("int sum_two(int a, int b) {")
    );
    let main = std::fs::read_to_string(w.join("main.c")).unwrap();
    assert_eq!(main.matches("sum_two").count(), 2, "{main}");
}
