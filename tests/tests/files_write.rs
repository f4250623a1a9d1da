//! `write`, `edit` and `apply_patch` through the real daemon: atomic writes that keep the
//! file's mode, edit ambiguity and misses that change nothing, patches that apply whole or
//! not at all (unified diffs and the `*** Begin Patch` format), and paths that escape the
//! workdir (`../../etc/passwd`, a symlink) refused.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, options};

fn client(d: &TestDaemon, workdir: &Path) -> Client {
    let mut o = options(Codec::Json, Tier::Write, true);
    o.workdir = workdir.display().to_string();
    Client::connect(&d.socket, o).expect("connect")
}

fn call(c: &mut Client, tool: &str, args: Json) -> Result<Json, ToolError> {
    match c
        .call_with("c", tool, args, |_| true)
        .expect("call")
        .outcome
    {
        Outcome::Ok(v) => Ok(v.0),
        Outcome::Err(e) => Err(e),
    }
}

fn ok(c: &mut Client, tool: &str, args: Json) -> Json {
    call(c, tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn write_is_atomic_keeps_mode_and_creates_directories() {
    let d = TestDaemon::start("");
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("run.sh");
    std::fs::write(&script, "old\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    let mut c = client(&d, t.path());
    let v = ok(
        &mut c,
        "write",
        json!({"path": "run.sh", "content": "#!/bin/sh\necho 안녕\n"}),
    );
    assert_eq!(v["status"], "modified");
    assert_eq!(v["previous_bytes"], 4);
    assert_eq!(read(&script), "#!/bin/sh\necho 안녕\n");
    assert_eq!(
        std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777,
        0o750
    );

    let v = ok(
        &mut c,
        "write",
        json!({"path": "deep/er/new.txt", "content": "x"}),
    );
    assert_eq!(
        (v["status"].as_str(), v["path"].as_str()),
        (Some("created"), Some("deep/er/new.txt"))
    );
    let names: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains(".tmp")),
        "temp files left: {names:?}"
    );

    let e = call(&mut c, "write", json!({"path": "deep", "content": "x"})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
}

#[test]
fn edit_refuses_ambiguity_and_misses_and_changes_nothing() {
    let d = TestDaemon::start("");
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("lib.rs");
    let body = "fn a() -> i32 {\n    1\n}\nfn b() -> i32 {\n    1\n}\nfn c() -> i32 {\n    1\n}\n";
    std::fs::write(&f, body).unwrap();
    let mut c = client(&d, t.path());

    let e = call(
        &mut c,
        "edit",
        json!({"path": "lib.rs", "old_text": "    1\n", "new_text": "    2\n"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message
            .contains("matches 3 times in lib.rs, at (line:column) 2:1, 5:1, 8:1"),
        "{e}"
    );
    assert!(e.hint.contains("replace_all"), "{e}");
    assert_eq!(read(&f), body);

    let e = call(
        &mut c,
        "edit",
        json!({"path": "lib.rs", "old_text": "fn d()", "new_text": "fn e()"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::NotFound);
    assert_eq!(read(&f), body);

    let v = ok(
        &mut c,
        "edit",
        json!({"path": "lib.rs", "old_text": "fn b() -> i32 {\n    1", "new_text": "fn b() -> i32 {\n    20"}),
    );
    assert_eq!(v["replacements"], 1);
    assert_eq!(v["lines"], json!([4]));
    assert!(v["diff"].as_str().unwrap().contains("-    1\n+    20\n"));
    let v = ok(
        &mut c,
        "edit",
        json!({"path": "lib.rs", "old_text": "    1\n", "new_text": "    3\n", "replace_all": true}),
    );
    assert_eq!(v["replacements"], 2);
    assert_eq!(
        read(&f),
        "fn a() -> i32 {\n    3\n}\nfn b() -> i32 {\n    20\n}\nfn c() -> i32 {\n    3\n}\n"
    );
}

#[test]
fn apply_patch_is_all_or_nothing() {
    let d = TestDaemon::start("");
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a.py");
    let b = t.path().join("b.py");
    std::fs::write(&a, "def f():\n    return 1\n\n\ndef g():\n    return 2\n").unwrap();
    std::fs::write(&b, "X = 1\n").unwrap();
    let mut c = client(&d, t.path());

    // b.py's hunk applies; a.py's second hunk does not: nothing at all is written.
    let bad = "--- a/b.py\n+++ b/b.py\n@@ -1 +1 @@\n-X = 1\n+X = 2\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 10\n@@ -5,2 +5,2 @@\n def g():\n-    return 3\n+    return 30\n";
    let e = call(&mut c, "apply_patch", json!({"patch": bad})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(
        e.message
            .contains("hunk 2 of a.py (@@ -5,2 +5,2 @@) does not apply"),
        "{e}"
    );
    assert!(
        e.message.contains("    return 3"),
        "the failing context is shown: {e}"
    );
    assert_eq!(read(&b), "X = 1\n");
    assert_eq!(
        read(&a),
        "def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    );

    let good = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 10\n@@ -5,2 +5,3 @@\n def g():\n-    return 2\n+    return 20\n+# end\n--- /dev/null\n+++ b/pkg/new.py\n@@ -0,0 +1 @@\n+NEW = True\n--- a/b.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-X = 1\n";
    let v = ok(&mut c, "apply_patch", json!({"patch": good}));
    let files: Vec<(String, String)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("a.py".to_string(), "modified".to_string()),
            ("pkg/new.py".into(), "created".into()),
            ("b.py".into(), "deleted".into())
        ]
    );
    assert_eq!(
        read(&a),
        "def f():\n    return 10\n\n\ndef g():\n    return 20\n# end\n"
    );
    assert_eq!(read(&t.path().join("pkg/new.py")), "NEW = True\n");
    assert!(!b.exists());

    let e = call(&mut c, "apply_patch", json!({"patch": "not a diff"})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
}

#[test]
fn apply_patch_takes_the_begin_patch_format() {
    let d = TestDaemon::start("");
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a.py");
    std::fs::write(&a, "def f():\n    return 1\n\n\ndef g():\n    return 2\n").unwrap();
    std::fs::write(t.path().join("old.py"), "X = 1\n").unwrap();
    let mut c = client(&d, t.path());

    // As a model writes it: inside a shell heredoc, sections located by `@@` context.
    let patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 10\n@@ def g():\n-    return 2\n+    return 20\n*** Update File: old.py\n*** Move to: pkg/new.py\n@@\n-X = 1\n+X = 2\n*** Add File: notes.txt\n+hello\n*** End Patch\nEOF\n";
    let v = ok(&mut c, "apply_patch", json!({"patch": patch}));
    let files: Vec<(String, String, Json)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().into(),
                f["status"].as_str().unwrap().into(),
                f["moved_from"].clone(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("a.py".to_string(), "modified".to_string(), Json::Null),
            ("old.py".into(), "deleted".into(), Json::Null),
            ("pkg/new.py".into(), "created".into(), json!("old.py")),
            ("notes.txt".into(), "created".into(), Json::Null),
        ]
    );
    assert!(v["diagnostics"].is_object(), "diagnostics folded in: {v}");
    assert_eq!(
        read(&a),
        "def f():\n    return 10\n\n\ndef g():\n    return 20\n"
    );
    assert_eq!(read(&t.path().join("pkg/new.py")), "X = 2\n");
    assert!(!t.path().join("old.py").exists());

    // A section that does not apply is named with what it expected and what the file holds.
    let e = call(
        &mut c,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Add File: more.txt\n+x\n*** Update File: a.py\n@@ def g():\n-    return 3\n+    return 30\n*** End Patch"}),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(
        e.message
            .contains("section 1 of a.py (@@ def g():, patch line 5) does not apply")
            && e.message.contains("    return 3")
            && e.message.contains("    return 20"),
        "{e}"
    );
    assert!(!t.path().join("more.txt").exists(), "nothing was written");
}

#[test]
fn paths_escaping_the_workdir_are_refused() {
    let d = TestDaemon::start("");
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(outer.path().join("secret.txt"), "keep\n").unwrap();
    std::os::unix::fs::symlink(outer.path(), root.join("up")).unwrap();
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), root.join("leak.txt")).unwrap();
    let mut c = client(&d, &root);

    let attempts = [
        ("write", json!({"path": "../../etc/passwd", "content": "x"})),
        ("write", json!({"path": "../secret.txt", "content": "x"})),
        ("write", json!({"path": "up/secret.txt", "content": "x"})),
        ("write", json!({"path": "leak.txt", "content": "x"})),
        (
            "write",
            json!({"path": "/tmp/toolvisor-escape.txt", "content": "x"}),
        ),
        (
            "edit",
            json!({"path": "leak.txt", "old_text": "keep", "new_text": "lost"}),
        ),
        (
            "apply_patch",
            json!({"patch": "--- a/leak.txt\n+++ b/leak.txt\n@@ -1 +1 @@\n-keep\n+lost\n"}),
        ),
        (
            "apply_patch",
            json!({"patch": "--- /dev/null\n+++ b/../../etc/evil\n@@ -0,0 +1 @@\n+x\n"}),
        ),
        ("read", json!({"path": "../../etc/passwd"})),
        ("read", json!({"path": "leak.txt"})),
        ("ls", json!({"path": "up"})),
    ];
    for (tool, args) in attempts {
        let e = call(&mut c, tool, args.clone()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::OutOfScope, "{tool} {args}: {e}");
        assert!(e.message.contains("outside"), "{e}");
    }
    assert_eq!(read(&outer.path().join("secret.txt")), "keep\n");
    assert!(!Path::new("/tmp/toolvisor-escape.txt").exists());
    drop(c);

    // The operator can open it up.
    let d = TestDaemon::start("[files]\nallow_outside_workdir = true\n");
    let mut c = client(&d, &root);
    let v = ok(&mut c, "read", json!({"path": "leak.txt"}));
    assert_eq!(v["content"], "1\tkeep\n");
}
