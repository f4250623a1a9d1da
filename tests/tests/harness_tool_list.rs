//! What toolvisor's tool list costs a model, measured where it counts: in the request Claude
//! Code (`claude -p`) and Codex (`codex exec`) send to their model endpoint, with `toolvisor mcp`
//! on the exec surface of a daemon with the default configuration plus kernels (every tool it
//! lists by default). The entries of toolvisor's tools in that request, as JSON text, must stay
//! within [`BUDGET`] characters, and every tool of `tools/list` must be among them (none
//! dropped or deferred to get under it). `--no-capture` prints the figures docs/BENCHMARKS.md
//! quotes.

use serde_json::{Value as Json, json};
use toolvisor_tests::eval;
use toolvisor_tests::harness::{Endpoint, claude, codex, played, project};

/// Characters of toolvisor's tool entries in one model request (at most 15,000).
const BUDGET: usize = 15_000;

/// The tools the daemon lists on the exec surface (what `toolvisor mcp` offers by default).
fn listed(d: &toolvisor_tests::TestDaemon) -> Vec<String> {
    let out = std::process::Command::new(toolvisor_tests::bin())
        .args(["tools", "--surface", "exec", "--json", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Json = serde_json::from_slice(&out.stdout).unwrap();
    let tools = v.as_array().or_else(|| v["tools"].as_array()).unwrap();
    tools
        .iter()
        .filter(|t| t["available"] != false)
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The first main-loop request the endpoint got.
fn first_turn(ep: &Endpoint) -> Json {
    ep.requests()
        .into_iter()
        .find(|r| r["kind"] == "turn")
        .expect("no main-loop request reached the endpoint")
}

/// (tool name, its entry as sent) of toolvisor's tools in a request body, either API: an
/// Anthropic `tools` entry named `mcp__toolvisor__<tool>`; a Responses API function of that
/// name, or one inside a `namespace` entry for the server (whose own text counts too).
fn entries(body: &Json) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    let mut chars = 0;
    for t in body["tools"].as_array().cloned().unwrap_or_default() {
        let name = t["name"].as_str().unwrap_or_default();
        if t["type"] == "namespace" && name.contains("toolvisor") {
            chars += t.to_string().chars().count();
            for sub in t["tools"].as_array().cloned().unwrap_or_default() {
                names.push(sub["name"].as_str().unwrap_or_default().to_string());
            }
        } else if name.contains("toolvisor") {
            chars += t.to_string().chars().count();
            names.push(name.to_string());
        }
    }
    let bare = names
        .into_iter()
        .map(|n| {
            n.rsplit("__")
                .next()
                .unwrap_or_default()
                .trim_start_matches("toolvisor_")
                .to_string()
        })
        .collect();
    (bare, chars)
}

fn check(harness: &str, ep: &Endpoint, want: &[String]) {
    let (sent, chars) = entries(&first_turn(ep)["body"]);
    println!(
        "{harness}: {} toolvisor tools, {chars} characters in the model request",
        sent.len()
    );
    for t in want {
        assert!(
            sent.contains(t),
            "{harness} did not send {t} to the model: {sent:?}"
        );
    }
    assert!(
        chars <= BUDGET,
        "{harness} sends toolvisor's {} tools to the model as {chars} characters, over the budget of {BUDGET}: trim descriptions (docs/TOOLS.md holds the detail)",
        sent.len()
    );
}

#[test]
fn claude_code_sends_every_tool_within_the_budget() {
    let d = eval::daemon("");
    let work = project(&d);
    let want = listed(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), json!([{"final": "listed"}]));
    let run = claude(&d, &ep, &work, &[], &[]);
    played(&run, &ep, "");
    check("Claude Code", &ep, &want);
}

#[test]
fn codex_sends_every_tool_within_the_budget() {
    let d = eval::daemon("");
    let work = project(&d);
    let want = listed(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), json!([{"final": "listed"}]));
    let run = codex(&d, &ep, &work, &[], &[]);
    played(&run, &ep, "");
    check("Codex", &ep, &want);
}
