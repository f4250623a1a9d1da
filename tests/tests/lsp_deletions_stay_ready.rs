//! The agent's ordinary loop — write, edit, delete, ask again — must not leave pyright
//! waiting on work nothing will end. With files open in pyright, a deletion (outside the
//! daemon, or through `apply_patch`'s `*** Delete File` / `*** Move to`) and a file written,
//! edited and removed through the daemon's own tools each left every later `references`,
//! `diagnostics` and `completions` answering `not_ready` after 60 s for minutes, while
//! pyright idled: it kept its "N files to analyze" progress open for open documents it was
//! never asked to pull. Each case here must answer right at once, and the count must be what
//! a word count of the files finds.

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{call_in, enlist_package, lsp_config, ok_in, require, word_count};

const MODULES: usize = 30;

/// A package whose `core.enlist` is called from 30 modules.
fn package() -> tempfile::TempDir {
    enlist_package(MODULES, |i| {
        format!("from pkg.core import enlist\n\nX{i} = enlist(\"m{i}\")\n")
    })
}

/// Opens every module in pyright (a hover on each).
fn open_all(d: &TestDaemon, root: &Path) {
    for i in 0..MODULES {
        let file = format!("pkg/mod{i}.py");
        if root.join(&file).exists() {
            ok_in(
                d,
                root,
                "lsp",
                json!({"op": "hover", "file": file, "line": 3, "symbol": "enlist"}),
            );
        }
    }
}

/// `lsp` must answer (not `not_ready`): the value.
fn answers(d: &TestDaemon, root: &Path, args: Value) -> Value {
    match call_in(d, root, "lsp", args.clone()) {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!(
            "lsp {args} after the change: {e}\n--- daemon log (tail) ---\n{}",
            toolvisor_tests::lsp::tail(&d.log_text(), 60)
        ),
    }
}

/// `references`, `diagnostics` and `completions` all answer, and the reference count is the
/// word count of the files as they are now.
fn still_right(d: &TestDaemon, root: &Path, when: &str) {
    let want = word_count(root, "enlist", &["py"]);
    let v = answers(
        d,
        root,
        json!({"op": "references", "file": "pkg/core.py", "line": 1, "symbol": "enlist"}),
    );
    assert_eq!(
        v["total"].as_u64().unwrap() as usize,
        want,
        "{when}: references (rg counts {want}): {v}"
    );
    // (`complete` is false here only because the list shows 50 of them.)
    assert_eq!(v["readiness"], "ready", "{when}: {v}");
    answers(d, root, json!({"op": "diagnostics", "file": "pkg/mod1.py"}));
    answers(
        d,
        root,
        json!({"op": "completions", "file": "pkg/mod2.py", "line": 3, "symbol": "enl"}),
    );
}

#[test]
fn pyright_answers_at_once_after_an_open_file_is_deleted_outside_the_daemon() {
    require("pyright-langserver");
    let p = package();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    open_all(&d, &root);
    still_right(&d, &root, "before any change");
    std::fs::remove_file(root.join("pkg/mod7.py")).unwrap();
    still_right(&d, &root, "after `rm pkg/mod7.py`");
    // Putting it back is seen too.
    std::fs::write(
        root.join("pkg/mod7.py"),
        "from pkg.core import enlist\n\nX7 = enlist(\"m7\")\n",
    )
    .unwrap();
    still_right(&d, &root, "after the file is back");
}

#[test]
fn pyright_answers_at_once_after_a_file_is_written_edited_and_removed_through_the_daemon() {
    require("pyright-langserver");
    let p = package();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    open_all(&d, &root);
    ok_in(
        &d,
        &root,
        "write",
        json!({"path": "pkg/b.py", "content": "from pkg.core import enlist\n\nB = enlist(\"b\")\n"}),
    );
    still_right(&d, &root, "after `write pkg/b.py`");
    ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "pkg/b.py", "old_text": "B = enlist(\"b\")", "new_text": "B = enlist(\"b\")\nC = enlist(\"c\")"}),
    );
    still_right(&d, &root, "after `edit pkg/b.py`");
    let v = ok_in(&d, &root, "bash", json!({"command": "rm pkg/b.py"}));
    assert_eq!(v["exit_code"], 0, "{v}");
    still_right(&d, &root, "after `rm pkg/b.py`");
}

#[test]
fn pyright_answers_at_once_after_apply_patch_deletes_and_moves_open_files() {
    require("pyright-langserver");
    let p = package();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    open_all(&d, &root);
    let patch = "*** Begin Patch\n*** Delete File: pkg/mod3.py\n*** Update File: pkg/mod4.py\n*** Move to: pkg/moved4.py\n@@\n X4 = enlist(\"m4\")\n+Y4 = enlist(\"again\")\n*** End Patch\n";
    let v = ok_in(&d, &root, "apply_patch", json!({"patch": patch}));
    assert!(!root.join("pkg/mod3.py").exists(), "{v}");
    assert!(root.join("pkg/moved4.py").exists(), "{v}");
    still_right(&d, &root, "after the patch");
}
