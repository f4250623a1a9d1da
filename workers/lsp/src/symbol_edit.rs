//! Symbol-level edits of `lsp_edit`: `replace_symbol_body`, `insert_before_symbol`,
//! `insert_after_symbol`, addressed by a symbol path from the server's document symbols
//! (`Class/method`), so a whole definition is edited without reproducing its old text.
//! The edit becomes a one-file `WorkspaceEdit` written by the same all-or-nothing path as
//! `lsp_rename` ([`Edits::write_edit`]).

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::{LspEditArgs, LspEditOp};

use crate::answers::{self, show_path};
use crate::call::CallCtx;
use crate::diagnostics::Diagnostics;
use crate::edit::Edits;
use crate::lsp_edit::need;
use crate::ops::require;
use crate::servers::Servers;

/// Candidates named in a "no such symbol" answer.
const LISTED_MAX: usize = 40;

/// A symbol of the outline with its path and its full range (0-based lines, columns in the
/// server's encoding).
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub path: String,
    pub kind: &'static str,
    pub start: (u64, u64),
    pub end: (u64, u64),
}

/// Every symbol of a `textDocument/documentSymbol` answer with its `/`-joined path: nested
/// `DocumentSymbol`s by their parents' names, flat `SymbolInformation`s by `containerName`.
pub fn outline(result: &Value) -> Vec<Found> {
    fn pos(v: Option<&Value>) -> Option<(u64, u64)> {
        let v = v?;
        Some((v.get("line")?.as_u64()?, v.get("character")?.as_u64()?))
    }
    fn walk(v: &Value, parent: &str, out: &mut Vec<Found>) {
        let Some(name) = v.get("name").and_then(Value::as_str) else {
            return;
        };
        let mut path = if parent.is_empty() {
            String::new()
        } else {
            format!("{parent}/")
        };
        if parent.is_empty()
            && let Some(c) = v
                .get("containerName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
        {
            path = format!("{c}/");
        }
        path.push_str(name);
        let range = v.get("range").or_else(|| v.pointer("/location/range"));
        let (Some(start), Some(end)) = (
            pos(range.and_then(|r| r.get("start"))),
            pos(range.and_then(|r| r.get("end"))),
        ) else {
            return;
        };
        out.push(Found {
            path: path.clone(),
            kind: answers::symbol_kind(v.get("kind").and_then(Value::as_u64).unwrap_or(0)),
            start,
            end,
        });
        for c in v
            .get("children")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            walk(c, &path, out);
        }
    }
    let mut out = Vec::new();
    for v in result.as_array().into_iter().flatten() {
        walk(v, "", &mut out);
    }
    out
}

/// The one symbol at `wanted` (`Class/method`; `@N` at the end picks the one starting on
/// 1-based line N when the path names several, e.g. overloads).
pub fn pick<'a>(all: &'a [Found], wanted: &str, shown: &str) -> Result<&'a Found, ToolError> {
    let (name, line) = match wanted.rsplit_once('@') {
        Some((n, l)) if l.parse::<u64>().is_ok() => (n, l.parse::<u64>().ok()),
        _ => (wanted, None),
    };
    let name = name.trim_matches('/');
    let hits: Vec<&Found> = all
        .iter()
        .filter(|f| f.path == name && line.is_none_or(|l| f.start.0 + 1 == l))
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => {
            let listed: Vec<String> = all
                .iter()
                .take(LISTED_MAX)
                .map(|f| format!("{} ({} at line {})", f.path, f.kind, f.start.0 + 1))
                .collect();
            Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "no symbol `{wanted}` in {shown}'s outline; it has: {}{}",
                    if listed.is_empty() {
                        "nothing".to_string()
                    } else {
                        listed.join(", ")
                    },
                    if all.len() > LISTED_MAX {
                        format!(", … ({} in all)", all.len())
                    } else {
                        String::new()
                    }
                ),
                "give a path from that list (names joined by `/`, as `lsp symbols` nests them)",
            ))
        }
        many => Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!(
                "`{wanted}` names {} symbols in {shown} (lines {})",
                many.len(),
                many.iter()
                    .map(|f| (f.start.0 + 1).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "add `@<line>` for the one you mean, e.g. \"Greeter/greet@12\"",
        )),
    }
}

/// The byte offset where 0-based `line` starts in `text` (its length past the end).
fn line_start(text: &str, line: u64) -> usize {
    let mut at = 0;
    for _ in 0..line {
        match text[at..].find('\n') {
            Some(i) => at += i + 1,
            None => return text.len(),
        }
    }
    at
}

/// The text edit (`TextEdit` in the server's terms, whole lines) an op makes of `found`.
///
/// The symbol's lines are whole lines when only whitespace stands before it on its first
/// line; then `replace` swaps its lines for `text`, and the inserts go before its first line
/// or after its last. A `text` whose first non-blank line has no indentation while the symbol is
/// indented is indented as a block to the symbol's indentation (so a method can be given as
/// it reads at the top level); otherwise `text` is taken as it stands.
pub fn text_edit(doc: &str, found: &Found, op: LspEditOp, text: &str) -> Value {
    let first = line_start(doc, found.start.0);
    let line_end = doc[first..].find('\n').map_or(doc.len(), |i| first + i);
    let line = &doc[first..line_end];
    let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
    let mut body = text.to_string();
    let text_indented = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.starts_with([' ', '\t']));
    if !indent.is_empty() && !text_indented {
        body = text
            .split_inclusive('\n')
            .map(|l| {
                if l.trim().is_empty() {
                    l.to_string()
                } else {
                    format!("{indent}{l}")
                }
            })
            .collect();
    }
    if !body.ends_with('\n') {
        body.push('\n');
    }
    // An insert keeps the file's spacing between definitions: the blank lines that part the
    // symbol from its neighbour (after it, else before it; at most 2) part it from the new
    // text too, unless the text brings its own.
    let lines: Vec<&str> = doc.lines().collect();
    let blank = |l: &&&str| l.trim().is_empty();
    let after = lines
        .iter()
        .skip(found.end.0 as usize + 1)
        .take_while(blank)
        .count();
    let before = lines[..(found.start.0 as usize).min(lines.len())]
        .iter()
        .rev()
        .take_while(blank)
        .count();
    let parted = |first: usize, second: usize| {
        let n = if first > 0 { first } else { second };
        // Blank lines at the end of the file part nothing.
        "\n".repeat(n.min(2))
    };
    match op {
        LspEditOp::InsertAfterSymbol if !body.starts_with('\n') => {
            let n = if found.end.0 as usize + 1 + after >= lines.len() {
                0
            } else {
                after
            };
            body.insert_str(0, &parted(n, before));
        }
        LspEditOp::InsertBeforeSymbol if !body.ends_with("\n\n") => {
            let n = if before == found.start.0 as usize {
                0
            } else {
                before
            };
            body.push_str(&parted(n, after));
        }
        _ => {}
    }
    let at = |l: u64| json!({"line": l, "character": 0});
    let (start, end) = match op {
        LspEditOp::InsertBeforeSymbol => (at(found.start.0), at(found.start.0)),
        LspEditOp::InsertAfterSymbol => (at(found.end.0 + 1), at(found.end.0 + 1)),
        _ => (at(found.start.0), at(found.end.0 + 1)),
    };
    // At the end of a file without a final newline: an insert after starts a line first,
    // a replacement leaves the file without one, as it was.
    if line_start(doc, found.end.0 + 1) == doc.len() && !doc.ends_with('\n') {
        match op {
            LspEditOp::InsertAfterSymbol => body.insert(0, '\n'),
            LspEditOp::ReplaceSymbolBody => {
                body.pop();
            }
            _ => {}
        }
    }
    json!({"range": {"start": start, "end": end}, "newText": body})
}

impl Edits {
    /// `lsp_edit replace_symbol_body | insert_before_symbol | insert_after_symbol`.
    pub(crate) async fn symbol_edit(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        args: &LspEditArgs,
    ) -> Result<toolvisor_protocol::results::LspEditResult, ToolError> {
        let op = args.op;
        let file = need(&args.file, op, "file")?;
        let wanted = need(&args.symbol_path, op, "symbol_path")?;
        let text = need(&args.text, op, "text")?;
        let path = ctx.resolve("lsp_edit", file, Access::Write)?;
        let mut opened = servers.open(&path, &ctx.run).await?;
        require(&opened, "documentSymbolProvider", "document symbols")?;
        let shown = show_path(&path, &ctx.workdir);
        let params = json!({"textDocument": {"uri": opened.uri}});
        let mut result = servers
            .request(&mut opened, "textDocument/documentSymbol", params.clone())
            .await?;
        if result.as_array().is_none_or(Vec::is_empty) && !opened.shared.settled() {
            servers.ready(&opened.shared).await?;
            result = servers
                .request(&mut opened, "textDocument/documentSymbol", params)
                .await?;
        }
        let all = outline(&result);
        let found = pick(&all, wanted, &shown)?.clone();
        let edit = text_edit(&opened.text, &found, op, text);
        let edit = json!({"changes": {opened.uri.clone(): [edit]}});
        let (s, e) = (found.start.0 + 1, found.end.0 + 1);
        let what = match op {
            LspEditOp::ReplaceSymbolBody => {
                format!("replaced {} `{}` ({shown}:{s}-{e})", found.kind, found.path)
            }
            LspEditOp::InsertBeforeSymbol => {
                format!(
                    "inserted before {} `{}` ({shown}:{s})",
                    found.kind, found.path
                )
            }
            _ => format!(
                "inserted after {} `{}` ({shown}:{e})",
                found.kind, found.path
            ),
        };
        self.write_edit(servers, diagnostics, ctx, &opened, edit, what)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edit::apply_edits;
    use crate::position::Encoding;

    const DOC: &str = "class Greeter:\n    def greet(self):\n        return 1\n\n    def bye(self):\n        return 2\n";

    fn symbols() -> Value {
        let r = |s: u64, sc: u64, e: u64, ec: u64| json!({"start": {"line": s, "character": sc}, "end": {"line": e, "character": ec}});
        json!([{"name": "Greeter", "kind": 5, "range": r(0, 0, 5, 16), "children": [
            {"name": "greet", "kind": 6, "range": r(1, 4, 2, 16)},
            {"name": "bye", "kind": 6, "range": r(4, 4, 5, 16)},
        ]}])
    }

    fn edit(op: LspEditOp, path: &str, text: &str) -> String {
        let all = outline(&symbols());
        let f = pick(&all, path, "a.py").unwrap();
        apply_edits(DOC, &[text_edit(DOC, f, op, text)], Encoding::Utf16).unwrap()
    }

    #[test]
    fn symbol_paths_address_nested_symbols() {
        let all = outline(&symbols());
        let paths: Vec<_> = all.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["Greeter", "Greeter/greet", "Greeter/bye"]);
        let e = pick(&all, "Greeter/nope", "a.py").unwrap_err();
        assert!(
            e.message.contains("Greeter/greet (method at line 2)"),
            "{e}"
        );
        // Flat symbol information: the container names the parent.
        let flat = json!([{"name": "f", "kind": 12, "containerName": "m",
            "location": {"uri": "file:///a", "range": {"start": {"line": 3, "character": 0}, "end": {"line": 4, "character": 1}}}}]);
        assert_eq!(outline(&flat)[0].path, "m/f");
        // Two of one name: `@line` picks.
        let two = [
            all[1].clone(),
            Found {
                start: (7, 4),
                ..all[1].clone()
            },
        ];
        assert!(pick(&two, "Greeter/greet", "a.py").is_err());
        assert_eq!(pick(&two, "Greeter/greet@8", "a.py").unwrap().start.0, 7);
    }

    #[test]
    fn replace_and_insert_work_on_whole_lines_with_the_symbols_indentation() {
        // Unindented text is indented as a block to the method's column.
        let out = edit(
            LspEditOp::ReplaceSymbolBody,
            "Greeter/greet",
            "def greet(self):\n    return 'hi'",
        );
        assert_eq!(
            out,
            "class Greeter:\n    def greet(self):\n        return 'hi'\n\n    def bye(self):\n        return 2\n"
        );
        // Indented text stands as given.
        let out = edit(
            LspEditOp::InsertAfterSymbol,
            "Greeter/bye",
            "\n    def later(self):\n        return 3\n",
        );
        assert!(
            out.ends_with("return 2\n\n    def later(self):\n        return 3\n"),
            "{out}"
        );
        let out = edit(LspEditOp::InsertBeforeSymbol, "Greeter", "import os\n\n");
        assert!(out.starts_with("import os\n\nclass Greeter:\n"), "{out}");
    }

    #[test]
    fn an_insert_keeps_the_files_spacing_between_definitions() {
        let doc = "import os\n\n\ndef f():\n    return 1\n\n\ndef h():\n    return 3\n";
        let f = Found {
            path: "f".into(),
            kind: "function",
            start: (3, 0),
            end: (4, 12),
        };
        let g = "def g():\n    return 2\n";
        let after = text_edit(doc, &f, LspEditOp::InsertAfterSymbol, g);
        assert_eq!(
            apply_edits(doc, &[after], Encoding::Utf16).unwrap(),
            "import os\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n\n\ndef h():\n    return 3\n"
        );
        let before = text_edit(doc, &f, LspEditOp::InsertBeforeSymbol, g);
        assert_eq!(
            apply_edits(doc, &[before], Encoding::Utf16).unwrap(),
            "import os\n\n\ndef g():\n    return 2\n\n\ndef f():\n    return 1\n\n\ndef h():\n    return 3\n"
        );
        // The last definition: parted as it is from the one before it.
        let h = Found {
            path: "h".into(),
            kind: "function",
            start: (7, 0),
            end: (8, 12),
        };
        let after = text_edit(doc, &h, LspEditOp::InsertAfterSymbol, g);
        assert!(
            apply_edits(doc, &[after], Encoding::Utf16)
                .unwrap()
                .ends_with("    return 3\n\n\ndef g():\n    return 2\n")
        );
    }

    #[test]
    fn a_file_without_a_final_newline_keeps_its_lines_apart() {
        let doc = "def f():\n    return 1";
        let f = Found {
            path: "f".into(),
            kind: "function",
            start: (0, 0),
            end: (1, 12),
        };
        let after = text_edit(
            doc,
            &f,
            LspEditOp::InsertAfterSymbol,
            "def g():\n    return 2\n",
        );
        let out = apply_edits(doc, &[after], Encoding::Utf16).unwrap();
        assert_eq!(out, "def f():\n    return 1\ndef g():\n    return 2\n");
        let repl = text_edit(
            doc,
            &f,
            LspEditOp::ReplaceSymbolBody,
            "def f():\n    return 5\n",
        );
        let out = apply_edits(doc, &[repl], Encoding::Utf16).unwrap();
        assert_eq!(out, "def f():\n    return 5");
    }
}
