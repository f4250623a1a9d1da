//! `launch` options, `restart` and `set_variable` on the real adapters: `cwd`, `env` (on top
//! of the allowlisted environment) and `args` reach the program; debugpy runs a module
//! (`module`) and `just_my_code: false` steps into the standard library; lldb-dap refuses the
//! Python-only options naming itself; `restart` ends the session and launches it again with
//! the same arguments (a new session, the old processes gone); `set_variable` changes what
//! the program computes next.

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::debug::{
    dbg, dbg_err, debug_config, gcc, require_debugpy, require_lldb_dap, stopped_at, wait_state,
};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, alive, wait_for};

const MODULE: &str = r#"import os
import sys

print("cwd", os.path.basename(os.getcwd()))
print("argv", sys.argv[1:])
print("env", os.environ.get("GREETING"), "PATH" in os.environ)
"#;

/// The program's whole output once the session has ended.
fn final_output(d: &TestDaemon, w: &Path) -> String {
    wait_state(d, w, "exited");
    wait_for(
        "the program's output",
        std::time::Duration::from_secs(10),
        || {
            let out = dbg(d, w, json!({"op": "output", "offset": 0}));
            (out["eof"] == true).then(|| out["text"].as_str().unwrap_or("").to_string())
        },
    )
}

#[test]
fn module_cwd_env_and_args_reach_the_program_on_debugpy() {
    require_debugpy();
    let p = project(&[("app/pkg/__init__.py", ""), ("app/pkg/mod.py", MODULE)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));

    let launched = dbg(
        &d,
        w,
        json!({"op": "launch", "module": "pkg.mod", "cwd": "app", "args": ["--n", "3"],
               "env": {"GREETING": "hi there"}}),
    );
    // No breakpoints: stopped at the module's entry.
    assert_eq!(launched["state"], "stopped", "{launched}");
    assert_eq!(stopped_at(&launched), ("mod.py".into(), 1), "{launched}");
    assert_eq!(launched["session"]["module"], "pkg.mod", "{launched}");
    dbg(&d, w, json!({"op": "continue"}));
    let text = final_output(&d, w);
    assert!(text.contains("cwd app"), "{text}");
    assert!(text.contains("argv ['--n', '3']"), "{text}");
    assert!(text.contains("env hi there True"), "{text}");

    let both = dbg_err(
        &d,
        w,
        json!({"op": "launch", "module": "pkg.mod", "program": "app/pkg/mod.py"}),
    );
    assert_eq!(both.kind, ErrorKind::InvalidArgs, "{both:?}");
    let bad = dbg_err(&d, w, json!({"op": "launch", "module": "pkg/mod.py"}));
    assert_eq!(bad.kind, ErrorKind::InvalidArgs, "{bad:?}");
    let nodir = dbg_err(
        &d,
        w,
        json!({"op": "launch", "module": "pkg.mod", "cwd": "nowhere"}),
    );
    assert_eq!(nodir.kind, ErrorKind::NotFound, "{nodir:?}");
    let badenv = dbg_err(
        &d,
        w,
        json!({"op": "launch", "module": "pkg.mod", "cwd": "app", "env": {"A=B": "x"}}),
    );
    assert_eq!(badenv.kind, ErrorKind::InvalidArgs, "{badenv:?}");
}

const STEP: &str = r#"import json


def f(n):
    text = json.dumps({"n": n})
    total = n * 2
    return total, text


print("result", f(3))
"#;

#[test]
fn just_my_code_false_steps_into_the_library_and_restart_repeats_the_launch_on_debugpy() {
    require_debugpy();
    let p = project(&[("prog.py", STEP)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));

    let err = dbg_err(&d, w, json!({"op": "restart"}));
    assert_eq!(err.kind, ErrorKind::NotFound, "{err:?}");

    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [5]}),
    );
    // Default (just my code): step_in over a library call stays in prog.py.
    let launched = dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    assert_eq!(stopped_at(&launched), ("prog.py".into(), 5), "{launched}");
    let stepped = dbg(&d, w, json!({"op": "step_in"}));
    assert_eq!(stopped_at(&stepped).0, "prog.py", "{stepped}");
    dbg(&d, w, json!({"op": "terminate"}));

    let launched = dbg(
        &d,
        w,
        json!({"op": "launch", "program": "prog.py", "just_my_code": false}),
    );
    let first = launched["session"]["id"].as_str().unwrap().to_string();
    let old_adapter = launched["session"]["adapter_pid"].as_u64().unwrap() as u32;
    let old_debuggee = launched["session"]["debuggee_pid"].as_u64().unwrap() as u32;
    let stepped = dbg(&d, w, json!({"op": "step_in"}));
    let file = stepped["stopped"]["frame"]["file"].as_str().unwrap_or("");
    assert!(
        file.contains("json"),
        "stepped into the json module: {stepped}"
    );

    // Restart: the same launch (just_my_code false again), a new session, the old gone.
    let again = dbg(&d, w, json!({"op": "restart"}));
    assert_eq!(again["restarted_from"], first.as_str(), "{again}");
    assert_ne!(again["session"]["id"], first.as_str(), "{again}");
    assert_eq!(stopped_at(&again), ("prog.py".into(), 5), "{again}");
    wait_for(
        "the first session's processes to be gone",
        std::time::Duration::from_secs(10),
        || (!alive(old_adapter) && !alive(old_debuggee)).then_some(()),
    );
    let stepped = dbg(&d, w, json!({"op": "step_in"}));
    let file = stepped["stopped"]["frame"]["file"].as_str().unwrap_or("");
    assert!(
        file.contains("json"),
        "the restart kept just_my_code: {stepped}"
    );

    // After the program ended, restart runs it again.
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [6]}),
    );
    dbg(&d, w, json!({"op": "continue"}));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": []}),
    );
    dbg(&d, w, json!({"op": "continue"}));
    wait_state(&d, w, "exited");
    let third = dbg(&d, w, json!({"op": "restart"}));
    assert_eq!(third["state"], "stopped", "{third}");
    assert_eq!(third["stopped"]["reason"], "entry", "{third}");
    dbg(&d, w, json!({"op": "terminate"}));
}

/// The reference of the top frame's locals.
fn locals(d: &TestDaemon, w: &Path) -> i64 {
    let scopes = dbg(d, w, json!({"op": "scopes"}));
    scopes["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            let name = s["name"].as_str().unwrap_or("").to_lowercase();
            name.contains("local")
        })
        .and_then(|s| s["reference"].as_i64())
        .unwrap_or_else(|| panic!("a locals scope: {scopes}"))
}

#[test]
fn set_variable_changes_what_the_program_computes_on_debugpy() {
    require_debugpy();
    let p = project(&[("prog.py", STEP)]);
    let w = p.path();
    let d = TestDaemon::start(&debug_config(""));
    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "prog.py", "lines": [6]}),
    );
    dbg(&d, w, json!({"op": "launch", "program": "prog.py"}));
    let reference = locals(&d, w);
    let set = dbg(
        &d,
        w,
        json!({"op": "set_variable", "reference": reference, "name": "n", "value": "10"}),
    );
    assert_eq!(set["value"], "10", "{set}");
    assert_eq!(set["type"], "int", "{set}");
    dbg(&d, w, json!({"op": "step_over"}));
    let total = dbg(&d, w, json!({"op": "evaluate", "expression": "total"}));
    assert_eq!(total["result"], "20", "{total}");

    // A reference that names no container is the adapter's refusal, quoted.
    let bad = dbg_err(
        &d,
        w,
        json!({"op": "set_variable", "reference": 999_999, "name": "n", "value": "1"}),
    );
    assert_eq!(bad.kind, ErrorKind::InvalidArgs, "{bad:?}");
    assert!(bad.message.contains("setVariable"), "{bad:?}");
    let missing = dbg_err(
        &d,
        w,
        json!({"op": "set_variable", "reference": reference, "name": "n"}),
    );
    assert_eq!(missing.kind, ErrorKind::InvalidArgs, "{missing:?}");
    assert!(missing.message.contains("`value`"), "{missing:?}");

    dbg(&d, w, json!({"op": "continue"}));
    let text = final_output(&d, w);
    assert!(text.contains("result (20, '{\"n\": 3}')"), "{text}");
}

const C: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

int twice(int n) {
    int total = n * 2;
    return total;
}

int main(int argc, char **argv) {
    char cwd[4096];
    getcwd(cwd, sizeof cwd);
    const char *base = strrchr(cwd, '/');
    printf("cwd %s\n", base ? base + 1 : cwd);
    for (int i = 1; i < argc; i++) printf("arg %s\n", argv[i]);
    const char *g = getenv("GREETING");
    printf("env %s %d\n", g ? g : "(none)", getenv("PATH") != NULL);
    printf("twice %d\n", twice(3));
    return 0;
}
"#;

#[test]
fn cwd_env_args_restart_and_set_variable_on_lldb() {
    require_lldb_dap();
    let p = project(&[("run/.keep", "")]);
    let w = p.path();
    gcc(w, "opts", C);
    let d = TestDaemon::start(&debug_config(""));

    // Python-only options are refused naming the adapter.
    for extra in [json!({"just_my_code": false}), json!({"module": "pkg.mod"})] {
        let mut args = json!({"op": "launch", "adapter": "lldb"});
        if extra.get("module").is_none() {
            args["program"] = json!("opts");
        }
        for (k, v) in extra.as_object().unwrap() {
            args[k] = v.clone();
        }
        let e = dbg_err(&d, w, args);
        assert_eq!(e.kind, ErrorKind::NotAvailable, "{e:?}");
        assert!(e.message.contains("lldb"), "{e:?}");
    }

    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "opts.c", "lines": [7]}),
    );
    let launched = dbg(
        &d,
        w,
        json!({"op": "launch", "program": "opts", "cwd": "run", "args": ["a b", "c"],
               "env": {"GREETING": "hello"}}),
    );
    assert_eq!(stopped_at(&launched), ("opts.c".into(), 7), "{launched}");
    let first = launched["session"]["id"].clone();

    let again = dbg(&d, w, json!({"op": "restart"}));
    assert_eq!(again["restarted_from"], first, "{again}");
    assert_eq!(stopped_at(&again), ("opts.c".into(), 7), "{again}");

    let reference = locals(&d, w);
    let set = dbg(
        &d,
        w,
        json!({"op": "set_variable", "reference": reference, "name": "n", "value": "10"}),
    );
    assert_eq!(set["value"], "10", "{set}");
    dbg(&d, w, json!({"op": "continue"}));
    let text = final_output(&d, w);
    assert!(text.contains("cwd run"), "{text}");
    assert!(
        text.contains("arg a b") && text.contains("arg c"),
        "{text:?}"
    );
    assert!(text.contains("env hello 1"), "{text}");
    assert!(text.contains("twice 20"), "{text}");
    let _: Value = dbg(&d, w, json!({"op": "status"}));
}
