//! The field formatter of `serve --log-format json`'s spans: tracing-subscriber's JSON
//! writes a span's own name as `name` beside its fields, and ractor's actor span has a field
//! `name` too (the actor's name), so one object carried two `name` keys and `jq` kept only
//! the span's ("Actor"). A span field `name` is written as `actor` instead.
//!
//! Only a span with a `name` field is parsed and written again: every other span (a call's,
//! one per call at `info`) is written as tracing-subscriber formats it (parsing every
//! call's span back into a map and writing it anew cost 3 µs per call).

use std::fmt;

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::FormattedFields;
use tracing_subscriber::fmt::format::{JsonFields, Writer};

/// JSON span fields with `name` renamed `actor` (see the module docs).
#[derive(Debug, Default)]
pub struct SpanFields;

/// The key a span field called `name` is written under.
pub const ACTOR_KEY: &str = "actor";

fn rename(json: &str) -> Result<String, fmt::Error> {
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(json).map_err(|_| fmt::Error)?;
    if let Some(v) = map.remove("name") {
        map.insert(ACTOR_KEY.to_string(), v);
    }
    serde_json::to_string(&map).map_err(|_| fmt::Error)
}

/// Whether the compact JSON object `json` may have a key `name`. A string value cannot hold
/// `"name":` unescaped, so a `false` is certain; a `true` only costs the rewrite.
fn has_name(json: &str) -> bool {
    json.contains("\"name\":")
}

fn to_json<R: RecordFields>(fields: R) -> Result<String, fmt::Error> {
    let mut json = String::new();
    JsonFields::new().format_fields(Writer::new(&mut json), fields)?;
    Ok(if json.is_empty() { "{}".into() } else { json })
}

impl<'w> FormatFields<'w> for SpanFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let json = to_json(fields)?;
        if has_name(&json) {
            writer.write_str(&rename(&json)?)
        } else {
            writer.write_str(&json)
        }
    }

    /// Fields recorded later merge into the object (the default would append text to it).
    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let added: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&rename(&to_json(fields)?)?).map_err(|_| fmt::Error)?;
        let mut map: serde_json::Map<String, serde_json::Value> = if current.fields.is_empty() {
            serde_json::Map::new()
        } else {
            serde_json::from_str(&current.fields).map_err(|_| fmt::Error)?
        };
        map.extend(added);
        current.fields = serde_json::to_string(&map).map_err(|_| fmt::Error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_field_becomes_actor() {
        assert_eq!(
            rename(r#"{"id":"0.1","name":"supervisor/processes"}"#).unwrap(),
            r#"{"actor":"supervisor/processes","id":"0.1"}"#
        );
        assert_eq!(rename(r#"{"tool":"ls"}"#).unwrap(), r#"{"tool":"ls"}"#);
    }

    #[test]
    fn only_an_object_with_a_name_key_is_rewritten() {
        assert!(has_name(r#"{"id":"0.1","name":"root"}"#));
        assert!(!has_name(r#"{"call":1,"conversation":"c","tool":"ls"}"#));
        // The text of a value is escaped: it never looks like the key.
        let value =
            serde_json::to_string(&serde_json::json!({"conversation": "x\"name\":y"})).unwrap();
        assert!(!has_name(&value), "{value}");
    }
}
