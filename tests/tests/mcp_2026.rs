//! MCP 2026-07-28 beside 2025-11-25: the TypeScript SDK's v2 client negotiates the
//! current revision (no `initialize`; per-request `_meta`), lists and calls tools over stdio,
//! stays in one conversation by sending back the handle a result named (an eval variable
//! survives; a request without it gets a new conversation), writes with `--approvals harness`,
//! and over Streamable HTTP the official Tasks package follows a `download_model` task to its
//! end against the loopback test hub. A 2026 request without its `_meta` is refused clearly.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;
use toolvisor_tests::hf::HfServer;
use toolvisor_tests::mcp::{McpHttp, node_modules, run_client, script, workdir};
use toolvisor_tests::{TestDaemon, bin, eval};

const REPO: &str = "tester/tiny-gguf";

#[test]
fn the_v2_client_negotiates_2026_keeps_its_conversation_by_handle_and_follows_a_task() {
    let hub = HfServer::start(None);
    hub.add_gguf_3shard(REPO, 200_000);
    let d = TestDaemon::start(&eval::kernels_config(&format!(
        "[models]\nendpoint = {:?}\nconnect_timeout_s = 5\n",
        hub.url()
    )));
    let work = workdir(&d);
    let server = McpHttp::start_with(&d.socket, &work, "127.0.0.1:0", &["--approvals", "harness"]);
    let mut cmd = Command::new("node");
    cmd.arg(script("ts2026_session.mjs"))
        .arg(node_modules())
        .arg(bin())
        .arg(&d.socket)
        .arg(&work)
        .arg(&server.url)
        .arg(server.token.as_deref().unwrap())
        .arg(REPO);
    let out = run_client(cmd, Duration::from_secs(240));
    let facts: Json = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));

    assert_eq!(facts["era"], "modern", "{facts}");
    assert_eq!(facts["version"], "2026-07-28", "{facts}");
    let tools: Vec<&str> = facts["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Json::as_str)
        .collect();
    assert!(
        tools.contains(&"read") && tools.contains(&"bash"),
        "{facts}"
    );
    assert!(
        facts["read"]
            .as_str()
            .unwrap()
            .contains("hello from a file"),
        "{facts}"
    );
    let handle = facts["handle"]
        .as_str()
        .expect("a result names its conversation");
    assert!(handle.starts_with("mcp-"), "{handle}");
    assert!(
        facts["eval_same"].as_str().unwrap().contains("42"),
        "{facts}"
    );
    // Over stdio, naming no handle is the session's own conversation (the one `read` named);
    // another handle is another conversation, which has no `x`.
    assert!(
        facts["eval_unnamed"].as_str().unwrap().contains("True"),
        "{facts}"
    );
    assert_eq!(facts["eval_unnamed_handle"], facts["handle"], "{facts}");
    assert!(
        facts["eval_other"].as_str().unwrap().contains("False"),
        "{facts}"
    );
    assert_eq!(
        facts["eval_other_handle"], "another-conversation",
        "{facts}"
    );
    assert_eq!(facts["write_is_error"], false, "{facts}");
    assert_eq!(
        std::fs::read_to_string(work.join("made-2026.txt")).unwrap(),
        "made in 2026\n"
    );

    // A person's approval through the MRTR round trip: asked twice, yes then no.
    assert_eq!(facts["asked"].as_array().map(Vec::len), Some(2), "{facts}");
    assert!(
        facts["asked"][0]
            .as_str()
            .unwrap()
            .contains("touch approved-2026"),
        "{facts}"
    );
    assert_eq!(facts["approved_is_error"], false, "{facts}");
    assert!(
        work.join("approved-2026").exists(),
        "the approved command ran"
    );
    assert!(
        facts["declined_text"]
            .as_str()
            .unwrap()
            .contains("approval_denied"),
        "{facts}"
    );
    assert!(
        !work.join("declined-2026").exists(),
        "the declined command ran"
    );

    assert_eq!(facts["http_era"], "modern", "{facts}");
    assert!(facts["task_error"].is_null(), "{}", facts["task_error"]);
    assert_eq!(facts["download_is_error"], false, "{facts}");
    let text = facts["download_text"].as_str().unwrap();
    assert!(text.contains("state: done"), "{text}");
    // The files are in the store: a task that said done meant it.
    assert!(hub.served(REPO, "tiny-Q4_K_M-00003-of-00003.gguf") >= 200_000);
}

#[test]
fn a_2026_request_without_its_meta_is_refused_naming_what_is_missing() {
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let server = McpHttp::start(&d.socket, &work, "127.0.0.1:0");
    let addr = server.addr().to_string();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{}MCP-Protocol-Version: 2026-07-28\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        server.auth_header(),
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(
        answer.contains("protocolVersion") || answer.contains("_meta"),
        "the refusal names the missing request metadata: {answer}"
    );
    assert!(answer.contains("\"error\""), "{answer}");
}
