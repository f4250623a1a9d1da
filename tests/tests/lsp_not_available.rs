//! An operation the server does not implement is `not_available` naming
//! the server and the capability it lacks, never `resource_failed` with a hint about the
//! position. pylsp has no `workspace/symbol` (it answered "Method Not Found").

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

const PYLSP: &str = "[lsp.languages.python]\nextensions = [\"py\"]\nmarkers = [\"pyproject.toml\"]\nservers = [[\"pylsp\"]]\n";

#[test]
fn pylsp_workspace_symbols_are_not_available_naming_the_server() {
    require("pylsp");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        (
            "app/models.py",
            "class Greeter:\n    def greet(self, name):\n        return 'hi ' + name\n",
        ),
        (
            "app/main.py",
            "from app.models import Greeter\n\nprint(Greeter().greet('x'))\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(PYLSP));
    // The server works for what it implements (cross-file definition).
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 3, "symbol": "greet"}),
    );
    assert!(
        v["text"].as_str().unwrap().contains("app/models.py:2"),
        "{v}"
    );

    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "symbols", "query": "Greeter", "file": "app/main.py"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("pylsp"), "{e}");
    assert!(e.message.contains("workspaceSymbolProvider"), "{e}");
    assert!(!e.hint.contains("position"), "{e}");
}
