//! `lsp workspace_diagnostics` against real servers: none of the installed servers offers
//! the workspace pull (pyright registers `textDocument/diagnostic` with
//! `workspaceDiagnostics: false`), so the project checker answers, and the answer says so
//! (`source: "checker"` with the reason naming the server and the capability).

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

#[test]
fn pyright_without_workspace_pull_falls_back_to_the_checker_and_says_so() {
    require("pyright-langserver");
    require("pyright");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/ok.py", "def f() -> int:\n    return 1\n"),
        // An error in a file never opened: only a whole-project check finds it.
        ("app/bad.py", "from app.ok import f\n\nx: str = f()\n"),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "workspace_diagnostics", "file": "app/ok.py"}),
    );
    assert_eq!(v["source"], "checker", "{v}");
    let why = v["source_reason"].as_str().unwrap();
    assert!(why.contains("pyright"), "{why}");
    assert!(
        why.contains("diagnosticProvider.workspaceDiagnostics"),
        "{why}"
    );
    let bad: Vec<_> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["path"] == "app/bad.py")
        .collect();
    assert_eq!(bad.len(), 1, "{v}");
    assert_eq!(bad[0]["line"], 3, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("app/bad.py:3:"), "{text}");
    assert!(
        text.contains("(source: the project checker `pyright --outputjson"),
        "{text}"
    );
    // Without a file no server is picked: the checker, saying why.
    let v = ok_in(&d, w, "lsp", json!({"op": "workspace_diagnostics"}));
    assert_eq!(v["source"], "checker", "{v}");
    assert!(
        v["source_reason"].as_str().unwrap().contains("no `file`"),
        "{v}"
    );
    assert_eq!(v["total"], 1, "{v}");
}
