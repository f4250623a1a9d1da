//! Misbehaving servers (small fake programs, in addition to the real ones): a server stuck
//! indexing never yields an empty "nothing found" — the caller gets `not_ready`; a server that
//! never answers gets `timeout` and the request is cancelled; a server writing garbage and an
//! oversized frame is treated as crashed (`resource_failed`), never as an empty answer; a
//! server flooding notifications past the transport's bounded queue is held back, not
//! deadlocked: its answer still arrives, and its own request is answered. A server offering a
//! workspace pull (none installed here does) is asked for it, and a cut answer says so.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::lsp::{err_in, lsp_config, project};
use toolvisor_tests::{TestDaemon, wait_for};

fn daemon_with_fake(mode: &str, extra: &str) -> (TestDaemon, tempfile::TempDir) {
    let p = project(&[("fake.toml", ""), ("a.fake", "hello world\n")]);
    let log = p.path().join("methods.log").display().to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/fake_lsp.py");
    let config = format!(
        "[restart]\nbackoff_ms = 10\nbackoff_max_ms = 50\n{}",
        lsp_config(&format!(
            "ready_wait_s = 1\nrequest_timeout_s = 1\n{extra}[lsp.languages.fake]\nextensions = [\"fake\"]\nmarkers = [\"fake.toml\"]\nservers = [[{:?}, {mode:?}, {log:?}]]\n",
            script.display().to_string()
        ))
    );
    (TestDaemon::start(&config), p)
}

#[test]
fn a_server_stuck_indexing_gives_not_ready_not_an_empty_answer() {
    let (d, p) = daemon_with_fake("stuck-indexing", "");
    let e = err_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "references", "file": "a.fake", "line": 1, "symbol": "hello"}),
    );
    assert_eq!(e.kind, ErrorKind::NotReady, "{e}");
    assert!(
        e.message.contains("still indexing") && e.message.contains("Indexing"),
        "{e}"
    );
    assert!(e.hint.contains("Retry"), "{e}");
    // A file-local op is asked at once; its empty answer from a server still indexing is
    // not "nothing found" either.
    let e = err_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "definition", "file": "a.fake", "line": 1, "symbol": "world"}),
    );
    assert_eq!(e.kind, ErrorKind::NotReady, "{e}");
}

#[test]
fn a_server_that_never_answers_times_out_and_is_cancelled() {
    let (d, p) = daemon_with_fake("hang", "");
    let e = err_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "hover", "file": "a.fake", "line": 1, "symbol": "world"}),
    );
    assert_eq!(e.kind, ErrorKind::Timeout, "{e}");
    assert!(
        e.message
            .contains("did not answer `textDocument/hover` within 1 s"),
        "{e}"
    );
    // The timed-out request was cancelled on the wire.
    wait_for(
        "the fake server to receive $/cancelRequest",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(p.path().join("methods.log"))
                .ok()
                .filter(|m| m.contains("textDocument/hover\n$/cancelRequest\n"))
        },
    );
}

#[test]
fn a_server_writing_garbage_is_a_failure_not_an_answer() {
    let (d, p) = daemon_with_fake("garbage", "");
    let e = err_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "definition", "file": "a.fake", "line": 1, "symbol": "world"}),
    );
    assert!(
        matches!(e.kind, ErrorKind::ResourceFailed | ErrorKind::NotReady),
        "{e}"
    );
    assert!(
        d.log_text().contains("exceeds the cap"),
        "the oversized frame is logged"
    );
}

#[test]
fn a_server_flooding_notifications_still_answers_and_is_answered() {
    let (d, p) = daemon_with_fake("flood", "");
    for round in 0..2 {
        let v = toolvisor_tests::lsp::ok_in(
            &d,
            p.path(),
            "lsp",
            json!({"op": "hover", "file": "a.fake", "line": 1, "symbol": "world"}),
        );
        assert!(
            v.to_string().contains("after the flood"),
            "round {round}: {v}"
        );
    }
    // Its workspace/configuration request, sent mid-flood, was answered (the fake reads the
    // answer before the second hover).
    wait_for(
        "the fake server to receive the answer to its mid-flood request",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(p.path().join("methods.log"))
                .ok()
                .filter(|m| m.contains("response cfg"))
        },
    );
}

/// No installed server offers `workspace/diagnostic`, so a fake one does: the answer is the
/// server's pull (`source: server`), bounded at 200, and says it was cut (`truncated`,
/// `complete: false`) instead of passing for the whole list.
#[test]
fn a_workspace_pull_is_the_servers_answer_and_a_cut_one_is_not_complete() {
    let (d, p) = daemon_with_fake("workspace-pull", "");
    let v = toolvisor_tests::lsp::ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "workspace_diagnostics", "file": "a.fake"}),
    );
    assert_eq!(v["source"], "server", "{v}");
    assert_eq!(v["total"], 205, "{v}");
    assert_eq!(v["diagnostics"].as_array().unwrap().len(), 200, "{v}");
    assert_eq!(v["diagnostics"][0]["path"], "a.fake", "{v}");
    assert_eq!(v["diagnostics"][0]["severity"], "warning", "{v}");
    assert_eq!(v["truncated"], true, "{v}");
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["text"].as_str().unwrap().contains("showing 200 of 205"),
        "{v}"
    );
    let log = std::fs::read_to_string(p.path().join("methods.log")).unwrap();
    assert!(log.contains("workspace/diagnostic"), "{log}");
}
