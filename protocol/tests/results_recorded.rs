//! The results recorded from a real daemon (`mcp/tests/fixtures/results/`) pass through their
//! tools' result types unchanged: parsed into the type and serialized again, the JSON is the
//! same, key for key (a field the type lacks, or one it writes where the handler left it out,
//! would show here).

use std::path::PathBuf;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value as Json;
use toolvisor_protocol::results::*;

fn again<R: Serialize + DeserializeOwned>(result: &Json) -> Json {
    let typed: R = serde_json::from_value(result.clone()).unwrap_or_else(|e| panic!("{e}"));
    serde_json::to_value(typed).unwrap()
}

#[test]
fn recorded_results_serialize_again_to_the_same_json() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/fixtures/results");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let recorded: Json = serde_json::from_str(&text).unwrap();
        let result = &recorded["result"];
        let again = match recorded["tool"].as_str().unwrap() {
            "bash" => again::<BashResult>(result),
            "read" => again::<ReadResult>(result),
            "ls" => again::<LsResult>(result),
            "find" => again::<FindResult>(result),
            "grep" => again::<GrepResult>(result),
            "write" => again::<WriteResult>(result),
            "ast_grep" => again::<AstGrepResult>(result),
            "lsp" => again::<LspResult>(result),
            _ => continue,
        };
        assert_eq!(&again, result, "{}", entry.path().display());
        checked.push(entry.file_name());
    }
    assert!(checked.len() >= 12, "only {checked:?}");
}
