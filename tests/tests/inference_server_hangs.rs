//! A model server that binds its port and listens but never answers (hung in its start-up:
//! the kernel still completes connections into its backlog). The readiness probe must not
//! wait on it for ever: the model fails its start after `ready_timeout_s`, naming what it
//! waited for, restarts within the policy and ends `failed` — never `loading` for ever.

use std::time::{Duration, Instant};

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::inference::{put_in_store, status_of};

/// Listens on {port} and never accepts.
const HUNG_SERVER: &str = "import socket, sys, time
s = socket.socket()
s.bind(('127.0.0.1', int(sys.argv[1])))
s.listen(16)
print('listening, never answering', flush=True)
time.sleep(600)
";

#[test]
fn a_server_that_listens_and_never_answers_fails_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    put_in_store(&store, "tester/hung", "F32", "hung.gguf", b"GGUF not read");
    let cfg = format!(
        "[models]\nstore = {store:?}\n[inference]\ncommands.gguf = [\"python3\", \"-c\", {HUNG_SERVER:?}, \"{{port}}\"]\nready_timeout_s = 3\n[restart]\nintensity = 1\nperiod_s = 120\nbackoff_ms = 100\n",
        store = store.display().to_string(),
    );
    let d = TestDaemon::start_in(dir, &cfg);
    d.ok("c", "load_model", json!({"model": "tester/hung"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    let failed = loop {
        let s = status_of(&d, "hung").expect("the model is listed");
        assert_ne!(s["state"], "ready", "{s:#}");
        if s["state"] == "failed" {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "a server that never answers kept the model {} for 60 s: {s:#}",
            s["state"]
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let error = failed["last_error"].as_str().unwrap();
    assert!(
        error.contains("did not answer GET /v1/models within 3 s")
            && error.contains("listening, never answering"),
        "{failed:#}"
    );
}
