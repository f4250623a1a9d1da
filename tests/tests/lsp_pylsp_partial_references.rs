//! Pylsp's references come from jedi,
//! which has no index and stops after 30 files that mention the name. On a package where 40
//! modules call a function, `references` finds at most 30 of them: the answer must say it is
//! partial (`complete: false`, `partial_reason`, a `(partial: …)` line). On a small package
//! the same question is complete.

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const PYLSP: &str = "[lsp.languages.python]\nextensions = [\"py\"]\nmarkers = [\"pyproject.toml\"]\nservers = [[\"pylsp\"]]\n";

fn package(users: usize) -> tempfile::TempDir {
    let mut files = vec![
        ("pyproject.toml".to_string(), String::new()),
        ("pkg/__init__.py".to_string(), String::new()),
        (
            "pkg/core.py".to_string(),
            "def compute_total(x: int) -> int:\n    return x * 2\n".to_string(),
        ),
    ];
    for i in 0..users {
        files.push((
            format!("pkg/user{i:02}.py"),
            format!("from pkg.core import compute_total\n\nVALUE = compute_total({i})\n"),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    project(&refs)
}

fn references(d: &TestDaemon, w: &std::path::Path) -> Value {
    ok_in(
        d,
        w,
        "lsp",
        json!({"op": "references", "file": "pkg/core.py", "line": 1, "symbol": "compute_total"}),
    )
}

#[test]
fn pylsp_references_past_jedis_search_limit_are_marked_partial() {
    require("pylsp");
    let d = TestDaemon::start(&lsp_config(PYLSP));
    let big = package(40);
    let v = references(&d, big.path());
    // The declaration and 40 * 2 uses exist; jedi's cut search finds fewer.
    assert!(v["total"].as_u64().unwrap() < 81, "{v}");
    assert_eq!(
        v["complete"], false,
        "a cut search answered as complete: {v}"
    );
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap_or("")
            .contains("at most 30 files"),
        "{v}"
    );
    assert!(v["text"].as_str().unwrap().contains("(partial: "), "{v}");

    let small = package(3);
    let v = references(&d, small.path());
    assert_eq!(v["complete"], true, "{v}");
    // The declaration, and per user the import and the call.
    assert_eq!(v["total"], 7, "{v}");
}

/// `complete` depended on how `symbol` was spelled: the jedi count looked
/// for the query's text (`"compute_total("`, which no file holds as a whole word), found
/// nothing past the cut and said `complete: true`. The count is of the identifier at the
/// position, so every spelling of the same question gets the same answer.
#[test]
fn pylsp_coverage_does_not_depend_on_how_the_symbol_is_spelled() {
    require("pylsp");
    let d = TestDaemon::start(&lsp_config(PYLSP));
    let big = package(40);
    let plain = references(&d, big.path());
    assert_eq!(plain["complete"], false, "{plain}");
    for spelled in ["compute_total(", "compute_total(x"] {
        let v = ok_in(
            &d,
            big.path(),
            "lsp",
            json!({"op": "references", "file": "pkg/core.py", "line": 1, "symbol": spelled}),
        );
        assert_eq!(v["total"], plain["total"], "{spelled:?}: {v}");
        assert_eq!(
            v["complete"], false,
            "`{spelled}` made a cut search look complete: {v}"
        );
        assert_eq!(v["partial_reason"], plain["partial_reason"], "{v}");
    }
}
