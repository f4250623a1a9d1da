//! lldb-dap (Debian's lldb-19) through the real daemon: the same shape as the Python session
//! on a C program built with `gcc -g` — breakpoints on two lines, launch stops at the first,
//! stack, scopes, variables (a 600-character string cut at 400), evaluate, step_over moves
//! one line, continue to the second breakpoint, continue to the end, output captured — and
//! a Rust program built with `rustc -g`.

use std::process::Command;

use serde_json::json;
use toolvisor_tests::debug::{dbg, debug_config, gcc, require_lldb_dap, stopped_at};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, alive, wait_for};

const C: &str = r#"#include <stdio.h>
#include <string.h>

int twice(int n) {
    char text[601];
    memset(text, 'y', 600); text[600] = 0;
    int total = n * 2;
    printf("total %d %zu\n", total, strlen(text));
    return total;
}

int main(void) {
    int a = twice(3);
    int b = a + 1;
    fprintf(stderr, "done %d\n", b);
    return 0;
}
"#;

#[test]
fn breakpoints_stack_variables_step_continue_and_output_with_lldb_on_c() {
    require_lldb_dap();
    let p = project(&[]);
    let w = p.path();
    gcc(w, "cprog", C);
    let d = TestDaemon::start(&debug_config(""));

    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "cprog.c", "lines": [7, 14]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "cprog"}));
    assert_eq!(launched["session"]["adapter"], "lldb", "{launched}");
    assert_eq!(launched["stopped"]["reason"], "breakpoint", "{launched}");
    assert_eq!(stopped_at(&launched), ("cprog.c".into(), 7), "{launched}");
    let adapter_pid = launched["session"]["adapter_pid"].as_u64().unwrap() as u32;
    let debuggee_pid = launched["session"]["debuggee_pid"].as_u64().unwrap() as u32;

    let stack = dbg(&d, w, json!({"op": "stack"}));
    let frames = stack["frames"].as_array().unwrap();
    assert_eq!(
        (frames[0]["name"].as_str(), frames[0]["line"].as_u64()),
        (Some("twice"), Some(7)),
        "{stack}"
    );
    assert_eq!(
        (frames[1]["name"].as_str(), frames[1]["line"].as_u64()),
        (Some("main"), Some(13)),
        "{stack}"
    );

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
    let text = var("text");
    assert_eq!(
        text["value"].as_str().unwrap().chars().count(),
        400,
        "{text}"
    );
    assert_eq!(text["value_truncated"], true, "{text}");

    let ev = dbg(&d, w, json!({"op": "evaluate", "expression": "n * 10"}));
    assert_eq!(ev["result"], "30", "{ev}");

    let stepped = dbg(&d, w, json!({"op": "step_over"}));
    assert_eq!(stopped_at(&stepped), ("cprog.c".into(), 8), "{stepped}");

    let second = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&second), ("cprog.c".into(), 14), "{second}");
    assert_eq!(
        dbg(&d, w, json!({"op": "evaluate", "expression": "a"}))["result"],
        "6"
    );

    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    assert_eq!(end["exit_code"], 0, "{end}");
    let output = dbg(&d, w, json!({"op": "output"}));
    let text = output["text"].as_str().unwrap();
    assert!(
        text.contains("total 6 600") && text.contains("done 7"),
        "{output}"
    );
    wait_for(
        "lldb-dap and the program to be gone",
        std::time::Duration::from_secs(15),
        || (!alive(adapter_pid) && !alive(debuggee_pid)).then_some(()),
    );
}

const RUST: &str = r#"fn double(n: i32) -> i32 {
    let total = n * 2;
    println!("double {total}");
    total
}

fn main() {
    let a = double(21);
    println!("answer {a}");
}
"#;

#[test]
fn a_rust_program_stops_steps_and_evaluates_under_lldb() {
    require_lldb_dap();
    let p = project(&[("main.rs", RUST)]);
    let w = p.path();
    let out = Command::new("rustc")
        .args(["-g", "-C", "opt-level=0", "-o", "rprog", "main.rs"])
        .current_dir(w)
        .output()
        .expect("rustc");
    assert!(
        out.status.success(),
        "rustc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "main.rs", "lines": [2]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "rprog"}));
    assert_eq!(stopped_at(&launched), ("main.rs".into(), 2), "{launched}");
    let stack = dbg(&d, w, json!({"op": "stack"}));
    assert!(
        stack["frames"][0]["name"]
            .as_str()
            .unwrap()
            .contains("double"),
        "{stack}"
    );
    assert_eq!(
        dbg(&d, w, json!({"op": "evaluate", "expression": "n"}))["result"],
        "21"
    );
    let stepped = dbg(&d, w, json!({"op": "step_over"}));
    assert_eq!(stopped_at(&stepped), ("main.rs".into(), 3), "{stepped}");
    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    let output = dbg(&d, w, json!({"op": "output"}));
    let text = output["text"].as_str().unwrap();
    assert!(
        text.contains("double 42") && text.contains("answer 42"),
        "{output}"
    );
}
