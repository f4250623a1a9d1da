//! Every tool the daemon advertises, every required argument: a call without it answers
//! `invalid_args` naming that argument, end to end through the daemon, before any handler
//! runs (nothing is written, started or asked). The other required arguments are given the
//! simplest value of their declared type, so the one left out is the only thing wrong.

use serde_json::{Map, Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_tests::TestDaemon;

/// The simplest value a property's schema takes.
fn simplest(prop: &Json) -> Json {
    if let Some(first) = prop
        .get("enum")
        .and_then(Json::as_array)
        .and_then(|a| a.first())
    {
        return first.clone();
    }
    if let Some(c) = prop.get("const") {
        return c.clone();
    }
    if let Some(any) = prop
        .get("anyOf")
        .or_else(|| prop.get("oneOf"))
        .and_then(Json::as_array)
        .and_then(|a| a.iter().find(|s| s.get("type") != Some(&json!("null"))))
    {
        return simplest(any);
    }
    let kind = match prop.get("type") {
        Some(Json::Array(kinds)) => kinds
            .iter()
            .filter_map(Json::as_str)
            .find(|k| *k != "null")
            .unwrap_or("string")
            .to_string(),
        Some(Json::String(k)) => k.clone(),
        _ => "string".to_string(),
    };
    match kind.as_str() {
        "integer" | "number" => prop.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        "array" => json!([]),
        "object" => json!({}),
        _ => json!("x"),
    }
}

#[test]
fn each_required_argument_of_each_tool_is_named_when_missing() {
    let d = TestDaemon::start("");
    let mut c = d.client(Codec::Json, Tier::Exec, true);
    let tools = match c.request(&ClientFrame::ListTools { all: false }).unwrap() {
        DaemonFrame::Tools { tools } => tools,
        other => panic!("{other:?}"),
    };
    let mut checked = Vec::new();
    let mut wrong = Vec::new();
    for tool in tools.iter().filter(|t| t.available) {
        let schema = &tool.schema.0;
        let required: Vec<String> = schema["required"]
            .as_array()
            .map(|r| {
                r.iter()
                    .filter_map(Json::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let full: Map<String, Json> = required
            .iter()
            .map(|k| (k.clone(), simplest(&schema["properties"][k])))
            .collect();
        for field in &required {
            let mut args = full.clone();
            args.remove(field);
            let outcome = c
                .call_with("c", &tool.name, Json::Object(args.clone()), |_| true)
                .expect("call")
                .outcome;
            match outcome {
                Outcome::Err(e)
                    if e.kind == ErrorKind::InvalidArgs
                        && e.message.contains(&format!("`{field}`")) =>
                {
                    checked.push(format!("{}.{field}", tool.name));
                }
                Outcome::Err(e) => wrong.push(format!("{} without {field}: {e}", tool.name)),
                Outcome::Ok(v) => wrong.push(format!(
                    "{} without {field} {}: answered {}",
                    tool.name,
                    Json::Object(args),
                    v.0
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The daemon with no configuration advertises some thirty tools with required arguments.
    let tools_checked: std::collections::BTreeSet<&str> = checked
        .iter()
        .map(|c| c.split('.').next().unwrap())
        .collect();
    assert!(
        tools_checked.len() >= 20,
        "only {} tools had required arguments: {checked:?}",
        tools_checked.len()
    );
}
