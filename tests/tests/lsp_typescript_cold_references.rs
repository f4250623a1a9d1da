//! typescript-language-server loads a project lazily, after its first
//! document is opened, and until then answers `references` from the files loaded so far (one
//! file, the declaration). On a cold daemon, the first `references` call on a project of 17
//! files must give all of them (or `not_ready`), never the partial list as if complete.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

#[test]
fn typescript_references_on_a_cold_server_wait_for_the_project() {
    require("typescript-language-server");
    let mut files = vec![
        (
            "tsconfig.json".to_string(),
            "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}, \"include\": [\"src\"]}\n".to_string(),
        ),
        (
            "src/core.ts".to_string(),
            "export function compare(a: number, b: number): number {\n    return a - b;\n}\n"
                .to_string(),
        ),
    ];
    for i in 1..=16 {
        files.push((
            format!("src/m{i}.ts"),
            format!(
                "import {{ compare }} from \"./core\";\n\nexport function f{i}(x: number): number {{\n    return compare(x, {i}) + compare({i}, x);\n}}\n"
            ),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let p = project(&refs);
    let d = TestDaemon::start(&lsp_config(""));
    // The very first call: the server starts now, cold.
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "src/core.ts", "line": 1, "symbol": "compare"}),
    );
    // The declaration, and per importing file the import and two calls: 1 + 16 * 3.
    assert_eq!(v["total"], 49, "a partial list answered as complete: {v}");
    let files: std::collections::BTreeSet<&str> = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["path"].as_str())
        .collect();
    assert_eq!(files.len(), 17, "{v}");
    assert_eq!(v["server"]["state"], "ready", "{v}");
}
