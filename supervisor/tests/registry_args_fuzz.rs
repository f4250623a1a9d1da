//! Every tool's argument handling takes arbitrary JSON, arrived through either codec, without a
//! panic: the schema validator, the approval rule, and the one parse into the handler's type
//! after validation (the type the tool's declaration ties to its handler and its schema).
//!
//! The case count is `TOOLVISOR_FUZZ_CASES` per property (a bounded default for CI); run
//! e.g. `TOOLVISOR_FUZZ_CASES=200000 cargo test -p toolvisor --test registry_args_fuzz`
//! for a longer search.

use proptest::prelude::*;
use serde_json::{Value as Json, json};
use toolvisor::registry::validate;
use toolvisor::tools::ToolSpec;
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::value::Value;
use toolvisor_protocol::wire::{Call, ClientFrame};

fn cases(default: u32) -> u32 {
    std::env::var("TOOLVISOR_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tools() -> Vec<ToolSpec> {
    toolvisor::tools::all(true)
}

fn arb_json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::from),
        any::<i64>().prop_map(Json::from),
        any::<u64>().prop_map(Json::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Json::from),
        ".{0,12}".prop_map(Json::from),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// A small deterministic generator, seeded by proptest.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, in_ten: u64) -> bool {
        self.below(10) < in_ten
    }
}

/// A value for one schema property: mostly of the declared type (edge values included), now
/// and then anything at all.
fn value_for(prop: &Json, rng: &mut Rng, junk: &[Json], right_type: bool) -> Json {
    if !right_type && rng.chance(3) {
        return junk[rng.below(junk.len() as u64) as usize].clone();
    }
    if let Some(allowed) = prop.get("enum").and_then(Json::as_array) {
        return allowed[rng.below(allowed.len() as u64) as usize].clone();
    }
    match prop.get("type").and_then(Json::as_str).unwrap_or("any") {
        "string" => {
            let words = ["", "x", "a b c", "../../etc/passwd", "é🦀\u{0}", "*", "42"];
            let mut text = words[rng.below(words.len() as u64) as usize].to_string();
            if rng.chance(2) {
                text = text.repeat(1 + rng.below(50) as usize);
            }
            Json::from(text)
        }
        "integer" => {
            let min = prop.get("minimum").and_then(Json::as_i64);
            let max = prop.get("maximum").and_then(Json::as_i64);
            let edges = [
                Some(0),
                Some(1),
                Some(-1),
                Some(i64::MAX),
                Some(i64::MIN),
                Some(u32::MAX as i64 + 1),
                min,
                max,
                min.map(|m| m.saturating_sub(1)),
                max.map(|m| m.saturating_add(1)),
            ];
            match edges[rng.below(edges.len() as u64) as usize] {
                Some(n) => Json::from(n),
                None => Json::from(u64::MAX),
            }
        }
        "number" => Json::from([0.0, -1.5, 1e300, 0.1][rng.below(4) as usize]),
        "boolean" => Json::from(rng.chance(5)),
        "array" => {
            let items = prop.get("items").cloned().unwrap_or(json!({}));
            let n = rng.below(4);
            Json::Array(
                (0..n)
                    .map(|_| value_for(&items, rng, junk, right_type))
                    .collect(),
            )
        }
        "object" if prop.get("properties").is_some() => guided(prop, rng, junk, right_type),
        "object" => json!({}),
        _ => junk[rng.below(junk.len() as u64) as usize].clone(),
    }
}

/// Arguments shaped by `schema`: each property present or not, values of the declared type
/// or (unless `right_type`) anything, sometimes an unknown key.
fn guided(schema: &Json, rng: &mut Rng, junk: &[Json], right_type: bool) -> Json {
    let mut args = serde_json::Map::new();
    if let Some(props) = schema.get("properties").and_then(Json::as_object) {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Json::as_array)
            .map(|r| r.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        for (key, prop) in props {
            let present = required.contains(&key.as_str()) || rng.chance(5);
            if present {
                args.insert(key.clone(), value_for(prop, rng, junk, right_type));
            }
        }
    }
    if !right_type && rng.chance(1) {
        args.insert("unknown_key".into(), json!(1));
    }
    Json::Object(args)
}

/// Everything a call's arguments meet before the handler's work: nothing may panic, and
/// each refusal is an `invalid_args` error.
fn exercise(spec: &ToolSpec, args: &Json) -> Result<bool, ToolError> {
    let _ = spec.needs_approval(args);
    validate(spec.name, &spec.schema, args)?;
    // The one parse into the handler's type (the same type the schema is derived from; a
    // summary takes the parsed value, so it sees nothing the parse refused).
    match spec.parses(args) {
        Err(message) => Err(ToolError::new(ErrorKind::InvalidArgs, message, "")),
        Ok(()) => Ok(true),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(2000), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_json_arguments_never_panic(tool in any::<prop::sample::Index>(), args in arb_json()) {
        let all = tools();
        let spec = tool.get(&all);
        // As the session gets them: a `call` frame through either codec.
        for c in [Codec::Bincode, Codec::Json] {
            let frame = ClientFrame::Call(Call {
                id: 1,
                conversation: "c".into(),
                tool: spec.name.into(),
                args: Value(args.clone()),
            });
            let bytes = codec::encode(c, &frame).unwrap();
            let ClientFrame::Call(call) = codec::decode::<ClientFrame>(c, &bytes).unwrap() else {
                unreachable!("a call decodes as a call");
            };
            if let Err(e) = exercise(spec, &call.args.0) {
                prop_assert_eq!(e.kind, ErrorKind::InvalidArgs, "{}", e);
            }
        }
    }

    #[test]
    fn schema_shaped_arguments_never_panic(
        tool in any::<prop::sample::Index>(),
        seed in 1u64..,
        junk in prop::collection::vec(arb_json(), 1..4),
    ) {
        let all = tools();
        let spec = tool.get(&all);
        let mut rng = Rng(seed);
        let args = guided(&spec.schema, &mut rng, &junk, false);
        if let Err(e) = exercise(spec, &args) {
            prop_assert_eq!(e.kind, ErrorKind::InvalidArgs, "{}", e);
        }
    }

    #[test]
    fn arguments_the_schema_accepts_parse_into_the_handlers_type(
        tool in any::<prop::sample::Index>(),
        seed in 1u64..,
    ) {
        // The schema and the typed struct agree: what the validator lets through, the
        // handler can parse (otherwise the advertised schema lies to the model).
        let all = tools();
        let spec = tool.get(&all);
        let mut rng = Rng(seed);
        let args = guided(&spec.schema, &mut rng, &[Json::Null], true);
        if validate(spec.name, &spec.schema, &args).is_ok()
            && let Err(message) = spec.parses(&args)
        {
            prop_assert!(false, "{}: schema accepts {} but the parse says {}", spec.name, args, message);
        }
    }
}

/// Two disagreements the fuzz found between a schema and its handler's type: the validator
/// let them through and the parse refused them without naming the field.
#[test]
fn what_the_typed_parse_would_refuse_the_validator_refuses_naming_the_field() {
    let all = tools();
    let schema = |name: &str| &all.iter().find(|s| s.name == name).unwrap().schema;
    // `debug` lines are u64: a negative line is below the schema's minimum now.
    let args = json!({"op": "breakpoints", "file": "a.py", "lines": [3, -1]});
    let e = validate("debug", schema("debug"), &args).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.message.contains("`lines[1]`"), "{e}");
    // `ask_user` options need a label: the nested object schema is checked too.
    let args = json!({"question": "which?", "options": [{"label": "a"}, {"description": "b"}]});
    let e = validate("ask_user", schema("ask_user"), &args).unwrap_err();
    assert!(
        e.message.contains("`options[1]`") && e.message.contains("`label`"),
        "{e}"
    );
    let args = json!({"question": "which?", "options": [{"label": 5}]});
    let e = validate("ask_user", schema("ask_user"), &args).unwrap_err();
    assert!(e.message.contains("`options[0].label`"), "{e}");
    // And what is right still passes, and parses.
    let args = json!({"question": "which?", "options": [{"label": "a", "description": "b"}]});
    validate("ask_user", schema("ask_user"), &args).unwrap();
    let ask = all.iter().find(|s| s.name == "ask_user").unwrap();
    assert_eq!(ask.parses(&args), Ok(()));
}

/// The deepest values the daemon holds: arguments at the wire's limit, and results parsed
/// from a child's JSON (serde_json stops at 128) wrapped in a few levels of ours. Everything
/// that walks a value recursively must take them on a quarter of a tokio worker's stack.
#[test]
fn the_walkers_of_a_value_take_the_deepest_values_the_daemon_can_hold() {
    use toolvisor_protocol::value::MAX_DEPTH;
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(|| {
            let secrets = toolvisor_files::secrets::Secrets::from_vars(
                [("API_TOKEN".to_string(), "s3cr3t-value".to_string())],
                &["API_TOKEN".to_string()],
                &[],
                8,
            )
            .unwrap();
            for depth in [MAX_DEPTH, 140] {
                let mut v = json!({"k": "s3cr3t-value"});
                for _ in 1..depth {
                    v = json!([v]);
                }
                let args = json!({ "command": v.clone() });
                for spec in tools() {
                    let _ = exercise(&spec, &args);
                }
                let mut masked = v.clone();
                assert_eq!(secrets.mask_json(&mut masked)["API_TOKEN"], 1);
                assert!(toolvisor_files::store::json_chars(&v) > 0);
                assert!(toolvisor_files::store::json_chars_bound(&v) > 0);
                assert!(!format!("{v:?}").is_empty() && !v.to_string().is_empty());
                let encoded = toolvisor_protocol::codec::encode(
                    toolvisor_protocol::Codec::Json,
                    &toolvisor_protocol::Value(v),
                );
                // Past the wire's limit the encoder refuses (the session answers an error).
                assert_eq!(encoded.is_ok(), depth <= MAX_DEPTH);
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
