//! Graceful drain end to end: on SIGTERM (and `toolvisor drain`) the daemon stops accepting,
//! lets a call in flight finish with its whole answer, answers a new call on an open
//! connection `shutting_down`, stops its resources (a tracked process dies with it) and exits
//! 0; a stored result and a staged edit are still there for the next daemon.

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ApprovalAnswer, ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_tests::structural::{contents, four_files, original, rewritten};
use toolvisor_tests::{TestDaemon, alive, bin, wait_for};

#[test]
fn sigterm_finishes_the_call_in_flight_refuses_new_ones_stops_resources_and_keeps_results() {
    let mut d = toolvisor_tests::eval::daemon("[limits]\ndrain_timeout_s = 60");
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("started");

    // Durable state: a stored result, to be read back by the next daemon.
    let big = d.ok("c", "bash", json!({"command": "seq 1 100000"}));
    let stored_ref = big["projected"]["stdout"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("a stored result: {big:.600}"))
        .to_string();
    let first_page = d.ok("c", "tool_result_read", json!({"ref": stored_ref}));
    // A staged edit, to be accepted after the restart.
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    let staged = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
    );
    let edit_id = staged["edit_id"].as_str().unwrap().to_string();
    // A live resource the drain must stop.
    let started = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "sleep 300"}),
    );
    let process_pid = started["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("a pid: {started}")) as u32;
    assert!(alive(process_pid));
    // A kernel: stopped before the processes.
    toolvisor_tests::eval::ok(&d, "c", "x = 1");

    // A call in flight when the signal arrives.
    let mut a = d.client(Codec::Bincode, Tier::Exec, true);
    let slow = a
        .start_call(
            "c",
            "bash",
            json!({"command": format!("touch {}; sleep 2; echo finished", marker.display())}),
        )
        .unwrap();
    match a.recv().expect("bash asks for approval") {
        DaemonFrame::ApprovalRequest(req) => a
            .send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                request_id: req.request_id,
                approved: true,
                reason: None,
            }))
            .unwrap(),
        other => panic!("expected an approval request, got {other:?}"),
    }
    wait_for(
        "the slow call to be running",
        Duration::from_secs(20),
        || marker.exists().then_some(()),
    );
    let pid = d.pid();
    toolvisor_tests::sigterm(pid).expect("SIGTERM");

    // New calls on the open connection are refused once the drain began; the slow call's
    // answer arrives whole, on the same connection.
    let mut results: HashMap<u64, Outcome> = HashMap::new();
    let mut refused = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while refused.is_none() || !results.contains_key(&slow) {
        assert!(
            std::time::Instant::now() < deadline,
            "no `shutting_down` or no slow answer within 20 s; log:\n{}",
            d.log_text()
        );
        let probe = if refused.is_none() {
            Some(a.start_call("c", "ls", json!({"path": "."})).unwrap())
        } else {
            None
        };
        // Read until the probe's answer (or, once refused, the slow call's).
        loop {
            match a.recv().expect("the connection stays open while draining") {
                DaemonFrame::Result { id, outcome } => {
                    let done = Some(id) == probe || (probe.is_none() && id == slow);
                    if let (Some(p), Outcome::Err(e)) = (probe, &outcome)
                        && id == p
                        && e.kind == ErrorKind::ShuttingDown
                    {
                        refused = Some(e.clone());
                    }
                    results.insert(id, outcome);
                    if done {
                        break;
                    }
                }
                _ => continue,
            }
        }
    }
    let refused = refused.unwrap();
    assert!(refused.message.contains("shutting down"), "{refused:?}");
    assert!(!refused.hint.is_empty());
    match &results[&slow] {
        Outcome::Ok(v) => assert_eq!(
            v.0["stdout"].as_str().map(str::trim),
            Some("finished"),
            "{:?}",
            v.0
        ),
        Outcome::Err(e) => panic!("the call in flight was cut short: {e}"),
    }
    drop(a);

    let mut child = d.child.take().unwrap();
    let status = wait_for("the daemon to exit", Duration::from_secs(30), || {
        child.try_wait().ok().flatten()
    });
    assert!(status.success(), "drain exits 0: {status:?}");
    assert!(
        !alive(process_pid),
        "the tracked process outlived the drained daemon"
    );
    let log = d.log_text();
    let order: Vec<usize> = ["draining", "drained and stopped"]
        .iter()
        .map(|l| {
            log.find(l)
                .unwrap_or_else(|| panic!("no {l:?} in the log:\n{log}"))
        })
        .collect();
    assert!(order[0] < order[1]);
    let stopping = |kind: &str| {
        log.lines()
            .position(|l| l.contains("stopping resources") && l.contains(&format!("\"{kind}\"")))
            .unwrap_or_else(|| panic!("no `stopping resources` line for {kind}:\n{log}"))
    };
    assert!(
        stopping("kernels") < stopping("processes"),
        "kernels stop before processes:\n{log}"
    );

    // What is on disk stays: the next daemon pages the same stored result.
    d.spawn("");
    let again = d.ok("c", "tool_result_read", json!({"ref": stored_ref}));
    assert_eq!(again["text"], first_page["text"]);
    assert_eq!(contents(&files), (1..=4).map(original).collect::<Vec<_>>());
    d.ok(
        "c",
        "resolve",
        json!({"edit_id": edit_id, "action": "accept"}),
    );
    assert_eq!(contents(&files), (1..=4).map(rewritten).collect::<Vec<_>>());
}

#[test]
fn toolvisor_drain_stops_the_daemon_and_reports_it() {
    let mut d = TestDaemon::start("");
    d.ok("c", "ls", json!({"path": "."}));
    let inference = std::path::PathBuf::from(format!("{}.inference", d.socket.display()));
    assert!(
        inference.exists(),
        "the inference endpoint listens beside the socket"
    );
    let out = Command::new(bin())
        .args(["drain", "--socket"])
        .arg(&d.socket)
        .output()
        .expect("run toolvisor drain");
    let answer: Json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(out.status.success(), "{answer}");
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["result"]["pid"], d.pid());
    let mut child = d.child.take().unwrap();
    let status = wait_for("the daemon to exit", Duration::from_secs(10), || {
        child.try_wait().ok().flatten()
    });
    assert!(status.success(), "{status:?}");
    assert!(
        !d.socket.exists(),
        "a drained daemon removes the socket it made"
    );
    assert!(
        !inference.exists(),
        "a drained daemon removes its inference endpoint's socket too"
    );
}
