//! What every MCP client downloads on each `tools/list`: without `--structured` the list has no
//! `outputSchema` (most of its size) and stays under a budget of characters; with it every tool
//! that declares its results carries its schema. `cargo nextest run -p toolvisor-tests -E
//! 'test(mcp_tool_list_size)' --no-capture` prints the figures docs/BENCHMARKS.md quotes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_tests::mcp::workdir;
use toolvisor_tests::{bin, eval};

/// The `tools/list` result of a stdio `toolvisor mcp EXTRA…` session.
fn tools_list(d: &toolvisor_tests::TestDaemon, extra: &[&str]) -> Json {
    let work = workdir(d);
    let mut child = Command::new(bin())
        .args(["mcp", "--socket"])
        .arg(&d.socket)
        .arg("--workdir")
        .arg(&work)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn toolvisor mcp");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Json>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut send = |v: Json| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "size-probe", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = loop {
        let v = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("no tools/list answer from toolvisor mcp within 60 s");
        if v["id"] == 2 {
            break v["result"].clone();
        }
    };
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    list
}

#[test]
fn the_tool_list_carries_output_schemas_only_with_structured() {
    let d = eval::daemon("");
    let plain = tools_list(&d, &[]);
    let structured = tools_list(&d, &["--structured"]);
    let tools = |l: &Json| l["tools"].as_array().unwrap().clone();
    assert_eq!(tools(&plain).len(), tools(&structured).len());
    assert!(
        tools(&plain)
            .iter()
            .all(|t| t.get("outputSchema").is_none()),
        "an outputSchema without --structured"
    );
    let with_schema = tools(&structured)
        .iter()
        .filter(|t| t.get("outputSchema").is_some())
        .count();
    assert!(with_schema * 2 > tools(&structured).len(), "{with_schema}");
    let (p, s) = (
        plain.to_string().chars().count(),
        structured.to_string().chars().count(),
    );
    println!(
        "tools/list: {} tools; {p} characters; with --structured {s} characters",
        tools(&plain).len()
    );
    // The budget: every description and (lean) input schema, the annotations, no output
    // schema. What a model reads of it is held to 15,000 by harness_tool_list.
    assert!(
        p <= 25_000,
        "tools/list is {p} characters, over the 25,000 budget"
    );
    assert!(
        s > 3 * p,
        "output schemas are most of the structured list: {s} vs {p}"
    );
}
