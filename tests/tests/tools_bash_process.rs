//! `bash` and `process` round trips against real commands: exit codes, streams, timeouts,
//! stdin, offsets, kill, conversation isolation, and a child killed from outside.

use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{Event, Outcome, Stream, Tier};
use toolvisor_tests::{TestDaemon, alive, ok_of, wait_for};

#[test]
fn bash_reports_streams_exit_code_and_streams_output_events() {
    let d = TestDaemon::start("");
    let mut c = d.client(Codec::Json, Tier::Exec, true);
    let reply = c
        .call_with(
            "c",
            "bash",
            json!({"command": "echo out; echo 에러 >&2; pwd; exit 7"}),
            |_| true,
        )
        .unwrap();
    let v = ok_of(&reply);
    assert_eq!(v["exit_code"], 7);
    assert_eq!(v["stderr"], "에러\n");
    assert!(v["stdout"].as_str().unwrap().starts_with("out\n"));
    assert_eq!(v["timed_out"], false);
    let streamed: String = reply
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Output {
                stream: Stream::Stdout,
                text,
            } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(streamed.starts_with("out\n"), "stdout events: {streamed:?}");
}

#[test]
fn bash_timeout_kills_the_whole_tree_and_marks_truncation() {
    let d = TestDaemon::start("[limits]\nbash_output_bytes = 1000\n");
    let marker = d.dir.path().join("bg.pid");
    let v = d.ok("c", "bash", json!({"command": format!("sleep 300 & echo $! > {}; wait", marker.display()), "timeout_s": 1}));
    assert_eq!(v["timed_out"], true);
    assert!(v["note"].as_str().unwrap().contains("timeout"));
    // Killed, not exited: no exit code 143 that reads as the command's own.
    assert_eq!(v["exit_code"], Json::Null, "{v}");
    assert_eq!(v["signal"], 9, "{v}");
    let bg: u32 = std::fs::read_to_string(&marker)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    wait_for(
        "the background sleep of a timed-out bash to die",
        Duration::from_secs(5),
        || (!alive(bg)).then_some(()),
    );

    let v = d.ok(
        "c",
        "bash",
        json!({"command": "head -c 5000 /dev/zero | tr '\\0' a"}),
    );
    assert_eq!(v["truncated"], true);
    assert_eq!(v["stdout_bytes"], 5000);
    assert!(v["stdout"].as_str().unwrap().contains("bytes omitted"));
}

#[test]
fn process_start_read_write_kill_round_trip() {
    let d = TestDaemon::start("");
    let started = d.ok("c1", "process", json!({"op": "start", "command": "while read line; do echo \"got $line\"; done; echo bye", "label": "echoer"}));
    let id = started["id"].as_str().unwrap().to_string();
    assert_eq!(started["state"], "running");
    let pid = started["pid"].as_u64().unwrap() as u32;
    assert!(alive(pid));
    d.ok(
        "c1",
        "process",
        json!({"op": "write", "id": id, "data": "한글 line\n"}),
    );
    let text = wait_for(
        "the echo of the first line",
        Duration::from_secs(10),
        || {
            let v = d.ok(
                "c1",
                "process",
                json!({"op": "read", "id": id, "offset": 0}),
            );
            v["text"]
                .as_str()
                .filter(|t| t.contains("got 한글 line"))
                .map(str::to_string)
        },
    );
    assert_eq!(text, "got 한글 line\n");
    // Reads continue where the last one stopped.
    d.ok(
        "c1",
        "process",
        json!({"op": "write", "id": id, "data": "two\n", "eof": true}),
    );
    let rest = wait_for("the end of output", Duration::from_secs(10), || {
        let v = d.ok(
            "c1",
            "process",
            json!({"op": "read", "id": id, "offset": text.len()}),
        );
        (v["eof"] == true).then_some(v)
    });
    assert_eq!(rest["text"], "got two\nbye\n");
    assert_eq!(rest["exit_code"], 0);
    assert_eq!(rest["state"], "exited");

    let list = d.ok("c1", "process", json!({"op": "list"}));
    assert_eq!(list["processes"][0]["label"], "echoer");

    let sleeper = d.ok(
        "c1",
        "process",
        json!({"op": "start", "command": "sleep 300"}),
    );
    let sid = sleeper["id"].as_str().unwrap();
    let spid = sleeper["pid"].as_u64().unwrap() as u32;
    let killed = d.ok("c1", "process", json!({"op": "kill", "id": sid}));
    assert_eq!(killed["state"], "killed");
    assert_eq!(
        (killed["signal"].clone(), killed["exit_code"].clone()),
        (json!(15), json!(null)),
        "{killed}"
    );
    wait_for(
        "the killed sleeper to be gone",
        Duration::from_secs(5),
        || (!alive(spid)).then_some(()),
    );
}

#[test]
fn another_conversation_cannot_see_read_or_kill_a_process() {
    let d = TestDaemon::start("");
    let p = d.ok(
        "owner",
        "process",
        json!({"op": "start", "command": "sleep 300"}),
    );
    let id = p["id"].as_str().unwrap();
    let list = d.ok("intruder", "process", json!({"op": "list"}));
    assert_eq!(list["processes"], json!([]));
    for op in ["read", "kill", "write"] {
        match d.call(
            "intruder",
            "process",
            json!({"op": op, "id": id, "data": "x"}),
        ) {
            Outcome::Err(e) => {
                assert_eq!(e.kind, ErrorKind::NotFound, "{op}: {e}");
                assert!(e.message.contains("intruder"), "{e}");
            }
            Outcome::Ok(v) => panic!("{op} by another conversation succeeded: {}", v.0),
        }
    }
    assert!(alive(p["pid"].as_u64().unwrap() as u32));
    d.ok("owner", "process", json!({"op": "kill", "id": id}));
}

#[test]
fn a_child_killed_from_outside_is_reported_as_exited_by_signal() {
    let d = TestDaemon::start("");
    let p = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300"}),
    );
    let id = p["id"].as_str().unwrap();
    let pid = p["pid"].as_u64().unwrap() as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let v = wait_for(
        "the process to be reported as ended",
        Duration::from_secs(10),
        || {
            let v = d.ok("c", "process", json!({"op": "read", "id": id}));
            (v["state"] != "running").then_some(v)
        },
    );
    assert_eq!(v["state"], "exited", "{v}");
    assert_eq!(v["signal"], 9, "{v}");
    let list = d.ok("c", "process", json!({"op": "list"}));
    assert!(
        list["processes"][0]["last_error"]
            .as_str()
            .unwrap()
            .contains("signal 9"),
        "{list}"
    );
}

#[test]
fn a_restart_policy_that_cannot_succeed_ends_failed_not_in_a_loop() {
    let d = TestDaemon::start("[restart]\nbackoff_ms = 20\n");
    let p = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "echo starting; exit 3", "restart": "on_failure"}),
    );
    let id = p["id"].as_str().unwrap().to_string();
    let info = wait_for(
        "the crash-looping process to be failed",
        Duration::from_secs(30),
        || {
            let list = d.ok("c", "process", json!({"op": "list"}));
            let p = list["processes"][0].clone();
            (p["state"] == "failed").then_some(p)
        },
    );
    assert_eq!(info["restarts"], 5, "{info}");
    let err = info["last_error"].as_str().unwrap();
    assert!(
        err.contains("exit code 3") && err.contains("gave up after 5 restarts"),
        "{err}"
    );
    // The tree shows it failed too, and it stays failed (no further restarts).
    let mut c = d.client(Codec::Bincode, Tier::Read, false);
    let snap = match c
        .request(&toolvisor_protocol::wire::ClientFrame::Tree)
        .unwrap()
    {
        toolvisor_protocol::wire::DaemonFrame::Tree(s) => s,
        other => panic!("expected a tree, got {other:?}"),
    };
    let node = snap
        .root
        .walk()
        .into_iter()
        .map(|(_, n)| n)
        .find(|n| n.id == id)
        .expect("process in tree")
        .clone();
    assert_eq!(node.state, toolvisor_protocol::tree::NodeState::Failed);
    assert_eq!(node.restarts, 5);
    let out = d.ok("c", "process", json!({"op": "read", "id": id, "offset": 0}));
    assert_eq!(
        out["text"].as_str().unwrap().matches("starting").count(),
        6,
        "{out}"
    );
    let again = d.ok("c", "process", json!({"op": "list"}));
    assert_eq!(again["processes"][0]["restarts"], 5);
}

#[test]
fn a_process_past_its_ttl_is_stopped_and_says_so() {
    let d = TestDaemon::start("");
    let p = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "echo up; exec sleep 300", "ttl_s": 1}),
    );
    assert!(p["ttl_left_ms"].as_u64().unwrap() <= 1000, "{p}");
    let pid = p["pid"].as_u64().unwrap() as u32;
    let id = p["id"].as_str().unwrap();
    let v = wait_for(
        "the hard TTL to stop the process",
        Duration::from_secs(15),
        || {
            let v = d.ok("c", "process", json!({"op": "read", "id": id, "offset": 0}));
            (v["state"] == "expired").then_some(v)
        },
    );
    assert!(
        v["text"].as_str().unwrap().contains("hard TTL expired"),
        "{v}"
    );
    wait_for(
        "the expired process to be gone",
        Duration::from_secs(5),
        || (!alive(pid)).then_some(()),
    );
    assert!(d.log_text().contains("process TTL expired"));
}

/// Ids restarted from 1 after a daemon restart, so `p1` named a different process
/// than the caller knew. They are persisted now: a restarted daemon never reuses one.
#[test]
fn process_ids_never_repeat_across_a_daemon_restart() {
    let mut d = TestDaemon::start("");
    let first = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300", "label": "before"}),
    );
    let old_id = first["id"].as_str().unwrap().to_string();
    d.kill_hard();
    d.spawn("");
    let second = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300", "label": "after"}),
    );
    let new_id = second["id"].as_str().unwrap().to_string();
    assert_ne!(new_id, old_id, "a restarted daemon reused the id {old_id}");
    // The old id names nothing now, rather than the new process.
    match d.call("c", "process", json!({"op": "read", "id": old_id})) {
        Outcome::Err(e) => assert_eq!(e.kind, ErrorKind::NotFound, "{e}"),
        Outcome::Ok(v) => panic!("{old_id} answered after the restart: {}", v.0),
    }
}
