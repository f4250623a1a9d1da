//! What a model reads of a result, before (the result's JSON as the text content) and after
//! (its tool's rendering from its result type, `ToolSpec.render`, as `toolvisor mcp` sends
//! it), on twelve results recorded from a real daemon (pyright on the `packaging` package:
//! `mcp/tests/fixtures/results/`): characters per result, the total saved, and the facts a
//! model needs still there (completeness, truncation, totals, the next offset, every
//! location). `cargo test -p toolvisor --test result_size -- --nocapture` prints the table
//! docs/BENCHMARKS.md quotes.

use std::path::PathBuf;

use serde_json::Value as Json;
use toolvisor_protocol::render::Outward;

/// `tool`'s rendering of `value`, from its spec.
fn render(tool: &str, value: &Json) -> String {
    let specs = toolvisor::tools::all(true);
    let spec = specs
        .iter()
        .find(|s| s.name == tool)
        .unwrap_or_else(|| panic!("no tool {tool}"));
    (spec.render)(tool, value, &Outward::default())
}

fn fixtures() -> Vec<(String, String, Json)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/fixtures/results");
    let mut out: Vec<(String, String, Json)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.path().file_stem().unwrap().to_string_lossy().to_string();
            let v: Json =
                serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
            (
                name,
                v["tool"].as_str().unwrap().to_string(),
                v["result"].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn renderings_are_much_smaller_and_keep_what_a_model_needs() {
    let mut before_total = 0;
    let mut after_total = 0;
    println!("| result | JSON chars | rendered chars | ratio |");
    println!("|---|---:|---:|---:|");
    for (name, tool, value) in fixtures() {
        let before = value.to_string().chars().count();
        let text = render(&tool, &value);
        let after = text.chars().count();
        println!(
            "| {name} | {before} | {after} | {:.2} |",
            after as f64 / before as f64
        );
        before_total += before;
        after_total += after;
        // Facts that must survive, wherever the result has them.
        for key in [
            "complete",
            "total",
            "next_offset",
            "matches",
            "exit_code",
            "eof",
        ] {
            if let Some(v) = value
                .get(key)
                .filter(|v| !v.is_null() && !v.is_array() && !v.is_object())
            {
                let shown = format!(
                    "{key}: {}",
                    v.as_str().map(String::from).unwrap_or(v.to_string())
                );
                assert!(text.contains(&shown), "{name}: {shown} lost:\n{text}");
            }
        }
        if value["truncated"] == true {
            assert!(text.contains("truncated: true"), "{name}");
        }
        if let Some(locations) = value["locations"].as_array() {
            for l in locations {
                let at = format!("{}:{}:", l["path"].as_str().unwrap(), l["line"]);
                assert!(text.contains(&at), "{name}: {at} lost");
            }
        }
        for body in ["content", "output", "stdout", "stderr"] {
            if let Some(s) = value[body].as_str() {
                assert!(
                    text.contains(s.trim_end()),
                    "{name}: its {body} is not verbatim"
                );
            }
        }
    }
    let saved = 1.0 - after_total as f64 / before_total as f64;
    println!(
        "| all | {before_total} | {after_total} | {:.2} |",
        1.0 - saved
    );
    println!("saved: {:.0}%", saved * 100.0);
    assert!(saved >= 0.40, "only {:.0}% fewer characters", saved * 100.0);
}

#[test]
#[ignore = "prints every rendering: cargo test -p toolvisor --test result_size -- --ignored --nocapture"]
fn print_renderings() {
    for (name, tool, value) in fixtures() {
        println!("===== {name}\n{}\n", render(&tool, &value));
    }
}
