//! A stop on an exception says what it is: debugpy on a Python program raising an uncaught
//! `ValueError` pauses where it was raised (the `uncaught` filter is on by default) and the
//! answer and `status` carry `exception {id, description, type, stack_trace_text}` from
//! `exceptionInfo`; `[debug] pause_on_uncaught = false` lets the program end instead.
//! lldb-dap on a C++ `throw`: with no filters the uncaught exception stops on its SIGABRT
//! (`exception.id` `signal`), with the `cpp_throw` filter at the throw itself.

use std::process::Command;

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::debug::{dbg, debug_config, require_debugpy, require_lldb_dap, stopped_at};
use toolvisor_tests::lsp::project;

const PY: &str = r#"def boom(n):
    raise ValueError(f"bad value {n}")


print("before")
boom(3)
print("never")
"#;

#[test]
fn an_uncaught_python_exception_pauses_and_says_what_it_is() {
    require_debugpy();
    let p = project(&[("prog.py", PY)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));
    // No breakpoints: the launch stops at the entry; the exception filters are the defaults.
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(launched["stopped"]["reason"], "entry", "{launched}");
    let raised = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(raised["state"], "stopped", "{raised}");
    assert_eq!(raised["stopped"]["reason"], "exception", "{raised}");
    assert_eq!(stopped_at(&raised), ("prog.py".into(), 2), "{raised}");
    let exception = &raised["stopped"]["exception"];
    assert_eq!(exception["id"], "ValueError", "{raised}");
    assert_eq!(exception["type"], "ValueError", "{raised}");
    assert_eq!(exception["description"], "bad value 3", "{raised}");
    let trace = exception["stack_trace_text"].as_str().unwrap();
    assert!(
        trace.contains("line 2, in boom") && trace.contains("line 6, in <module>"),
        "{raised}"
    );
    assert!(
        raised["text"]
            .as_str()
            .unwrap()
            .ends_with("in boom (exception ValueError: bad value 3)"),
        "{raised}"
    );
    // `status` shows the same, without asking the adapter again.
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["exception"], *exception, "{status}");
    // The frame's locals are there to look at.
    let n = dbg(&d, w, json!({"op": "evaluate", "expression": "n"}));
    assert_eq!(n["result"], "3", "{n}");
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    assert_eq!(end["exit_code"], 1, "{end}");
    let output = dbg(&d, w, json!({"op": "output"}));
    let text = output["text"].as_str().unwrap();
    assert!(
        text.contains("before") && !text.contains("never"),
        "{output}"
    );
}

#[test]
fn with_pause_on_uncaught_off_the_program_just_ends() {
    require_debugpy();
    let p = project(&[("prog.py", PY)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config("pause_on_uncaught = false"));
    dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    assert_eq!(end["exit_code"], 1, "{end}");
    // The caller's own filters win over the default either way.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "exceptions": ["uncaught"]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(launched["stopped"]["reason"], "exception", "{launched}");
    assert_eq!(
        launched["stopped"]["exception"]["type"], "ValueError",
        "{launched}"
    );
}

const CPP: &str = r#"#include <stdexcept>

int check(int n) {
    if (n > 2) throw std::runtime_error("too big");
    return n;
}

int main() {
    return check(3);
}
"#;

#[test]
fn a_cpp_throw_stops_on_its_abort_and_with_cpp_throw_at_the_throw_under_lldb() {
    require_lldb_dap();
    let p = project(&[("thr.cpp", CPP)]);
    let w = p.path();
    let out = Command::new("g++")
        .args(["-g", "-O0", "-o", "thr", "thr.cpp"])
        .current_dir(w)
        .output()
        .expect("g++ (scripts/install-test-deps installs gcc and g++)");
    assert!(
        out.status.success(),
        "g++: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = TestDaemon::start(&debug_config(""));
    // No filters: lldb has no `uncaught` filter; the uncaught exception's std::terminate
    // raises SIGABRT, and lldb stops on it.
    let launched = dbg(&d, w, json!({"op": "launch", "program": "thr"}));
    assert_eq!(launched["stopped"]["reason"], "entry", "{launched}");
    let aborted = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(aborted["stopped"]["reason"], "exception", "{aborted}");
    let exception = &aborted["stopped"]["exception"];
    assert_eq!(exception["id"], "signal", "{aborted}");
    assert_eq!(exception["description"], "signal SIGABRT", "{aborted}");
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["exception"], *exception, "{status}");
    dbg(&d, w, json!({"op": "terminate"}));

    // `cpp_throw`: the stop is at the throw, named by the filter.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "exceptions": ["cpp_throw"]}),
    );
    let thrown = dbg(&d, w, json!({"op": "launch", "program": "thr"}));
    assert_eq!(thrown["stopped"]["reason"], "exception", "{thrown}");
    assert_eq!(
        thrown["stopped"]["exception"]["id"], "cpp_throw",
        "{thrown}"
    );
    assert_eq!(
        thrown["stopped"]["exception"]["description"], "C++ Throw",
        "{thrown}"
    );
    let stack = dbg(&d, w, json!({"op": "stack"}));
    assert!(
        stack["frames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"].as_str().is_some_and(|n| n.contains("check"))),
        "the throw is in check: {stack}"
    );
    dbg(&d, w, json!({"op": "terminate"}));
}
