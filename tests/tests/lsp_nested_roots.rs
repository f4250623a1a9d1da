//! Issue 35, case 8: in a monorepo with nested roots (a `pyproject.toml` at the top and
//! another in `lib/`), a file in `lib/` gets the inner root's server, which searches `lib/`
//! only: `references` missed the top level's uses and said `complete: true`. It must say
//! that it covers the inner root only (`complete: false`, the reason naming both roots); a
//! question asked from the top root's own files is complete.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

#[test]
fn references_from_a_nested_root_say_they_cover_that_root_only() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("lib/pyproject.toml", ""),
        (
            "lib/core.py",
            "def enlist(name: str) -> str:\n    return name\n",
        ),
        (
            "lib/use.py",
            "from core import enlist\n\nX = enlist(\"lib\")\n",
        ),
        (
            "app.py",
            "from lib.core import enlist\n\nY = enlist(\"app\")\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "lib/core.py", "line": 1, "symbol": "enlist"}),
    );
    let paths: Vec<&str> = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["path"].as_str())
        .collect();
    assert!(
        !paths.contains(&"app.py"),
        "the inner root's server searched outside it: {v}"
    );
    assert_eq!(v["complete"], false, "one root's answer said complete: {v}");
    let reason = v["partial_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("nested inside another python root") && reason.contains("lib"),
        "{v}"
    );
    assert!(v["text"].as_str().unwrap().contains("(partial: "), "{v}");
    // The top root's server, asked from its own file, covers the whole tree.
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "app.py", "line": 3, "symbol": "enlist"}),
    );
    assert_eq!(v["complete"], true, "{v}");
}
