//! In a monorepo with nested roots (a
//! `pyproject.toml` at the top and another in `lib/`), a file in `lib/` gets the inner root's
//! server, which searches `lib/` only: `references` missed the top level's uses and said
//! `complete: true`. Now the enclosing root's server is asked too and the answers merged:
//! the inner server finds `lib/use.py`'s use (the outer one cannot resolve its `from core
//! import`), the outer finds `app.py`'s, and the answer names both roots.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

#[test]
fn references_from_a_nested_root_merge_the_enclosing_roots_answers() {
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
    for file in ["lib/core.py", "lib/use.py", "app.py"] {
        assert!(
            paths.contains(&file),
            "{file} missing from the merged answer: {v}"
        );
    }
    // Each location once, though both servers found the definition.
    let mut unique = v["locations"].as_array().unwrap().clone();
    unique.dedup();
    assert_eq!(
        unique.len(),
        v["locations"].as_array().unwrap().len(),
        "{v}"
    );
    assert_eq!(v["merged"], true, "{v}");
    assert_eq!(v["roots"], json!(["lib", "."]), "{v}");
    assert_eq!(
        (&v["complete"], &v["readiness"]),
        (&json!(true), &json!("ready")),
        "{v}"
    );
    assert!(v["text"].as_str().unwrap().contains("(merged: "), "{v}");
    // The top root's server, asked from its own file, covers the whole tree.
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "app.py", "line": 3, "symbol": "enlist"}),
    );
    assert_eq!(v["complete"], true, "{v}");
}

#[test]
fn references_from_a_module_shadowed_by_its_stub_say_they_miss_the_uses() {
    // Found by a probe on matplotlib (`_api/__init__.py` beside `_api/__init__.pyi`): pyright
    // resolves every use to the stub, so references asked from the `.py` found the definition
    // alone and said `complete: true`; a rename from there would have missed every caller.
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        ("pkg/mod.py", "def helper(x):\n    return x\n"),
        ("pkg/mod.pyi", "def helper(x: int) -> int: ...\n"),
        (
            "pkg/use.py",
            "from pkg.mod import helper\n\nprint(helper(1), helper(2))\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "pkg/mod.py", "line": 1, "symbol": "helper"}),
    );
    assert_eq!(
        (&v["complete"], &v["readiness"]),
        (&json!(false), &json!("partial")),
        "{v}"
    );
    let reason = v["partial_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("pkg/mod.pyi") && reason.contains("stub"),
        "{v}"
    );
    let v = ok_in(
        &d,
        p.path(),
        "lsp_rename",
        json!({"file": "pkg/mod.py", "line": 1, "symbol": "helper", "new_name": "helper2", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "{v}");
    // Asked from a use, the answer has the uses and is complete.
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "pkg/use.py", "line": 3, "symbol": "helper", "occurrence": 1}),
    );
    assert!(v["total"].as_u64().unwrap() >= 3, "{v}");
}

#[test]
fn references_from_a_definition_re_exported_through_a_package_stub_say_they_miss_the_uses() {
    // Found by a probe on attrs (`attr/_make.py` defines `fields_dict`, `attr/__init__.pyi`
    // declares it again): pyright resolves `attr.fields_dict` to the package's stub, so
    // references asked from the definition found 7 of 15 and said `complete: true`.
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", "from pkg._impl import helper\n"),
        ("pkg/__init__.pyi", "def helper(x: int) -> int: ...\n"),
        ("pkg/_impl.py", "def helper(x):\n    return x\n"),
        ("main.py", "import pkg\n\nprint(pkg.helper(1))\n"),
        (
            "direct.py",
            "from pkg._impl import helper\n\nprint(helper(2))\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "pkg/_impl.py", "line": 1, "symbol": "helper"}),
    );
    let text = v["text"].as_str().unwrap_or_default();
    assert!(
        !text.contains("main.py:3"),
        "pyright now finds the use through the stub: the test no longer shows the gap: {v}"
    );
    assert_eq!(
        (&v["complete"], &v["readiness"]),
        (&json!(false), &json!("partial")),
        "{v}"
    );
    let reason = v["partial_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("pkg/__init__.pyi:1") && text.contains("pkg/__init__.pyi:1"),
        "the answer names the stub line to ask from: {v}"
    );
    // The same from a use that imports the module itself (no stub on its path).
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "direct.py", "line": 3, "symbol": "helper"}),
    );
    assert_eq!(v["complete"], false, "{v}");
    // Asked from the stub, as the answer says, the uses are there and the answer is complete.
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "pkg/__init__.pyi", "line": 1, "symbol": "helper"}),
    );
    assert!(
        v["text"].as_str().unwrap_or_default().contains("main.py:3"),
        "{v}"
    );
    assert_eq!(v["complete"], true, "{v}");
}

#[test]
fn an_import_a_stub_does_not_declare_is_named_as_a_place_the_answer_misses() {
    // Found by a probe on more-itertools: `more.py` imports `UnequalIterablesError` from
    // `.recipes`, whose stub `recipes.pyi` does not declare it, so pyright links neither that
    // import nor the `__all__` entry, and references (and a rename) from any use left both
    // behind while saying complete.
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        (
            "pkg/recipes.py",
            "class UnequalError(ValueError):\n    pass\n\n\ndef take(n):\n    return n\n",
        ),
        ("pkg/recipes.pyi", "def take(n: int) -> int: ...\n"),
        (
            "pkg/more.py",
            "from .recipes import (\n    take,\n    UnequalError,\n)\n\n__all__ = [\n    'UnequalError',\n]\n\n\ndef zip_equal():\n    raise UnequalError()\n",
        ),
        (
            "pkg/more.pyi",
            "class UnequalError(ValueError): ...\n\ndef zip_equal() -> None: ...\n",
        ),
        (
            "use.py",
            "from pkg.more import UnequalError\n\nprint(UnequalError)\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "use.py", "line": 3, "symbol": "UnequalError"}),
    );
    let listed: Vec<String> = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| format!("{}:{}", l["path"].as_str().unwrap(), l["line"]))
        .collect();
    assert!(listed.contains(&"use.py:3".to_string()), "{v}");
    assert!(
        !listed.contains(&"pkg/more.py:3".to_string()),
        "pyright now links the import: the test no longer shows the gap: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    let reason = v["partial_reason"].as_str().unwrap_or_default();
    for place in ["pkg/more.py:3", "pkg/more.py:7", "pkg/more.py:12"] {
        assert!(reason.contains(place), "{place} is not named: {v}");
    }
    // Its definition asked from the file whose import pyright did not link: none found, and
    // the answer says why instead of a complete "none".
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "definition", "file": "pkg/more.py", "line": 12, "symbol": "UnequalError"}),
    );
    assert_eq!(
        v["total"], 0,
        "pyright now finds the definition: the test no longer shows the gap: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("pkg/more.py:3"),
        "{v}"
    );
    // A use of another name whose every line the answer holds says complete, stub beside or
    // not (it used to be flagged for the stub beside `more.py`).
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "pkg/recipes.pyi", "line": 1, "symbol": "take"}),
    );
    assert_eq!(v["complete"], true, "{v}");
}
