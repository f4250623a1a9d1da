//! `debug`'s state-changing ops need approval and run at the exec tier: `restart` like
//! `launch`, `set_variable` like `evaluate`, `run_to` like `continue`; inspection ops and
//! `watch` (a breakpoint, like `breakpoints`) do not ask.

use serde_json::json;
use toolvisor_protocol::wire::Tier;

#[test]
fn restart_and_set_variable_are_approved_exec_calls() {
    let tools = toolvisor::tools::all(false);
    let debug = tools
        .iter()
        .find(|t| t.name == "debug")
        .expect("debug is registered");
    for op in ["launch", "restart", "evaluate", "set_variable", "run_to"] {
        let args = json!({"op": op});
        assert!(debug.needs_approval(&args), "{op} needs approval");
        assert_eq!(debug.call_tier(&args), Tier::Exec, "{op}");
    }
    for op in [
        "status",
        "breakpoints",
        "variables",
        "stack",
        "output",
        "watch",
    ] {
        assert!(
            !debug.needs_approval(&json!({"op": op})),
            "{op} does not ask"
        );
    }
    let ops = debug.schema["properties"]["op"]["enum"]
        .as_array()
        .expect("op is an enum");
    for op in ["restart", "set_variable", "run_to", "watch"] {
        assert!(ops.iter().any(|o| o == op), "the schema offers {op}");
    }
    for field in [
        "points",
        "functions",
        "exceptions",
        "cwd",
        "env",
        "module",
        "just_my_code",
        "name",
        "value",
        "line",
    ] {
        assert!(
            debug.schema["properties"].get(field).is_some(),
            "the schema has {field}"
        );
    }
    // `line` is 1-based: the schema says so.
    let line = &debug.schema["properties"]["line"];
    assert!(line.to_string().contains("\"minimum\":1"), "{line}");
}
