//! Ties each tool's places together: the example calls `docs/TOOLS.md` shows, the
//! schema the registry derives from the typed argument struct, the handler's typed parse, and
//! the reference TOOLS.md holds for it, generated from its spec (`tools::reference`).
//! Every example passes the validator and the parse; every tool has an example and a
//! reference block that is what its spec renders now (`TOOLVISOR_BLESS=1` rewrites them:
//! `tools::reference::BLESS`); for every tool and every property (nested ones included) a
//! value of the wrong type is refused by both, and the validator's message names the field;
//! and every schema uses only keywords the validator checks or that only annotate.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};
use toolvisor::registry::validate;
use toolvisor::tools::ToolSpec;
use toolvisor_protocol::error::ErrorKind;

fn tools() -> Vec<ToolSpec> {
    toolvisor::tools::all(true)
}

/// One documented call: the tool, its arguments, the line of TOOLS.md it is on, and the
/// result shown on the next line (`{"ok":true,"result":…}`) where one is, whole.
struct Example {
    tool: String,
    args: Json,
    line: usize,
    result: Option<Json>,
}

/// Every `toolvisor call <tool> ... --args '<json>'` line of TOOLS.md.
fn examples() -> Vec<Example> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/TOOLS.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let mut out = Vec::new();
    let lines: Vec<&str> = doc.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let Some((_, call)) = line.split_once("toolvisor call ") else {
            continue;
        };
        let tool = call.split_whitespace().next().unwrap_or("").to_string();
        let Some((_, quoted)) = call.split_once("--args '") else {
            panic!(
                "TOOLS.md:{}: a `toolvisor call {tool}` example without `--args '<json>'`",
                n + 1
            );
        };
        // The JSON is shell-quoted: it ends at the next single quote (`'\''` is one quote).
        let quoted = quoted.replace(r"'\''", "\u{0}");
        let json = quoted
            .split_once('\'')
            .unwrap_or_else(|| panic!("TOOLS.md:{}: the --args quote is not closed", n + 1))
            .0
            .replace('\u{0}', "'");
        let args = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("TOOLS.md:{}: --args is not JSON ({e}): {json}", n + 1));
        let result = lines
            .get(n + 1)
            .filter(|next| next.starts_with(r#"{"ok":true"#))
            .and_then(|next| match serde_json::from_str::<Json>(next) {
                Ok(answer) => Some(answer["result"].clone()),
                // Shortened on purpose (`…` or `...` for what is left out), or wrapped over
                // several lines: not checked.
                Err(_) if next.contains('…') || next.contains("...") || !next.ends_with('}') => {
                    None
                }
                Err(e) => panic!("TOOLS.md:{}: the answer is not JSON ({e}): {next}", n + 2),
            });
        out.push(Example {
            tool,
            args,
            line: n + 1,
            result,
        });
    }
    out
}

#[test]
fn every_documented_example_passes_the_schema_and_the_typed_parse() {
    let all = tools();
    let examples = examples();
    assert!(examples.len() >= all.len(), "too few examples found");
    let mut failures = Vec::new();
    for ex in &examples {
        let Some(spec) = all.iter().find(|s| s.name == ex.tool) else {
            failures.push(format!("TOOLS.md:{}: no tool named `{}`", ex.line, ex.tool));
            continue;
        };
        if let Err(e) = validate(spec.name, &spec.schema, &ex.args) {
            failures.push(format!("TOOLS.md:{}: {}", ex.line, e.message));
        }
        if let Err(e) = spec.parses(&ex.args) {
            failures.push(format!(
                "TOOLS.md:{}: {} does not parse into {}: {e}",
                ex.line, spec.name, spec.args_type
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every answer TOOLS.md shows parses into its tool's result type, and every output schema
/// is an object (as MCP requires).
#[test]
fn the_documented_answers_are_their_tools_results() {
    let all = tools();
    let mut failures = Vec::new();
    let mut answers = 0;
    for ex in examples() {
        let (Some(result), Some(spec)) = (&ex.result, all.iter().find(|s| s.name == ex.tool))
        else {
            continue;
        };
        answers += 1;
        if let Err(why) = (spec.decode)(result) {
            failures.push(format!(
                "TOOLS.md:{}: {} answers what its result type does not parse: {why}",
                ex.line + 1,
                ex.tool
            ));
        }
    }
    assert!(answers >= 20, "only {answers} documented answers found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    for spec in &all {
        let outward = toolvisor_protocol::results::outward(&spec.output);
        assert_eq!(outward["type"], "object", "{}", spec.name);
    }
}

#[test]
fn every_tool_has_a_documented_example() {
    let examples = examples();
    let missing: Vec<&str> = tools()
        .iter()
        .map(|s| s.name)
        .filter(|name| !examples.iter().any(|e| e.tool == *name))
        .collect();
    assert!(
        missing.is_empty(),
        "tools without an example call in docs/TOOLS.md: {}",
        missing.join(", ")
    );
}

/// The JSON types a property allows: `type` as one name or a list of names.
fn types_of(prop: &Json) -> Vec<&str> {
    match &prop["type"] {
        Json::String(t) => vec![t.as_str()],
        Json::Array(ts) => ts.iter().filter_map(Json::as_str).collect(),
        _ => Vec::new(),
    }
}

/// A value of none of the JSON types of `prop`.
fn wrong_for(prop: &Json) -> Json {
    let types = types_of(prop);
    assert!(
        !types.is_empty(),
        "a schema property without a type: {prop}"
    );
    let candidates = [
        ("integer", json!(12345)),
        ("string", json!("12")),
        ("boolean", json!(true)),
        ("object", json!({"not": "a list"})),
        ("array", json!(["not", "an object"])),
    ];
    candidates
        .into_iter()
        .find(|(ty, _)| {
            // A number admits an integer.
            let admitted = types.contains(ty) || (*ty == "integer" && types.contains(&"number"));
            !admitted
        })
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no value is wrong for {prop}"))
}

/// Arguments that pass `schema`: its required properties, each with a value of its type.
fn minimal(schema: &Json) -> Json {
    let mut args = serde_json::Map::new();
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for r in schema["required"].as_array().into_iter().flatten() {
        let key = r.as_str().unwrap();
        args.insert(key.to_string(), valid_for(&props[key]));
    }
    Json::Object(args)
}

fn valid_for(prop: &Json) -> Json {
    if let Some(first) = prop["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    let at_least = |lo: i64| json!(prop["minimum"].as_i64().unwrap_or(lo).max(lo));
    match types_of(prop).first().copied().unwrap_or("") {
        "string" if prop.get("minWords").is_some() => {
            json!("one two three four five six seven")
        }
        "string" => json!("x"),
        "integer" | "number" => at_least(1),
        "boolean" => json!(true),
        "array" => json!([]),
        "object" => minimal(prop),
        other => panic!("a schema property without a known type: {other}"),
    }
}

/// Every (path, wrong arguments) pair for `schema`: each property, and inside arrays the
/// first item and its own properties, set to a value of the wrong type.
fn wrong_typed_cases(schema: &Json) -> Vec<(String, Json)> {
    let base = minimal(schema);
    let mut cases = Vec::new();
    for (key, prop) in schema["properties"].as_object().into_iter().flatten() {
        let mut args = base.clone();
        args[key] = wrong_for(prop);
        cases.push((format!("`{key}`"), args));
        if types_of(prop) == ["array"] {
            let items = &prop["items"];
            let mut args = base.clone();
            args[key] = json!([wrong_for(items)]);
            cases.push((format!("`{key}[0]`"), args));
            for (sub, sub_prop) in items["properties"].as_object().into_iter().flatten() {
                let mut item = minimal(items);
                item[sub] = wrong_for(sub_prop);
                let mut args = base.clone();
                args[key] = json!([item]);
                cases.push((format!("`{key}[0].{sub}`"), args));
            }
        }
    }
    cases
}

#[test]
fn a_value_of_the_wrong_type_is_refused_naming_the_field_for_every_property() {
    let mut failures = Vec::new();
    let mut checked = BTreeMap::new();
    for spec in tools() {
        // The arguments the cases start from are right.
        let base = minimal(&spec.schema);
        validate(spec.name, &spec.schema, &base).unwrap();
        spec.parses(&base)
            .unwrap_or_else(|e| panic!("{}: {base} does not parse: {e}", spec.name));
        let cases = wrong_typed_cases(&spec.schema);
        checked.insert(spec.name, cases.len());
        for (field, args) in cases {
            match validate(spec.name, &spec.schema, &args) {
                Ok(()) => failures.push(format!("{}: {args} passed the schema", spec.name)),
                Err(e) if e.kind != ErrorKind::InvalidArgs || !e.message.contains(&field) => {
                    failures.push(format!(
                        "{}: {args} refused without naming {field}: {e}",
                        spec.name
                    ))
                }
                Err(_) => {}
            }
            if spec.parses(&args).is_ok() {
                failures.push(format!(
                    "{}: {args} parses into {} although the schema refuses it",
                    spec.name, spec.args_type
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every tool with properties was exercised (the probes and `vibe_list` have fewer).
    assert!(
        checked["debug"] >= 13 && checked["ask_user"] >= 7,
        "{checked:?}"
    );
}

/// The keywords a derived schema may hold: those the validator checks, and annotations.
const KNOWN: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "items",
    "minWords",
    "maxWords",
    "description",
    "default",
];

fn unknown_keywords(schema: &Json, path: &str, out: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        out.push(format!("{path} is not an object"));
        return;
    };
    for (key, value) in map {
        if !KNOWN.contains(&key.as_str()) {
            out.push(format!("{path}: `{key}`"));
        }
        match key.as_str() {
            "properties" => {
                for (name, sub) in value.as_object().into_iter().flatten() {
                    unknown_keywords(sub, &format!("{path}.{name}"), out);
                }
            }
            "items" => unknown_keywords(value, &format!("{path}[]"), out),
            _ => {}
        }
    }
    let types = ["string", "integer", "number", "boolean", "array", "object"];
    let named = types_of(schema);
    if named.is_empty() || !named.iter().all(|t| types.contains(t)) {
        out.push(format!(
            "{path}: `type` is not JSON types: {:?}",
            map.get("type")
        ));
    }
}

#[test]
fn every_schema_is_self_contained_and_uses_only_what_the_validator_checks() {
    let mut out = Vec::new();
    for spec in tools() {
        assert_eq!(spec.schema["type"], "object", "{}", spec.name);
        assert_eq!(spec.schema["additionalProperties"], false, "{}", spec.name);
        unknown_keywords(&spec.schema, spec.name, &mut out);
    }
    assert!(
        out.is_empty(),
        "keywords the validator does not know:\n{}",
        out.join("\n")
    );
}

/// The validator treats a `null` property as absent; the typed parse must too, or a call the
/// schema accepts fails in the handler with a message that names no field.
#[test]
fn a_null_property_is_absent_for_the_schema_and_the_typed_parse() {
    let mut failures = Vec::new();
    for spec in tools() {
        let base = minimal(&spec.schema);
        for key in spec.schema["properties"].as_object().unwrap().keys() {
            if base.get(key).is_some() {
                continue;
            }
            let mut args = base.clone();
            args[key] = Json::Null;
            if let Err(e) = validate(spec.name, &spec.schema, &args) {
                failures.push(format!("{}: {args} refused by the schema: {e}", spec.name));
            }
            if let Err(e) = spec.parses(&args) {
                failures.push(format!(
                    "{}: {args} passes the schema but not the parse into {}: {e}",
                    spec.name, spec.args_type
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bounds and enums the schema states are enforced, naming the field: one past each integer
/// bound, and a string outside each enum.
#[test]
fn a_value_outside_a_bound_or_an_enum_is_refused_naming_the_field() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for spec in tools() {
        let base = minimal(&spec.schema);
        for (key, prop) in spec.schema["properties"].as_object().unwrap() {
            let mut bad = Vec::new();
            if let Some(min) = prop["minimum"].as_i64().filter(|m| *m > i64::MIN) {
                bad.push(json!(min - 1));
            }
            if let Some(max) = prop["maximum"].as_i64() {
                bad.push(json!(i128::from(max) + 1));
            }
            if prop["enum"].is_array() {
                bad.push(json!("no_such_value"));
            }
            for value in bad {
                checked += 1;
                let mut args = base.clone();
                args[key] = value;
                match validate(spec.name, &spec.schema, &args) {
                    Err(e) if e.message.contains(&format!("`{key}`")) => {}
                    other => failures.push(format!("{}: {args} gave {other:?}", spec.name)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked > 40, "only {checked} bounds and enums checked");
}

/// Every tool's reference block in TOOLS.md (`<!-- generated: <tool> -->`) is what
/// `tools::reference` renders from its spec now; `TOOLVISOR_BLESS=1` rewrites them.
#[test]
fn generated_reference_is_current() {
    use toolvisor::tools::reference;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/TOOLS.md");
    let doc = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let (fresh, changed) =
        reference::regenerate(&doc, &tools()).unwrap_or_else(|e| panic!("docs/TOOLS.md: {e}"));
    if std::env::var_os("TOOLVISOR_BLESS").is_some_and(|v| v == "1") {
        if fresh != doc {
            // Whole or not at all: the other tests of this file may be reading it.
            let tmp = format!("{path}.bless");
            std::fs::write(&tmp, &fresh).unwrap();
            std::fs::rename(&tmp, path).unwrap();
        }
        return;
    }
    assert!(
        changed.is_empty(),
        "docs/TOOLS.md: the generated reference of {} differs from the specs; run `{}`",
        changed.join(", "),
        reference::BLESS
    );
}
