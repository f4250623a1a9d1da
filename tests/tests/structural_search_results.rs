//! `ast_grep` through the real daemon: `path:line:col` locations, captures, the exact total
//! with a `max_results` cut, and the answers to bad input (unknown language, a pattern that
//! does not parse, a directory of several languages, a missing path).

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;

fn err(d: &TestDaemon, tool: &str, args: Json) -> toolvisor_protocol::ToolError {
    match d.call("c", tool, args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("{tool} {args} should fail, got {}", v.0),
    }
}

#[test]
fn max_results_cuts_the_list_but_not_the_total() {
    let d = TestDaemon::start("");
    let src = d.dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for i in 0..3 {
        let body: String = (0..4)
            .map(|j| format!("    println!(\"{i} {{}}\", {j});\n"))
            .collect();
        std::fs::write(
            src.join(format!("f{i}.rs")),
            format!("fn f{i}() {{\n{body}}}\n"),
        )
        .unwrap();
    }
    std::fs::write(src.join("quiet.rs"), "fn q() {}\n").unwrap();
    // A path relative to the client's workdir (the temp dir), shown relative in results.
    let rel = src
        .strip_prefix(std::env::temp_dir())
        .unwrap()
        .to_path_buf();
    let v = d.ok(
        "c",
        "ast_grep",
        json!({"pattern": "println!($$$A)", "path": rel, "max_results": 5}),
    );
    assert_eq!(v["total"], 12, "{v:#}");
    assert_eq!(v["shown"], 5);
    assert_eq!(v["truncated"], true);
    assert_eq!(v["matches"].as_array().unwrap().len(), 5);
    assert_eq!(v["files_matched"], 3);
    assert_eq!(v["files_searched"], 4);
    assert_eq!(
        v["files_parsed"], 3,
        "quiet.rs lacks `println` and is not parsed"
    );
    assert_eq!(v["language"], "rust");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("showing the first 5")
    );
    // Ordered by path, then position.
    let first = &v["matches"][0];
    let f0 = rel.join("f0.rs").display().to_string();
    assert_eq!(first["location"], format!("{f0}:2:5"));
    assert_eq!(first["text"], "println!(\"0 {}\", 0)");
    assert_eq!(first["captures"]["A"], "\"0 {}\", 0");
    assert_eq!(
        v["matches"][4]["location"],
        format!("{}:2:5", rel.join("f1.rs").display())
    );

    let all = d.ok(
        "c",
        "ast_grep",
        json!({"pattern": "println!($$$A)", "path": src}),
    );
    assert_eq!(
        (
            all["total"].clone(),
            all["shown"].clone(),
            all["truncated"].clone()
        ),
        (json!(12), json!(12), json!(false))
    );
}

#[test]
fn bad_input_gets_a_clear_error() {
    let d = TestDaemon::start("");
    let dir = d.dir.path().join("mixed");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.py"), "print(1)\n").unwrap();
    std::fs::write(dir.join("b.js"), "print(1)\n").unwrap();

    let e = err(
        &d,
        "ast_grep",
        json!({"pattern": "print($A)", "path": dir, "language": "cobol"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message.contains("\"cobol\"")
            && e.message.contains("dart")
            && e.message.contains("python"),
        "{e}"
    );

    let e = err(&d, "ast_grep", json!({"pattern": "print($A)", "path": dir}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message.contains("`language` is required")
            && e.message.contains("javascript (1)")
            && e.message.contains("python (1)"),
        "{e}"
    );
    assert!(e.hint.contains("pass `language`"), "{e}");
    // With the language named, it works.
    let v = d.ok(
        "c",
        "ast_grep",
        json!({"pattern": "print($A)", "path": dir, "language": "py"}),
    );
    assert_eq!(v["total"], 1);

    let e = err(
        &d,
        "ast_grep",
        json!({"pattern": "def (", "path": dir.join("a.py")}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message.contains("does not parse as one python node") && e.message.contains("1:"),
        "{e}"
    );

    let e = err(
        &d,
        "ast_grep",
        json!({"pattern": "x", "path": d.dir.path().join("nope")}),
    );
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert!(e.message.contains("no such file or directory"), "{e}");

    // Only one language here: inferred, and said so.
    let py = d.dir.path().join("py");
    std::fs::create_dir_all(&py).unwrap();
    std::fs::write(py.join("m.py"), "print(2)\n").unwrap();
    let v = d.ok("c", "ast_grep", json!({"pattern": "print($A)", "path": py}));
    assert_eq!(v["language"], "python");
    assert!(
        v["language_note"].as_str().unwrap().contains("inferred"),
        "{v:#}"
    );
}

#[test]
fn dart_patterns_without_a_top_level_form_are_wrapped_and_say_so() {
    let d = TestDaemon::start("");
    let file = d.dir.path().join("w.dart");
    std::fs::write(
        &file,
        "void main() {\n  if (c != null) c.dispose();\n  if (c != null) d.dispose();\n}\n",
    )
    .unwrap();
    let v = d.ok(
        "c",
        "ast_grep",
        json!({"pattern": "if ($X != null) $X.dispose()", "path": file}),
    );
    assert_eq!(v["total"], 1, "{v:#}");
    assert_eq!(v["matches"][0]["captures"]["X"], "c");
    assert!(
        v["pattern_context"]
            .as_str()
            .unwrap()
            .contains("void __toolvisor()"),
        "{v:#}"
    );
}
