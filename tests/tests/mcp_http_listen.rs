//! `toolvisor mcp --listen`: loopback or a private Unix socket only. A Unix socket is made
//! 0600 and answers MCP's Streamable HTTP (an `initialize` POST); a non-loopback address is
//! refused before anything listens, saying what to use instead; a foreign `Host` (DNS
//! rebinding) is refused.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::Command;

use toolvisor_tests::mcp::{McpHttp, workdir};
use toolvisor_tests::{TestDaemon, bin};

#[test]
fn a_unix_socket_listener_is_private_and_speaks_streamable_http() {
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let path = d.dir.path().join("mcp.sock");
    let server = McpHttp::start(&d.socket, &work, path.to_str().unwrap());
    assert!(
        server.url.contains(path.to_str().unwrap()),
        "{}",
        server.url
    );
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the MCP socket must be private");

    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let mut s = UnixStream::connect(&path).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.to_lowercase().contains("mcp-session-id"), "{answer}");
    assert!(answer.contains("\"name\":\"toolvisor\""), "{answer}");
    assert!(answer.contains("\"listChanged\":true"), "{answer}");
}

#[test]
fn a_non_loopback_listen_address_is_refused() {
    let out = Command::new(bin())
        .args(["mcp", "--listen", "0.0.0.0:8765"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("loopback only") && err.contains("127.0.0.1"),
        "{err}"
    );
}

#[test]
fn a_loopback_listener_refuses_a_foreign_host_header() {
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let server = McpHttp::start(&d.socket, &work, "127.0.0.1:0");
    let addr = server.addr();
    let auth = server.auth_header();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let post = |host: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    };
    // A page on another site that resolves its name to 127.0.0.1 (DNS rebinding) sends its
    // own name as Host.
    let rebound = post("attacker.example");
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    let local = post(addr);
    assert!(local.starts_with("HTTP/1.1 200"), "{local}");
}
