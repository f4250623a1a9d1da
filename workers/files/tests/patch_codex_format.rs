//! `apply_patch` with the `*** Begin Patch` format: add, delete, update with several
//! sections, move, end of file, files without a final newline, CRLF, unicode, each level of
//! the leniency ladder, detection inside a heredoc, and refusals that write nothing.

use std::path::Path;

use toolvisor_files::patch::{PatchResult, apply_patch};
use toolvisor_files::{ChangeStatus, Scope};
use toolvisor_protocol::ErrorKind;

fn setup(files: &[(&str, &str)]) -> (tempfile::TempDir, Scope) {
    let dir = tempfile::tempdir().unwrap();
    for (p, c) in files {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, c).unwrap();
    }
    let s = Scope::new(dir.path(), &[], false).unwrap();
    (dir, s)
}

fn body(d: &Path, p: &str) -> String {
    std::fs::read_to_string(d.join(p)).unwrap()
}

fn apply(s: &Scope, patch: &str) -> PatchResult {
    apply_patch(s, patch, None).unwrap_or_else(|e| panic!("{patch}\n---\n{e}"))
}

/// Every file under `d` with its content, to show that a refused patch wrote nothing.
fn snapshot(d: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![d.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push((
                    e.path().strip_prefix(d).unwrap().display().to_string(),
                    std::fs::read(e.path()).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

const PY: &str = "import os\n\nclass A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n\ndef main():\n    print(A().f())\n";

#[test]
fn add_delete_and_update_with_several_sections() {
    let (d, s) = setup(&[("pkg/a.py", PY), ("old.txt", "bye\nnow\n")]);
    let r = apply(
        &s,
        "*** Begin Patch\n*** Add File: pkg/new/b.py\n+def b():\n+\n+    return 'b'\n*** Delete File: old.txt\n*** Update File: pkg/a.py\n@@ class A:\n     def f(self):\n-        return 1\n+        return 10\n@@ def g(self):\n-        return 2\n+        return 20\n@@ def main():\n-    print(A().f())\n+    print(A().g())\n*** End Patch\n",
    );
    assert_eq!(
        body(d.path(), "pkg/new/b.py"),
        "def b():\n\n    return 'b'\n"
    );
    assert!(!d.path().join("old.txt").exists());
    assert_eq!(
        body(d.path(), "pkg/a.py"),
        PY.replace("return 1", "return 10")
            .replace("return 2", "return 20")
            .replace("A().f()", "A().g()")
    );
    let files: Vec<_> = r
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.status, f.hunks, f.added, f.removed))
        .collect();
    assert_eq!(
        files,
        [
            ("pkg/new/b.py", ChangeStatus::Created, 1, 3, 0),
            ("old.txt", ChangeStatus::Deleted, 1, 0, 2),
            ("pkg/a.py", ChangeStatus::Modified, 3, 3, 3),
        ]
    );
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn move_to_writes_the_new_path_and_removes_the_old() {
    let (d, s) = setup(&[("src/old.rs", "fn run() {\n    let a = 1;\n}\n")]);
    let r = apply(
        &s,
        "*** Begin Patch\n*** Update File: src/old.rs\n*** Move to: src/bin/new.rs\n@@ fn run() {\n-    let a = 1;\n+    let a = 2;\n*** End Patch",
    );
    assert!(!d.path().join("src/old.rs").exists());
    assert_eq!(
        body(d.path(), "src/bin/new.rs"),
        "fn run() {\n    let a = 2;\n}\n"
    );
    let moved = r.files.iter().find(|f| f.path == "src/bin/new.rs").unwrap();
    assert_eq!(moved.moved_from.as_deref(), Some("src/old.rs"));
    assert_eq!(moved.status, ChangeStatus::Created);
    assert!(
        r.files
            .iter()
            .any(|f| f.path == "src/old.rs" && f.status == ChangeStatus::Deleted)
    );

    // A pure rename has no sections.
    let (d, s) = setup(&[("a.txt", "x\n")]);
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b.txt\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "b.txt"), "x\n");
    assert!(!d.path().join("a.txt").exists());
}

#[test]
fn end_of_file_sections_apply_at_the_end() {
    // The same lines occur twice; `*** End of File` picks the last ones.
    let (d, s) = setup(&[("a.txt", "x\ny\nmid\nx\ny\n")]);
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n x\n-y\n+Y\n*** End of File\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "x\ny\nmid\nx\nY\n");
}

#[test]
fn a_file_without_a_final_newline_keeps_it_that_way() {
    let (d, s) = setup(&[("a.txt", "one\ntwo\nthree")]);
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n two\n-three\n+THREE\n*** End of File\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "one\ntwo\nTHREE");

    // Lines added after the last line: the old last line gets its ending, the file still has none.
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n THREE\n+four\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "one\ntwo\nTHREE\nfour");

    // Removing the last line: the new last line has no ending either.
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n THREE\n-four\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "one\ntwo\nTHREE");

    // A section in the middle leaves the end alone.
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n two\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "ONE\ntwo\nTHREE");
}

#[test]
fn crlf_files_stay_crlf_and_unicode_passes_through() {
    let (d, s) = setup(&[("w.txt", "héllo\r\nwörld\r\n日本\r\n")]);
    apply(
        &s,
        "*** Begin Patch\r\n*** Update File: w.txt\r\n@@\r\n héllo\r\n-wörld\r\n+мир 🌍\r\n+ünï\r\n 日本\r\n*** End Patch\r\n",
    );
    assert_eq!(
        body(d.path(), "w.txt"),
        "héllo\r\nмир 🌍\r\nünï\r\n日本\r\n"
    );
}

#[test]
fn each_level_of_the_leniency_ladder() {
    // (file, patch's old line, which level the note names)
    for (file, old, level) in [
        (
            "    value = 1   \n",
            "    value = 1",
            Some("ignoring whitespace at line ends"),
        ),
        (
            "\t\tvalue = 1\n",
            "    value = 1",
            Some("ignoring leading and trailing whitespace"),
        ),
        (
            "    say(\u{201C}hi\u{201D} \u{2014} it\u{2019}s\u{00A0}ok)\n",
            "    say(\"hi\" - it's ok)",
            Some("typographic"),
        ),
        ("    value = 1\n", "    value = 1", None),
    ] {
        let (d, s) = setup(&[("a.py", &format!("def f():\n{file}    return\n"))]);
        let r = apply(
            &s,
            &format!(
                "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-{old}\n+    changed()\n*** End Patch\n"
            ),
        );
        assert_eq!(
            body(d.path(), "a.py"),
            "def f():\n    changed()\n    return\n",
            "{file:?}"
        );
        match level {
            Some(level) => {
                assert!(
                    r.notes
                        .iter()
                        .any(|n| n.contains("section 1 of a.py matched at line 2")
                            && n.contains(level)),
                    "{file:?}: {:?}",
                    r.notes
                )
            }
            None => assert!(r.notes.is_empty(), "{:?}", r.notes),
        }
    }

    // An exact match later in the file wins over a loose one earlier: each level is tried
    // over the whole file before the next.
    let (d, s) = setup(&[("a.txt", "x  \nx\n")]);
    let r = apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "x  \ny\n");
    assert!(r.notes.is_empty(), "{:?}", r.notes);

    // Context matched loosely keeps the file's own bytes.
    let (d, s) = setup(&[("a.txt", "keep\t \nold\n")]);
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.txt\n@@\n keep\n-old\n+new\n*** End Patch\n",
    );
    assert_eq!(body(d.path(), "a.txt"), "keep\t \nnew\n");
}

#[test]
fn detected_inside_a_heredoc_and_after_whitespace() {
    for wrap in [
        "\n  \n*** Begin Patch\n*** Update File: a.txt\n@@\n-1\n+one\n*** End Patch\n\n",
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n@@\n-1\n+one\n*** End Patch\nEOF\n",
        "<<\"PATCH\"\n*** Begin Patch\n*** Update File: a.txt\n@@\n-1\n+one\nPATCH\n",
        "cat <<EOF | apply_patch\n  *** Begin Patch\n*** Update File: a.txt\n-1\n+one\nEOF",
        // No `*** End Patch` at all.
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-1\n+one\n",
        // A unified-diff range written out of habit is only a bare `@@`.
        "*** Begin Patch\n*** Update File: a.txt\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n*** End Patch",
    ] {
        let (d, s) = setup(&[("a.txt", "1\n2\n")]);
        apply(&s, wrap);
        assert_eq!(body(d.path(), "a.txt"), "one\n2\n", "{wrap:?}");
    }
}

#[test]
fn nested_contexts_and_trailing_blank_lines() {
    let py = "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def f(self):\n        return 1\n";
    let (d, s) = setup(&[("a.py", py)]);
    // `@@ class B:` then `@@ def f`: the second narrows the first; a blank line before the
    // next marker is not required to match.
    apply(
        &s,
        "*** Begin Patch\n*** Update File: a.py\n@@ class B:\n@@     def f(self):\n-        return 1\n+        return 2\n\n*** End Patch\n",
    );
    assert_eq!(
        body(d.path(), "a.py"),
        py.replacen("return 1\n", "RET", 1)
            .replace("return 1", "return 2")
            .replace("RET", "return 1\n")
    );
}

#[test]
fn context_lines_that_start_with_stars_are_context() {
    let md = "# Notes\n\n*** bold intro ***\n- item\n";
    let (d, s) = setup(&[("notes.md", md)]);
    apply(
        &s,
        "*** Begin Patch\n*** Update File: notes.md\n@@\n *** bold intro ***\n-- item\n+- first item\n*** End Patch\n",
    );
    assert_eq!(
        body(d.path(), "notes.md"),
        "# Notes\n\n*** bold intro ***\n- first item\n"
    );
}

#[test]
fn refusals_write_nothing_and_say_why() {
    let files = [("a.py", PY), ("b.txt", "b\n")];
    for (patch, kind, says) in [
        // The second section does not apply: the first file's change is not written either.
        (
            "*** Begin Patch\n*** Update File: b.txt\n@@\n-b\n+B\n*** Update File: a.py\n@@ def f(self):\n-        return 1\n+        return 10\n@@ def g(self):\n-        return 3\n+        return 30\n*** End Patch",
            ErrorKind::Conflict,
            "section 2 of a.py (@@ def g(self):, patch line 10) does not apply, nothing was written: its context and removed lines were not found after line 7.\nThe section expects:\n            return 3\nThe file has at line 8:\n            return 2",
        ),
        (
            "*** Begin Patch\n*** Update File: a.py\n@@ def nowhere():\n-x\n+y\n*** End Patch",
            ErrorKind::Conflict,
            "its context line \"def nowhere():\" is not in the file",
        ),
        // Sections out of file order.
        (
            "*** Begin Patch\n*** Update File: a.py\n@@ def main():\n-    print(A().f())\n+    pass\n@@\n-import os\n+import sys\n*** End Patch",
            ErrorKind::Conflict,
            "put the sections in file order",
        ),
        (
            "*** Begin Patch\n*** Add File: b.txt\n+x\n*** End Patch",
            ErrorKind::Conflict,
            "the patch adds b.txt, which already exists",
        ),
        (
            "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch",
            ErrorKind::Conflict,
            "deletes nope.txt, which does not exist",
        ),
        (
            "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch",
            ErrorKind::Conflict,
            "updates nope.txt, which does not exist",
        ),
        (
            "*** Begin Patch\n*** Update File: b.txt\n*** Move to: a.py\n*** End Patch",
            ErrorKind::Conflict,
            "moves b.txt to a.py, which already exists",
        ),
        (
            "*** Begin Patch\n*** Update File: b.txt\n@@\n-b\n+B\n*** Add File: ../escape.txt\n+x\n*** End Patch",
            ErrorKind::OutOfScope,
            "outside",
        ),
        (
            "*** Begin Patch\n*** Update File: b.txt\n@@\nb\n*** End Patch",
            ErrorKind::InvalidArgs,
            "patch line 4: \"b\" in the update of b.txt starts with none of",
        ),
        (
            "*** Begin Patch\n*** Frobnicate File: b.txt\n*** End Patch",
            ErrorKind::InvalidArgs,
            "is not a file operation",
        ),
        (
            "*** Begin Patch\n*** Update File: b.txt\n*** End Patch",
            ErrorKind::InvalidArgs,
            "has no sections",
        ),
        (
            "*** Begin Patch\n*** Update File: b.txt\n@@\n-b\n+B\n*** End Patch\nrm -rf /\n",
            ErrorKind::InvalidArgs,
            "follows `*** End Patch`",
        ),
        (
            "*** Begin Patch\n*** End Patch",
            ErrorKind::InvalidArgs,
            "no file operations",
        ),
    ] {
        let (d, s) = setup(&files);
        let before = snapshot(d.path());
        let e = apply_patch(&s, patch, None).unwrap_err();
        let te = e.to_tool_error("apply_patch");
        assert_eq!(te.kind, kind, "{patch}\n{e}");
        let said = format!("{}\nhint: {}", te.message, te.hint);
        assert!(said.contains(says), "{patch}\n--- got:\n{said}");
        assert!(!te.hint.is_empty());
        assert_eq!(snapshot(d.path()), before, "{patch}: something was written");
    }
}

#[test]
fn a_journaled_codex_patch_leaves_no_journal_and_an_add_then_delete_changes_nothing() {
    let (d, s) = setup(&[("a.txt", "1\n")]);
    let state = tempfile::tempdir().unwrap();
    let journal = toolvisor_files::journal::Journal::open(&state.path().join("journal")).unwrap();
    let r = apply_patch(
        &s,
        "*** Begin Patch\n*** Add File: tmp.txt\n+x\n*** Delete File: tmp.txt\n*** Update File: a.txt\n@@\n-1\n+2\n*** End Patch",
        Some(&journal),
    )
    .unwrap();
    assert_eq!(body(d.path(), "a.txt"), "2\n");
    assert!(!d.path().join("tmp.txt").exists());
    assert_eq!(r.files.len(), 1, "{:?}", r.files);
    assert!(
        r.notes.iter().any(|n| n.contains("tmp.txt is unchanged")),
        "{:?}",
        r.notes
    );
    assert_eq!(
        std::fs::read_dir(state.path().join("journal"))
            .unwrap()
            .count(),
        0
    );
}
