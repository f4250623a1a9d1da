//! The start rule and `lsp status`: a server starts only where its root marker AND its binary
//! are found; with one of the two, status says exactly which half is missing, and a call
//! gets `not_available` with the same reason instead of a guess.

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

fn lang<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["languages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["language"] == name)
        .unwrap_or_else(|| panic!("{name} missing from {status}"))
}

/// Two languages whose servers cannot exist on any machine (whatever else it has installed,
/// e.g. gopls): the "marker only" half of the rule is tested on them.
const ABSENT_SERVERS: &str = r#"
[lsp.languages.absentgo]
extensions = ["absentgo"]
markers = ["absent-go.mod"]
servers = [["toolvisor-test-absent-gopls"]]

[lsp.languages.absentdart]
extensions = ["absentdart"]
markers = ["absent-pubspec.yaml"]
servers = [["toolvisor-test-absent-dart", "language-server"]]
"#;

#[test]
fn status_names_the_missing_half() {
    require("pyright-langserver");
    let d = TestDaemon::start(&lsp_config(ABSENT_SERVERS));

    // Both: a marker and a resolvable binary.
    let both = project(&[("pyproject.toml", ""), ("a.py", "x = 1\n")]);
    let s = ok_in(&d, both.path(), "lsp", json!({"op": "status"}));
    let py = lang(&s, "python");
    assert_eq!(py["state"], "available", "{s}");
    // What a model reads: the languages present, the others named on one line (each still
    // in `languages` with its reason).
    let text = s["text"].as_str().unwrap();
    assert!(text.contains("  python: available"), "{text}");
    assert!(!text.contains("absentdart: no root"), "{text}");
    let others = text
        .lines()
        .find(|l| l.contains("no root marker here for:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        others.contains("absentdart") && others.contains("rust"),
        "{text}"
    );
    assert_eq!(lang(&s, "absentdart")["state"], "no root", "{s}");
    assert!(
        py["reason"]
            .as_str()
            .unwrap()
            .contains("pyright-langserver"),
        "{s}"
    );

    // Marker only: the markers are there, the servers' binaries nowhere.
    let marker_only = project(&[
        ("absent-go.mod", "module x\n"),
        ("absent-pubspec.yaml", "name: x\n"),
        ("main.absentgo", "package main\n"),
    ]);
    let s = ok_in(&d, marker_only.path(), "lsp", json!({"op": "status"}));
    for (name, bin) in [
        ("absentgo", "`toolvisor-test-absent-gopls`"),
        ("absentdart", "`toolvisor-test-absent-dart`"),
    ] {
        let l = lang(&s, name);
        assert_eq!(l["state"], "binary not found", "{s}");
        let reason = l["reason"].as_str().unwrap();
        assert!(
            reason.contains(bin)
                && reason.contains("node_modules/.bin")
                && reason.contains("$PATH"),
            "{reason}"
        );
    }
    let e = err_in(
        &d,
        marker_only.path(),
        "lsp",
        json!({"op": "hover", "file": "main.absentgo", "line": 1, "symbol": "main"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable);
    assert!(
        e.message
            .contains("binary not found: looked for `toolvisor-test-absent-gopls`"),
        "{e}"
    );

    // Binary only: pyright resolves, but no Python root marker from here up.
    let binary_only = project(&[("a.py", "x = 1\n")]);
    let s = ok_in(&d, binary_only.path(), "lsp", json!({"op": "status"}));
    let py = lang(&s, "python");
    assert_eq!(py["state"], "no root", "{s}");
    assert!(
        py["reason"]
            .as_str()
            .unwrap()
            .contains("root marker missing: none of pyproject.toml"),
        "{s}"
    );
    let e = err_in(
        &d,
        binary_only.path(),
        "lsp",
        json!({"op": "hover", "file": "a.py", "line": 1, "symbol": "x"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable);
    assert!(e.message.contains("root marker missing"), "{e}");

    // Nothing was started by any of this.
    assert_eq!(s["servers"].as_array().unwrap().len(), 0, "{s}");
    assert!(
        s["text"]
            .as_str()
            .unwrap()
            .contains("no language server has been started")
    );
}

#[test]
fn ten_conversations_on_one_root_share_one_server() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("a.py", "def f() -> int:\n    return 1\n\n\nf()\n"),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let mut pids = Vec::new();
    for i in 0..10 {
        let mut c = toolvisor_tests::lsp::client_in(&d, p.path(), &format!("run-{i}"));
        let reply = c
            .call_with(
                &format!("conv-{i}"),
                "lsp",
                json!({"op": "hover", "file": "a.py", "line": 5, "symbol": "f"}),
                |_| true,
            )
            .unwrap();
        let v = toolvisor_tests::ok_of(&reply);
        pids.push(v["server"]["pid"].as_u64().unwrap());
    }
    pids.dedup();
    assert_eq!(
        pids.len(),
        1,
        "one server process for ten conversations: {pids:?}"
    );
    let s = ok_in(&d, p.path(), "lsp", json!({"op": "status"}));
    assert_eq!(s["servers"].as_array().unwrap().len(), 1, "{s}");
}
