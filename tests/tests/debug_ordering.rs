//! Calls of one conversation are strictly ordered: a `stack` pipelined before a `continue`
//! on the same connection sees the program where it was, never after the continue.

use std::collections::HashMap;

use serde_json::json;
use toolvisor_protocol::wire::{ApprovalAnswer, ClientFrame, DaemonFrame, Outcome};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::debug::{dbg, debug_config, require_debugpy};
use toolvisor_tests::lsp::{client_in, project};

#[test]
fn a_continue_never_overtakes_a_stack_sent_before_it() {
    require_debugpy();
    let p = project(&[(
        "prog.py",
        "def f(n):\n    return n + 1\n\n\nx = f(1)\ny = f(x)\nz = f(y)\n",
    )]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [2]}),
    );
    dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let mut c = client_in(&d, w, "test-run");
    // Pipelined: none waits for the one before it.
    let plan = [
        ("stack1", json!({"op": "stack"})),
        ("continue1", json!({"op": "continue"})),
        ("stack2", json!({"op": "stack"})),
        ("continue2", json!({"op": "continue"})),
        ("stack3", json!({"op": "stack"})),
    ];
    let mut ids = HashMap::new();
    for (tag, args) in &plan {
        ids.insert(c.start_call("c", "debug", args.clone()).unwrap(), *tag);
    }
    let mut results = HashMap::new();
    while results.len() < plan.len() {
        match c.recv().unwrap() {
            DaemonFrame::Result { id, outcome } => {
                let value = match outcome {
                    Outcome::Ok(v) => v.0,
                    Outcome::Err(e) => panic!("{} failed: {e}", ids[&id]),
                };
                results.insert(ids[&id], value);
            }
            DaemonFrame::ApprovalRequest(req) => {
                c.send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                    request_id: req.request_id,
                    approved: true,
                    reason: None,
                }))
                .unwrap();
            }
            _ => {}
        }
    }
    // Each stack sees the caller's line of the stop before it: f called from 5, 6, 7.
    for (tag, caller) in [("stack1", 5), ("stack2", 6), ("stack3", 7)] {
        let frames = results[tag]["frames"].as_array().unwrap();
        assert_eq!(frames[0]["line"], 2, "{tag}: {}", results[tag]);
        assert_eq!(frames[1]["line"], caller, "{tag}: {}", results[tag]);
    }
}
