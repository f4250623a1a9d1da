//! The tool registry: the rules that decide what a client may see and call (surface, policy,
//! attachment), over the tools [`crate::tools::all`] assembles; plus the argument validator
//! every call passes before its one parse into the handler's type.
//!
//! The validator checks nested object schemas too; it recurses along the schema, never along the
//! value, and compares integers exactly (a value past `i64::MAX` is above a maximum of `i64::MAX`).
//! `tests/registry_args_fuzz.rs` fuzzes every tool's argument handling (validator, approval rule,
//! the one parse) and checks that what the schema accepts the parse accepts;
//! `tests/registry_docs_examples.rs` ties every example call of `docs/TOOLS.md` to its tool's
//! schema and parse.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value as Json;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Surface, ToolInfo};

pub use crate::tools::spec::{Approval, Attachment, OpOf, OpTier, Rule, ToolSpec, schema_of};

/// Tools by name, with the rules of visibility.
pub struct Registry {
    /// Shared, so a call holds the spec its one lookup found ([`Registry::check`]).
    tools: BTreeMap<&'static str, Arc<ToolSpec>>,
    denied: Vec<String>,
}

impl Registry {
    pub fn new(tools: Vec<ToolSpec>, denied: Vec<String>) -> Self {
        Registry {
            tools: tools.into_iter().map(|t| (t.name, Arc::new(t))).collect(),
            denied,
        }
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name).map(|t| &**t)
    }

    pub fn is_denied(&self, name: &str) -> bool {
        self.denied.iter().any(|d| d == name)
    }

    /// Why `surface` may not call `spec`, if it may not.
    fn refusal(&self, spec: &ToolSpec, surface: &Surface) -> Option<(ErrorKind, String)> {
        if self.is_denied(spec.name) {
            return Some((
                ErrorKind::PolicyDenied,
                format!("tool `{}` is denied by the operator's policy", spec.name),
            ));
        }
        if spec.tier > surface.max_tier {
            return Some((
                ErrorKind::SurfaceDenied,
                format!(
                    "tool `{}` is {} tier, above this client's surface ({})",
                    spec.name, spec.tier, surface.max_tier
                ),
            ));
        }
        if let Attachment::NotBuilt(why) = &spec.attachment {
            return Some((ErrorKind::NotAvailable, why.to_string()));
        }
        if let Attachment::Detached(why) = &spec.attachment {
            return Some((ErrorKind::NotAvailable, why.clone()));
        }
        None
    }

    /// The advertised set: what the client may see ∩ what is attached ∩ policy.
    pub fn advertised(&self, surface: &Surface) -> Vec<ToolInfo> {
        self.tools
            .values()
            .filter(|t| self.refusal(t, surface).is_none())
            .map(|t| t.info(true, None))
            .collect()
    }

    /// The advertised set as the Welcome carries it: without schemas (`ListTools` has them).
    pub fn welcome_list(&self, surface: &Surface) -> Vec<ToolInfo> {
        self.tools
            .values()
            .filter(|t| self.refusal(t, surface).is_none())
            .map(|t| t.brief(true, None))
            .collect()
    }

    /// Every registered tool, each marked with whether this client may call it and why not.
    pub fn everything(&self, surface: &Surface) -> Vec<ToolInfo> {
        self.tools
            .values()
            .map(|t| match self.refusal(t, surface) {
                None => t.info(true, None),
                Some((_, why)) => t.info(false, Some(why)),
            })
            .collect()
    }

    /// The spec of a tool this client may call now, or the structured refusal.
    pub fn check(&self, name: &str, surface: &Surface) -> Result<Arc<ToolSpec>, ToolError> {
        let Some(spec) = self.tools.get(name) else {
            let names: Vec<_> = self
                .advertised(surface)
                .into_iter()
                .map(|t| t.name)
                .collect();
            return Err(ToolError::new(
                ErrorKind::UnknownTool,
                format!("no tool named {name:?}"),
                format!("tools available to this client: {}", names.join(", ")),
            ));
        };
        match self.refusal(spec, surface) {
            None => Ok(spec.clone()),
            Some((kind, why)) => {
                let hint = match kind {
                    ErrorKind::PolicyDenied => {
                        "do not retry; ask the operator if the tool is needed".to_string()
                    }
                    ErrorKind::SurfaceDenied => format!(
                        "connect with a surface of at least `{}` to use it",
                        spec.tier
                    ),
                    _ => {
                        "use another tool; `toolvisor tools --all` lists what runs here".to_string()
                    }
                };
                Err(ToolError::new(kind, why, hint))
            }
        }
    }
}

/// Check `args` against a tool's schema (the subset the registry uses: object, properties,
/// required, additionalProperties, type, enum, minimum, maximum, items, and the
/// non-standard `minWords`/`maxWords` of a string), naming the field.
pub fn validate(tool: &str, schema: &Json, args: &Json) -> Result<(), ToolError> {
    let bad = |msg: String| {
        ToolError::new(
            ErrorKind::InvalidArgs,
            format!("{tool}: {msg}"),
            format!("`toolvisor tools --json` shows the schema of `{tool}`"),
        )
    };
    let Some(map) = args.as_object() else {
        return Err(bad(format!(
            "arguments must be a JSON object, got {}",
            type_name(args)
        )));
    };
    let props = schema.get("properties").and_then(Json::as_object);
    if let Some(required) = schema.get("required").and_then(Json::as_array) {
        for r in required.iter().filter_map(Json::as_str) {
            if map.get(r).is_none_or(Json::is_null) {
                return Err(bad(format!("missing required argument `{r}`")));
            }
        }
    }
    for (key, value) in map {
        let Some(prop) = props.and_then(|p| p.get(key)) else {
            let known: Vec<_> = props
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            return Err(bad(format!(
                "unknown argument `{key}` (known: {})",
                known.join(", ")
            )));
        };
        if value.is_null() {
            continue;
        }
        check_value(key, prop, value).map_err(bad)?;
    }
    Ok(())
}

fn check_value(path: &str, prop: &Json, value: &Json) -> Result<(), String> {
    if let Some(text) = value.as_str() {
        let words = text.split_whitespace().count() as u64;
        let min = prop.get("minWords").and_then(Json::as_u64);
        let max = prop.get("maxWords").and_then(Json::as_u64);
        if min.is_some_and(|m| words < m) || max.is_some_and(|m| words > m) {
            return Err(format!(
                "argument `{path}` must be {} to {} words, got {words} ({})",
                min.unwrap_or(0),
                max.map_or("any".to_string(), |m| m.to_string()),
                describe(value)
            ));
        }
    }
    // One JSON type, or several (`["string", "integer"]`: a section by title or index).
    let types: Vec<&str> = match prop.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
        _ => Vec::new(),
    };
    let is = |ty: &str| match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    if !types.is_empty() && !types.iter().any(|t| is(t)) {
        let wanted: Vec<String> = types.iter().map(|t| article(t)).collect();
        return Err(format!(
            "argument `{path}` must be {}, got {}",
            wanted.join(" or "),
            describe(value)
        ));
    }
    if let Some(allowed) = prop.get("enum").and_then(Json::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<_> = allowed.iter().map(|a| a.to_string()).collect();
        return Err(format!(
            "argument `{path}` is {value}, expected one of {}",
            names.join(", ")
        ));
    }
    // Compared as i128, so a u64 past `i64::MAX` is above a maximum of `i64::MAX` (read as
    // equal to it, it would reach a handler that cannot hold it).
    if let Some(n) = integer(value) {
        if let Some(min) = prop.get("minimum").and_then(integer)
            && n < min
        {
            return Err(format!(
                "argument `{path}` is {value}, below the minimum {min}"
            ));
        }
        if let Some(max) = prop.get("maximum").and_then(integer)
            && n > max
        {
            return Err(format!(
                "argument `{path}` is {value}, above the maximum {max}"
            ));
        }
    }
    if let (Some(items), Some(list)) = (prop.get("items"), value.as_array()) {
        for (i, item) in list.iter().enumerate() {
            check_value(&format!("{path}[{i}]"), items, item)?;
        }
    }
    // A nested object schema (`ask_user`'s options) is checked like the top level, so what
    // passes here also parses into the handler's type. The recursion follows the schema,
    // which is ours and shallow, never the depth of the value.
    if let Some(map) = value.as_object() {
        if let Some(required) = prop.get("required").and_then(Json::as_array) {
            for r in required.iter().filter_map(Json::as_str) {
                if map.get(r).is_none_or(Json::is_null) {
                    return Err(format!("argument `{path}` misses its required field `{r}`"));
                }
            }
        }
        if let Some(props) = prop.get("properties").and_then(Json::as_object) {
            for (key, sub) in props {
                if let Some(v) = map.get(key).filter(|v| !v.is_null()) {
                    check_value(&format!("{path}.{key}"), sub, v)?;
                }
            }
        }
    }
    Ok(())
}

fn integer(v: &Json) -> Option<i128> {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn describe(v: &Json) -> String {
    let mut shown = v.to_string();
    if shown.len() > 40 {
        shown = format!("{}…", shown.chars().take(40).collect::<String>());
    }
    format!("{} ({shown})", type_name(v))
}

fn article(ty: &str) -> String {
    match ty {
        "integer" => "an integer".into(),
        "array" => "an array".into(),
        "object" => "an object".into(),
        other => format!("a {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolvisor_protocol::wire::{JobFollow, Tier};

    fn surface(tier: Tier) -> Surface {
        Surface {
            max_tier: tier,
            approvals: false,
            questions: false,
            bridge_tools: vec![],
        }
    }

    #[test]
    fn every_spec_tool_is_registered_with_its_tier() {
        let reg = Registry::new(crate::tools::all(false), vec![]);
        let expect = [
            ("lsp", Tier::Read),
            ("ast_grep", Tier::Read),
            ("ask_user", Tier::Read),
            ("vibe_spawn", Tier::Read),
            ("vibe_send", Tier::Read),
            ("vibe_wait", Tier::Read),
            ("vibe_kill", Tier::Read),
            ("vibe_list", Tier::Read),
            ("lsp_rename", Tier::Write),
            ("lsp_edit", Tier::Write),
            ("ast_edit", Tier::Write),
            ("resolve", Tier::Write),
            ("write", Tier::Write),
            ("edit", Tier::Write),
            ("apply_patch", Tier::Write),
            ("debug", Tier::Exec),
            ("eval", Tier::Exec),
            ("bash", Tier::Exec),
            ("process", Tier::Exec),
            ("read", Tier::Read),
            ("ls", Tier::Read),
            ("find", Tier::Read),
            ("grep", Tier::Read),
            ("tool_result_read", Tier::Read),
            ("download_model", Tier::Write),
            ("list_downloads", Tier::Read),
            ("cancel_download", Tier::Write),
            ("delete_model", Tier::Write),
            ("list_models", Tier::Read),
            ("search_huggingface_models", Tier::Read),
            ("load_model", Tier::Write),
            ("unload_model", Tier::Write),
            ("get_inference_status", Tier::Read),
            ("get_token_usage_stats", Tier::Read),
        ];
        for (name, tier) in expect {
            let spec = reg
                .get(name)
                .unwrap_or_else(|| panic!("{name} not registered"));
            assert_eq!(spec.tier, tier, "{name}");
            assert_eq!(
                spec.parallel_safe,
                !matches!(name, "debug" | "eval"),
                "{name}"
            );
            assert_eq!(spec.schema["type"], "object");
        }
    }

    #[test]
    fn surfaces_and_policy_filter_the_advertised_set() {
        let reg = Registry::new(crate::tools::all(false), vec!["process".into()]);
        let names = |t: Tier| {
            reg.advertised(&surface(t))
                .into_iter()
                .map(|i| i.name)
                .collect::<Vec<_>>()
        };
        // What a surface of `t` is shown: every attached tool at or below `t` the policy
        // does not deny, by name.
        let expected = |t: Tier| {
            let mut v: Vec<String> = crate::tools::all(false)
                .iter()
                .filter(|s| s.attachment == Attachment::Attached)
                .filter(|s| s.tier <= t && s.name != "process")
                .map(|s| s.name.to_string())
                .collect();
            v.sort();
            v
        };
        for t in [Tier::Read, Tier::Write, Tier::Exec] {
            assert_eq!(names(t), expected(t), "{t}");
        }
        let (exec, read) = (names(Tier::Exec), names(Tier::Read));
        for tool in [
            "bash",
            "debug",
            "eval",
            "write",
            "lsp_rename",
            "download_model",
        ] {
            assert!(exec.iter().any(|n| n == tool), "{tool} at exec");
            assert!(!read.iter().any(|n| n == tool), "{tool} not at read");
        }
        for tool in [
            "lsp",
            "read",
            "grep",
            "ast_grep",
            "tool_result_read",
            "ask_user",
        ] {
            assert!(read.iter().any(|n| n == tool), "{tool} at read");
        }
        assert!(
            !exec
                .iter()
                .any(|n| n == "process" || n.starts_with("vibe_"))
        );
        assert_eq!(
            reg.check("process", &surface(Tier::Exec)).unwrap_err().kind,
            ErrorKind::PolicyDenied
        );
        assert_eq!(
            reg.check("bash", &surface(Tier::Read)).unwrap_err().kind,
            ErrorKind::SurfaceDenied
        );
        assert_eq!(
            reg.check("vibe_spawn", &surface(Tier::Exec))
                .unwrap_err()
                .kind,
            ErrorKind::NotAvailable
        );
        assert_eq!(
            reg.check("nope", &surface(Tier::Exec)).unwrap_err().kind,
            ErrorKind::UnknownTool
        );
        let all = reg.everything(&surface(Tier::Read));
        let bash = all.iter().find(|t| t.name == "bash").unwrap();
        assert!(
            !bash.available
                && bash
                    .unavailable_reason
                    .as_deref()
                    .unwrap()
                    .contains("exec tier")
        );
    }

    /// The job a tool's call starts is followed with tools that exist, called with arguments
    /// their own schemas and parses take; the states are the tool's result states.
    #[test]
    fn every_follow_polls_and_stops_with_real_tools_and_valid_arguments() {
        let all = crate::tools::all(true);
        let mut followed: Vec<&str> = all
            .iter()
            .filter(|t| t.follow.is_some())
            .map(|t| t.name)
            .collect();
        followed.sort_unstable();
        assert_eq!(followed, ["download_model", "load_model", "vibe_spawn"]);
        let mut long: Vec<&str> = all
            .iter()
            .filter(|t| t.long_running)
            .map(|t| t.name)
            .collect();
        long.sort_unstable();
        assert_eq!(long, ["bash", "eval"]);
        for t in all.iter().filter(|t| t.follow.is_some()) {
            let f = t.follow.as_ref().unwrap();
            assert!(f.ended.contains(&f.ok), "{}: {f:?}", t.name);
            for (tool, args) in [(&f.poll, &f.poll_args), (&f.stop, &f.stop_args)] {
                let spec = all
                    .iter()
                    .find(|s| s.name == tool.as_str())
                    .unwrap_or_else(|| panic!("{} follows with {tool}, no such tool", t.name));
                let args = JobFollow::args_for(args, "j-1");
                validate(tool, &spec.schema, &args)
                    .unwrap_or_else(|e| panic!("{} → {tool} {args}: {e}", t.name));
                spec.parses(&args)
                    .unwrap_or_else(|e| panic!("{} → {tool} {args}: {e}", t.name));
            }
        }
    }

    #[test]
    fn validation_names_the_field() {
        let reg = Registry::new(crate::tools::all(false), vec![]);
        let schema = &reg.get("bash").unwrap().schema;
        assert!(validate("bash", schema, &json!({"command": "ls", "timeout_s": 5})).is_ok());
        let err = |args: Json| validate("bash", schema, &args).unwrap_err().message;
        assert!(err(json!({"command": 5})).contains("`command` must be a string, got a number"));
        assert!(err(json!({})).contains("missing required argument `command`"));
        assert!(err(json!({"command": "x", "timeout": 1})).contains("unknown argument `timeout`"));
        assert!(err(json!({"command": "x", "timeout_s": 0})).contains("below the minimum 1"));
        assert!(err(json!([1])).contains("must be a JSON object"));
        let schema = &reg.get("process").unwrap().schema;
        assert!(
            validate("process", schema, &json!({"op": "explode"}))
                .unwrap_err()
                .message
                .contains("expected one of")
        );
    }

    #[test]
    fn integers_past_i64_are_compared_not_clamped() {
        // A u64 past `i64::MAX` read as `i64::MAX` would pass a maximum of `i64::MAX` and
        // reach a handler that cannot hold it.
        let reg = Registry::new(crate::tools::all(false), vec![]);
        let big = json!(9_223_372_036_854_775_808u64);
        let err = |tool: &str, args: Json| {
            validate(tool, &reg.get(tool).unwrap().schema, &args)
                .unwrap_err()
                .message
        };
        let e = err("process", json!({"op": "read", "id": "p1", "offset": big}));
        assert!(
            e.contains("`offset` is 9223372036854775808, above the maximum 9223372036854775807"),
            "{e}"
        );
        let e = err("read", json!({"path": "f", "offset": u64::MAX}));
        assert!(
            e.contains("`offset`") && e.contains("above the maximum"),
            "{e}"
        );
        let read = &reg.get("read").unwrap().schema;
        validate("read", read, &json!({"path": "f", "offset": i64::MAX})).unwrap();
        validate("read", read, &json!({"path": "f", "offset": i64::MIN})).unwrap();
    }

    #[test]
    fn derived_schemas_are_small_and_say_what_the_typed_args_say() {
        let reg = Registry::new(crate::tools::all(false), vec![]);
        let process = &reg.get("process").unwrap().schema;
        assert_eq!(
            process["properties"]["op"],
            json!({"description": "Operation.", "type": "string",
                   "enum": ["start", "list", "read", "write", "kill", "resize"]})
        );
        assert_eq!(process["required"], json!(["op"]));
        assert_eq!(process["additionalProperties"], json!(false));
        let ttl = &process["properties"]["ttl_s"];
        assert_eq!(
            (&ttl["type"], &ttl["minimum"], &ttl["maximum"]),
            (&json!("integer"), &json!(1), &json!(2_592_000))
        );
        // A doc comment's line breaks are gone; no `format`, `title`, `$schema`, `$defs`.
        let offset = process["properties"]["offset"]["description"]
            .as_str()
            .unwrap();
        assert!(!offset.contains('\n'), "{offset}");
        for key in ["$schema", "$defs", "title", "description"] {
            assert!(process.get(key).is_none(), "{key}");
        }
        assert!(process["properties"]["offset"].get("format").is_none());
        // A variant with docs does not split an enum (`lsp`'s `trust`).
        let op = &reg.get("lsp").unwrap().schema["properties"]["op"];
        assert_eq!(op["enum"].as_array().unwrap().len(), 18);
        assert!(
            op.get("oneOf").is_none() && op.get("anyOf").is_none(),
            "{op}"
        );
        // Every variant documented: still one enum (`lsp_edit`'s ops).
        let op = &reg.get("lsp_edit").unwrap().schema["properties"]["op"];
        assert_eq!(op["enum"].as_array().unwrap().len(), 5);
        assert!(
            op.get("oneOf").is_none() && op.get("anyOf").is_none(),
            "{op}"
        );
        // An empty struct: an object with no properties, nothing required.
        assert_eq!(
            reg.get("vibe_list").unwrap().schema,
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
        // A nested struct is inlined, with its own required field.
        let items = &reg.get("ask_user").unwrap().schema["properties"]["options"]["items"];
        assert_eq!(items["required"], json!(["label"]));
    }

    #[test]
    fn approval_follows_the_op() {
        let reg = Registry::new(crate::tools::all(false), vec![]);
        let p = reg.get("process").unwrap();
        assert!(!p.needs_approval(&json!({"op": "list"})));
        assert!(!p.needs_approval(&json!({"op": "read", "id": "p1"})));
        assert!(p.needs_approval(&json!({"op": "start", "command": "x"})));
        assert!(
            reg.get("bash")
                .unwrap()
                .needs_approval(&json!({"command": "x"}))
        );
        let lsp = reg.get("lsp").unwrap();
        assert!(!lsp.needs_approval(&json!({"op": "hover"})));
        assert!(!lsp.needs_approval(&json!({"op": "diagnostics", "file": "*"})));
        assert!(lsp.needs_approval(&json!({"op": "trust"})));
        assert_eq!(lsp.call_tier(&json!({"op": "hover"})), Tier::Read);
        assert_eq!(lsp.call_tier(&json!({"op": "trust"})), Tier::Write);
        // Typed: an op the enum does not know, or none, needs approval (never skips it).
        assert!(p.needs_approval(&json!({"op": "explode"})));
        assert!(p.needs_approval(&json!({})));
        let debug = reg.get("debug").unwrap();
        assert!(debug.needs_approval(&json!({"op": "step_over"})));
        assert!(!debug.needs_approval(&json!({"op": "stack"})));
    }

    #[test]
    fn eval_description_must_be_five_to_ten_words() {
        let reg = Registry::new(crate::tools::all(false), vec![]);
        let schema = &reg.get("eval").unwrap().schema;
        let check = |d: &str| validate("eval", schema, &json!({"code": "1", "description": d}));
        assert!(check("load the csv and plot totals").is_ok());
        assert!(check("one two three four five six seven eight nine ten").is_ok());
        let err = check("plot it").unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgs);
        assert!(
            err.message
                .contains("`description` must be 5 to 10 words, got 2"),
            "{err}"
        );
        assert!(check("a b c d e f g h i j k").is_err());
    }
}
