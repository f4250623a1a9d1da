//! Diagnostics returned after a write are for the text just written. In a
//! long-running daemon with pyright (a package of several files, cross-file imports), a
//! sequence of writes each replaces one undefined name by another: every write must report
//! exactly the name it introduced — never the one the previous write had (a list published
//! for the older version), and never miss the new one — and `lsp diagnostics` right after a
//! write must list the current name only. And a file whose text did not change but whose
//! import did (a method renamed in another module) gets the diagnostics of the project as it
//! is now, not the list the server published before the other file changed.

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const MODELS: &str = "class Widget:\n    def __init__(self, size: int) -> None:\n        self.size = size\n\n    def area(self) -> int:\n        return self.size * self.size\n";
const SERVICE: &str = "from pkg.models import Widget\n\n\ndef total(ws: list[Widget]) -> int:\n    return sum(w.area() for w in ws)\n";

fn app(name: &str) -> String {
    format!(
        "from pkg.models import Widget\nfrom pkg.service import total\n\n\ndef main() -> int:\n    ws = [Widget(1), Widget(2)]\n    return total(ws) + {name}\n"
    )
}

fn messages(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|d| d["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn pyright_diagnostics_after_each_write_are_for_the_text_just_written() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        ("pkg/models.py", MODELS),
        ("pkg/service.py", SERVICE),
        ("app.py", &app("0")),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // The server is up and has seen the project before the edits start (a long-running daemon).
    let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "app.py"}));
    assert!(messages(&v["diagnostics"]).is_empty(), "{v}");
    let names = [
        "alpha_missing",
        "bravo_missing",
        "charlie_missing",
        "delta_missing",
        "echo_missing",
        "foxtrot_missing",
    ];
    let mut previous: Option<&str> = None;
    for (i, name) in names.iter().enumerate() {
        let v = ok_in(
            &d,
            w,
            "write",
            json!({"path": "app.py", "content": app(name)}),
        );
        let new = messages(&v["diagnostics"]["new"]);
        assert!(
            new.iter().any(|m| m.contains(name)),
            "write {i}: the error just introduced ({name}) is missing: {v}"
        );
        if let Some(old) = previous {
            assert!(
                new.iter().all(|m| !m.contains(old)),
                "write {i}: the error removed by this write ({old}) is reported as new: {v}"
            );
        }
        let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "app.py"}));
        let now = messages(&v["diagnostics"]);
        assert!(
            now.iter().any(|m| m.contains(name)),
            "write {i}: `lsp diagnostics` lacks the current error {name}: {v}"
        );
        if let Some(old) = previous {
            assert!(
                now.iter().all(|m| !m.contains(old)),
                "write {i}: `lsp diagnostics` still lists the removed error {old}: {v}"
            );
        }
        previous = Some(name);
    }
    // Fixed: nothing new, and nothing left.
    let v = ok_in(
        &d,
        w,
        "write",
        json!({"path": "app.py", "content": app("0")}),
    );
    assert!(messages(&v["diagnostics"]["new"]).is_empty(), "{v}");
    let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "app.py"}));
    assert!(messages(&v["diagnostics"]).is_empty(), "{v}");
}

#[test]
fn pyright_diagnostics_follow_a_change_in_an_imported_file() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        ("pkg/models.py", MODELS),
        ("pkg/service.py", SERVICE),
        ("app.py", &app("0")),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    for file in ["app.py", "pkg/service.py", "pkg/models.py"] {
        let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": file}));
        assert!(messages(&v["diagnostics"]).is_empty(), "{file}: {v}");
    }
    let renamed = MODELS.replace("def area", "def surface");
    for round in 0..6 {
        // `area` is gone from the model: service.py, unchanged, now has an error.
        ok_in(
            &d,
            w,
            "write",
            json!({"path": "pkg/models.py", "content": renamed}),
        );
        let v = ok_in(
            &d,
            w,
            "lsp",
            json!({"op": "diagnostics", "file": "pkg/service.py"}),
        );
        assert!(
            messages(&v["diagnostics"])
                .iter()
                .any(|m| m.contains("area")),
            "round {round}: service.py's list predates the change to models.py: {v}"
        );
        // And back: the error is gone at once.
        ok_in(
            &d,
            w,
            "write",
            json!({"path": "pkg/models.py", "content": MODELS}),
        );
        let v = ok_in(
            &d,
            w,
            "lsp",
            json!({"op": "diagnostics", "file": "pkg/service.py"}),
        );
        assert!(
            messages(&v["diagnostics"]).is_empty(),
            "round {round}: a fixed error is still listed for service.py: {v}"
        );
    }
}
