//! The latency `toolvisor mcp` adds: the trivial call (`process {"op":"list"}`) as an MCP
//! `tools/call` over stdio through `toolvisor mcp`, against the same call on the daemon's
//! socket, in the same run. `cargo bench -p toolvisor --bench mcp`.
//!
//! The MCP side is driven by hand (newline-delimited JSON-RPC on the child's stdin/stdout),
//! so no client library's overhead is counted; each sample is one request and its response.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;
use common::{Guard, wait_socket};

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientKind, Outcome, Surface, Tier};

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("toolvisor.sock");
    let _daemon = common::start_daemon(dir.path(), &socket, "");
    wait_socket(&socket);

    let mut mcp = Guard(
        Command::new(env!("CARGO_BIN_EXE_toolvisor"))
            .args(["mcp", "--socket"])
            .arg(&socket)
            .env("TOOLVISOR_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start toolvisor mcp"),
    );
    let mut stdin = mcp.0.stdin.take().unwrap();
    let mut stdout = BufReader::new(mcp.0.stdout.take().unwrap());
    let mut next_id = 0u64;
    let mut request = |stdin: &mut ChildStdin,
                       stdout: &mut BufReader<ChildStdout>,
                       method: &str,
                       params: Json|
     -> Json {
        next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params});
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        loop {
            let mut answer = String::new();
            assert!(
                stdout.read_line(&mut answer).unwrap() > 0,
                "toolvisor mcp closed"
            );
            let answer: Json = serde_json::from_str(&answer).unwrap();
            if answer["id"] == next_id {
                return answer;
            }
        }
    };
    let init = request(
        &mut stdin,
        &mut stdout,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"}}),
    );
    assert!(
        init["result"]["serverInfo"]["name"] == "toolvisor",
        "{init}"
    );
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();

    let call = json!({"name": "process", "arguments": {"op": "list"}});
    let mut mcp_once = || {
        let r = request(&mut stdin, &mut stdout, "tools/call", call.clone());
        assert_eq!(r["result"]["isError"], false, "{r}");
    };
    let mut client = connect(&socket);
    let mut socket_once = || match client
        .call("bench", "process", json!({"op": "list"}))
        .map(|r| r.outcome)
    {
        Ok(Outcome::Ok(_)) => {}
        other => panic!("trivial call failed: {other:?}"),
    };

    let n = 5_000;
    for _ in 0..500 {
        mcp_once();
        socket_once();
    }
    // Interleaved, so both see the same machine load.
    let (mut via_mcp, mut via_socket) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        mcp_once();
        via_mcp.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        socket_once();
        via_socket.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let (m50, s50) = (percentile(&via_mcp, 50), percentile(&via_socket, 50));
    let (m99, s99) = (percentile(&via_mcp, 99), percentile(&via_socket, 99));
    println!("| figure | via toolvisor mcp (stdio) | on the socket | added | target |");
    println!("|---|---|---|---|---|");
    println!(
        "| trivial call, median (n={n}) | {m50:.1} µs | {s50:.1} µs | {:.1} µs | < 1000 µs |",
        m50 - s50
    );
    println!(
        "| trivial call, p99 | {m99:.1} µs | {s99:.1} µs | {:.1} µs | — |",
        m99 - s99
    );
    drop(stdin);
    let _ = mcp.0.wait();
}

fn connect(path: &Path) -> Client {
    Client::connect(
        path,
        ClientOptions {
            codec: Codec::Bincode,
            client_kind: ClientKind::Harness,
            surface: Surface {
                max_tier: Tier::Exec,
                approvals: false,
                questions: false,
                bridge_tools: vec![],
            },
            ..ClientOptions::default()
        },
    )
    .expect("connect to the daemon")
}

fn percentile(samples: &[f64], p: usize) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[(v.len() * p / 100).min(v.len() - 1)]
}
