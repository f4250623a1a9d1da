//! `toolvisor tree`: the snapshot shows supervisors, resources and sessions with their facts,
//! and `--watch` redraws when the tree changes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use toolvisor_tests::{TestDaemon, bin, wait_for};

#[test]
fn tree_json_shows_resources_and_watch_redraws_on_change() {
    let d = TestDaemon::start("");
    let sock = d.socket.display().to_string();
    let mut watch = Command::new(bin())
        .args(["tree", "--watch", "--socket", &sock])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    // First screen, before any process exists.
    wait_for("the first tree screen", Duration::from_secs(10), || {
        rx.recv_timeout(Duration::from_millis(50))
            .ok()
            .filter(|l| l.contains("supervisor processes"))
    });
    let p = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300", "label": "watched"}),
    );
    let pid = p["pid"].as_u64().unwrap();
    let line = wait_for(
        "a redraw that shows the new process",
        Duration::from_secs(10),
        || {
            rx.recv_timeout(Duration::from_millis(50))
                .ok()
                .filter(|l| l.contains("process p1") && l.contains("ready"))
        },
    );
    assert!(
        line.contains(&pid.to_string()) && line.contains("watched"),
        "{line}"
    );
    let _ = watch.kill();
    let _ = watch.wait();

    let out = Command::new(bin())
        .args(["tree", "--json", "--socket", &sock])
        .output()
        .unwrap();
    let tree: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tree["root"]["kind"], "root");
    assert_eq!(tree["root"]["pid"], d.pid());
    let sup = &tree["root"]["children"][0];
    assert_eq!(
        (sup["kind"].as_str(), sup["id"].as_str()),
        (Some("supervisor"), Some("processes"))
    );
    let node = &sup["children"][0];
    assert_eq!(node["pid"], pid);
    assert_eq!(node["state"], "ready");
    assert!(node["rss_bytes"].as_u64().unwrap() > 0);
    for key in [
        "uptime_ms",
        "ttl_left_ms",
        "restarts",
        "mailbox",
        "detail",
        "last_error",
    ] {
        assert!(node.get(key).is_some(), "missing {key} in {node}");
    }
    let sessions = tree["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["kind"] == "sessions")
        .expect("a sessions node");
    assert_eq!(sessions["kind"], "sessions");
    assert!(
        !sessions["children"].as_array().unwrap().is_empty(),
        "the tree's own client shows as a session"
    );
}

/// Each `tree`/`status` frame spawned a task, unbounded. A client sending hundreds of
/// them without reading now meets backpressure (a few answers built at once), and still gets
/// every answer, in order of kind.
#[test]
fn a_flood_of_tree_and_status_frames_is_answered_whole() {
    let d = TestDaemon::start("");
    let mut c = d.client(
        toolvisor_protocol::codec::Codec::Bincode,
        toolvisor_protocol::wire::Tier::Read,
        false,
    );
    const N: usize = 300;
    for i in 0..N {
        let frame = if i % 2 == 0 {
            toolvisor_protocol::wire::ClientFrame::Tree
        } else {
            toolvisor_protocol::wire::ClientFrame::Status
        };
        c.send(&frame).unwrap();
    }
    let (mut trees, mut statuses) = (0, 0);
    while trees + statuses < N {
        match c.recv().unwrap() {
            toolvisor_protocol::wire::DaemonFrame::Tree(_) => trees += 1,
            toolvisor_protocol::wire::DaemonFrame::Status(_) => statuses += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((trees, statuses), (N / 2, N / 2));
    assert!(toolvisor_tests::alive(d.pid()));
}
