//! A headless harness run's resources end with its MCP session: after a real `claude -p` that
//! started a Python kernel (`eval`) and a tracked process exits, neither is left (the bridge
//! sends `end_conversation` as its stdio session closes); a run the operator named with
//! `--conversation` keeps them, since a later run resumes that conversation.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::tree::{NodeState, TreeNode};
use toolvisor_protocol::wire::{ClientFrame, ClientKind, DaemonFrame, Tier};
use toolvisor_tests::harness::{Endpoint, claude, played, project, sleeps, unique_sleep};
use toolvisor_tests::{TestDaemon, eval, wait_for};

/// The kernel nodes of the daemon's tree (as `toolvisor tree` sees them) still running.
fn live_kernels(d: &TestDaemon) -> Vec<TreeNode> {
    let mut opts = toolvisor_tests::options(Codec::Json, Tier::Read, false);
    opts.client_kind = ClientKind::Ops;
    let mut c = toolvisor_protocol::client::Client::connect(&d.socket, opts).unwrap();
    let DaemonFrame::Tree(tree) = c.request(&ClientFrame::Tree).unwrap() else {
        panic!("expected a tree");
    };
    tree.root
        .children
        .iter()
        .filter(|n| n.id == "kernels")
        .flat_map(|k| k.children.iter())
        .filter(|n| n.kind == "kernel" && !matches!(n.state, NodeState::Exited | NodeState::Failed))
        .cloned()
        .collect()
}

/// One scripted run: a kernel, then a process of `sleep SECS`, then the answer.
fn run_claude(d: &TestDaemon, secs: &str, extra: &[&str]) {
    let work = project(d);
    let ep = Endpoint::start(
        &d.dir.path().join(format!("ep-{secs}")),
        json!([
            {"tool": "eval", "args": {"code": "x = 6 * 7\nx", "description": "keep a value in the kernel for the test"}},
            {"tool": "process", "args": {"op": "start", "command": format!("sleep {secs}")}},
            {"final": "started"}
        ]),
    );
    let mut args = vec!["--approvals", "harness"];
    args.extend_from_slice(extra);
    let run = claude(d, &ep, &work, &args, &["eval", "process"]);
    played(&run, &ep, "");
    let text = ep.results_text();
    assert!(
        text.contains("42"),
        "the kernel did not run the cell: {text}"
    );
    assert!(text.contains("p1"), "the process did not start: {text}");
}

#[test]
fn a_headless_runs_kernel_and_processes_end_when_the_harness_exits() {
    let d = eval::daemon("");
    let secs = unique_sleep("ends");
    run_claude(&d, &secs, &[]);
    wait_for(
        "the run's kernel and process to end after claude exited",
        Duration::from_secs(10),
        || (sleeps(&secs).is_empty() && live_kernels(&d).is_empty()).then_some(()),
    );
    wait_for(
        "the daemon to log the ending",
        Duration::from_secs(10),
        || {
            d.log_text()
                .contains("conversation ended with its session")
                .then_some(())
        },
    );
}

/// Sessions open on the daemon, this status client's own included.
fn sessions(d: &TestDaemon) -> u32 {
    let mut c = d.client(Codec::Json, Tier::Read, false);
    match c.request(&ClientFrame::Status).unwrap() {
        DaemonFrame::Status(s) => s.sessions,
        other => panic!("expected a status, got {other:?}"),
    }
}

#[test]
fn a_run_named_with_conversation_keeps_its_kernel_and_processes() {
    let mut d = eval::daemon("");
    let secs = unique_sleep("keep");
    run_claude(&d, &secs, &["--conversation", "keep-me"]);
    wait_for(
        "the run's daemon session to close after claude exited",
        Duration::from_secs(10),
        || (sessions(&d) == 1).then_some(()),
    );
    // A later run resumes the conversation: its process runs, its kernel holds its value.
    assert_eq!(sleeps(&secs).len(), 1, "the named run's process is gone");
    let listed = d.ok("keep-me", "process", json!({"op": "list"}));
    assert_eq!(listed["processes"][0]["state"], "running", "{listed}");
    let v = eval::ok(&d, "keep-me", "x");
    assert_eq!(
        v["text"], "42\n",
        "the named run's kernel was not kept: {v}"
    );
    assert!(!d.log_text().contains("conversation ended with its session"));
    // Clean up what the run kept: the process, then the kernel with the daemon.
    d.ok("keep-me", "process", json!({"op": "kill", "id": "p1"}));
    d.stop();
    wait_for("the kept sleep to end", Duration::from_secs(10), || {
        sleeps(&secs).is_empty().then_some(())
    });
}
