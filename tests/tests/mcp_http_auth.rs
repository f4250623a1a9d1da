//! `toolvisor mcp --listen 127.0.0.1:PORT` against other local users and floods:
//! every request needs the listener's bearer token, kept in a 0600 file; another user (uid
//! 65534, with curl) can neither read the token nor open a session; a flood of sessions
//! without the token opens none, and one client holding the token cannot take more than its
//! share, so the daemon keeps serving everyone else.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::mcp::{McpHttp, workdir};
use toolvisor_tests::{TestDaemon, wait_for};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// One HTTP answer.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// POST `body` to `/mcp` with the extra header lines `extra` (each ending in \r\n).
fn post(addr: &str, extra: &str, body: &str) -> Answer {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {text}"));
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// A whole session opened the way a harness does (initialize, initialized, tools/list), so
/// it holds a daemon connection; `Err(answer)` when a step is refused.
fn open_session(addr: &str, auth: &str) -> Result<String, Answer> {
    let init = post(addr, auth, INIT);
    if init.status != 200 {
        return Err(init);
    }
    let id = init
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session id: {}", init.head));
    let with_id = format!("{auth}Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-06-18\r\n");
    let notified = post(
        addr,
        &with_id,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert_eq!(notified.status, 202, "{}{}", notified.head, notified.body);
    let list = post(
        addr,
        &with_id,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
    );
    assert_eq!(list.status, 200, "{}{}", list.head, list.body);
    assert!(list.body.contains("\"read\""), "{}", list.body);
    Ok(id)
}

#[test]
fn every_request_to_a_loopback_listener_needs_its_token() {
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let server = McpHttp::start(&d.socket, &work, "127.0.0.1:0");
    let file = server
        .token_file
        .clone()
        .expect("a loopback listener names its token file");
    assert_eq!(
        file.parent(),
        d.socket.parent(),
        "beside the daemon's socket"
    );
    let port = server.addr().rsplit(':').next().unwrap();
    assert_eq!(
        file.file_name().unwrap().to_str().unwrap(),
        format!("toolvisor-mcp-{port}.token")
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the token file must be private");
    let token = server.token.clone().unwrap();
    assert_eq!(token.len(), 64, "32 random bytes in hex");

    let none = post(server.addr(), "", INIT);
    assert_eq!(none.status, 401, "{}{}", none.head, none.body);
    assert!(
        none.header("www-authenticate")
            .is_some_and(|v| v.starts_with("Bearer")),
        "{}",
        none.head
    );
    assert!(
        none.body.contains("Authorization: Bearer") && none.body.contains(file.to_str().unwrap()),
        "the refusal says what to send and where the token is: {}",
        none.body
    );
    assert!(
        !none.body.contains(&token),
        "the refusal never shows the token"
    );
    let wrong = post(
        server.addr(),
        &format!("Authorization: Bearer {}\r\n", "0".repeat(64)),
        INIT,
    );
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert!(wrong.body.contains("does not carry"), "{}", wrong.body);

    let id = open_session(server.addr(), &server.auth_header())
        .unwrap_or_else(|a| panic!("{} {}", a.status, a.body));
    // Every request, not only the first: a session id alone is not enough.
    let stolen = post(
        server.addr(),
        &format!("Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-06-18\r\n"),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#,
    );
    assert_eq!(stolen.status, 401, "{}", stolen.body);

    // A generated token is the listener's alone: gone when it stops.
    toolvisor_tests::sigterm(server.child.id()).unwrap();
    wait_for("the token file to go", Duration::from_secs(10), || {
        (!file.exists()).then_some(())
    });
}

#[test]
fn another_local_user_can_neither_read_the_token_nor_drive_the_listener() {
    toolvisor_tests::require_root("running a client as uid 65534");
    let d = TestDaemon::start("");
    let work = workdir(&d);
    // The attack reaches the daemon only through the listener: the socket's directory is the
    // test's private temp dir, which uid 65534 cannot enter.
    let server = McpHttp::start(&d.socket, &work, "127.0.0.1:0");
    let marker = std::env::temp_dir().join(format!("toolvisor-pwned-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let nobody = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap_or_else(|e| panic!("run {program} as uid 65534: {e}"))
    };
    let cat = nobody(
        "cat",
        &[server.token_file.as_ref().unwrap().to_str().unwrap()],
    );
    assert!(!cat.status.success(), "uid 65534 read the token");

    let url = server.url.clone();
    let curl = |body: &str, extra: &[&str]| {
        let mut args = vec![
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: application/json, text/event-stream",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--data", body, &url]);
        let out = nobody("curl", &args);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // What uid 65534 did on the old code: open a session, approve its own call through
    // elicitation, and run bash as the daemon's user.
    assert_eq!(curl(INIT, &[]), "401", "a session for another user");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": format!("touch {}", marker.display())}}})
    .to_string();
    assert_eq!(
        curl(
            &call,
            &[
                "-H",
                "Mcp-Session-Id: guessed",
                "-H",
                "MCP-Protocol-Version: 2025-06-18"
            ]
        ),
        "401"
    );
    assert!(
        !marker.exists(),
        "uid 65534 ran a command as the daemon's user"
    );
    // The listener's owner still works.
    open_session(server.addr(), &server.auth_header())
        .unwrap_or_else(|a| panic!("{} {}", a.status, a.body));
}

#[test]
fn a_flood_of_sessions_cannot_starve_the_daemons_other_clients() {
    let d = TestDaemon::start("[limits]\nmax_sessions = 24\n");
    let work = workdir(&d);
    let server = McpHttp::start_with(
        &d.socket,
        &work,
        "127.0.0.1:0",
        &["--max-sessions", "40", "--max-sessions-per-client", "8"],
    );
    let addr = server.addr().to_string();
    // Without the token: 60 sessions opened at once, more than the daemon takes.
    let floods: Vec<_> = (0..6)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                (0..10)
                    .map(|_| open_session(&addr, "").err().map(|a| a.status))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for f in floods {
        for status in f.join().unwrap() {
            assert_eq!(status, Some(401), "a session opened without the token");
        }
    }
    // The daemon still serves its own clients.
    d.ok("native", "ls", json!({"path": "."}));

    // With the token, one client gets its share and a clear refusal past it.
    let auth = server.auth_header();
    let mut mine = Vec::new();
    let refused = loop {
        match open_session(&addr, &auth) {
            Ok(id) => mine.push(id),
            Err(a) => break a,
        }
        assert!(mine.len() <= 8, "one client held more than its cap");
    };
    assert_eq!(mine.len(), 8);
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.header("retry-after").is_some(), "{}", refused.head);
    assert!(
        refused.body.contains("--max-sessions-per-client 8")
            && refused.body.contains(&std::process::id().to_string()),
        "the refusal names the cap and the client: {}",
        refused.body
    );
    // Another client process still gets a session, and the daemon still answers natively.
    let other = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-H",
            "Accept: application/json, text/event-stream",
            "-H",
            auth.trim_end(),
            "--data",
            INIT,
            &server.url,
        ])
        .output()
        .expect("run curl");
    assert_eq!(String::from_utf8_lossy(&other.stdout), "200");
    d.ok("native", "ls", json!({"path": "."}));

    // A session closed (DELETE) gives its place back.
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "DELETE /mcp HTTP/1.1\r\nHost: {addr}\r\n{auth}Mcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-06-18\r\nConnection: close\r\n\r\n",
        mine[0]
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 2"), "{text}");
    wait_for(
        "the closed session's place",
        Duration::from_secs(10),
        || open_session(&addr, &auth).ok(),
    );
}
