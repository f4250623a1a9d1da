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
