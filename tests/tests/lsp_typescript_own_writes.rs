//! The daemon's own writes to files open in typescript-language-server leave it synced and
//! answering at once: an `edit` of an open file reports the error it adds, a following
//! `diagnostics` counts both errors, and a rename across two files answers with every
//! written file's diagnostics. The server publishes nothing for a file whose empty list stays
//! empty, so the rename waited 30 s for a publish that never came and said "no diagnostics
//! within 30 s (not_ready)" for the file it renamed a use in.

use serde_json::{Value, json};
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{call_in, lsp_config, project, require, tail};

const ERRORS: &str = "export function total(xs: number[]): number {\n    return xs.length;\n}\n\nexport const bad: number = \"one\";\n";

fn must(d: &TestDaemon, w: &std::path::Path, tool: &str, args: Value) -> Value {
    match call_in(d, w, tool, args.clone()) {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!(
            "{tool} {args}: {e}\n--- daemon log (tail) ---\n{}",
            tail(&d.log_text(), 60)
        ),
    }
}

fn errors(v: &Value) -> Vec<u64> {
    v["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics list in {v}"))
        .iter()
        .filter(|d| d["severity"] == "error")
        .map(|d| d["line"].as_u64().unwrap())
        .collect()
}

#[test]
fn an_edit_of_an_open_typescript_file_is_answered_at_once_and_stays_synced() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}, \"include\": [\"src\"]}\n",
        ),
        ("src/errors.ts", ERRORS),
        (
            "src/use.ts",
            "import { total } from \"./errors\";\n\nexport const n = total([1, 2]);\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // Open in the server, with its one error.
    let v = must(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "src/errors.ts"}),
    );
    assert_eq!(errors(&v), vec![5], "{v}");
    // The daemon's own edit adds a second error: reported with the edit.
    let v = must(
        &d,
        w,
        "edit",
        json!({"path": "src/errors.ts", "old_text": "    return xs.length;\n", "new_text": "    const s: string = 1;\n    return xs.length;\n"}),
    );
    let new = v["diagnostics"]["new"]
        .as_array()
        .unwrap_or_else(|| panic!("the edit reports no diagnostics: {v}"));
    assert!(new.iter().any(|d| d["line"] == 2), "{v}");
    // And the server stays synced: both errors, asked at once.
    let v = must(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "src/errors.ts"}),
    );
    assert_eq!(errors(&v), vec![2, 6], "{v}");
    // A rename across the two files.
    let v = must(
        &d,
        w,
        "lsp_rename",
        json!({"file": "src/errors.ts", "line": 1, "symbol": "total", "new_name": "sum"}),
    );
    assert!(v.to_string().contains("use.ts"), "{v}");
    let notes = v["diagnostics"]["notes"].as_array().unwrap();
    assert!(notes.is_empty(), "every written file's diagnostics: {v}");
    let used = std::fs::read_to_string(w.join("src/use.ts")).unwrap();
    assert!(used.contains("sum([1, 2])"), "{used}");
    // Once more after the rename's own write.
    let v = must(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "src/errors.ts"}),
    );
    assert_eq!(errors(&v), vec![2, 6], "{v}");
}
