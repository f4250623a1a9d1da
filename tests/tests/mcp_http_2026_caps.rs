//! 2026-07-28 requests (no session) against the listener's caps: each new
//! conversation handle is a run holding a daemon connection, and one client once opened
//! about 256 of them, each kept 10 minutes, until the daemon answered `busy` to everyone.
//! Now runs count against the per-client and total caps as sessions do (a request naming a
//! run it already has still works at the cap), and an idle run gives its daemon connection
//! and its place back without waiting for another request.

use std::io::{Read, Write};
use std::time::Duration;

use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::mcp::{McpHttp, workdir};
use toolvisor_tests::{TestDaemon, options, wait_for};

const KEY: &str = "toolvisor/conversation";

/// A 2026-07-28 `tools/list`, naming `handle` when given; the whole HTTP answer.
fn list(addr: &str, auth: &str, handle: Option<&str>) -> String {
    let mut meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "0"},
    });
    if let Some(h) = handle {
        meta[KEY] = h.into();
    }
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
        "params": {"_meta": meta}})
    .to_string();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// The handle a result gave back.
fn handle_of(answer: &str) -> String {
    let key = format!("\"{KEY}\":\"");
    let at = answer
        .find(&key)
        .unwrap_or_else(|| panic!("no {KEY} in the answer: {answer}"))
        + key.len();
    answer[at..].split('"').next().unwrap().to_string()
}

#[test]
fn runs_without_a_session_share_the_caps_and_idle_ones_give_their_connection_back() {
    // The daemon takes 3 connections: as many as this client's runs may hold.
    let d = TestDaemon::start("[limits]\nmax_sessions = 3\n");
    let work = workdir(&d);
    let server = McpHttp::start_with(
        &d.socket,
        &work,
        "127.0.0.1:0",
        &[
            "--max-sessions-per-client",
            "3",
            // Long enough that the runs cannot idle out between the requests below.
            "--run-idle-secs",
            "15",
        ],
    );
    let addr = server.addr().to_string();
    let auth = server.auth_header();
    let handles: Vec<String> = (0..3)
        .map(|_| {
            let answer = list(&addr, &auth, None);
            assert!(answer.contains("\"read\""), "{answer}");
            handle_of(&answer)
        })
        .collect();

    // A fourth conversation is one run too many: refused, naming the cap and what to do.
    let refused = list(&addr, &auth, None);
    assert!(
        refused.contains("\"error\"")
            && refused.contains("--max-sessions-per-client 3")
            && refused.contains(&std::process::id().to_string())
            && refused.contains(KEY),
        "the refusal names the cap, the client and the handle to send back: {refused}"
    );
    // A run the client has is still served at the cap.
    let again = list(&addr, &auth, Some(&handles[0]));
    assert!(again.contains("\"read\""), "{again}");
    assert_eq!(handle_of(&again), handles[0]);

    // Nobody uses them: their daemon connections come back without another request, so a
    // client of the daemon's own is served again.
    let native = wait_for(
        "the idle runs to give the daemon's connections back",
        Duration::from_secs(120),
        || Client::connect(&d.socket, options(Codec::Json, Tier::Read, false)).ok(),
    );
    drop(native);
    // And their places: a new conversation is admitted again.
    let fresh = wait_for("a place for a new run", Duration::from_secs(30), || {
        let answer = list(&addr, &auth, None);
        answer.contains("\"read\"").then_some(answer)
    });
    assert!(!handles.contains(&handle_of(&fresh)));
}
