//! The tools' results: one type per tool, which its handler returns (`Serialize`, turned into
//! the JSON that leaves once, by `ToolSpec`) and whose schema clients see (MCP
//! `outputSchema`, `ToolInfo.output_schema`, derived here by [`schema_of`]). A debug build of
//! the daemon also checks every result against its tool's schema before it leaves
//! ([`conforms`]), so the whole test suite catches a result that drifted from its
//! declaration, and `docs/TOOLS.md`'s answers are checked against them too.
//!
//! How a result spells absence is part of its type: a field the handler leaves out when it
//! has nothing to say is `#[serde(skip_serializing_if = "Option::is_none")]`, a plain
//! `Option` is written as `null`. A free-form value is `serde_json::Value`; enums are closed
//! (a value the declaration does not list fails the debug check). Clients must allow unknown
//! fields (a result may carry more than its schema names: the result store adds `masked`
//! and `projected`, see [`outward`]). The built types derive `Deserialize` too, for clients and
//! the tests that parse recorded results (`protocol/tests/results_recorded.rs`).
//!
//! One file per family of tools (`results/<family>.rs`), like the arguments in `tools`.
//! Transitional: the types of the tools whose handlers still build their JSON by hand
//! (`lsp`) are descriptions only, named by `.returns::<R>()` and never built (the
//! lsp shapes that `lsp_rename`, `lsp_edit` and `synced_write` build are typed).

mod data;
mod debug;
mod eval;
mod files;
mod human;
mod jobs;
#[allow(clippy::large_enum_variant)]
mod lsp;
mod models;
mod structural;

pub use data::*;
pub use debug::*;
pub use eval::*;
pub use files::*;
pub use human::*;
pub use jobs::*;
pub use lsp::*;
pub use models::*;
pub use structural::*;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value as Json};

/// The JSON schema of a result of type `R`: a shape used more than once is one entry of
/// `$defs` that `{"$ref": "#/$defs/Name"}` points at (the `lsp` answers share their `server`
/// fourteen times: inlined, its schema was four times larger); no `$schema`, `title` or
/// `format`, one line per paragraph of a description. Unlike the arguments' schemas, `null`
/// stays in a field's type (a result says `null`).
pub fn schema_of<R: schemars::JsonSchema>() -> Json {
    let mut settings = SchemaSettings::draft2020_12();
    settings.meta_schema = None;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<R>()
        .to_value();
    tidy_with(&mut schema, &|_| {});
    schema
}

/// The cleanup every schema derived here gets (the arguments' in `supervisor/src/tools/spec.rs`
/// too), bottom-up along the subschemas, never into a `properties` map's keys (field names):
/// no `$schema`, `title` or `format`, one line per paragraph of a description (a doc comment's
/// line breaks are not the text's); then `more` on each node.
pub fn tidy_with(schema: &mut Json, more: &dyn Fn(&mut Map<String, Json>)) {
    let Json::Object(map) = schema else {
        return;
    };
    for (key, value) in map.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "$defs", Json::Object(subs)) => {
                subs.values_mut().for_each(|s| tidy_with(s, more))
            }
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Json::Array(subs)) => {
                subs.iter_mut().for_each(|s| tidy_with(s, more))
            }
            ("items" | "additionalProperties", sub) => tidy_with(sub, more),
            _ => {}
        }
    }
    for key in ["$schema", "title", "format"] {
        map.remove(key);
    }
    if let Some(Json::String(text)) = map.get_mut("description") {
        *text = text
            .split("\n\n")
            .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n");
    }
    more(map);
}

/// The schema clients see for a tool's results: `result`'s, widened by what the result store
/// may do to any result on its way out (`masked`: the kinds of secret masked; `projected`:
/// the fields stored whole, shortened in place) or instead of it (a result too large even when
/// its fields are shortened is replaced by `{preview, projected}`), and the MCP face's error
/// result (`{error: {kind, message, hint}}` beside `isError: true`, which some clients check
/// against the schema too).
pub fn outward(result: &Json) -> Json {
    let mut widened = result.clone();
    // The references point at the root's `$defs`: they move up to the new root.
    let defs = widened.as_object_mut().and_then(|m| m.remove("$defs"));
    if let Some(props) = widened.get_mut("properties").and_then(Json::as_object_mut) {
        // A tool's own field of the name keeps its schema (`tool_result_read` says its
        // masks as counts).
        props.entry("masked").or_insert_with(masked);
        props.entry("projected").or_insert_with(projected);
    }
    let mut whole = Map::new();
    whole.insert("type".into(), "object".into());
    whole.insert(
        "description".into(),
        "The whole result was too large: its first characters, and where it is stored.".into(),
    );
    whole.insert(
        "properties".into(),
        serde_json::json!({
            "preview": {"type": "string", "description": "The start of the result's JSON, with a note of what is left."},
            "projected": projected(),
            "masked": masked(),
        }),
    );
    whole.insert(
        "required".into(),
        serde_json::json!(["preview", "projected"]),
    );
    let error = serde_json::json!({
        "type": "object",
        "description": "The call failed (the result has isError: true).",
        "properties": {"error": {"type": "object", "properties": {
            "kind": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": "string"}},
            "required": ["kind", "message", "hint"]}},
        "required": ["error"],
    });
    let mut root =
        serde_json::json!({"type": "object", "anyOf": [widened, Json::Object(whole), error]});
    if let Some(defs) = defs {
        root["$defs"] = defs;
    }
    root
}

fn masked() -> Json {
    serde_json::json!({
        "type": "array",
        "items": {"type": "string"},
        "description": "The kinds of secret masked in this result.",
    })
}

fn projected() -> Json {
    serde_json::json!({
        "type": "object",
        "description": "Fields stored whole (shortened here), by name: `ref`, `total_chars` and how to read the rest with tool_result_read.",
        "additionalProperties": {"type": "object", "properties": {"ref": {"type": "string"}, "total_chars": {"type": "integer"}}, "required": ["ref", "total_chars"]},
    })
}

/// Whether `value` conforms to `schema` (the keywords [`schema_of`] produces: `type` (one or
/// a list), `enum`, `const`, `anyOf`/`oneOf` (at least one alternative), `allOf`,
/// `properties`, `required`, `additionalProperties`, `items`, `prefixItems`, `minimum`,
/// `maximum`); the error names the first place that does not, as a JSON path. The
/// recursion follows the schema, never deeper than it.
pub fn conforms(schema: &Json, value: &Json) -> Result<(), String> {
    check(schema, value, "$", schema)
}

fn check(schema: &Json, value: &Json, at: &str, root: &Json) -> Result<(), String> {
    let map = match schema {
        Json::Bool(true) => return Ok(()),
        Json::Bool(false) => return Err(format!("{at}: nothing is allowed here")),
        Json::Object(map) => map,
        _ => return Ok(()),
    };
    // `#/$defs/Name` (the only references `schema_of` makes), beside what else the schema says.
    if let Some(Json::String(reference)) = map.get("$ref") {
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer))
            .ok_or_else(|| format!("{at}: the schema's reference {reference} leads nowhere"))?;
        check(target, value, at, root)?;
    }
    if let Some(ty) = map.get("type") {
        let types: Vec<&str> = match ty {
            Json::String(one) => vec![one.as_str()],
            Json::Array(list) => list.iter().filter_map(Json::as_str).collect(),
            _ => vec![],
        };
        if !types.is_empty() && !types.iter().any(|t| is_type(t, value)) {
            return Err(format!(
                "{at}: expected {}, got {}",
                types.join(" or "),
                shown(value)
            ));
        }
    }
    if let Some(Json::Array(allowed)) = map.get("enum")
        && !allowed.contains(value)
    {
        return Err(format!(
            "{at}: {} is not one of {}",
            shown(value),
            Json::Array(allowed.clone())
        ));
    }
    if let Some(one) = map.get("const")
        && one != value
    {
        return Err(format!("{at}: expected {one}, got {}", shown(value)));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Json::Array(alternatives)) = map.get(key) {
            let mut why = Vec::new();
            for alt in alternatives {
                match check(alt, value, at, root) {
                    Ok(()) => {
                        why.clear();
                        break;
                    }
                    Err(e) => why.push(e),
                }
            }
            if !why.is_empty() {
                return Err(format!("{at}: matches no alternative ({})", why.join("; ")));
            }
        }
    }
    if let Some(Json::Array(all)) = map.get("allOf") {
        for sub in all {
            check(sub, value, at, root)?;
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = map.get("minimum").and_then(Json::as_f64)
            && n < min
        {
            return Err(format!("{at}: {value} is below the minimum {min}"));
        }
        if let Some(max) = map.get("maximum").and_then(Json::as_f64)
            && n > max
        {
            return Err(format!("{at}: {value} is above the maximum {max}"));
        }
    }
    if let Json::Object(fields) = value {
        if let Some(Json::Array(required)) = map.get("required") {
            for r in required.iter().filter_map(Json::as_str) {
                if !fields.contains_key(r) {
                    return Err(format!("{at}: the field `{r}` is missing"));
                }
            }
        }
        let props = map.get("properties").and_then(Json::as_object);
        for (key, v) in fields {
            let here = format!("{at}.{key}");
            match props.and_then(|p| p.get(key)) {
                Some(sub) => check(sub, v, &here, root)?,
                None => {
                    if let Some(extra) = map.get("additionalProperties") {
                        check(extra, v, &here, root)?;
                    }
                }
            }
        }
    }
    if let Json::Array(items) = value {
        let prefix = map.get("prefixItems").and_then(Json::as_array);
        for (i, item) in items.iter().enumerate() {
            let here = format!("{at}[{i}]");
            match prefix.and_then(|p| p.get(i)) {
                Some(sub) => check(sub, item, &here, root)?,
                None => {
                    if let Some(sub) = map.get("items") {
                        check(sub, item, &here, root)?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn is_type(ty: &str, value: &Json) -> bool {
    match ty {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    }
}

/// A value as an error shows it: its type and at most 80 characters of it.
fn shown(value: &Json) -> String {
    let kind = match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    };
    let text: String = value.to_string().chars().take(80).collect();
    format!("{kind} ({text})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A result type as the families declare them.
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// Always there.
        count: u64,
        /// Sometimes there, sometimes null.
        note: Option<String>,
        items: Vec<Item>,
        kind: Kind,
        extra: Json,
    }

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Item {
        path: String,
        line: u32,
    }

    #[derive(schemars::JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Kind {
        Ready,
        Partial,
    }

    #[test]
    fn a_conforming_result_passes_and_each_kind_of_drift_is_named() {
        let schema = schema_of::<Sample>();
        let text = schema.to_string();
        assert!(!text.contains("\"title\""), "{text}");
        assert_eq!(
            schema["properties"]["kind"]["$ref"], "#/$defs/Kind",
            "{text}"
        );
        let good = json!({"count": 3, "note": null, "items": [{"path": "a.py", "line": 1}],
            "kind": "ready", "extra": {"any": [1]}, "more": "allowed"});
        conforms(&schema, &good).unwrap();
        let without_note = json!({"count": 0, "items": [], "kind": "partial", "extra": null});
        conforms(&schema, &without_note).unwrap();
        let cases = [
            (
                json!({"items": [], "kind": "ready", "extra": 1}),
                "`count` is missing",
            ),
            (
                json!({"count": -1, "items": [], "kind": "ready", "extra": 1}),
                "$.count",
            ),
            (
                json!({"count": 1.5, "items": [], "kind": "ready", "extra": 1}),
                "$.count",
            ),
            (
                json!({"count": 1, "note": 2, "items": [], "kind": "ready", "extra": 1}),
                "$.note",
            ),
            (
                json!({"count": 1, "items": [{"path": "a", "line": "1"}], "kind": "ready", "extra": 1}),
                "$.items[0].line",
            ),
            (
                json!({"count": 1, "items": [], "kind": "indexing", "extra": 1}),
                "$.kind",
            ),
            (json!([1]), "expected object"),
        ];
        for (value, named) in cases {
            let err = conforms(&schema, &value).expect_err(&value.to_string());
            assert!(err.contains(named), "{err} should name {named}");
        }
    }

    #[test]
    fn the_outward_schema_takes_what_the_result_store_makes_of_a_result() {
        let outward = outward(&schema_of::<Sample>());
        assert!(
            outward["$defs"]["Item"].is_object(),
            "the references' targets at the root"
        );
        let shortened = json!({"count": 1, "items": [], "kind": "ready", "extra": 1,
            "masked": ["aws"], "projected": {"items": {"ref": "tr_1", "total_chars": 90000}}});
        conforms(&outward, &shortened).unwrap();
        let whole = json!({"preview": "{\"count\"…", "projected": {"result": {"ref": "tr_2", "total_chars": 900000}}});
        conforms(&outward, &whole).unwrap();
        assert!(conforms(&outward, &json!({"count": "x"})).is_err());
        let error = json!({"error": {"kind": "not_found", "message": "m", "hint": "h"}});
        conforms(&outward, &error).unwrap();
        assert_eq!(outward["type"], "object", "MCP wants an object at the root");
    }
}
