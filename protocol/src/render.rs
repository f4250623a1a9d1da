//! The text a model reads of a tool's result (`toolvisor mcp` sends it as the result's text
//! content; the whole JSON goes to programs as `structuredContent` with `--structured`),
//! written the way a person would read it, from the tool's result type: one [`Render`] impl
//! per result type, here, beside the types (`render/<family>.rs` beside `results/<family>.rs`),
//! each writing its fields into a [`Doc`] (the shared rules: flags said only when set, counts
//! only when not zero, the facts' and blocks' order). The daemon's `ToolSpec` of each tool
//! carries [`render_as`] for its type, which `toolvisor mcp` gets from the binary; so nothing
//! here or there lists tool names. Every result type has its own impl (`Render` has no
//! default: a new result type says how it reads).
//!
//! What reaches a model is not always its tool's type: the result store adds `masked` and
//! `projected` to a result, or replaces a result too large by `{preview, projected}`
//! (`results::outward`), and a daemon of another build may answer with fields or tools this
//! build does not know. [`render_as`] renders a result as its type with the keys the type
//! does not hold beside it, and anything that is not its type by the [`generic`] rules;
//! where its images went ([`Outward`]) is said either way.

mod data;
mod debug;
mod doc;
mod eval;
mod files;
mod generic;
mod human;
mod jobs;
mod lsp;
mod lsp_edits;
mod lsp_lines;
mod models;
mod outward;
mod structural;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value as Json};

pub use doc::Doc;
pub use generic::json as generic;
pub use lsp_lines::{LINE_SHOWN_MAX, OUTSIDE_NOTE};
pub use outward::{ImageFate, Outward};

/// A tool's rendering of its result as `toolvisor mcp` calls it: the tool, the result's
/// outward JSON (images' `data` as their fates' notes: [`Outward::note`]), where its images
/// went.
pub type RenderFn = fn(tool: &str, value: &Json, outward: &Outward) -> String;

/// A result type's text for a model.
pub trait Render: Serialize {
    /// Writes this result's fields into `doc`, its images where `outward` says (an enum of
    /// shapes: the one it holds).
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward);

    /// The text of this result of `tool`: its fields ([`Render::write`]), then `extra` (the
    /// outward keys the type does not hold: `masked`, `projected`) beside them.
    fn render(&self, tool: &str, extra: &Map<String, Json>, outward: &Outward) -> String {
        let mut doc = Doc::new(tool);
        self.write(&mut doc, outward);
        doc.extra(extra);
        doc.finish()
    }
}

/// `value` rendered as `R` when it is one, else by the [`generic`] rules.
pub fn render_as<R: Render + DeserializeOwned>(
    tool: &str,
    value: &Json,
    outward: &Outward,
) -> String {
    match R::deserialize(value) {
        Ok(typed) => {
            let own = serde_json::to_value(&typed).unwrap_or_default();
            let extra: Map<String, Json> = match value {
                Json::Object(map) => map
                    .iter()
                    .filter(|(k, _)| own.get(k.as_str()).is_none())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                _ => Map::new(),
            };
            typed.render(tool, &extra, outward)
        }
        Err(_) => render_json(tool, value, outward),
    }
}

/// `value`, whatever it is, by the [`generic`] rules.
pub fn render_json(tool: &str, value: &Json, outward: &Outward) -> String {
    let mut value = value.clone();
    outward.show(&mut value);
    generic(tool, &value)
}

/// `value` is an `R`, and its rendering as one reads as its JSON always has (the tests of the
/// family files).
#[cfg(test)]
pub(crate) fn as_before<R: Render + DeserializeOwned>(tool: &str, value: Json) -> String {
    assert!(R::deserialize(&value).is_ok(), "{value}");
    let text = render_as::<R>(tool, &value, &Outward::default());
    assert_eq!(text, generic(tool, &value));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::ReadResult;
    use serde::Deserialize;
    use serde_json::json;

    fn read_text() -> Json {
        json!({"content": "1\tTOKEN=***\n", "eof": true, "kind": "text", "lines": 1,
            "next_offset": null, "offset": 1, "path": ".env", "size_bytes": 9, "total_lines": 1})
    }

    #[test]
    fn a_result_of_its_type_renders_as_its_json_reads() {
        let v = read_text();
        assert!(ReadResult::deserialize(&v).is_ok());
        let text = render_as::<ReadResult>("read", &v, &Outward::default());
        assert_eq!(text, generic("read", &v));
        assert_eq!(
            text,
            "read: eof: true · kind: text · lines: 1 · offset: 1 · path: .env · size_bytes: 9 · total_lines: 1\n1\tTOKEN=***"
        );
    }

    #[test]
    fn what_the_result_store_adds_is_said_in_its_place() {
        // `masked` sorts between the facts' lines… and the blocks after: where it always was.
        let mut v = read_text();
        v["masked"] = json!(["github_token"]);
        v["projected"] = json!({"content": {"ref": "tr_1", "total_chars": 9000}});
        let text = render_as::<ReadResult>("read", &v, &Outward::default());
        assert_eq!(text, generic("read", &v));
        assert!(text.contains("masked: github_token\nprojected:\n  content:\n    ref: tr_1"));
    }

    #[test]
    fn what_is_not_its_type_renders_by_the_generic_rules() {
        let preview = json!({"preview": "{\"content\":\"1\\tx", "projected": {"result": {"ref": "tr_1", "total_chars": 90000}}});
        assert!(ReadResult::deserialize(&preview).is_err());
        let text = render_as::<ReadResult>("read", &preview, &Outward::default());
        assert_eq!(text, generic("read", &preview));
        assert!(text.starts_with("read: preview: "), "{text}");
    }

    #[test]
    fn an_image_says_where_it_went_in_place_of_its_data() {
        let outward = Outward {
            images: vec![(None, ImageFate::Written("a.png".into(), 70))],
        };
        let mut v = json!({"kind": "image", "mime_type": "image/png", "data": "iVBO", "width": 1,
            "height": 1, "transformed": false, "note": null,
            "source": {"format": "png", "width": 1, "height": 1, "bytes": 70}});
        outward.note(&mut v);
        assert_eq!(v["data"], "(written to a.png, 70 bytes)");
        assert!(ReadResult::deserialize(&v).is_ok(), "the typed shape");
        let text = render_as::<ReadResult>("read", &v, &outward);
        assert!(
            text.starts_with("read: file: a.png · file_bytes: 70 · height: 1 · kind: image"),
            "{text}"
        );
        assert!(!text.contains("data"), "{text}");
        outward.show(&mut v);
        assert_eq!(text, generic("read", &v));
    }
}
