//! `code_actions` sent the diagnostics of the asked line's neighbours too
//! (clangd reports a missing `;` on the line after), and listed the fixes for those
//! neighbours as if they were the asked line's. Each action now names its line; the asked
//! line's come first, a neighbour's is labelled with its own line.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const MAIN: &str = "#include \"util.h\"\n\nint main(void) {\n    int a = add(1, 2)\n    int b = add(a, 3)\n    return a + b;\n}\n";

#[test]
fn clangd_code_actions_name_their_line_and_label_neighbours() {
    require("clangd");
    let p = project(&[
        ("compile_commands.json", "[]"),
        ("util.h", "int add(int a, int b);\n"),
        (
            "util.c",
            "#include \"util.h\"\n\nint add(int a, int b) {\n    return a + b;\n}\n",
        ),
        ("main.c", MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "code_actions", "file": "main.c", "line": 5, "symbol": "add"}),
    );
    let actions = v["actions"].as_array().unwrap();
    let text = v["text"].as_str().unwrap();
    assert!(!actions.is_empty(), "{v}");
    // Every action says which line it is for; those for line 5 come first.
    let mut seen_off = false;
    for a in actions {
        let line = a["line"].as_u64().unwrap();
        let on = a["on_line"].as_bool().unwrap();
        assert_eq!(
            on,
            a["line"] == 5 || a["end_line"].as_u64().unwrap() >= 5 && line <= 5,
            "{a}"
        );
        if on {
            assert!(!seen_off, "the asked line's actions come first: {v}");
        } else {
            seen_off = true;
        }
    }
    // clangd reports a missing `;` at the start of the next line: line 5's own is reported
    // on line 6, so its fix is listed as line 6's, labelled as not the asked line.
    let neighbour = actions
        .iter()
        .find(|a| a["line"] == 6)
        .unwrap_or_else(|| panic!("no action for line 6 (the neighbour's fix): {v}"));
    assert_eq!(neighbour["on_line"], false, "{v}");
    let idx = neighbour["index"].as_u64().unwrap();
    assert!(
        text.contains(&format!("[{idx}] line 6 (not line 5")),
        "{text}"
    );
    // Line 4's missing `;`, reported on line 5, is listed as line 5's.
    assert!(
        actions
            .iter()
            .any(|a| a["line"] == 5 && a["on_line"] == true),
        "{v}"
    );
}
