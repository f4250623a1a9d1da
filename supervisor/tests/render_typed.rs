//! Each tool's rendering from its result type (`ToolSpec.render`, what `toolvisor mcp`
//! sends a model) reads, byte for byte, as the generic rendering of the same JSON did: on
//! the results recorded from a real daemon (`mcp/tests/fixtures/results/`) and on every
//! whole answer `docs/TOOLS.md` shows; and each of them is its tool's type (a result that is
//! not would only fall back to the generic rules, unnoticed).

use std::path::PathBuf;

use serde_json::Value as Json;
use toolvisor_protocol::render::{Outward, generic};

/// (where, tool, result) of every recorded result and documented answer.
fn results() -> Vec<(String, String, Json)> {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut out = Vec::new();
    let dir = root.join("mcp/tests/fixtures/results");
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let v: Json = serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", entry.path().display()));
        let tool = v["tool"].as_str().unwrap().to_string();
        out.push((
            entry.path().display().to_string(),
            tool,
            v["result"].clone(),
        ));
    }
    let doc = std::fs::read_to_string(root.join("docs/TOOLS.md")).unwrap();
    let lines: Vec<&str> = doc.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some((_, call)) = line.split_once("toolvisor call ") else {
            continue;
        };
        let tool = call.split_whitespace().next().unwrap_or("").to_string();
        // A whole answer (one shortened with `…` is not JSON, and not checked).
        if let Some(next) = lines.get(n + 1)
            && next.starts_with(r#"{"ok":true"#)
            && let Ok(answer) = serde_json::from_str::<Json>(next)
        {
            out.push((
                format!("TOOLS.md:{}", n + 2),
                tool,
                answer["result"].clone(),
            ));
        }
    }
    out
}

#[test]
fn every_result_reads_as_its_json_always_has() {
    let specs = toolvisor::tools::all(true);
    let results = results();
    assert!(results.len() >= 40, "{} results", results.len());
    for (at, tool, value) in results {
        let spec = specs
            .iter()
            .find(|s| s.name == tool)
            .unwrap_or_else(|| panic!("{at}: no tool {tool}"));
        (spec.decode)(&value).unwrap_or_else(|e| panic!("{at}: not a result of {tool}: {e}"));
        assert_eq!(
            (spec.render)(&tool, &value, &Outward::default()),
            generic(&tool, &value),
            "{at}"
        );
    }
}
