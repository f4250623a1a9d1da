//! Diagnostics on write: `write` and `edit` (the file tools) sync the written file through
//! pyright and fold in only the diagnostics new for this run — introduced → reported, moved
//! four lines down → not reported, fixed and reintroduced → reported, a second error of an old
//! message reported at its own line; a file no server covers
//! is written and the result says why there are no diagnostics.

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

fn new_of(v: &Value) -> Vec<String> {
    v["diagnostics"]["new"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics in {v}"))
        .iter()
        .map(|d| format!("{}:{}", d["line"], d["message"].as_str().unwrap()))
        .collect()
}

#[test]
fn write_and_edit_fold_in_new_diagnostics_only() {
    require("pyright-langserver");
    let p = project(&[("pyproject.toml", "")]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let bad = "value: int = missing_name\n";

    let v = ok_in(
        &d,
        w,
        "write",
        json!({"path": "m.py", "content": format!("import os\n{bad}")}),
    );
    let new = new_of(&v);
    assert!(
        new.iter()
            .any(|m| m.starts_with("2:") && m.contains("missing_name")),
        "{v}"
    );

    // Moved four lines down by an edit: the same diagnostic, not reported again.
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "m.py", "old_text": "import os\n", "new_text": "import os\n\n\n\n\n"}),
    );
    assert!(
        new_of(&v).iter().all(|m| !m.contains("missing_name")),
        "{v}"
    );

    // Fixed: nothing new. Reintroduced: new again.
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "m.py", "old_text": "missing_name", "new_text": "1"}),
    );
    assert!(new_of(&v).is_empty(), "{v}");
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "m.py", "old_text": "value: int = 1", "new_text": "value: int = missing_name"}),
    );
    assert!(new_of(&v).iter().any(|m| m.contains("missing_name")), "{v}");

    // No server for this file type: written, with the reason.
    let v = ok_in(
        &d,
        w,
        "write",
        json!({"path": "notes.md", "content": "# notes\n"}),
    );
    let notes = v["diagnostics"]["notes"].to_string();
    assert!(
        notes.contains("no language server covers this file type"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("notes.md")).unwrap(),
        "# notes\n"
    );
}

#[test]
fn a_second_error_with_the_same_message_as_an_old_one_is_new() {
    require("pyright-langserver");
    let p = project(&[("pyproject.toml", "")]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "write",
        json!({"path": "m.py", "content": "a: int = \"s\"\n"}),
    );
    let first = new_of(&v);
    assert_eq!(first.len(), 1, "{v}");
    assert!(first[0].starts_with("1:"), "{v}");
    // The same assignment error again, on another line: the same message, and news.
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "m.py", "old_text": "a: int = \"s\"\n", "new_text": "a: int = \"s\"\nb: int = \"s\"\n"}),
    );
    let new = new_of(&v);
    assert_eq!(new.len(), 1, "{v}");
    assert!(new[0].starts_with("2:"), "{v}");
    assert_eq!(new[0][2..], first[0][2..], "the same message: {v}");
    // Moved down together: nothing new.
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "m.py", "old_text": "a: int", "new_text": "\n\na: int"}),
    );
    assert!(new_of(&v).is_empty(), "{v}");
    // A third one added above the two: the new one is the added line, not the last one of
    // the message in the file (an old one moved down).
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "m.py", "old_text": "\n\na: int", "new_text": "c: int = \"s\"\n\n\na: int"}),
    );
    let new = new_of(&v);
    assert_eq!(new.len(), 1, "{v}");
    assert!(
        new[0].starts_with("1:"),
        "the added line, not a moved one: {v}"
    );
}
