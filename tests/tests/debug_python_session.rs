//! A whole debugpy session through the real daemon: breakpoints on two lines set before
//! launch, launch stops at the first, stack, scopes, variables (a long string cut at 400
//! characters, saying so), evaluate, step_over moves one line, continue to the second
//! breakpoint, continue to the end, output captured; the session is in the tree with both
//! pids and a TTL, and nothing of it is left afterwards. Breakpoints set and cleared during a
//! session apply at once; pause stops a running program; terminate leaves nothing behind.

use std::process::Command;

use serde_json::{Value, json};
use toolvisor_tests::debug::{dbg, debug_config, require_debugpy, stopped_at};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, alive, bin, wait_for};

const PROG: &str = r#"import sys


def f(n):
    long = "x" * 1000
    total = n * 2
    print("total", total)
    return total


a = f(3)
b = a + 1
print("done", b, file=sys.stderr)
"#;

#[test]
fn breakpoints_stack_variables_step_continue_and_output_with_debugpy() {
    require_debugpy();
    let p = project(&[("prog.py", PROG)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));

    let bp = dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [6, 12]}),
    );
    assert_eq!(bp["applied"], false, "{bp}");

    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(launched["state"], "stopped", "{launched}");
    assert_eq!(launched["stopped"]["reason"], "breakpoint", "{launched}");
    assert_eq!(stopped_at(&launched), ("prog.py".into(), 6), "{launched}");
    let file_bps = launched["breakpoints"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert!(
        file_bps
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["verified"] == true),
        "{launched}"
    );
    let session = &launched["session"];
    let adapter_pid = session["adapter_pid"].as_u64().expect("adapter pid") as u32;
    let debuggee_pid = session["debuggee_pid"].as_u64().expect("debuggee pid") as u32;
    assert!(alive(adapter_pid) && alive(debuggee_pid));

    // The tree shows the session: adapter pid, debuggee pid, state, TTL left.
    let out = Command::new(bin())
        .args([
            "tree",
            "--json",
            "--socket",
            &d.socket.display().to_string(),
        ])
        .output()
        .unwrap();
    let tree: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sup = tree["root"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "debug_adapters")
        .expect("a debug_adapters supervisor in the tree")
        .clone();
    let node = &sup["children"][0];
    assert_eq!(node["kind"], "debug_session", "{sup}");
    assert_eq!(node["pid"], adapter_pid, "{sup}");
    assert!(node["ttl_left_ms"].as_u64().unwrap() > 0, "{sup}");
    let detail = node["detail"].as_str().unwrap();
    assert!(
        detail.contains("stopped") && detail.contains(&format!("debuggee pid {debuggee_pid}")),
        "{sup}"
    );

    let stack = dbg(&d, w, json!({"op": "stack"}));
    let frames = stack["frames"].as_array().unwrap();
    assert_eq!(frames[0]["line"], 6, "{stack}");
    assert_eq!(frames[0]["name"], "f", "{stack}");
    assert_eq!(frames[1]["line"], 11, "{stack}");
    assert_eq!(stack["truncated"], false);

    let scopes = dbg(&d, w, json!({"op": "scopes", "frame_id": frames[0]["id"]}));
    let locals = scopes["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "Locals")
        .unwrap_or_else(|| panic!("a Locals scope: {scopes}"))
        .clone();
    let vars = dbg(
        &d,
        w,
        json!({"op": "variables", "reference": locals["reference"]}),
    );
    let var = |name: &str| {
        vars["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("variable {name} in {vars}"))
            .clone()
    };
    assert_eq!(var("n")["value"], "3", "{vars}");
    let long = var("long");
    assert_eq!(
        long["value"].as_str().unwrap().chars().count(),
        400,
        "{long}"
    );
    assert_eq!(long["value_truncated"], true, "{long}");
    assert!(long["value_chars"].as_u64().unwrap() > 400, "{long}");

    let ev = dbg(
        &d,
        w,
        json!({"op": "evaluate", "expression": "n * 10 + len(long)"}),
    );
    assert_eq!(ev["result"], "1030", "{ev}");

    let stepped = dbg(&d, w, json!({"op": "step_over"}));
    assert_eq!(stopped_at(&stepped), ("prog.py".into(), 7), "{stepped}");
    assert_eq!(stepped["stopped"]["reason"], "step");

    let second = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&second), ("prog.py".into(), 12), "{second}");
    assert_eq!(second["stopped"]["reason"], "breakpoint");
    let ev = dbg(&d, w, json!({"op": "evaluate", "expression": "a"}));
    assert_eq!(ev["result"], "6", "{ev}");

    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    assert_eq!(end["exit_code"], 0, "{end}");

    let output = dbg(&d, w, json!({"op": "output"}));
    let text = output["text"].as_str().unwrap();
    assert!(
        text.contains("total 6\n") && text.contains("done 7\n"),
        "{output}"
    );
    // Reads go on from where the last stopped.
    let again = dbg(&d, w, json!({"op": "output"}));
    assert_eq!(again["text"], "", "{again}");
    assert_eq!(again["offset"], output["next_offset"]);
    // `eof` once nothing more can come: the adapter's stream closed (or 2 s after the end).
    wait_for(
        "the output's eof",
        std::time::Duration::from_secs(15),
        || {
            let more = dbg(&d, w, json!({"op": "output"}));
            assert_eq!(more["text"], "", "{more}");
            (more["eof"] == true).then_some(())
        },
    );

    wait_for(
        "the adapter and the program to be gone",
        std::time::Duration::from_secs(15),
        || (!alive(adapter_pid) && !alive(debuggee_pid)).then_some(()),
    );
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["state"], "exited", "{status}");
}

#[test]
fn terminate_kills_and_reaps_the_adapter_and_the_program() {
    require_debugpy();
    let p = project(&[(
        "loop.py",
        "import time\nwhile True:\n    time.sleep(0.05)\n",
    )]);
    let w = p.path();
    // `continue` answers "running" once the program has not stopped for stop_wait_s.
    let d = TestDaemon::start(&debug_config("stop_wait_s = 2"));
    // No breakpoints: launch stops on entry.
    let launched = dbg(&d, w, json!({"op": "launch", "program": "loop.py"}));
    assert_eq!(launched["stopped"]["reason"], "entry", "{launched}");
    assert_eq!(stopped_at(&launched), ("loop.py".into(), 1), "{launched}");
    let adapter_pid = launched["session"]["adapter_pid"].as_u64().unwrap() as u32;
    let debuggee_pid = launched["session"]["debuggee_pid"].as_u64().unwrap() as u32;
    // Breakpoints set and cleared while the session runs apply at once.
    let bp = dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "loop.py", "lines": [3]}),
    );
    assert_eq!(bp["applied"], true, "{bp}");
    assert_eq!(bp["breakpoints"][0]["verified"], true, "{bp}");
    let hit = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&hit), ("loop.py".into(), 3), "{hit}");
    assert_eq!(hit["stopped"]["reason"], "breakpoint", "{hit}");
    let cleared = dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "loop.py", "lines": []}),
    );
    assert_eq!(cleared["applied"], true, "{cleared}");
    let running = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(running["state"], "running", "{running}");
    let paused = dbg(&d, w, json!({"op": "pause"}));
    assert_eq!(paused["state"], "stopped", "{paused}");
    assert_eq!(paused["stopped"]["reason"], "pause", "{paused}");
    let threads = dbg(&d, w, json!({"op": "threads"}));
    assert!(
        !threads["threads"].as_array().unwrap().is_empty(),
        "{threads}"
    );

    let t = dbg(&d, w, json!({"op": "terminate"}));
    assert_eq!(t["terminated"], true, "{t}");
    assert_eq!(t["session"]["state"], "terminated", "{t}");
    assert!(!alive(adapter_pid), "the adapter outlived terminate");
    assert!(!alive(debuggee_pid), "the program outlived terminate");
    let again = dbg(&d, w, json!({"op": "terminate"}));
    assert_eq!(again["terminated"], false, "{again}");
}
