//! A daemon whose log cannot be written (its stderr on a full disk) loses log lines and
//! nothing else: every kind keeps serving. Before, tracing's report of the failed write was an
//! `eprintln!`, which panicked on the same stderr inside whichever actor had logged — a 30-minute
//! chaos run on a disk that filled up lost its kernels and vibe kind supervisors that way.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::{alive, bin, options, wait_for};

#[test]
fn a_daemon_logging_to_a_full_disk_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("toolvisor.sock");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n[vibe.tiers.fast]\ncommand = [\"sh\", \"-c\", \"echo done {{brief}}\"]\n",
            dir.path().join("state").display().to_string()
        ),
    )
    .unwrap();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full: every write fails with ENOSPC");
    let mut child = Command::new(bin())
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--config")
        .arg(&config)
        .env("TOOLVISOR_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(full)
        .spawn()
        .expect("spawn toolvisor serve");
    let pid = child.id();
    let mut client = wait_for(
        "the daemon to accept connections",
        Duration::from_secs(20),
        || {
            toolvisor_protocol::client::Client::connect(
                &socket,
                options(Codec::Json, Tier::Exec, true),
            )
            .ok()
        },
    );
    let mut ok = |tool: &str, args: serde_json::Value| -> serde_json::Value {
        match client
            .call_with("c", tool, args.clone(), |_| true)
            .expect("an answer")
            .outcome
        {
            toolvisor_protocol::wire::Outcome::Ok(v) => v.0,
            toolvisor_protocol::wire::Outcome::Err(e) => panic!("{tool} {args}: {e}"),
        }
    };
    // Several rounds, each logging at every level on its way through several actors.
    for round in 0..3 {
        let v = ok("bash", json!({"command": format!("echo round{round}")}));
        assert_eq!(v["stdout"], format!("round{round}\n"));
        let started = ok("process", json!({"op": "start", "command": "echo tracked"}));
        let id = started["id"].as_str().unwrap().to_string();
        let done = wait_for(
            "the tracked process to end",
            Duration::from_secs(20),
            || {
                let v = ok("process", json!({"op": "read", "id": id, "offset": 0}));
                (v["state"] == "exited").then_some(v)
            },
        );
        assert_eq!(done["text"], "tracked\n");
        let w = ok(
            "vibe_spawn",
            json!({"brief": format!("b{round}"), "label": "x"}),
        );
        let id = w["worker_id"].as_str().unwrap().to_string();
        let waited = ok("vibe_wait", json!({"worker_id": id, "timeout_seconds": 30}));
        assert_eq!(waited["state"], "done", "{waited}");
    }
    let tree = ok("process", json!({"op": "list"}));
    assert!(tree["processes"].as_array().is_some_and(|p| p.len() == 3));
    assert!(alive(pid), "the daemon is still up");
    let _ = toolvisor_tests::sigterm(pid);
    let status = wait_for("the daemon to exit", Duration::from_secs(20), || {
        child.try_wait().ok().flatten()
    });
    assert!(status.success(), "a clean exit: {status}");
}
