//! delve (Debian's `delve` with `golang-go`) through the real daemon on a Go module made here:
//! `dlv dap` listens on TCP, so the daemon starts it with `--listen=127.0.0.1:0`, reads the
//! address it prints and speaks DAP there. A breakpoint in a function called from a loop:
//! launch stops there, stack, scopes, variables, evaluate, step_over, continue to the next
//! iteration, a breakpoint moved to after the loop, continue to the end with the exit code
//! and the program's output, and delve gone; launched again and terminated, delve and the
//! program it built are gone. An adapter that prints no
//! address, or exits before it does, fails at once naming what it printed.

use std::time::{Duration, Instant};

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::debug::{dbg, dbg_err, debug_config, go_env, require_go, stopped_at};
use toolvisor_tests::lsp::project;
use toolvisor_tests::{TestDaemon, alive, children, wait_for};

const GO_MOD: &str = "module example.com/adder\n\ngo 1.19\n";

const MAIN: &str = r#"package main

import (
	"fmt"
	"os"
)

func add(total, n int) int {
	sum := total + n
	return sum
}

func main() {
	total := 0
	for i := 1; i <= 3; i++ {
		total = add(total, i)
	}
	fmt.Println("total", total)
	os.Exit(total)
}
"#;

fn config(debug: &str) -> String {
    format!("{}{}", go_env(), debug_config(debug))
}

/// The variables of the top frame's first scope, by name.
fn locals(d: &TestDaemon, w: &std::path::Path) -> serde_json::Value {
    let scopes = dbg(d, w, json!({"op": "scopes"}));
    let first = &scopes["scopes"][0];
    assert_eq!(first["name"], "Locals", "{scopes}");
    let vars = dbg(
        d,
        w,
        json!({"op": "variables", "reference": first["reference"]}),
    );
    let mut by_name = serde_json::Map::new();
    for v in vars["variables"].as_array().unwrap() {
        by_name.insert(v["name"].as_str().unwrap().to_string(), v["value"].clone());
    }
    serde_json::Value::Object(by_name)
}

#[test]
fn delve_stops_steps_evaluates_and_reports_the_exit_code_of_a_go_module() {
    require_go();
    let p = project(&[("go.mod", GO_MOD), ("main.go", MAIN)]);
    let w = p.path();
    let d = TestDaemon::start(&config(""));

    let adapters = dbg(&d, w, json!({"op": "adapters"}));
    let delve = adapters["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "delve")
        .unwrap_or_else(|| panic!("delve in {adapters}"))
        .clone();
    assert_eq!(delve["available"], true, "{delve}");

    dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "main.go", "lines": [9]}),
    );
    let launched = dbg(&d, w, json!({"op": "launch", "program": "main.go"}));
    assert_eq!(launched["session"]["adapter"], "delve", "{launched}");
    assert_eq!(launched["stopped"]["reason"], "breakpoint", "{launched}");
    assert_eq!(stopped_at(&launched), ("main.go".into(), 9), "{launched}");
    let adapter_pid = launched["session"]["adapter_pid"].as_u64().unwrap() as u32;

    let stack = dbg(&d, w, json!({"op": "stack"}));
    let frames = stack["frames"].as_array().unwrap();
    assert_eq!(
        (frames[0]["name"].as_str(), frames[0]["line"].as_u64()),
        (Some("main.add"), Some(9)),
        "{stack}"
    );
    assert_eq!(
        (frames[1]["name"].as_str(), frames[1]["line"].as_u64()),
        (Some("main.main"), Some(16)),
        "{stack}"
    );

    let vars = locals(&d, w);
    assert_eq!(
        (&vars["total"], &vars["n"]),
        (&json!("0"), &json!("1")),
        "{vars}"
    );
    let ev = dbg(&d, w, json!({"op": "evaluate", "expression": "n * 10"}));
    assert_eq!(ev["result"], "10", "{ev}");

    let stepped = dbg(&d, w, json!({"op": "step_over"}));
    assert_eq!(stopped_at(&stepped), ("main.go".into(), 10), "{stepped}");
    let ev = dbg(&d, w, json!({"op": "evaluate", "expression": "sum"}));
    assert_eq!(ev["result"], "1", "{ev}");

    // The next iteration stops at the same breakpoint with the loop's state carried on.
    let again = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&again), ("main.go".into(), 9), "{again}");
    let vars = locals(&d, w);
    assert_eq!(
        (&vars["total"], &vars["n"]),
        (&json!("1"), &json!("2")),
        "{vars}"
    );

    // Moved after the loop: the live session gets the new set.
    let set = dbg(
        &d,
        w,
        json!({"op": "breakpoints", "file": "main.go", "lines": [18]}),
    );
    assert_eq!(set["applied"], true, "{set}");
    let after = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(stopped_at(&after), ("main.go".into(), 18), "{after}");
    let ev = dbg(&d, w, json!({"op": "evaluate", "expression": "total"}));
    assert_eq!(ev["result"], "6", "{ev}");

    let end = dbg(&d, w, json!({"op": "continue"}));
    assert_eq!(end["state"], "exited", "{end}");
    assert_eq!(end["exit_code"], 6, "{end}");
    // The program's last output may reach the adapter after its exit: read to `eof`.
    let mut text = String::new();
    wait_for(
        "the program's output to be all in",
        Duration::from_secs(15),
        || {
            let output = dbg(&d, w, json!({"op": "output"}));
            text.push_str(output["text"].as_str().unwrap());
            (output["eof"] == true).then_some(())
        },
    );
    assert!(text.contains("total 6\n"), "{text}");
    wait_for(
        "delve to be gone after the program ended",
        Duration::from_secs(15),
        || (!alive(adapter_pid)).then_some(()),
    );

    // Launched again and terminated while stopped: delve and the program it runs are gone.
    let launched = dbg(&d, w, json!({"op": "launch", "program": "main.go"}));
    assert_eq!(stopped_at(&launched), ("main.go".into(), 18), "{launched}");
    let adapter_pid = launched["session"]["adapter_pid"].as_u64().unwrap() as u32;
    let children = children(adapter_pid);
    let program: Vec<u32> = children
        .iter()
        .filter(|(_, name)| name.starts_with("__debug_bin"))
        .map(|(pid, _)| *pid)
        .collect();
    assert_eq!(program.len(), 1, "delve's children: {children:?}");
    let ended = dbg(&d, w, json!({"op": "terminate"}));
    assert_eq!(ended["session"]["state"], "terminated", "{ended}");
    wait_for(
        "delve and the program to be gone after terminate",
        Duration::from_secs(15),
        || (!alive(adapter_pid) && !alive(program[0])).then_some(()),
    );
}

#[test]
fn an_adapter_that_prints_no_address_fails_in_time_naming_what_it_printed() {
    require_go();
    let p = project(&[("go.mod", GO_MOD), ("main.go", MAIN)]);
    let w = p.path();
    // Real delve with a flag it does not know: it exits at once, saying so on stderr.
    let d = TestDaemon::start(&config(
        "start_timeout_s = 5\n[debug.adapters.delve]\ncommands = [[\"dlv\", \"dap\", \"--listen=127.0.0.1:0\", \"--no-such-flag\"]]\nmarkers = [\"go.mod\"]\nextensions = [\"go\"]\ntransport = \"tcp-listen\"\n",
    ));
    let e = dbg_err(&d, w, json!({"op": "launch", "program": "main.go"}));
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    assert!(
        e.message.contains("the delve debug adapter")
            && e.message
                .contains("before printing the address it listens at")
            && e.message.contains("unknown flag: --no-such-flag"),
        "{e}"
    );
    assert!(e.hint.contains("by hand"), "{e}");

    // One that says something else and then nothing: refused once start_timeout_s is over,
    // and killed.
    let d = TestDaemon::start(&config(
        "start_timeout_s = 2\n[debug.adapters.delve]\ncommands = [[\"sh\", \"-c\", \"echo warming up; echo still warming >&2; exec sleep 600\"]]\nmarkers = [\"go.mod\"]\nextensions = [\"go\"]\ntransport = \"tcp-listen\"\n",
    ));
    let started = Instant::now();
    let e = dbg_err(&d, w, json!({"op": "launch", "program": "main.go"}));
    let took = started.elapsed();
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    assert!(
        e.message.contains("printed no address to connect to")
            && e.message.contains("within 2 s")
            && e.message.contains("stdout: warming up")
            && e.message.contains("still warming"),
        "{e}"
    );
    assert!(e.hint.contains("start_timeout_s"), "{e}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let status = dbg(&d, w, json!({"op": "status"}));
    assert_eq!(status["session"]["state"], "failed", "{status}");
    let pid = status["session"]["adapter_pid"].as_u64().unwrap() as u32;
    wait_for(
        "the adapter that printed no address to be killed",
        Duration::from_secs(10),
        || (!alive(pid)).then_some(()),
    );
}
