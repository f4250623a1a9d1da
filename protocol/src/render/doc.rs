//! [`Doc`], a rendering as a result type's [`super::Render`] impl writes it: the header's
//! facts, the body, the blocks after it, each by its field's name, laid out in the order of
//! the names (the order the generic rendering, over a JSON object's sorted keys, has
//! always had), whatever the order they were written in.

use std::collections::BTreeMap;
use std::fmt::Display;

use serde::Serialize;
use serde_json::{Map, Value as Json};

use super::generic::{
    QUIET_ZERO, UNUSED, is_block, list, object, push_block, quiet_false, says_reason, scalar,
};

/// A result's text, being written.
pub struct Doc<'a> {
    tool: &'a str,
    /// The header's facts (`key: value`), by key.
    facts: BTreeMap<String, String>,
    /// The result's own text or main output, verbatim.
    body: Option<String>,
    /// What follows the body (long strings, lists, nested objects), by key.
    blocks: BTreeMap<String, String>,
}

impl<'a> Doc<'a> {
    /// The text of a result of `tool`.
    pub fn new(tool: &'a str) -> Doc<'a> {
        Doc {
            tool,
            facts: BTreeMap::new(),
            body: None,
            blocks: BTreeMap::new(),
        }
    }

    /// A fact of the header: `key: value`.
    pub fn fact(&mut self, key: &str, value: impl Display) {
        self.facts.insert(key.into(), format!("{key}: {value}"));
    }

    /// A fact when there is one (`null` says nothing).
    pub fn opt(&mut self, key: &str, value: Option<impl Display>) {
        if let Some(value) = value {
            self.fact(key, value);
        }
    }

    /// A flag whose absence says `false` (`truncated`, `timed_out`): only when it is set.
    pub fn flag(&mut self, key: &str, on: bool) {
        if on {
            self.fact(key, true);
        }
    }

    /// A count whose `0` says nothing (things skipped, left out): only when there are some.
    pub fn count(&mut self, key: &str, n: impl Into<Option<u64>>) {
        if let Some(n) = n.into().filter(|n| *n != 0) {
            self.fact(key, n);
        }
    }

    /// A field of any type (an enum, a list, a part), by the generic rules of its JSON.
    pub fn field(&mut self, key: &str, value: &impl Serialize) {
        self.json(key, &serde_json::to_value(value).unwrap_or_default());
    }

    /// The main output, verbatim, after the header.
    pub fn body(&mut self, text: &str) {
        let mut out = String::new();
        push_block(&mut out, text);
        self.body = Some(out);
    }

    /// A string field: a fact when short and on one line, a block under its key when not,
    /// nothing when empty.
    pub fn string(&mut self, key: &str, s: &str) {
        if is_block(s) {
            let mut out = format!("{key}:\n");
            push_block(&mut out, s);
            self.blocks.insert(key.into(), out);
        } else if !s.is_empty() {
            self.fact(key, s);
        }
    }

    /// Why an answer may cover less (`partial_reason`, `source_reason`), unless the body says
    /// it already: a reason is a note of the answer's own text, said once.
    pub fn reason(&mut self, key: &str, reason: Option<&str>) {
        if let Some(reason) = reason
            && !self
                .body
                .as_deref()
                .is_some_and(|body| says_reason(body, reason))
        {
            self.string(key, reason);
        }
    }

    /// Any field, by the generic rules of its JSON (what the store adds: `masked`,
    /// `projected`; a field of another build).
    pub fn json(&mut self, key: &str, v: &Json) {
        if UNUSED.contains(&key) {
            return;
        }
        match v {
            Json::Null => {}
            Json::Bool(false) if quiet_false(key) => {}
            Json::Number(n) if n.as_u64() == Some(0) && QUIET_ZERO.contains(&key) => {}
            Json::String(s) => self.string(key, s),
            Json::Bool(_) | Json::Number(_) => self.fact(key, scalar(v)),
            Json::Array(items) if items.is_empty() => {}
            Json::Array(items) => {
                let mut out = String::new();
                list(&mut out, key, items, "");
                self.blocks.insert(key.into(), out);
            }
            Json::Object(o) if o.is_empty() => {}
            Json::Object(o) => {
                let mut out = format!("{key}:\n");
                object(&mut out, o, "  ");
                self.blocks.insert(key.into(), out);
            }
        }
    }

    /// The keys beside the type's own (`Render::render`'s `extra`: what the result store
    /// adds, a field of another build), each written: the type's own lists beside a `text`
    /// are its impl's to leave out, a key it does not know is not (the generic rules, not
    /// knowing which lists a `text` holds, leave every list but `masked` and `images` out).
    pub fn extra(&mut self, extra: &Map<String, Json>) {
        for (k, v) in extra {
            self.json(k, v);
        }
    }

    /// The text: `tool: fact · fact`, the body, the blocks; no last line break.
    pub fn finish(self) -> String {
        let mut out = String::new();
        if !self.facts.is_empty() {
            let facts: Vec<String> = self.facts.into_values().collect();
            out.push_str(&format!("{}: {}\n", self.tool, facts.join(" · ")));
        }
        if let Some(body) = self.body {
            out.push_str(&body);
        }
        for block in self.blocks.into_values() {
            out.push_str(&block);
        }
        if out.ends_with('\n') {
            out.pop();
        }
        out
    }
}
