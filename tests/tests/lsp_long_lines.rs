//! A location on a very long line (a minified bundle, a generated table)
//! was quoted whole, line after line, in `references`. Lines are cut to 200 characters
//! around the match, the cut ends marked `…`, the item saying `text_cut` and the line's
//! length, and the answer says lines were cut.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

#[test]
fn references_on_a_long_line_quote_the_match_not_the_line() {
    require("typescript-language-server");
    let numbers: Vec<String> = (0..4000).map(|i| i.to_string()).collect();
    let big = format!(
        "import {{ enlist }} from \"./core\"; export const table = [{}]; export const z = enlist(\"x\");\n",
        numbers.join(", ")
    );
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}, \"include\": [\"src\"]}\n",
        ),
        (
            "src/core.ts",
            "export function enlist(name: string): string {\n    return name;\n}\n",
        ),
        ("src/big.ts", &big),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "src/core.ts", "line": 1, "symbol": "enlist"}),
    );
    assert_eq!(v["total"], 3, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.len() < 1500,
        "a long line quoted whole ({} bytes)",
        text.len()
    );
    let on_big: Vec<&serde_json::Value> = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["path"] == "src/big.ts")
        .collect();
    assert_eq!(on_big.len(), 2, "{v}");
    for l in on_big {
        let shown = l["text"].as_str().unwrap();
        assert!(shown.chars().count() <= 202, "{shown}");
        assert!(shown.contains("enlist"), "the cut lost the match: {shown}");
        assert_eq!(l["text_cut"], true, "{l}");
        assert_eq!(l["line_chars"], big.trim_end().chars().count(), "{l}");
    }
    assert!(
        text.contains("enlist(\"x\")…") || text.contains("enlist(\"x\");"),
        "{text}"
    );
    assert!(text.contains("cut around the match"), "{text}");
}
