//! Diagnostics on write through `synced_write`, with the per-run ledger: an error introduced is
//! reported; the same error moved four lines down is not; fixed and reintroduced, it is new
//! again. With pyright (pull or push) and with pylsp + pyflakes (push without versions).

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{call_in, client_in, lsp_config, ok_in, project, require, write};

fn synced(d: &TestDaemon, w: &Path, run: &str, file: &str, content: &str) -> Value {
    write(w, file, content);
    let mut c = client_in(d, w, run);
    let reply = c
        .call_with("c", "synced_write", json!({"path": file}), |_| true)
        .unwrap();
    toolvisor_tests::ok_of(&reply).clone()
}

fn new_messages(v: &Value) -> Vec<String> {
    v["diagnostics"]["new"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap().to_string())
        .collect()
}

fn ledger_cycle(d: &TestDaemon, w: &Path, bad: &str, needle: &str) {
    let clean = "def f() -> int:\n    return 1\n";
    let v = synced(d, w, "run-1", "m.py", clean);
    assert!(new_messages(&v).is_empty(), "clean file: {v}");

    let v = synced(d, w, "run-1", "m.py", &format!("{clean}{bad}\n"));
    let msgs = new_messages(&v);
    assert!(msgs.iter().any(|m| m.contains(needle)), "introduced: {v}");
    assert!(v["text"].as_str().unwrap().contains("m.py:3:"), "{v}");

    // Moved four lines down: the same diagnostic, not news.
    let v = synced(d, w, "run-1", "m.py", &format!("{clean}\n\n\n\n{bad}\n"));
    assert!(
        new_messages(&v).iter().all(|m| !m.contains(needle)),
        "moved: {v}"
    );

    // Another run has not seen it.
    let v = synced(d, w, "run-2", "m.py", &format!("{clean}\n\n\n\n{bad}\n"));
    assert!(
        new_messages(&v).iter().any(|m| m.contains(needle)),
        "other run: {v}"
    );

    // Fixed, then back: new again.
    let v = synced(d, w, "run-1", "m.py", clean);
    assert!(new_messages(&v).is_empty(), "fixed: {v}");
    let v = synced(d, w, "run-1", "m.py", &format!("{clean}{bad}\n"));
    assert!(
        new_messages(&v).iter().any(|m| m.contains(needle)),
        "reintroduced: {v}"
    );
}

#[test]
fn pyright_ledger_reports_only_new_diagnostics() {
    require("pyright-langserver");
    let p = project(&[("pyproject.toml", "")]);
    let d = TestDaemon::start(&lsp_config(""));
    ledger_cycle(&d, p.path(), "x: int = undefined_name", "undefined_name");
    // A file no server covers: the write is fine and says why there is nothing.
    write(p.path(), "notes.txt", "hello");
    let v = ok_in(&d, p.path(), "synced_write", json!({"path": "notes.txt"}));
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("no diagnostics: no language server covers"),
        "{v}"
    );
    // `lsp diagnostics` shows the current state in full, ledger or not.
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "m.py"}),
    );
    assert!(
        v["text"].as_str().unwrap().contains("undefined_name"),
        "{v}"
    );
}

#[test]
fn pylsp_ledger_reports_only_new_diagnostics() {
    require("pylsp");
    let p = project(&[("pyproject.toml", "")]);
    let d = TestDaemon::start(&lsp_config(
        "[lsp.languages.python]\nextensions = [\"py\"]\nmarkers = [\"pyproject.toml\"]\nservers = [[\"pylsp\"]]\n",
    ));
    ledger_cycle(&d, p.path(), "import os", "'os' imported but unused");
    let v = ok_in(&d, p.path(), "lsp", json!({"op": "status"}));
    assert_eq!(v["servers"][0]["command"][0], "pylsp", "{v}");
}

#[test]
fn project_checker_reports_in_the_same_shape() {
    require("pyright");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/a.py", "def f() -> int:\n    return 'text'\n"),
        ("pkg/b.py", "x = 1\n"),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "*"}),
    );
    assert_eq!(v["checker"], "pyright --outputjson", "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("pkg/a.py:2:12: error:") && text.contains("reportReturnType"),
        "{text}"
    );
    assert_eq!(v["total"], 1, "{v}");
}

/// The checker's output was read through a 32 MiB cap and then waited for: a
/// checker writing more blocked on its full pipe until the timeout. Past the cap the rest is
/// drained now, and the answer says the output was not read whole rather than "no
/// diagnostics".
#[test]
fn a_checker_writing_past_the_cap_is_drained_not_left_blocked() {
    let p = project(&[("marker.flood", ""), ("a.flood", "")]);
    let d = TestDaemon::start(&lsp_config(
        "checker_timeout_s = 60\n[lsp.languages.flood]\nextensions = [\"flood\"]\nmarkers = [\"marker.flood\"]\nservers = [[\"no-such-flood-server\"]]\nchecker = [\"sh\", \"-c\", \"head -c 40000000 /dev/zero | tr '\\\\0' x\"]\nchecker_format = \"gcc\"\n",
    ));
    match call_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "*"}),
    ) {
        Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::Io, "{e}");
            assert!(e.message.contains("was not read"), "{e}");
        }
        Outcome::Ok(v) => panic!(
            "a flood of unparsed output answered as diagnostics: {}",
            v.0
        ),
    }
}

/// A fresh probe on cachetools: an edit, undone outside the daemon (`git checkout`), then made
/// again answered "no new diagnostics": the run's entry for the file was still the one from
/// the first edit. A file changed since its entry was taken gets its baseline again.
#[test]
fn an_edit_undone_outside_and_made_again_is_news_again() {
    require("pyright-langserver");
    let good = "def typedkey(*args: int) -> int:\n    return len(args)\n\n\nX = typedkey(1, 2)\n";
    let p = project(&[("pyproject.toml", ""), ("keys.py", good)]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let edit = json!({"path": "keys.py", "old_text": "def typedkey(*args: int)", "new_text": "def typedkey(arg: int)"});
    let v = ok_in(&d, w, "edit", edit.clone());
    assert!(!new_messages(&v).is_empty(), "the first edit's errors: {v}");
    // Undone outside the daemon, as `git checkout keys.py` would.
    write(w, "keys.py", good);
    let v = ok_in(&d, w, "edit", edit);
    assert!(
        !new_messages(&v).is_empty(),
        "the same errors again, after they were gone: {v}"
    );
}
