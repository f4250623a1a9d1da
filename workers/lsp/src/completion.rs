//! `lsp completions`: what the server would complete where `symbol` ends on the line (the
//! text typed so far, `obj.` for members or `obj.na` for a prefix), bounded, each item's
//! label, kind and detail (`textDocument/completion`).

use serde_json::{Value, json};
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::results::{LspCompletion, LspCompletions, LspServed};
use toolvisor_protocol::tools::LspArgs;

use crate::call::CallCtx;
use crate::ops::require;
use crate::servers::Servers;

/// Items listed; the rest are counted in `truncated`.
pub const COMPLETIONS_MAX: usize = 50;

const NEED: &str = "completions needs `file`, `line` (1-based) and `symbol`: the text typed so far on that line (e.g. `obj.` or `obj.na`); the position is at its end";

/// `CompletionItemKind` by number.
fn kind_name(k: u64) -> &'static str {
    const NAMES: [&str; 25] = [
        "text",
        "method",
        "function",
        "constructor",
        "field",
        "variable",
        "class",
        "interface",
        "module",
        "property",
        "unit",
        "value",
        "enum",
        "keyword",
        "snippet",
        "color",
        "file",
        "reference",
        "folder",
        "enum member",
        "constant",
        "struct",
        "event",
        "operator",
        "type parameter",
    ];
    k.checked_sub(1)
        .and_then(|i| NAMES.get(i as usize))
        .copied()
        .unwrap_or("")
}

/// The identifier typed just before the position: the tail of `symbol` made of word
/// characters (`obj.na` → `na`, `obj.` → ``; `g.greet` → `greet`, the callee's name).
pub(crate) fn typed_prefix(symbol: &str) -> &str {
    let start = symbol
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric() || *c == '_' || *c == '$')
        .last()
        .map_or(symbol.len(), |(i, _)| i);
    &symbol[start..]
}

/// One item as shown.
struct Item {
    label: String,
    kind: &'static str,
    detail: String,
    sort: String,
}

fn item(v: &Value) -> Option<Item> {
    let label = v.get("label").and_then(Value::as_str)?.trim().to_string();
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").trim();
    // `labelDetails` (3.17) holds what some servers leave out of `detail`.
    let detail = [
        s("/detail"),
        s("/labelDetails/detail"),
        s("/labelDetails/description"),
    ]
    .into_iter()
    .filter(|d| !d.is_empty())
    .fold(String::new(), |acc, d| {
        if acc.contains(d) {
            acc
        } else if acc.is_empty() {
            d.to_string()
        } else {
            format!("{acc} {d}")
        }
    });
    Some(Item {
        kind: kind_name(v.get("kind").and_then(Value::as_u64).unwrap_or(0)),
        detail,
        sort: v
            .get("sortText")
            .and_then(Value::as_str)
            .unwrap_or(&label)
            .to_string(),
        label,
    })
}

/// Whether an item matches the typed prefix (its `filterText`, else its label, starts with
/// it, ignoring case): servers may answer more than a client would show.
fn matches(v: &Value, prefix: &str) -> bool {
    if prefix.is_empty() {
        return true;
    }
    let key = v
        .get("filterText")
        .or_else(|| v.get("label"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim_start();
    key.to_lowercase().starts_with(&prefix.to_lowercase())
}

impl Servers {
    /// `lsp completions {file, line, symbol, occurrence?}`.
    pub async fn completions(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspCompletions, ToolError> {
        let mut at = self.open_at(ctx, args, NEED).await?;
        require(&at.opened, "completionProvider", "completions")?;
        // Members of an imported type depend on the project: wait until it is loaded.
        self.ready_for(&at.opened.shared, &at.opened.uri).await?;
        let end = at.byte + at.symbol.len();
        let last = at
            .symbol
            .chars()
            .last()
            .map(String::from)
            .unwrap_or_default();
        let triggers = at
            .opened
            .conn
            .caps
            .pointer("/completionProvider/triggerCharacters")
            .and_then(Value::as_array)
            .is_some_and(|t| t.iter().any(|c| c.as_str() == Some(&last)));
        let context = if triggers {
            json!({"triggerKind": 2, "triggerCharacter": last})
        } else {
            json!({"triggerKind": 1})
        };
        let params = json!({"textDocument": {"uri": at.opened.uri},
            "position": at.position(end), "context": context});
        let (result, request_ms) = self
            .ask_settled(&mut at.opened, "textDocument/completion", params, |v| {
                v.get("items")
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty)
            })
            .await?;
        let incomplete = result
            .get("isIncomplete")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let raw = match &result {
            Value::Array(a) => a.clone(),
            v => v
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        };
        let prefix = typed_prefix(&at.symbol);
        let mut items: Vec<Item> = raw
            .iter()
            .filter(|v| matches(v, prefix))
            .filter_map(item)
            .collect();
        items.sort_by(|a, b| (&a.sort, &a.label).cmp(&(&b.sort, &b.label)));
        let total = items.len();
        let cut = total.saturating_sub(COMPLETIONS_MAX);
        let mut text = String::new();
        let mut listed = Vec::new();
        for i in items.iter().take(COMPLETIONS_MAX) {
            let item = LspCompletion {
                label: i.label.clone(),
                kind: i.kind.to_string(),
                detail: i.detail.clone(),
            };
            text.push_str(&item.line());
            text.push('\n');
            listed.push(item);
        }
        let here = format!("the end of {}", at.here());
        if total == 0 {
            text = format!("no completions at {here}\n");
        } else if cut > 0 {
            text.push_str(&format!(
                "(showing {COMPLETIONS_MAX} of {total} completions; the list was cut)\n"
            ));
        }
        if incomplete {
            text.push_str(
                "(the server says this list is incomplete: type more of the name and ask again)\n",
            );
        }
        let mut server = self.server_of(&at.opened);
        server.request_ms = Some(request_ms);
        // Cut at its bound, or said incomplete by the server: not the whole list.
        let served = LspServed::of(server, false, cut > 0 || incomplete);
        Ok(LspCompletions {
            text,
            items: listed,
            total: total as u64,
            truncated: cut as u64,
            served,
            server_incomplete: incomplete,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typed_prefix_is_the_identifier_tail_of_the_symbol() {
        assert_eq!(typed_prefix("obj."), "");
        assert_eq!(typed_prefix("obj.na"), "na");
        assert_eq!(typed_prefix("self.büro_1"), "büro_1");
        assert_eq!(typed_prefix("std::"), "");
        assert_eq!(typed_prefix("pri"), "pri");
    }

    #[test]
    fn items_match_their_filter_text_or_label_ignoring_case() {
        assert!(matches(&json!({"label": "Greet"}), "gr"));
        assert!(matches(
            &json!({"label": " greet(int)", "filterText": "greet"}),
            "gre"
        ));
        assert!(!matches(&json!({"label": "name"}), "gr"));
        assert!(matches(&json!({"label": "anything"}), ""));
        assert_eq!(kind_name(2), "method");
        assert_eq!(kind_name(0), "");
        assert_eq!(kind_name(99), "");
    }
}
