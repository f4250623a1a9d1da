//! The inference endpoint's loopback port and its key (no model needed): with
//! `[inference] api_key` set, a request on the port without the key, or with another, gets a
//! 401 `invalid_api_key` naming what to send; with it (`Authorization: Bearer` or
//! `x-api-key`) it is served; the Unix socket (peers checked by uid) needs none; the key
//! never shows in a tool's result or in the daemon's log.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::inference::{endpoint, request};

const KEY: &str = "sk-toolvisor-test-0123456789abcdef";

/// `GET /v1/models` on the loopback port with `headers`; the status line and the body.
fn models_on(port: u16, headers: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn the_loopback_port_needs_the_key_and_the_socket_does_not() {
    let d = TestDaemon::start(&format!(
        "[inference]\nlisten = \"127.0.0.1:0\"\napi_key = {KEY:?}\n"
    ));
    let status = d.ok("c", "get_inference_status", json!({}));
    let url = status["endpoint"]["listen"].as_str().unwrap().to_string();
    assert_eq!(status["endpoint"]["listen_needs_key"], true, "{status}");
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/v1")
        .parse()
        .unwrap();

    let none = models_on(port, "");
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    assert!(
        none.contains("invalid_api_key") && none.contains("Authorization: Bearer"),
        "{none}"
    );
    let wrong = models_on(port, "authorization: Bearer sk-not-the-key-0123456789\r\n");
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    assert!(!wrong.contains(KEY), "{wrong}");
    let bearer = models_on(port, &format!("authorization: Bearer {KEY}\r\n"));
    assert!(bearer.starts_with("HTTP/1.1 200"), "{bearer}");
    let x_api_key = models_on(port, &format!("x-api-key: {KEY}\r\n"));
    assert!(x_api_key.starts_with("HTTP/1.1 200"), "{x_api_key}");
    // /health stays open (a load balancer's probe carries no key).
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut health = String::new();
    s.read_to_string(&mut health).unwrap();
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");

    // The Unix socket needs no key.
    assert_eq!(
        request(&endpoint(&d), "GET", "/v1/models", None).status,
        200
    );

    // The key is a secret: masked in results, never in the log.
    let shown = d.ok("c", "bash", json!({"command": format!("echo {KEY}")}));
    assert!(!shown.to_string().contains(KEY), "{shown}");
    assert!(!status.to_string().contains(KEY), "{status}");
    assert!(
        !d.log_text().contains(KEY),
        "the key is in the daemon's log"
    );
}

#[test]
fn a_short_key_is_refused_at_start_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n[inference]\napi_key = \"short-key\"\n",
            dir.path().join("state").display().to_string()
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(toolvisor_tests::bin())
        .arg("serve")
        .arg("--socket")
        .arg(dir.path().join("s.sock"))
        .arg("--config")
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = toolvisor_tests::wait_for(
        "the daemon to refuse its config",
        Duration::from_secs(30),
        || child.try_wait().unwrap(),
    );
    let mut text = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(!status.success(), "{text}");
    assert!(text.contains("inference.api_key"), "{text}");
    assert!(
        !text.contains("short-key"),
        "the refusal shows the key: {text}"
    );
}

/// The port of the endpoint's loopback listener, from `get_inference_status`.
fn listen_port(d: &TestDaemon) -> u16 {
    let status = d.ok("c", "get_inference_status", json!({}));
    status["endpoint"]["listen"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/v1")
        .parse()
        .unwrap()
}

/// Clients on the port without the key cannot take the endpoint from anyone: a 401 closes its
/// connection (no keep-alive to hold a slot with), and the port's connections count against a
/// limit of their own, so the Unix socket is served while the port is full. A path with a dot
/// segment is not routed to a model server (it could name a route outside `/v1/` there).
#[test]
fn clients_on_the_port_cannot_take_the_sockets_connections() {
    let d = TestDaemon::start(&format!(
        "[inference]\nlisten = \"127.0.0.1:0\"\napi_key = {KEY:?}\nmax_connections = 2\nrequest_read_timeout_s = 60\n"
    ));
    let port = listen_port(&d);

    // No `connection: close` asked: the 401 closes the connection all the same.
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut refused = String::new();
    s.read_to_string(&mut refused)
        .expect("a 401 must close its connection, not keep it alive");
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("connection: close"),
        "{refused}"
    );

    // Two connections on the port hold both of its slots (heads begun, never finished) ...
    // (The 401's connection may not have given its slot back yet: a held one refused for
    // that is replaced.)
    let hold = || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        s
    };
    let mut held: Vec<TcpStream> = Vec::new();
    toolvisor_tests::wait_for("the port to be full", Duration::from_secs(30), || {
        held.retain_mut(|s| {
            let mut buf = [0; 512];
            // Nothing to read yet: still held. A refusal, or a close: gone.
            s.read(&mut buf).is_err_and(|e| {
                matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            })
        });
        while held.len() < 2 {
            held.push(hold());
        }
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let _ = write!(
            s,
            "GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer {KEY}\r\n\r\n"
        );
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out.starts_with(b"HTTP/1.1 503").then_some(())
    });
    // ... and the Unix socket is served all the same.
    let sock = endpoint(&d);
    assert_eq!(request(&sock, "GET", "/v1/models", None).status, 200);
    // (No body: the 404 is answered without reading one.)
    let dotted = request(&sock, "POST", "/v1/../slots", None);
    assert_eq!(dotted.status, 404, "{}", dotted.body);
    assert!(dotted.body.contains("not_found"), "{}", dotted.body);
    drop(held);
}

/// `GET /v1/models` and a chat request asking for a model, sent on the loopback port by a
/// process of user `nobody` (65534), with `headers`; the two answers as one text.
fn as_nobody(port: u16, headers: &str) -> String {
    use std::os::unix::process::CommandExt;
    let script = r#"
import socket, sys
port, headers = int(sys.argv[1]), sys.argv[2].replace("\\n", "\r\n")
for req in ("GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n" + headers + "\r\n",
            'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: 16\r\n' + headers + '\r\n{"model":"tiny"}'):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(req.encode())
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    print(out.decode(errors="replace"))
    print("----")
"#;
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(port.to_string())
        .arg(headers.replace("\r\n", "\\n"))
        .uid(65534)
        .gid(65534)
        .current_dir("/")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A port without a key is held to the Unix socket's rule: another local user's process gets
/// a 403 naming the setting, triggers no load and learns no store path; the daemon's own user
/// is served. With a key, another user holding it is served.
#[test]
fn a_port_without_a_key_serves_only_the_daemons_user() {
    if !nix::unistd::geteuid().is_root() {
        panic!("this test runs a client as user nobody: run it as root (CI does)");
    }
    let d = TestDaemon::start("[inference]\nlisten = \"127.0.0.1:0\"\n");
    let status = d.ok("c", "get_inference_status", json!({}));
    assert_eq!(status["endpoint"]["listen_needs_key"], false, "{status}");
    let port = listen_port(&d);

    let theirs = as_nobody(port, "");
    let answers: Vec<&str> = theirs.split("----").filter(|a| a.trim() != "").collect();
    assert_eq!(answers.len(), 2, "{theirs}");
    for answer in answers {
        let answer = answer.trim_start();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
        assert!(
            answer.contains("other_user") && answer.contains("[inference] api_key"),
            "{answer}"
        );
        assert!(!answer.contains("/models/"), "a store path: {answer}");
    }
    let status = d.ok("c", "get_inference_status", json!({}));
    assert_eq!(
        status["models"].as_array().map(Vec::len),
        Some(0),
        "another user's request loaded something: {status}"
    );

    let ours = models_on(port, "");
    assert!(ours.starts_with("HTTP/1.1 200"), "{ours}");
    drop(d);

    let d = TestDaemon::start(&format!(
        "[inference]\nlisten = \"127.0.0.1:0\"\napi_key = {KEY:?}\n"
    ));
    let port = listen_port(&d);
    let keyed = as_nobody(port, &format!("authorization: Bearer {KEY}\r\n"));
    assert!(keyed.trim_start().starts_with("HTTP/1.1 200"), "{keyed}");
}
