//! Rewrite proposals: metavariables substituted (runs keep their text), nested matches left
//! to the outer replacement and counted, no-op rewrites not counted, a bounded diff preview.

use std::path::Path;

use toolvisor_structural::rewrite::{Proposal, preview, propose};
use toolvisor_structural::search::SearchRequest;

/// The file scope of a call made from `path`'s directory (or `path` when it is one).
fn scope_of(path: &Path) -> toolvisor_files::Scope {
    let root = if path.is_dir() {
        path
    } else {
        path.parent().unwrap()
    };
    toolvisor_files::Scope::new(root, &[], false).unwrap()
}

fn propose_in(path: &Path, pattern: &str, rewrite: &str, language: &str) -> Proposal {
    propose(
        &SearchRequest {
            pattern,
            language: Some(language),
            path,
            scope: &scope_of(path),
            max_results: 1000,
            prefilter: true,
            threads: 1,
            cancel: None,
            limits: Default::default(),
        },
        rewrite,
    )
    .unwrap_or_else(|e| panic!("{pattern}: {e}"))
}

#[test]
fn runs_keep_their_text_and_nested_matches_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.rs");
    std::fs::write(
        &file,
        "fn f() {\n    a.unwrap().b.unwrap();\n    g(1,   2);\n    g();\n}\n",
    )
    .unwrap();
    let p = propose_in(&file, "$A.unwrap()", "$A.expect(\"checked\")", "rust");
    assert_eq!((p.replacements, p.nested), (1, 1));
    assert_eq!(
        p.files[0].after,
        "fn f() {\n    a.unwrap().b.expect(\"checked\");\n    g(1,   2);\n    g();\n}\n"
    );
    let p = propose_in(&file, "g($$$ARGS)", "h($$$ARGS)", "rust");
    assert_eq!(p.replacements, 2);
    assert!(
        p.files[0].after.contains("h(1,   2);\n    h();"),
        "{}",
        p.files[0].after
    );
}

#[test]
fn the_seed_example_in_dart() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "a.dart",
            "void a() {\n  dispose(controller);\n  dispose(other);\n}\n",
        ),
        ("b.dart", "void b() {\n  dispose(x);\n}\n"),
        ("c.dart", "void c() {\n  keep(x);\n}\n"),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let p = propose_in(dir.path(), "dispose($X)", "$X.dispose()", "dart");
    assert_eq!((p.replacements, p.files.len()), (3, 2));
    assert_eq!(
        p.files[0].after,
        "void a() {\n  controller.dispose();\n  other.dispose();\n}\n"
    );
    let shown = preview(&p.files, dir.path(), 10_000);
    assert!(!shown.truncated);
    assert!(
        shown.diff.contains("--- a/a.dart\n+++ b/a.dart\n"),
        "{}",
        shown.diff
    );
    assert!(shown.diff.contains("\n-  dispose(controller);\n-  dispose(other);\n+  controller.dispose();\n+  other.dispose();\n"), "{}", shown.diff);
    let cut = preview(&p.files, dir.path(), 80);
    assert!(cut.truncated && cut.omitted_lines > 0);
    assert!(cut.diff.contains("preview cut here"), "{}", cut.diff);
}

#[test]
fn a_rewrite_that_changes_nothing_is_not_a_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.py");
    std::fs::write(&file, "f(1)\nf(2)\n").unwrap();
    let p = propose_in(&file, "f($A)", "f($A)", "python");
    assert_eq!((p.replacements, p.unchanged, p.files.len()), (0, 2, 0));
}

#[test]
fn multi_line_rewrites_follow_the_indentation() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.py");
    std::fs::write(&file, "def f():\n    if x:\n        go(x)\n").unwrap();
    let p = propose_in(&file, "go($A)", "if $A:\n    go($A)", "python");
    assert_eq!(
        p.files[0].after,
        "def f():\n    if x:\n        if x:\n            go(x)\n"
    );
}
