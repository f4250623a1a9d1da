//! A language server over its memory limit: a fake server (a Python program, like most
//! non-node servers) that grows to 512 MiB under a 64 MiB limit is killed, reported as killed
//! at its memory limit in `lsp status` and the log, and restarted by the supervisor; the
//! restarted server answers. A node server gets its V8 heap capped at its limit through
//! `NODE_OPTIONS`, and is killed and reported at the limit the same way.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::lsp::{call_in, lsp_config, ok_in, project};
use toolvisor_tests::{TestDaemon, alive, wait_for};

#[test]
fn a_server_over_its_memory_limit_is_killed_reported_and_restarted() {
    let p = project(&[("fake.toml", ""), ("a.fake", "hello world\n")]);
    let w = p.path();
    let log = w.join("methods.log").display().to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake_lsp.py");
    let config = format!(
        "[restart]\nbackoff_ms = 10\nbackoff_max_ms = 50\n{}",
        lsp_config(&format!(
            "memory_limit_mb = 4096\n[lsp.languages.fake]\nextensions = [\"fake\"]\nmarkers = [\"fake.toml\"]\nmemory_limit_mb = 64\nservers = [[{:?}, \"balloon\", {log:?}]]\n",
            script.display().to_string()
        ))
    );
    let d = TestDaemon::start(&config);
    let hover = json!({"op": "hover", "file": "a.fake", "line": 1, "symbol": "world"});
    // The first request makes the server grow past its limit: it is killed mid-request, and
    // the call waits for the restart and asks again (or, past its wait, says it restarts).
    match call_in(&d, w, "lsp", hover.clone()) {
        Outcome::Ok(v) => assert!(v.0.to_string().contains("fine"), "{}", v.0),
        Outcome::Err(e) => assert!(
            e.message.contains("killed at its memory limit of 64 MiB")
                || e.message.contains("restarting"),
            "{e}"
        ),
    }
    assert!(
        w.join("methods.log.ballooned").exists(),
        "the fake server never grew"
    );
    let status = wait_for(
        "lsp status to report the kill at the memory limit",
        Duration::from_secs(30),
        || {
            let s = ok_in(&d, w, "lsp", json!({"op": "status"}));
            let server = s["servers"][0].clone();
            server["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("was killed at its memory limit of 64 MiB"))
                .then_some(server)
        },
    );
    let last = status["last_error"].as_str().unwrap();
    assert!(
        last.contains("language server fake:") && last.contains("MiB resident"),
        "{status}"
    );
    assert!(status["restarts"].as_u64().unwrap() >= 1, "{status}");
    assert!(
        d.log_text()
            .contains("was killed at its memory limit of 64 MiB"),
        "the kill is logged"
    );
    // Restarted: the new incarnation answers.
    let v = wait_for(
        "the restarted server to answer",
        Duration::from_secs(30),
        || match call_in(&d, w, "lsp", hover.clone()) {
            Outcome::Ok(v) => Some(v.0),
            Outcome::Err(_) => None,
        },
    );
    assert!(v.to_string().contains("fine"), "{v}");
    let pid = v["server"]["pid"].as_u64().unwrap() as u32;
    assert!(alive(pid));
}

/// A node server (pyright and typescript-language-server are node programs) gets its V8 heap
/// capped at the limit through `NODE_OPTIONS`, and growing past the limit ends the same way:
/// killed, reported at the limit, restarted.
#[test]
fn a_node_server_gets_its_heap_capped_and_is_killed_at_the_limit() {
    let p = project(&[("fake.toml", ""), ("a.fake", "hello world\n")]);
    let w = p.path();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake_lsp_node.js");
    let config = format!(
        "[restart]\nbackoff_ms = 10\nbackoff_max_ms = 50\n{}",
        lsp_config(&format!(
            "request_timeout_s = 60\n[lsp.languages.fake]\nextensions = [\"fake\"]\nmarkers = [\"fake.toml\"]\nmemory_limit_mb = 128\nservers = [[{:?}]]\n",
            script.display().to_string()
        ))
    );
    let d = TestDaemon::start(&config);
    let hover = json!({"op": "hover", "file": "a.fake", "line": 1, "symbol": "world"});
    let v = ok_in(&d, w, "lsp", hover.clone());
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("NODE_OPTIONS=--max-old-space-size=128"),
        "{v}"
    );
    let heap: u64 = text
        .split("heap_size_limit_mib=")
        .nth(1)
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no heap limit in {v}"));
    assert!(
        heap < 512,
        "V8's heap is not capped near 128 MiB: {heap} MiB"
    );
    let first = v["server"]["pid"].as_u64().unwrap() as u32;

    // `definition` makes it grow without end: killed at the limit, by the watchdog or by V8.
    let _ = call_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "a.fake", "line": 1, "symbol": "world"}),
    );
    let status = wait_for(
        "lsp status to report the node server's kill at its memory limit",
        Duration::from_secs(60),
        || {
            let s = ok_in(&d, w, "lsp", json!({"op": "status"}));
            let server = s["servers"][0].clone();
            server["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("was killed at its memory limit of 128 MiB"))
                .then_some(server)
        },
    );
    assert!(status["restarts"].as_u64().unwrap() >= 1, "{status}");
    let v = wait_for(
        "the restarted node server to answer",
        Duration::from_secs(30),
        || match call_in(&d, w, "lsp", hover.clone()) {
            Outcome::Ok(v) => Some(v.0),
            Outcome::Err(_) => None,
        },
    );
    assert_ne!(v["server"]["pid"].as_u64().unwrap() as u32, first, "{v}");
}
