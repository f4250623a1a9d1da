//! `toolvisor mcp --listen 127.0.0.1:PORT` against a local user without the token who holds
//! connections: 260 keep-alive connections, each reading its 401 and asking again,
//! once held all 256 of the listener's connections, and every legitimate connect was reset.
//! Now a 401 closes its connection, and one user holds only a few connections before showing
//! the token, so the token's holder is still answered.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use toolvisor_tests::mcp::{McpHttp, workdir};
use toolvisor_tests::{TestDaemon, wait_for};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// Another user's client: keeps N keep-alive connections open, sending a request without the
/// token on each every half second and reading what comes back; a connection the listener
/// closed is opened again. Prints `ready` once every connection had an answer or was closed,
/// and stops when its stdin closes.
const HOLDER: &str = r#"
import select, socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
req = (b"POST /mcp HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
       b"Accept: application/json, text/event-stream\r\nContent-Length: " + str(len(body)).encode()
       + b"\r\n\r\n" + body)
conns, ready = [], False
while not select.select([sys.stdin], [], [], 0)[0]:
    while len(conns) < n:
        try:
            s = socket.create_connection((host, port), timeout=5)
        except OSError:
            break
        s.setblocking(False)
        conns.append(s)
    for s in list(conns):
        try:
            s.sendall(req)
        except OSError:
            conns.remove(s)
    time.sleep(0.5)
    for s in list(conns):
        try:
            if s.recv(65536) == b"":
                conns.remove(s); s.close()
        except BlockingIOError:
            pass
        except OSError:
            conns.remove(s); s.close()
    if not ready:
        print("ready", flush=True)
        ready = True
"#;

/// The other user's client, killed if the test ends early.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// POST `body` with `extra` header lines on a fresh connection; the status, or the error.
fn post(addr: &str, extra: &str, body: &str) -> Result<(u16, String, String), String> {
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    s.read_to_string(&mut text).map_err(|e| e.to_string())?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {text:?}"))?;
    Ok((status, head.to_string(), body.to_string()))
}

/// initialize + tools/list with the token, as a harness does.
fn answered(addr: &str, auth: &str) -> Result<(), String> {
    let (status, head, body) = post(addr, auth, INIT)?;
    if status != 200 {
        return Err(format!("initialize: {status} {body}"));
    }
    let id = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .ok_or_else(|| format!("no session id: {head}"))?;
    let with_id = format!("{auth}Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-06-18\r\n");
    post(
        addr,
        &with_id,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )?;
    let (status, _, body) = post(
        addr,
        &with_id,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    )?;
    if status != 200 || !body.contains("\"read\"") {
        return Err(format!("tools/list: {status} {body}"));
    }
    Ok(())
}

#[test]
fn a_401_closes_its_connection() {
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let server = McpHttp::start(&d.socket, &work, "127.0.0.1:0");
    let addr = server.addr().to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    // Keep-alive asked for: the listener closes it anyway.
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{INIT}",
        INIT.len()
    )
    .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut text = Vec::new();
    s.read_to_end(&mut text).unwrap_or_else(|e| {
        panic!(
            "the connection stayed open after its answer ({e}): {}",
            String::from_utf8_lossy(&text)
        )
    });
    let text = String::from_utf8_lossy(&text);
    assert!(text.starts_with("HTTP/1.1 401"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "the 401 says it closes: {text}"
    );
}

#[test]
fn another_user_holding_connections_without_the_token_cannot_lock_out_the_tokens_holder() {
    toolvisor_tests::require_root("a client of uid 65534");
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let server = McpHttp::start(&d.socket, &work, "127.0.0.1:0");
    let addr = server.addr().to_string();
    let (host, port) = addr.rsplit_once(':').unwrap();
    // More than the listener's 256 connections.
    let mut holder = Holder(
        Command::new("/usr/bin/python3")
            .args(["-c", HOLDER, host, port, "260"])
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run python3 as uid 65534"),
    );
    let holder = &mut holder.0;
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the holder did not start");

    let auth = server.auth_header();
    for round in 0..5 {
        answered(&addr, &auth).unwrap_or_else(|e| {
            panic!("round {round}: the token's holder was not answered while another user held connections: {e}")
        });
    }
    assert!(
        holder.try_wait().unwrap().is_none(),
        "the holder stopped early, so it proved nothing"
    );
    drop(holder.stdin.take());
    wait_for("the holder to stop", Duration::from_secs(20), || {
        holder.try_wait().ok().flatten()
    });
}
