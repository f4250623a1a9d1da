//! `serve` with the default text log, written to a file (as under a service manager or
//! `2>daemon.log`): plain lines, no terminal colour codes, and a call's lines still carry its
//! call id, conversation and tool. Before issue 33's second pass every field name was wrapped
//! in escape codes whatever stderr was, which also made a call's span a third dearer to build.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{bin, options, wait_for};

#[test]
fn a_log_written_to_a_file_is_plain_text_with_the_calls_fields() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("toolvisor.sock");
    let config = dir.path().join("config.toml");
    let state = dir.path().join("state");
    std::fs::write(
        &config,
        format!("state_dir = {:?}\n", state.display().to_string()),
    )
    .unwrap();
    let log = dir.path().join("daemon.log");
    let mut daemon = Command::new(bin())
        .args(["serve", "--socket"])
        .arg(&socket)
        .arg("--config")
        .arg(&config)
        .env("TOOLVISOR_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut client = wait_for("the daemon to serve", Duration::from_secs(20), || {
        Client::connect(&socket, options(Codec::Bincode, Tier::Exec, true)).ok()
    });
    let reply = client
        .call_with("conv-text", "ls", json!({"path": "."}), |_| true)
        .unwrap();
    assert!(matches!(reply.outcome, Outcome::Ok(_)));
    drop(client);
    toolvisor_tests::sigterm(daemon.id()).expect("SIGTERM");
    wait_for("the daemon to exit", Duration::from_secs(20), || {
        daemon.try_wait().ok().flatten()
    });

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() > 3, "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "terminal escape codes in a log file:\n{}",
        text.escape_debug()
    );
    let ended = text
        .lines()
        .find(|l| l.contains("call ended") && l.contains("tool=ls"))
        .unwrap_or_else(|| panic!("no `call ended` line of ls:\n{text}"));
    for field in [
        "call=",
        "conversation=conv-text",
        "resource=\"files\"",
        "outcome=\"ok\"",
    ] {
        assert!(ended.contains(field), "{field} missing: {ended}");
    }
}
