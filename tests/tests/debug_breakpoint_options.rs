//! Breakpoint options on the real adapters: a `condition` stops only when true, a
//! `hit_condition` at the Nth hit, a `log_message` prints instead of stopping, function
//! breakpoints by name, exception filters the adapter advertises (an unknown one is refused
//! naming the adapter's), and `breakpoints` without a file lists what the adapter verified
//! and where it moved a breakpoint — on debugpy and on lldb-dap.

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::debug::{
    dbg, dbg_err, debug_config, gcc, require_debugpy, require_lldb_dap, stopped_at, wait_state,
};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, wait_for};

const PY: &str = r#"import sys


def f(i):
    x = i * 10
    return x


def boom():
    raise ValueError("caught here")


total = 0
for i in range(6):
    total += f(i)
try:
    boom()
except ValueError:
    pass
print("total", total)
"#;

/// Everything the program and the adapter printed so far (`output` text and console lines).
fn printed(d: &TestDaemon, w: &std::path::Path) -> String {
    let out = dbg(d, w, json!({"op": "output", "offset": 0}));
    let console: Vec<String> = out["console"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|l| l.as_str())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    format!("{}{}", out["text"].as_str().unwrap_or(""), console.join(""))
}

fn eval(d: &TestDaemon, w: &std::path::Path, expression: &str) -> String {
    let v = dbg(d, w, json!({"op": "evaluate", "expression": expression}));
    v["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

#[test]
fn conditions_hit_counts_logpoints_functions_and_exceptions_on_debugpy() {
    require_debugpy();
    let p = project(&[("prog.py", PY)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));

    let set = dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "points": [
            {"line": 5, "condition": "i == 3"},
            {"line": 15, "log_message": "loop i={i} total={total}"},
        ]}),
    );
    assert_eq!(set["applied"], false, "{set}");
    assert_eq!(set["lines"], json!([5, 15]), "{set}");

    // The condition: the first stop is the fourth call, not the first.
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(stopped_at(&launched), ("prog.py".into(), 5), "{launched}");
    assert_eq!(eval(&d, w, "i"), "3");
    // The logpoint printed on every pass before and never stopped.
    let text = wait_for(
        "the logpoint's messages",
        std::time::Duration::from_secs(10),
        || {
            let t = printed(&d, w);
            t.contains("loop i=3 total=30").then_some(t)
        },
    );
    assert!(text.contains("loop i=0 total=0"), "{text}");

    // The hit condition, set during the session: the 2nd hit from now (i == 4).
    let set = dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "points": [{"line": 6, "hit_condition": "2"}]}),
    );
    assert_eq!(set["applied"], true, "{set}");
    assert_eq!(set["breakpoints"][0]["verified"], true, "{set}");
    assert_eq!(set["breakpoints"][0]["hit_condition"], "2", "{set}");
    let next = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&next), ("prog.py".into(), 6), "{next}");
    assert_eq!(eval(&d, w, "i"), "4");

    // A function breakpoint by name; then the `raised` exception filter.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": []}),
    );
    let set = dbg(&d, w, json!({"op": "breakpoints", "functions": ["boom"]}));
    assert_eq!(set["functions"][0]["name"], "boom", "{set}");
    assert_eq!(set["functions"][0]["verified"], true, "{set}");
    let next = dbg(&d, w, json!({"op": "continue"}));
    let (file, line) = stopped_at(&next);
    assert_eq!(file, "prog.py", "{next}");
    assert!((9..=10).contains(&line), "stopped in boom: {next}");
    assert_eq!(next["stopped"]["frame"]["name"], "boom", "{next}");

    let bad = dbg_err(
        &d,
        w,
        json!({"op": "breakpoints", "exceptions": ["thrown"]}),
    );
    assert_eq!(bad.kind, ErrorKind::InvalidArgs, "{bad:?}");
    assert!(
        bad.message.contains("debugpy") && bad.message.contains("thrown"),
        "{bad:?}"
    );
    assert!(
        bad.hint.contains("raised") && bad.hint.contains("uncaught"),
        "{bad:?}"
    );
    dbg(&d, w, json!({"op": "breakpoints", "functions": []}));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "exceptions": ["raised"]}),
    );
    let next = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(next["stopped"]["reason"], "exception", "{next}");
    assert_eq!(stopped_at(&next), ("prog.py".into(), 10), "{next}");

    let listing = dbg(&d, w, json!({"op": "breakpoints"}));
    assert_eq!(listing["exceptions"]["set"], json!(["raised"]), "{listing}");
    let available: Vec<&str> = listing["exceptions"]["available"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["filter"].as_str())
        .collect();
    assert!(
        available.contains(&"raised") && available.contains(&"uncaught"),
        "{listing}"
    );
    assert_eq!(listing["applied"], true, "{listing}");

    dbg(&d, w, json!({"op": "breakpoints", "exceptions": []}));
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    assert!(printed(&d, w).contains("total 150"));
}

const C: &str = r#"#include <stdio.h>

int f(int i) {
    int x = i * 10;
    return x;
}


int main(void) {
    int total = 0;
    for (int i = 0; i < 6; i++) {
        total += f(i);
    }
    printf("total %d\n", total);
    return 0;
}
"#;

fn frame_var(d: &TestDaemon, w: &std::path::Path, name: &str) -> String {
    let v = dbg(d, w, json!({"op": "evaluate", "expression": name}));
    v["result"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string()
}

#[test]
fn conditions_hit_counts_logpoints_functions_and_moves_on_lldb() {
    require_lldb_dap();
    let p = project(&[]);
    let w = p.path();
    gcc(w, "bp", C);
    let d = TestDaemon::start(&debug_config(""));

    // Filters are checked against the adapter's once it answers `initialize`: debugpy's
    // `raised` fails the launch, naming lldb's filters; no session is left running.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "exceptions": ["raised"]}),
    );
    let bad = dbg_err(&d, w, json!({"op": "launch", "program": "bp"}));
    assert_eq!(bad.kind, ErrorKind::InvalidArgs, "{bad:?}");
    assert!(
        bad.message
            .starts_with("debug launch: the lldb adapter has no exception filter \"raised\""),
        "{bad:?}"
    );
    assert!(bad.hint.contains("cpp_throw"), "{bad:?}");
    wait_state(&d, w, "failed");
    dbg(&d, w, json!({"op": "breakpoints", "exceptions": []}));

    // Line 8 is blank: lldb moves the breakpoint to the next line with code.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "bp.c", "points": [
            {"line": 4, "condition": "i == 3"},
            {"line": 8},
            {"line": 12, "log_message": "loop i={i}"},
        ]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "bp"}));
    let verdicts = launched["breakpoints"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    let moved = verdicts
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["line"] == 8)
        .unwrap_or_else(|| panic!("{launched}"))
        .clone();
    let actual = moved["actual_line"]
        .as_u64()
        .unwrap_or_else(|| panic!("the blank line's breakpoint moved: {launched}"));
    assert!(actual > 8, "{launched}");
    assert_eq!(stopped_at(&launched), ("bp.c".into(), actual), "{launched}");

    // The listing says the same, with the options as set.
    let listing = dbg(&d, w, json!({"op": "breakpoints"}));
    let file: &Value = listing["files"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    let list = file.as_array().unwrap();
    assert_eq!(list.len(), 3, "{listing}");
    assert_eq!(list[0]["condition"], "i == 3", "{listing}");
    assert_eq!(list[1]["actual_line"], actual, "{listing}");
    assert_eq!(list[2]["log_message"], "loop i={i}", "{listing}");
    assert!(list.iter().all(|b| b["verified"] == true), "{listing}");

    let next = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&next), ("bp.c".into(), 4), "{next}");
    assert_eq!(frame_var(&d, w, "i"), "3");
    let text = printed(&d, w);
    assert!(text.contains("loop i=2"), "{text}");

    // The hit condition: the 2nd hit from now (i == 5).
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "bp.c", "points": [{"line": 5, "hit_condition": "2"}]}),
    );
    let next = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&next), ("bp.c".into(), 5), "{next}");
    assert_eq!(frame_var(&d, w, "i"), "4");

    // Function breakpoints by name: f is entered once more.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "bp.c", "lines": []}),
    );
    let set = dbg(&d, w, json!({"op": "breakpoints", "functions": ["f"]}));
    assert_eq!(set["functions"][0]["verified"], true, "{set}");
    let next = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(next["stopped"]["frame"]["name"], "f", "{next}");
    assert_eq!(frame_var(&d, w, "i"), "5");

    // lldb's exception filters are C++/ObjC ones: debugpy's names are refused, naming them.
    let bad = dbg_err(
        &d,
        w,
        json!({"op": "breakpoints", "exceptions": ["raised"]}),
    );
    assert_eq!(bad.kind, ErrorKind::InvalidArgs, "{bad:?}");
    assert!(bad.message.contains("lldb"), "{bad:?}");
    assert!(bad.hint.contains("cpp_throw"), "{bad:?}");

    dbg(&d, w, json!({"op": "breakpoints", "functions": []}));
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    wait_state(&d, w, "exited");
}
