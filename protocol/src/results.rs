//! The tools' results: one type per tool, which its handler returns (`Serialize`, turned into
//! the JSON that leaves once, by `ToolSpec`) and whose schema clients see (MCP
//! `outputSchema`, `ToolInfo.output_schema`, derived here by [`schema_of`]). The result and
//! its schema come from one type, so they cannot drift; `docs/TOOLS.md`'s answers and the
//! results recorded from a real daemon (`protocol/tests/results_recorded.rs`) are parsed
//! into their types by the tests.
//!
//! How a result spells absence is part of its type: a field the handler leaves out when it
//! has nothing to say is `#[serde(skip_serializing_if = "Option::is_none")]`, a plain
//! `Option` is written as `null`. A free-form value is `serde_json::Value`; enums are closed.
//! Clients must allow unknown fields (a result may carry more than its schema names: the
//! result store adds `masked` and `projected`, see [`outward`]). The types derive
//! `Deserialize` too, for clients and the tests.
//!
//! One file per family of tools (`results/<family>.rs`), like the arguments in `tools`.

mod data;
mod debug;
mod eval;
mod files;
mod human;
mod jobs;
#[allow(clippy::large_enum_variant)]
mod lsp;
mod lsp_edits;
mod models;
mod structural;

pub use data::*;
pub use debug::*;
pub use eval::*;
pub use files::*;
pub use human::*;
pub use jobs::*;
pub use lsp::*;
pub use lsp_edits::*;
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
    fn a_schema_is_tidy_and_names_its_enums_by_reference() {
        let schema = schema_of::<Sample>();
        let text = schema.to_string();
        assert!(!text.contains("\"title\""), "{text}");
        assert_eq!(
            schema["properties"]["kind"]["$ref"], "#/$defs/Kind",
            "{text}"
        );
    }

    #[test]
    fn the_outward_schema_takes_what_the_result_store_makes_of_a_result() {
        let outward = outward(&schema_of::<Sample>());
        assert!(
            outward["$defs"]["Item"].is_object(),
            "the references' targets at the root"
        );
        // The result as the handler made it, with what the result store may add; a result
        // replaced by its preview; an error. (A real client validates results against it:
        // `tests/tests/mcp_python_sdk.rs`.)
        let [own, whole, error] = outward["anyOf"].as_array().unwrap().as_slice() else {
            panic!("three shapes: {outward}");
        };
        for added in ["masked", "projected"] {
            assert!(own["properties"][added].is_object(), "{own}");
        }
        assert_eq!(own["required"], json!(["count", "items", "kind", "extra"]));
        assert_eq!(whole["required"], json!(["preview", "projected"]));
        assert_eq!(error["required"], json!(["error"]));
        assert_eq!(outward["type"], "object", "MCP wants an object at the root");
    }
}
