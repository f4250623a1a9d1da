//! Errors that were already there are not "new" on a file's first write.
//! Before a write, the diagnostics a file has then are the run's baseline for it when the run
//! has none yet: an `lsp_rename` that introduces nothing reports nothing (pyright, a package
//! of three files with an old error in two of them), an `ast_edit` accept reports no
//! pre-existing TS2339 (typescript-language-server), and a `write` reports the error it
//! introduced and not the old one beside it.

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

fn new_messages(v: &Value) -> Vec<String> {
    v["diagnostics"]["new"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics in {v}"))
        .iter()
        .map(|d| d["message"].as_str().unwrap_or("").to_string())
        .collect()
}

const MODELS: &str = "class Widget:\n    def __init__(self, size: int) -> None:\n        self.size = size\n\n    def area(self) -> int:\n        return self.size * self.size\n";
const SERVICE: &str = "from pkg.models import Widget\n\n\ndef total(ws: list[Widget]) -> int:\n    return sum(w.area() for w in ws) + legacy_offset\n";
const APP: &str = "from pkg.models import Widget\nfrom pkg.service import total\n\n\ndef main() -> int:\n    return total([Widget(2)]) + Widget(1).area() + missing_config\n";

#[test]
fn a_rename_that_introduces_nothing_reports_no_old_errors() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        ("pkg/models.py", MODELS),
        ("pkg/service.py", SERVICE),
        ("app.py", APP),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp_rename",
        json!({"file": "pkg/models.py", "line": 5, "symbol": "area", "new_name": "surface"}),
    );
    assert_eq!(v["files"].as_array().map(Vec::len), Some(3), "{v}");
    let new = new_messages(&v);
    assert!(
        new.is_empty(),
        "the rename introduced nothing, yet reported as new: {new:?}\n{v}"
    );
    // The old errors are still there: the baseline hid them, the server did not lose them.
    let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "app.py"}));
    assert!(
        v["text"].as_str().unwrap().contains("missing_config"),
        "{v}"
    );

    // A first write of a file with an old error reports the error it introduces only.
    let p2 = project(&[("pyproject.toml", ""), ("m.py", "a: int = old_missing\n")]);
    let v = ok_in(
        &d,
        p2.path(),
        "write",
        json!({"path": "m.py", "content": "a: int = old_missing\nb: int = fresh_missing\n"}),
    );
    let new = new_messages(&v);
    assert!(new.iter().any(|m| m.contains("fresh_missing")), "{v}");
    assert!(
        new.iter().all(|m| !m.contains("old_missing")),
        "a pre-existing error reported as new on the first write: {v}"
    );
}

#[test]
fn an_ast_edit_accept_reports_no_pre_existing_typescript_error() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        (
            "src/shapes.ts",
            "export interface Shape {\n    area(): number;\n}\n\nexport function describe(s: Shape): string {\n    console.log(s.area());\n    return String(s.perimeter);\n}\n",
        ),
        (
            "src/main.ts",
            "import { describe } from \"./shapes\";\n\nconsole.log(describe({ area: () => 1 }));\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let staged = ok_in(
        &d,
        w,
        "ast_edit",
        json!({"pattern": "console.log($A)", "rewrite": "console.info($A)", "path": "src", "language": "typescript"}),
    );
    let id = staged["edit_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{staged}"));
    let v = ok_in(&d, w, "resolve", json!({"edit_id": id, "action": "accept"}));
    let new = new_messages(&v);
    assert!(
        new.iter().all(|m| !m.contains("perimeter")),
        "the pre-existing TS2339 was reported as new by the accept: {v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "src/shapes.ts"}),
    );
    assert!(v["text"].as_str().unwrap().contains("perimeter"), "{v}");
}

/// A tenth probe (wcwidth 0.9.5): after `lsp_rename` of `width` to `text_width`, an error that
/// was there before — its message naming the function (`in function "width"`) — came back as
/// new, now naming `text_width`. What the run was told of the renamed files is renamed too.
#[test]
fn a_rename_does_not_report_an_old_error_under_the_new_name() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        ("pkg/w.py", "def width(s: str) -> int:\n    return len(s)\n"),
        ("pkg/t.py", "from pkg.w import width\n\nX = width(1)\n"),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "pkg/t.py"}),
    );
    assert!(
        v["text"].as_str().unwrap().contains("\"width\""),
        "the old error names the function: {v}"
    );
    let v = ok_in(
        &d,
        p.path(),
        "lsp_rename",
        json!({"file": "pkg/w.py", "line": 1, "symbol": "width", "new_name": "text_width"}),
    );
    assert_eq!(
        v["diagnostics"]["new"],
        json!([]),
        "an old error under the new name is reported as new: {v}"
    );
}
