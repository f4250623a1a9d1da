//! The Streamable HTTP listener's accepted TCP sockets have TCP_NODELAY set: without it a
//! small JSON-RPC answer waits for the client's delayed ACK (Nagle's algorithm), about 40 ms
//! per call from the TypeScript SDK. Checked on the server's own socket, found
//! among this process's file descriptors by its peer address.

use std::io::{Read, Write};
use std::os::fd::BorrowedFd;
use std::time::Duration;

use nix::sys::socket::{SockaddrStorage, getpeername, getsockopt, sockopt};
use toolvisor_mcp::http::{HttpOptions, serve_http};
use toolvisor_mcp::{Listen, Options};

#[test]
fn accepted_tcp_connections_have_nodelay() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = toolvisor_mcp::StopToken::new();
    let opts = Options {
        socket: dir.path().join("no-daemon.sock"),
        surface: toolvisor_protocol::wire::Tier::Read,
        conversation: None,
        run_id: None,
        workdir: dir.path().display().to_string(),
        poll: Duration::from_secs(60),
        approvals: toolvisor_mcp::Approvals::Elicit,
        questions: toolvisor_mcp::Questions::Elicit,
        structured: false,
        images: toolvisor_mcp::Images::Auto,
        run_token: None,
        renderer: Default::default(),
    };
    let http = HttpOptions::new(Listen::Tcp("127.0.0.1:0".parse().unwrap()));
    let server_stop = stop.clone();
    rt.spawn(async move {
        serve_http(opts, http, server_stop, move |ready| {
            tx.send(ready.clone()).unwrap();
        })
        .await
        .unwrap();
    });
    let ready = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let token = std::fs::read_to_string(ready.token_file.as_ref().unwrap()).unwrap();
    let addr = ready
        .url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap()
        .to_string();
    let mut client = std::net::TcpStream::connect(&addr).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    write!(
        client,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        token.trim(),
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 12];
    client.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");

    // The server's end of this connection: the socket whose peer is our client.
    let mine = client.local_addr().unwrap();
    let mut found = None;
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        // SAFETY: `fd` is open in this process for the duration of the loop body (the
        // server task keeps the connection until the client closes it, after the loop).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let Ok(peer) = getpeername::<SockaddrStorage>(std::os::fd::AsRawFd::as_raw_fd(&fd)) else {
            continue;
        };
        if peer
            .as_sockaddr_in()
            .map(|a| std::net::SocketAddr::from(std::net::SocketAddrV4::from(*a)))
            == Some(mine)
        {
            found = Some(getsockopt(&fd, sockopt::TcpNoDelay).unwrap());
        }
    }
    assert_eq!(found, Some(true), "the server's socket has TCP_NODELAY");
    drop(client);
    stop.cancel();
}
