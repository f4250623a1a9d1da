//! `run_to {file, line}` on debugpy: a temporary breakpoint that answers the stop and is
//! gone at the next stop (reached or not), the user's breakpoints untouched; `watch` on
//! lldb-dap stops after a watched variable of a C program (cc -g) is written, and is refused
//! `not_available` naming debugpy and the capability; a long `step_over` or `run_to` answers
//! "still running" within `stop_wait_s` and `pause` stops the program.

use std::process::Command;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::debug::{
    dbg, dbg_err, debug_config, require_debugpy, require_lldb_dap, stopped_at,
};
use toolvisor_tests::lsp::project;

const PY: &str = r#"def f(i):
    x = i * 2
    return x


for i in range(3):
    y = f(i)
    print("y", y)
print("end")
"#;

#[test]
fn run_to_stops_once_and_leaves_the_breakpoints_as_they_were() {
    require_debugpy();
    let p = project(&[("prog.py", PY)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [2]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(stopped_at(&launched), ("prog.py".into(), 2), "{launched}");

    let e = dbg_err(&d, w, json!({"op": "run_to", "file": "prog.py"}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("`line`"), "{e}");
    let e = dbg_err(&d, w, json!({"op": "run_to", "file": "nope.py", "line": 3}));
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");

    let there = dbg(&d, w, json!({"op": "run_to", "file": "prog.py", "line": 8}));
    assert_eq!(stopped_at(&there), ("prog.py".into(), 8), "{there}");
    assert_eq!(there["run_to"]["reached"], true, "{there}");
    assert_eq!(there["run_to"]["removed"], true, "{there}");
    assert_eq!(
        there["run_to"]["temporary_breakpoint"]["verified"], true,
        "{there}"
    );
    assert_eq!(
        dbg(&d, w, json!({"op": "evaluate", "expression": "y"}))["result"],
        "0"
    );
    // The user's breakpoint is still there; the temporary one is not.
    let next = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&next), ("prog.py".into(), 2), "{next}");
    assert_eq!(
        dbg(&d, w, json!({"op": "evaluate", "expression": "i"}))["result"],
        "1"
    );
    // A stop elsewhere first (the user's breakpoint) takes the temporary one out too.
    let elsewhere = dbg(&d, w, json!({"op": "run_to", "file": "prog.py", "line": 9}));
    assert_eq!(stopped_at(&elsewhere), ("prog.py".into(), 2), "{elsewhere}");
    assert_eq!(elsewhere["run_to"]["reached"], false, "{elsewhere}");
    assert_eq!(elsewhere["run_to"]["removed"], true, "{elsewhere}");
    let listing = dbg(&d, w, json!({"op": "breakpoints"}));
    let files = listing["files"].as_object().unwrap();
    assert_eq!(files.len(), 1, "{listing}");
    let lines: Vec<u64> = files
        .values()
        .next()
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![2], "{listing}");
    // Line 9 no longer stops the program: it runs to its end.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": []}),
    );
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    let output = dbg(&d, w, json!({"op": "output"}));
    assert!(output["text"].as_str().unwrap().contains("end"), "{output}");

    // debugpy has no data breakpoints: `watch` says so, naming the capability.
    dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let e = dbg_err(&d, w, json!({"op": "watch", "expression": "i"}));
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(
        e.message.contains("debugpy") && e.message.contains("supportsDataBreakpoints"),
        "{e}"
    );
    dbg(&d, w, json!({"op": "terminate"}));
}

const SPIN: &str = r#"import time


def spin():
    while True:
        time.sleep(0.05)


spin()
print("never")
"#;

#[test]
fn a_long_step_or_run_to_answers_running_and_pause_stops_it() {
    require_debugpy();
    let p = project(&[("spin.py", SPIN)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config("stop_wait_s = 2"));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "spin.py", "lines": [9]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "spin.py"}));
    assert_eq!(stopped_at(&launched), ("spin.py".into(), 9), "{launched}");
    let stepping = dbg(&d, w, json!({"op": "step_over"}));
    assert_eq!(stepping["state"], "running", "{stepping}");
    assert!(
        stepping["note"].as_str().unwrap().contains("still running"),
        "{stepping}"
    );
    let e = dbg_err(&d, w, json!({"op": "stack"}));
    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
    let paused = dbg(&d, w, json!({"op": "pause"}));
    assert_eq!(paused["state"], "stopped", "{paused}");
    // A line never reached: run_to answers running, its breakpoint armed until a stop.
    let running = dbg(
        &d,
        w,
        json!({"op": "run_to", "file": "spin.py", "line": 10}),
    );
    assert_eq!(running["state"], "running", "{running}");
    assert_eq!(running["run_to"]["removed"], false, "{running}");
    let paused = dbg(&d, w, json!({"op": "pause"}));
    assert_eq!(paused["state"], "stopped", "{paused}");
    assert_eq!(paused["stopped"]["reason"], "pause", "{paused}");
    let listing = dbg(&d, w, json!({"op": "breakpoints"}));
    let lines: Vec<u64> = listing["files"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|v| {
            v.as_array()
                .unwrap()
                .iter()
                .map(|b| b["line"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(lines, vec![9], "{listing}");
    dbg(&d, w, json!({"op": "terminate"}));
}

const C: &str = r#"#include <stdio.h>
int main(void) {
    int total = 0;
    int other = 5;
    for (int i = 0; i < 3; i++) {
        other += i;
    }
    total = other * 2;
    printf("total %d\n", total);
    return 0;
}
"#;

#[test]
fn watch_stops_after_a_write_to_a_c_variable_under_lldb() {
    require_lldb_dap();
    let p = project(&[("w.c", C)]);
    let w = p.path();
    let out = Command::new("cc")
        .args(["-g", "-O0", "-o", "w", "w.c"])
        .current_dir(w)
        .output()
        .expect("cc (scripts/install-test-deps installs gcc)");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "w.c", "lines": [5]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "w"}));
    assert_eq!(stopped_at(&launched), ("w.c".into(), 5), "{launched}");
    let e = dbg_err(&d, w, json!({"op": "watch", "expression": "nosuch"}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("cannot watch \"nosuch\""), "{e}");
    let watched = dbg(&d, w, json!({"op": "watch", "expression": "total"}));
    assert_eq!(watched["verified"], true, "{watched}");
    assert_eq!(watched["access_type"], "write", "{watched}");
    assert_eq!(watched["watches"].as_array().unwrap().len(), 1, "{watched}");
    let hit = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(hit["state"], "stopped", "{hit}");
    let (file, line) = stopped_at(&hit);
    // lldb stops on the instruction after the store: line 8 or the next statement.
    assert!(file == "w.c" && (8..=9).contains(&line), "{hit}");
    assert!(
        hit["stopped"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("watchpoint")),
        "{hit}"
    );
    assert_eq!(
        dbg(&d, w, json!({"op": "evaluate", "expression": "total"}))["result"],
        "16"
    );
    // The watch is on the address: once main's frame is gone, whatever reuses the stack
    // slot (the exit handlers) triggers it too, so the session is ended here.
    let t = dbg(&d, w, json!({"op": "terminate"}));
    assert_eq!(t["terminated"], true, "{t}");
}
