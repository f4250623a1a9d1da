//! `tool(name, args)` inside a cell: calls go through the same gates as a model's call of
//! the conversation (approval asked for `bash`, denied approvals and policy raise in the
//! cell), tools the harness declared in `bridge_tools` go to the client as `bridge_call`
//! frames (several at once from one JavaScript cell), `eval` itself is refused, and a cell
//! waiting on a slow bridge call is not interrupted.

use serde_json::{Value as Json, json};
use toolvisor_protocol::Value;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ApprovalAnswer, ClientFrame, DaemonFrame, Outcome};
use toolvisor_tests::eval::{self, args};
use toolvisor_tests::{ok_of, wait_for};

#[test]
fn a_cell_reads_a_file_and_runs_bash_through_the_gates() {
    let d = eval::daemon("");
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "line one\nline two\n").unwrap();
    let mut c = Client::connect(&d.socket, eval::options_in(work.path(), &[])).unwrap();
    let mut asked = Vec::new();
    let reply = eval::run(
        &mut c,
        "c",
        args(
            "r = tool('read', {'path': 'notes.txt'})\nb = tool('bash', {'command': 'echo bridged'})\np = tool('process', {'op': 'list'})\n('line two' in str(r), b['stdout'], p['processes'])",
            json!({}),
        ),
        &mut asked,
    );
    let v = ok_of(&reply);
    assert_eq!(v["status"], "ok", "{}", v["text"]);
    assert_eq!(v["text"], "(True, 'bridged\\n', [])\n");
    // eval itself, then bash: `read` and `process list` need no approval.
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].starts_with("eval python:"), "{asked:?}");
    assert_eq!(asked[1], "bash: echo bridged");

    // A declined approval raises in the cell, as a ToolError with the gate's kind.
    let reply = c
        .call_with(
            "c",
            "eval",
            args(
                "try:\n    tool('bash', {'command': 'touch nope'})\nexcept ToolError as e:\n    outcome = e.kind\noutcome",
                json!({}),
            ),
            |req| req.tool == "eval",
        )
        .unwrap();
    assert_eq!(ok_of(&reply)["text"], "'approval_denied'\n");
    assert!(!work.path().join("nope").exists());
    // Arguments are validated as for any call.
    let v = eval::ok(
        &d,
        "c",
        "try:\n    tool('bash', {})\nexcept ToolError as e:\n    r = (e.kind, e.message)\nr",
    );
    assert!(
        v["text"].as_str().unwrap().contains("invalid_args"),
        "{}",
        v["text"]
    );
}

#[test]
fn policy_denies_inside_cells_too_and_eval_from_a_cell_is_refused() {
    let d = eval::daemon("");
    let d2 = toolvisor_tests::TestDaemon::start(&format!(
        "[policy]\ndeny = [\"process\"]\n{}",
        eval::kernels_config("")
    ));
    let v = eval::ok(
        &d2,
        "c",
        "try:\n    tool('process', {'op': 'list'})\nexcept ToolError as e:\n    r = e.kind\nr",
    );
    assert_eq!(v["text"], "'policy_denied'\n");
    let v = eval::ok(
        &d,
        "c",
        "try:\n    tool('eval', {'code': '1', 'description': 'a nested cell that never runs'})\nexcept ToolError as e:\n    r = (e.kind, e.message)\nr",
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("invalid_args") && text.contains("refused"),
        "{text}"
    );
    let v = eval::ok(
        &d,
        "c",
        "try:\n    tool('no_such_tool', {})\nexcept ToolError as e:\n    r = e.kind\nr",
    );
    assert_eq!(v["text"], "'unknown_tool'\n");
}

#[test]
fn a_cell_waiting_on_a_slow_bridge_call_is_not_interrupted() {
    let d = eval::daemon("");
    // Silent for three budgets, but all of it inside a bridge call.
    let v = eval::ok_with(
        &d,
        "c",
        args(
            "r = tool('bash', {'command': 'sleep 3; echo slept'})\nr['stdout']",
            json!({"timeout_s": 1}),
        ),
    );
    assert_eq!(v["text"], "'slept\\n'\n");
}

/// Run one eval call on `c`, approving everything and answering `bridge_call` frames with
/// `answer`; returns the outcome and the bridge calls seen, in order.
fn run_with_bridge(
    c: &mut Client,
    conversation: &str,
    args: Json,
    mut answer: impl FnMut(&str, &Json) -> Outcome,
    hold_until: usize,
) -> (Outcome, Vec<(String, Json)>) {
    let id = c.start_call(conversation, "eval", args).unwrap();
    let mut seen = Vec::new();
    let mut held = Vec::new();
    loop {
        match c.recv().unwrap() {
            DaemonFrame::ApprovalRequest(req) => c
                .send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                    request_id: req.request_id,
                    approved: true,
                    reason: None,
                }))
                .unwrap(),
            DaemonFrame::BridgeCall(call) => {
                assert_eq!(call.call_id, id);
                assert_eq!(call.conversation, conversation);
                seen.push((call.tool.clone(), call.args.0.clone()));
                held.push(call);
                // Answer only once `hold_until` calls are pending: they were made at once.
                if held.len() >= hold_until {
                    for call in held.drain(..) {
                        let outcome = answer(&call.tool, &call.args.0);
                        c.send(&ClientFrame::BridgeResult {
                            bridge_id: call.bridge_id,
                            outcome,
                        })
                        .unwrap();
                    }
                }
            }
            DaemonFrame::Result { id: got, outcome } if got == id => return (outcome, seen),
            _ => {}
        }
    }
}

#[test]
fn the_harness_own_tools_are_forwarded_as_bridge_calls() {
    let d = eval::daemon("");
    let work = tempfile::tempdir().unwrap();
    let mut c = Client::connect(
        &d.socket,
        eval::options_in(work.path(), &["read", "web_search"]),
    )
    .unwrap();
    let answer = |tool: &str, args: &Json| match tool {
        "read" => Outcome::Ok(Value(
            json!({"content": format!("harness read {}", args["path"])}),
        )),
        _ => Outcome::Err(toolvisor_protocol::ToolError::new(
            ErrorKind::NotFound,
            "nothing found",
            "search for something else",
        )),
    };
    let (outcome, seen) = run_with_bridge(
        &mut c,
        "c",
        args(
            "r = tool('read', {'path': 'a.txt'})\ntry:\n    tool('web_search', {'q': 'x'})\nexcept ToolError as e:\n    miss = (e.kind, e.hint)\n(r['content'], miss)",
            json!({}),
        ),
        answer,
        1,
    );
    let Outcome::Ok(v) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        v.0["text"],
        "('harness read \"a.txt\"', ('not_found', 'search for something else'))\n"
    );
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], ("read".to_string(), json!({"path": "a.txt"})));

    // A JavaScript cell fans out: three calls are pending at once before any is answered.
    let (outcome, seen) = run_with_bridge(
        &mut c,
        "c",
        args(
            "const rs = await Promise.all(['x', 'y', 'z'].map((p) => tool('read', {path: p})));\nrs.map((r) => r.content).join(' | ')",
            json!({"language": "javascript"}),
        ),
        answer,
        3,
    );
    let Outcome::Ok(v) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        v.0["text"],
        "'harness read \"x\" | harness read \"y\" | harness read \"z\"'\n"
    );
    assert_eq!(seen.len(), 3);
}

#[test]
fn a_bridge_result_nobody_waits_for_is_answered_not_found() {
    let d = eval::daemon("");
    let mut c = d.client(
        toolvisor_protocol::codec::Codec::Json,
        toolvisor_protocol::wire::Tier::Exec,
        true,
    );
    c.send(&ClientFrame::BridgeResult {
        bridge_id: 12345,
        outcome: Outcome::Ok(Value(json!(null))),
    })
    .unwrap();
    let err = wait_for(
        "the error frame",
        std::time::Duration::from_secs(10),
        || match c.recv().ok()? {
            DaemonFrame::Error(e) => Some(e),
            _ => None,
        },
    );
    assert_eq!(err.kind, ErrorKind::NotFound);
    assert!(err.message.contains("no bridge call 12345"), "{err}");
}
