//! A vibe tier whose worker is a real harness: Claude Code (`claude -p {brief}`) against the
//! scripted model endpoint, with `toolvisor mcp` as its MCP server, as an operator would
//! configure it. The worker's `toolvisor mcp` is started with the worker's environment, so it
//! carries the worker's credential (`TOOLVISOR_RUN_TOKEN`) in its Hello: the model behind the
//! worker sees only its tier's surface (read), its calls run in its own run and conversation
//! `vibe:<id>`, confined to its workdir, and its final answer is the worker's result.

use std::path::Path;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::harness::{Endpoint, harness_bin};
use toolvisor_tests::{TestDaemon, bin, ok_of, options};

/// The daemon's config: the children's environment a `claude` run needs (a temp HOME, the
/// endpoint, no traffic elsewhere: what `[env] allow` would pass from an operator's shell) and
/// the `fast` tier running Claude Code with `toolvisor mcp` as its one MCP server.
fn config(dir: &Path, ep: &Endpoint) -> String {
    let home = dir.join("claude-home");
    std::fs::create_dir_all(&home).unwrap();
    let mcp = home.join("mcp.json");
    // No --socket and no --workdir: the worker's environment names the socket, and its
    // working directory is its workdir.
    std::fs::write(
        &mcp,
        json!({"mcpServers": {"toolvisor": {"type": "stdio", "command": bin(), "args": ["mcp"]}}})
            .to_string(),
    )
    .unwrap();
    let q = |s: &str| Json::String(s.to_string()).to_string();
    let command = [
        harness_bin("claude").display().to_string(),
        "-p".into(),
        "{brief}".into(),
        "--mcp-config".into(),
        mcp.display().to_string(),
        "--strict-mcp-config".into(),
        "--allowedTools".into(),
        "mcp__toolvisor".into(),
        "--output-format".into(),
        "text".into(),
        "--no-session-persistence".into(),
    ];
    let command: Vec<String> = command.iter().map(|s| q(s)).collect();
    format!(
        "[env]\nset = {{ HOME = {home}, CLAUDE_CONFIG_DIR = {cfg}, ANTHROPIC_BASE_URL = {url}, ANTHROPIC_API_KEY = \"sk-ant-scripted-endpoint\", DISABLE_TELEMETRY = \"1\", DISABLE_ERROR_REPORTING = \"1\", DISABLE_AUTOUPDATER = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\", ENABLE_TOOL_SEARCH = \"false\" }}\n\n[vibe.tiers.fast]\ncommand = [{}]\n",
        command.join(", "),
        home = q(&home.display().to_string()),
        cfg = q(&home.join(".claude").display().to_string()),
        url = q(&format!("http://127.0.0.1:{}", ep.port)),
    )
}

fn call(c: &mut Client, tool: &str, args: Json) -> Json {
    ok_of(&c.call("parent", tool, args).unwrap()).clone()
}

#[test]
fn claude_code_as_a_vibe_worker_sees_its_tiers_surface_and_answers_from_its_workdir() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(
        work.join("notes.txt"),
        "worker-visible toolvisor-vibe-4417\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("beside.txt"), "not the worker's\n").unwrap();
    // The model behind the worker: read a file of its workdir, try one beside it, ask `lsp
    // status` (it names the run), then answer.
    let ep = Endpoint::start(
        &dir.path().join("ep"),
        json!([
            {"tool": "read", "args": {"path": "notes.txt"}},
            {"tool": "read", "args": {"path": "../beside.txt"}},
            {"tool": "lsp", "args": {"op": "status"}},
            {"final": "worker finished: the notes say toolvisor-vibe-4417"}
        ]),
    );
    let config = config(dir.path(), &ep);
    let d = TestDaemon::start_in(dir, &config);
    let mut c = Client::connect(
        &d.socket,
        ClientOptions {
            run_id: "parent-run".into(),
            workdir: work.display().to_string(),
            ..options(Codec::Json, Tier::Read, false)
        },
    )
    .unwrap();
    let spawned = call(
        &mut c,
        "vibe_spawn",
        json!({"brief": "Read notes.txt and report what it says.", "label": "notes"}),
    );
    let id = spawned["worker_id"].as_str().unwrap().to_string();
    let done = call(
        &mut c,
        "vibe_wait",
        json!({"worker_id": id, "timeout_seconds": 240}),
    );
    let summary = ep.summary();
    assert_eq!(
        done["state"],
        "done",
        "{done}\nendpoint: {summary}\nlog: {}",
        d.log_text()
    );
    // The worker's result is the harness's final answer.
    let result = done["result"].as_str().unwrap_or_default();
    assert!(
        result.contains("worker finished: the notes say toolvisor-vibe-4417"),
        "{done}"
    );
    assert!(
        summary["problems"].as_array().is_some_and(|p| p.is_empty()),
        "the worker's harness did not play the whole script: {summary}"
    );

    // What the model behind the worker was offered: its tier's surface (read), whatever
    // `toolvisor mcp` would offer on its own (write and exec tools, with approvals).
    let offered: Vec<String> = ep
        .requests()
        .iter()
        .filter(|r| r["kind"] == "turn")
        .flat_map(|r| r["tool_names"].as_array().cloned().unwrap_or_default())
        .filter_map(|n| {
            n.as_str()?
                .strip_prefix("mcp__toolvisor__")
                .map(String::from)
        })
        .collect();
    assert!(
        offered.iter().any(|t| t == "read") && offered.iter().any(|t| t == "lsp"),
        "{offered:?}"
    );
    for t in ["bash", "write", "edit", "eval", "process"] {
        assert!(
            !offered.iter().any(|o| o == t),
            "the worker's model was offered {t}: {offered:?}"
        );
    }

    // Its calls ran in its own run and conversation, inside its workdir.
    let text = ep.results_text();
    assert!(
        text.contains("worker-visible toolvisor-vibe-4417"),
        "{text}"
    );
    assert!(!text.contains("not the worker's"), "{text}");
    assert!(text.contains("out_of_scope"), "{text}");
    assert!(text.contains(&format!("(run vibe:{id})")), "{text}");
}
