//! `lsp inlay_hints`: the inferred types and parameter names a server shows inline, for a
//! line range (`line`..`end_line`) or the whole file, bounded; each shown in its line as
//! `N: let v⟨: Vec<i32>⟩ = make(⟨count: ⟩1);` (`textDocument/inlayHint`; clangd before 15
//! answers only its own `clangd/inlayHints`, asked then).

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspHintKind, LspInlayHint, LspInlayHints, LspServed};
use toolvisor_protocol::tools::LspArgs;

use crate::answers;
use crate::call::CallCtx;
use crate::ops::require;
use crate::position::line_text;
use crate::servers::Servers;

/// Hints listed; the rest are counted in `truncated`.
pub const HINTS_MAX: usize = 200;

fn bad(msg: String, hint: &str) -> ToolError {
    ToolError::new(ErrorKind::InvalidArgs, msg, hint)
}

/// One hint: where (0-based line, byte in it) and what.
#[derive(Debug, PartialEq)]
struct Hint {
    line0: usize,
    byte: usize,
    column: usize,
    kind: LspHintKind,
    label: String,
}

/// A hint's label: a string or label parts, with the padding the server asks for.
fn label(v: &Value) -> String {
    let text = match v.get("label") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("value").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    let pad = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
    format!(
        "{}{text}{}",
        if pad("paddingLeft") { " " } else { "" },
        if pad("paddingRight") { " " } else { "" }
    )
}

/// Kind 1 / `"type"` is a type, 2 / `"parameter"` a parameter name (clangd's own protocol
/// names them).
fn kind(v: &Value) -> LspHintKind {
    match v.get("kind") {
        Some(Value::Number(n)) if n.as_u64() == Some(1) => LspHintKind::Type,
        Some(Value::Number(n)) if n.as_u64() == Some(2) => LspHintKind::Parameter,
        Some(Value::String(s)) if s == "type" => LspHintKind::Type,
        Some(Value::String(s)) if s == "parameter" => LspHintKind::Parameter,
        _ => LspHintKind::Other,
    }
}

/// Each line of `doc` with hints (sorted by place), the hints inserted: `N: line`.
fn lines_with_hints(hints: &[Hint], doc: &str) -> String {
    let mut text = String::new();
    let mut i = 0;
    while i < hints.len() {
        let line0 = hints[i].line0;
        let on_line: Vec<&Hint> = hints[i..].iter().take_while(|h| h.line0 == line0).collect();
        i += on_line.len();
        let src = line_text(doc, line0 + 1).unwrap_or("");
        let shown_line = inline(src, &on_line);
        let (shown_line, _) = answers::cut_line(shown_line.trim_end(), on_line[0].column);
        text.push_str(&format!("{}: {}\n", line0 + 1, shown_line));
    }
    text
}

/// The source line with its hints inserted as `⟨label⟩`.
fn inline(src: &str, hints: &[&Hint]) -> String {
    let mut out = String::new();
    let mut at = 0;
    for h in hints {
        let b = h.byte.clamp(at, src.len());
        out.push_str(&src[at..b]);
        out.push('⟨');
        out.push_str(&h.label);
        out.push('⟩');
        at = b;
    }
    out.push_str(&src[at..]);
    out
}

impl Servers {
    /// `lsp inlay_hints {file, line?, end_line?}`.
    pub async fn inlay_hints(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspInlayHints, ToolError> {
        let file = args.file.as_deref().ok_or_else(|| {
            bad(
                "lsp inlay_hints: missing required argument `file`".into(),
                "inlay_hints needs `file`; `line` and `end_line` (1-based, inclusive) narrow it to a range",
            )
        })?;
        if args.end_line.is_some() && args.line.is_none() {
            return Err(bad(
                "lsp inlay_hints: `end_line` without `line`".into(),
                "give `line` (the first line of the range) too, or neither for the whole file",
            ));
        }
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let mut opened = self.open(&path, &ctx.run).await?;
        let shown = answers::show_path(&path, &ctx.workdir);
        let total_lines = opened.text.split('\n').count();
        let first = args.line.unwrap_or(1) as usize;
        // `line` alone is that one line; neither is the whole file.
        let last = args
            .end_line
            .or(args.line)
            .map_or(total_lines, |l| l as usize);
        if first > total_lines {
            return Err(bad(
                format!("{shown} has {total_lines} lines; there is no line {first}"),
                "give a 1-based line number inside the file",
            ));
        }
        if last < first {
            return Err(bad(
                format!("lsp inlay_hints: `end_line` {last} is before `line` {first}"),
                "give `end_line` at or after `line` (the range is inclusive)",
            ));
        }
        let last = last.min(total_lines);
        let method = if opened.conn.supports("inlayHintProvider") {
            "textDocument/inlayHint"
        } else if opened.conn.supports("clangdInlayHintsProvider") {
            "clangd/inlayHints"
        } else {
            require(&opened, "inlayHintProvider", "inlay hints")?;
            unreachable!("require refuses a server without the capability")
        };
        // Inferred types depend on the whole project: wait until it is loaded.
        self.ready_for(&opened.shared, &opened.uri).await?;
        let enc = opened.conn.encoding;
        let end_src = line_text(&opened.text, last).unwrap_or("");
        let range = json!({"start": {"line": first - 1, "character": 0},
            "end": {"line": last - 1, "character": enc.column(end_src, end_src.len())}});
        let params = json!({"textDocument": {"uri": opened.uri}, "range": range});
        let (result, request_ms) = self
            .ask_settled(&mut opened, method, params, |_| false)
            .await?;
        let mut hints: Vec<Hint> = result
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                let line0 = v.pointer("/position/line").and_then(Value::as_u64)? as usize;
                let col = v.pointer("/position/character").and_then(Value::as_u64)? as u32;
                if line0 + 1 < first || line0 + 1 > last {
                    return None;
                }
                let src = line_text(&opened.text, line0 + 1)?;
                let byte = enc.byte(src, col);
                Some(Hint {
                    line0,
                    byte,
                    column: src[..byte].chars().count() + 1,
                    kind: kind(v),
                    label: label(v),
                })
            })
            .collect();
        hints.sort_by_key(|h| (h.line0, h.byte));
        let total = hints.len();
        let cut = total.saturating_sub(HINTS_MAX);
        hints.truncate(HINTS_MAX);
        let mut text = lines_with_hints(&hints, &opened.text);
        let span = if first == 1 && last == total_lines {
            shown.clone()
        } else if first == last {
            format!("{shown}:{first}")
        } else {
            format!("{shown}:{first}-{last}")
        };
        if total == 0 {
            text = format!("no inlay hints in {span}\n");
        } else if cut > 0 {
            text.push_str(&format!(
                "(showing {HINTS_MAX} of {total} hints; the list was cut: ask for a line range with `line` and `end_line`)\n"
            ));
        }
        let items = hints
            .iter()
            .map(|h| LspInlayHint {
                line: (h.line0 + 1) as u64,
                column: h.column as u64,
                kind: h.kind,
                label: h.label.trim().to_string(),
            })
            .collect();
        let mut server = self.server_of(&opened);
        server.request_ms = Some(request_ms);
        let served = LspServed::of(server, false, cut > 0);
        Ok(LspInlayHints {
            text,
            hints: items,
            total: total as u64,
            truncated: cut as u64,
            line: first as u64,
            end_line: last as u64,
            served,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_inserted_into_their_line_in_order() {
        let h = |byte, label: &str| Hint {
            line0: 0,
            byte,
            column: byte + 1,
            kind: LspHintKind::Other,
            label: label.into(),
        };
        let (a, b) = (h(5, ": i32"), h(13, "n: "));
        assert_eq!(
            inline("let x = f(1, 2);", &[&a, &b]),
            "let x⟨: i32⟩ = f(1, ⟨n: ⟩2);"
        );
        assert_eq!(
            label(&json!({"label": [{"value": "count"}, {"value": ":"}], "paddingRight": true})),
            "count: "
        );
        assert_eq!(kind(&json!({"kind": 2})), LspHintKind::Parameter);
        assert_eq!(kind(&json!({"kind": "type"})), LspHintKind::Type);
    }
}
