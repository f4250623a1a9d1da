//! A client that asks for a stream and then reads nothing: once its socket buffers are full
//! the endpoint can send nothing more, and after `[inference] response_write_timeout_s` it
//! cuts the connection — the request leaves its model's in-flight count (which would otherwise
//! keep the model from its idle TTL for ever) and frees its connection slot. The model server
//! is a fake child that streams without end (a real one stops at its token limit, long before
//! the buffers fill).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::inference::{endpoint, put_in_store, status_of, wait_state};
use toolvisor_tests::{TestDaemon, wait_for};

/// An OpenAI-shaped server on {port}: a model list, and a chat stream that never ends.
const ENDLESS_SERVER: &str = r#"import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        body = b'{"object":"list","data":[{"id":"endless","object":"model"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        event = json.dumps({"choices": [{"delta": {"content": "x" * 1000}}]})
        chunk = ("data: " + event + "\n\n").encode()
        try:
            while True:
                self.wfile.write(chunk)
        except Exception:
            pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;

/// A daemon serving the endless server as `endless`, ready; `inference` adds lines to its
/// `[inference]` table.
fn start_endless(inference: &str) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    put_in_store(
        &store,
        "tester/endless",
        "F32",
        "endless.gguf",
        b"GGUF not read",
    );
    let cfg = format!(
        "[models]\nstore = {store:?}\n[inference]\ncommands.gguf = [\"python3\", \"-c\", {ENDLESS_SERVER:?}, \"{{port}}\"]\n{inference}\n",
        store = store.display().to_string(),
    );
    let d = TestDaemon::start_in(dir, &cfg);
    d.ok("c", "load_model", json!({"model": "tester/endless"}));
    wait_state(&d, "endless", "ready", Duration::from_secs(60));
    d
}

fn in_flight(d: &TestDaemon) -> u64 {
    status_of(d, "endless").expect("the model is listed")["requests_in_flight"]
        .as_u64()
        .unwrap()
}

#[test]
fn a_client_that_stops_reading_is_cut_off_and_leaves_the_in_flight_count() {
    let d = start_endless("response_write_timeout_s = 2");
    let client = start_stream(&d);
    // The stream is in flight, and this client reads none of it ...
    wait_for(
        "the stream to be in flight",
        Duration::from_secs(30),
        || (in_flight(&d) == 1).then_some(()),
    );
    // ... so the endpoint cuts it off, and the request leaves the count.
    wait_for(
        "the stalled request to leave the in-flight count",
        Duration::from_secs(60),
        || (in_flight(&d) == 0).then_some(()),
    );
    drop(client);
}

/// Send a streamed chat request for `endless` on a new connection; the connection.
fn start_stream(d: &TestDaemon) -> UnixStream {
    let body = json!({"model": "endless", "stream": true, "messages": [{"role": "user", "content": "go"}]})
        .to_string();
    let mut client = UnixStream::connect(endpoint(d)).unwrap();
    write!(
        client,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    client
}

/// The status line and headers of the response on `client`.
fn head_of(client: &mut UnixStream) -> String {
    use std::io::Read;
    client
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[test]
fn past_a_models_slots_requests_wait_in_a_bounded_queue_then_get_429() {
    let d = start_endless("parallel = 1\nqueue = 1");
    // The one slot: a stream that never ends.
    let mut first = start_stream(&d);
    assert!(head_of(&mut first).starts_with("HTTP/1.1 200"));
    // The second waits for it ...
    let mut second = start_stream(&d);
    wait_for(
        "the second request to wait",
        Duration::from_secs(30),
        || {
            let s = status_of(&d, "endless")?;
            (s["queue_depth"] == 1 && s["slots_free"] == 0).then_some(())
        },
    );
    // ... and the third finds the queue full: 429, with when to retry.
    let mut third = start_stream(&d);
    let head = head_of(&mut third).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    // The first ends: the second gets the slot.
    drop(first);
    assert!(head_of(&mut second).starts_with("HTTP/1.1 200"));
    assert_eq!(status_of(&d, "endless").unwrap()["queue_depth"], 0);
}

#[test]
fn a_queued_request_waits_for_its_slot_no_longer_than_for_its_model() {
    let d = start_endless("parallel = 1\nready_timeout_s = 3");
    let mut first = start_stream(&d);
    assert!(head_of(&mut first).starts_with("HTTP/1.1 200"));
    // The slot never comes free: the waiting request gets a clear answer, not a hang.
    let mut second = start_stream(&d);
    let head = head_of(&mut second).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(status_of(&d, "endless").unwrap()["queue_depth"], 0);
    drop(first);
}
