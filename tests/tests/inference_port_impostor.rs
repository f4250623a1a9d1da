//! A model server's port taken by another process: the daemon picks a server's loopback port
//! by binding it and letting go, so another local process can take it before the server binds.
//! Here the "server" (a fake child) never listens and tells the test its port; the test
//! listens there and answers `GET /v1/models` like a healthy server. The model must never be
//! `ready` (requests would be proxied to the impostor as if it were the model): it fails its
//! start naming the port holder, restarts on a new port, and ends `failed` with that cause.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::inference::{chat, put_in_store, status_of};

/// Connects to the test's socket, names its {port}, then waits, listening nowhere.
const FAKE_SERVER: &str = "import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode())
s.close()
time.sleep(600)
";

/// Answer every request on `127.0.0.1:port` with a 200 model list, as a server would.
fn impostor(port: u16) {
    let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) else {
        return;
    };
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut head = Vec::new();
            let mut b = [0; 1];
            while !head.ends_with(b"\r\n\r\n") && c.read(&mut b).is_ok_and(|n| n == 1) {
                head.push(b[0]);
            }
            let body = r#"{"object":"list","data":[{"id":"tiny","object":"model"}]}"#;
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

/// A daemon whose gguf server is the fake above, with an impostor answering on every port
/// it names; `extra`: more `[inference]` lines.
fn start(extra: &str) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    put_in_store(
        &store,
        "tester/tiny",
        "F32",
        "tiny.gguf",
        b"GGUF not read by the fake",
    );
    let tell = dir.path().join("ports.sock");
    let listener = UnixListener::bind(&tell).unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut port = String::new();
            let _ = c.read_to_string(&mut port);
            if let Ok(port) = port.trim().parse() {
                impostor(port);
            }
        }
    });
    let cfg = format!(
        "[models]\nstore = {store:?}\n[inference]\ncommands.gguf = [\"python3\", \"-c\", {FAKE_SERVER:?}, {tell:?}, \"{{port}}\"]\nready_timeout_s = 3\n{extra}\n[restart]\nintensity = 1\nperiod_s = 120\nbackoff_ms = 100\n",
        store = store.display().to_string(),
        tell = tell.display().to_string(),
    );
    TestDaemon::start_in(dir, &cfg)
}

#[test]
fn a_port_another_process_answers_on_never_makes_the_model_ready() {
    let d = start("");
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let failed = loop {
        let s = status_of(&d, "tiny").expect("the model is listed");
        assert_ne!(
            s["state"], "ready",
            "an impostor's answer made the model ready: {s:#}"
        );
        if s["state"] == "failed" {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the model neither failed nor got ready: {s:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let error = failed["last_error"].as_str().unwrap();
    assert!(
        error.contains("another process holds 127.0.0.1:"),
        "{failed:#}"
    );
    assert!(error.contains("gave up after 1 restart"), "{failed:#}");
    let through = chat(&d, "tiny", 4);
    assert_eq!(through.status, 503, "{}", through.body);
}

/// `check_port_owner = false` is for servers whose port another process holds by design (a
/// container runtime's proxy): then an answer on the port is readiness, whoever gives it.
#[test]
fn without_the_owner_check_an_answer_on_the_port_is_readiness() {
    let d = start("check_port_owner = false");
    d.ok("c", "load_model", json!({"model": "tester/tiny"}));
    toolvisor_tests::inference::wait_state(&d, "tiny", "ready", Duration::from_secs(60));
}
