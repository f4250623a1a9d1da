//! Server answers made into typed items: the files an answer quotes lines of ([`Sources`],
//! within the caller's file scope only), the places of a location-shaped answer
//! ([`locations`], [`resolve_locs`]) and their items ([`loc_lines`]), hover contents as
//! markdown ([`hover_markdown`]), symbols ([`symbol_kind`], [`document_symbols`],
//! [`workspace_symbols`]), a diagnostic from LSP JSON, keyed for the ledger ([`Diag`]), a
//! path as an answer shows it ([`show_path`], [`show_dir`]) and a long source line cut
//! around the match ([`cut_line`]). The line each item reads as is not written here: it is
//! the protocol's (`toolvisor_protocol::render`'s `lsp_lines`: `LspLocation::line`,
//! `LspDiagnostic::line`, …), and an answer's text is its items' lines.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolvisor_protocol::render::LINE_SHOWN_MAX;
use toolvisor_protocol::results::{LspDiagnostic, LspLocation, LspSeverity};

use crate::position::{Encoding, line_text};
use crate::uri;

/// A location resolved to a path and 1-based line and column (characters).
#[derive(Clone, Debug, PartialEq)]
pub struct Loc {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub text: String,
    /// Outside the caller's file scope: named, its text not read (`column` is then the
    /// server's unit count plus one, not converted to characters).
    pub outside: bool,
}

/// Reads files once per answer; open documents win over the disk. Text is read only from
/// files `readable` allows (the caller's file scope): a location elsewhere is named, never
/// quoted.
pub struct Sources<'a> {
    cache: HashMap<PathBuf, Option<String>>,
    open: &'a dyn Fn(&Path) -> Option<String>,
    readable: &'a dyn Fn(&Path) -> bool,
    /// Reads a file the scope allows, beneath its root (`CallCtx::read_text`).
    read: &'a dyn Fn(&Path) -> Option<String>,
}

impl<'a> Sources<'a> {
    pub fn new(
        open: &'a dyn Fn(&Path) -> Option<String>,
        readable: &'a dyn Fn(&Path) -> bool,
        read: &'a dyn Fn(&Path) -> Option<String>,
    ) -> Self {
        Sources {
            cache: HashMap::new(),
            open,
            readable,
            read,
        }
    }

    /// Whether the text of `path` may be shown.
    pub fn readable(&self, path: &Path) -> bool {
        (self.readable)(path)
    }

    /// The text of `path` where the scope allows it, read once per answer.
    pub fn text(&mut self, path: &Path) -> Option<&str> {
        let (open, readable, read) = (self.open, self.readable, self.read);
        let text = self.cache.entry(path.to_path_buf()).or_insert_with(|| {
            if !readable(path) {
                return None;
            }
            open(path).or_else(|| read(path))
        });
        text.as_deref()
    }

    pub fn line(&mut self, path: &Path, line0: usize) -> Option<String> {
        self.text(path)
            .and_then(|t| line_text(t, line0 + 1))
            .map(str::to_string)
    }
}

/// The (uri, range) pairs of a definition/references-shaped answer: Location, Location[],
/// LocationLink[] or null.
pub fn locations(result: &Value) -> Vec<(String, Value)> {
    let items: Vec<&Value> = match result {
        Value::Array(a) => a.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    };
    items
        .into_iter()
        .filter_map(|v| {
            if let Some(uri) = v.get("targetUri").and_then(Value::as_str) {
                let range = v
                    .get("targetSelectionRange")
                    .or_else(|| v.get("targetRange"))?;
                Some((uri.to_string(), range.clone()))
            } else {
                let uri = v.get("uri").and_then(Value::as_str)?;
                Some((
                    uri.to_string(),
                    v.get("range").cloned().unwrap_or(Value::Null),
                ))
            }
        })
        .collect()
}

/// Where an LSP range starts: its 0-based line and its character in the server's units (0
/// for what the server left out).
pub fn start_of(range: Option<&Value>) -> (usize, u32) {
    let at = |key: &str| {
        range
            .and_then(|r| r.pointer(key))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    (at("/start/line") as usize, at("/start/character") as u32)
}

pub fn resolve_locs(pairs: &[(String, Value)], enc: Encoding, src: &mut Sources<'_>) -> Vec<Loc> {
    let mut out: Vec<Loc> = pairs
        .iter()
        .filter_map(|(u, range)| {
            let path = uri::to_path(u)?;
            let (line0, col) = start_of(Some(range));
            let outside = !src.readable(&path);
            let text = src.line(&path, line0).unwrap_or_default();
            let column = if outside {
                col as usize + 1
            } else {
                let byte = enc.byte(&text, col);
                text[..byte].chars().count() + 1
            };
            Some(Loc {
                path,
                line: line0 + 1,
                column,
                text,
                outside,
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
    out.dedup();
    out
}

/// `path` relative to `base` when under it.
pub fn show_path(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

/// A directory as [`show_path`] shows it, `.` for `base` itself.
pub fn show_dir(path: &Path, base: &Path) -> String {
    match show_path(path, base) {
        s if s.is_empty() => ".".to_string(),
        s => s,
    }
}

/// `line` trimmed, and cut to [`LINE_SHOWN_MAX`] characters around `column` (1-based,
/// characters) when longer, `…` marking each cut end; and whether it was cut.
pub fn cut_line(line: &str, column: usize) -> (String, bool) {
    let line = line.trim_end();
    let count = line.chars().count();
    if count <= LINE_SHOWN_MAX {
        return (line.trim_start().to_string(), false);
    }
    // The match a third of the way in: some context before it, more after.
    let at = column.saturating_sub(1).min(count);
    let start = at.saturating_sub(LINE_SHOWN_MAX / 3);
    let start = start.min(count.saturating_sub(LINE_SHOWN_MAX));
    let piece: String = line.chars().skip(start).take(LINE_SHOWN_MAX).collect();
    let before = if start > 0 { "…" } else { "" };
    let after = if start + LINE_SHOWN_MAX < count {
        "…"
    } else {
        ""
    };
    let piece = if start == 0 {
        piece.trim_start()
    } else {
        &piece
    };
    (format!("{before}{piece}{after}"), true)
}

/// The answer's text of `locs` (one [`LspLocation::line`] each, [`LspLocation::cut_note`]
/// after them when a line was cut) and their items.
pub fn loc_lines(locs: &[Loc], base: &Path) -> (String, Vec<LspLocation>) {
    let mut text = String::new();
    let mut items = Vec::new();
    let mut any_cut = false;
    let mut last = String::new();
    for l in locs {
        let (line, cut) = cut_line(&l.text, l.column);
        any_cut |= cut && !l.outside;
        let item = LspLocation {
            path: show_path(&l.path, base),
            abs_path: l.path.display().to_string(),
            line: l.line as u64,
            column: l.column as u64,
            text: if cut { line } else { l.text.clone() },
            outside: l.outside,
            text_cut: cut.then_some(true),
            line_chars: cut.then(|| l.text.chars().count() as u64),
        };
        let this = item.line() + "\n";
        // Two locations on one line (`import x as x`) read as one line; the list has both.
        if this != last {
            text.push_str(&this);
        }
        last = this;
        items.push(item);
    }
    if any_cut {
        text.push_str(&LspLocation::cut_note());
        text.push('\n');
    }
    (text, items)
}

/// Hover contents as markdown.
pub fn hover_markdown(result: &Value) -> String {
    fn marked(v: &Value) -> String {
        match v {
            Value::String(s) => s.clone(),
            Value::Object(_) => {
                if let Some(lang) = v.get("language").and_then(Value::as_str) {
                    format!(
                        "```{lang}\n{}\n```",
                        v.get("value").and_then(Value::as_str).unwrap_or("")
                    )
                } else {
                    v.get("value")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                }
            }
            Value::Array(a) => a.iter().map(marked).collect::<Vec<_>>().join("\n\n"),
            _ => String::new(),
        }
    }
    result
        .get("contents")
        .map(marked)
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub fn symbol_kind(k: u64) -> &'static str {
    const NAMES: [&str; 26] = [
        "symbol",
        "file",
        "module",
        "namespace",
        "package",
        "class",
        "method",
        "property",
        "field",
        "constructor",
        "enum",
        "interface",
        "function",
        "variable",
        "constant",
        "string",
        "number",
        "boolean",
        "array",
        "object",
        "key",
        "null",
        "enum member",
        "struct",
        "event",
        "operator",
    ];
    NAMES.get(k as usize).copied().unwrap_or("symbol")
}

/// A flattened outline entry.
#[derive(Clone, Debug)]
pub struct Sym {
    pub name: String,
    pub kind: &'static str,
    pub path: Option<PathBuf>,
    pub line: usize,
    pub depth: usize,
    pub container: Option<String>,
}

/// Document symbols (nested `DocumentSymbol` or flat `SymbolInformation`), depth-first: the
/// file's outline. A function's own variables and constants (pyright lists every parameter
/// and local) are left out: they are not the file's shape, and were most of a Python
/// outline's characters (74 entries for click's formatting.py, whose shape is 6 names and
/// their methods); functions and classes defined inside a function stay.
pub fn document_symbols(result: &Value) -> Vec<Sym> {
    fn walk(v: &Value, depth: usize, in_body: bool, out: &mut Vec<Sym>) {
        let Some(name) = v.get("name").and_then(Value::as_str) else {
            return;
        };
        let kind = symbol_kind(v.get("kind").and_then(Value::as_u64).unwrap_or(0));
        if in_body && matches!(kind, "variable" | "constant") {
            return;
        }
        let range = v
            .get("selectionRange")
            .or_else(|| v.get("range"))
            .or_else(|| v.pointer("/location/range"));
        let line = range
            .and_then(|r| r.pointer("/start/line"))
            .and_then(Value::as_u64)
            .unwrap_or(0) as usize
            + 1;
        out.push(Sym {
            name: name.to_string(),
            kind,
            path: None,
            line,
            depth,
            container: v
                .get("containerName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        });
        if let Some(children) = v.get("children").and_then(Value::as_array) {
            let body = matches!(kind, "function" | "method" | "constructor");
            for c in by_line(children) {
                walk(c, depth + 1, body, out);
            }
        }
    }
    /// Siblings in the file's order (typescript-language-server sends them by name), by the
    /// line each is shown at: its name's (`selectionRange`), so clangd's `typedef struct {…}
    /// Name;` (whose range starts at the `typedef`, with the anonymous struct's) reads in
    /// order.
    fn by_line(items: &[Value]) -> Vec<&Value> {
        let start = |v: &Value| {
            let r = v
                .get("selectionRange")
                .or_else(|| v.get("range"))
                .or_else(|| v.pointer("/location/range"));
            (
                r.and_then(|r| r.pointer("/start/line"))
                    .and_then(Value::as_u64),
                r.and_then(|r| r.pointer("/start/character"))
                    .and_then(Value::as_u64),
            )
        };
        let mut sorted: Vec<&Value> = items.iter().collect();
        sorted.sort_by_key(|v| start(v));
        sorted
    }
    let mut out = Vec::new();
    if let Some(a) = result.as_array() {
        for v in by_line(a) {
            walk(v, 0, false, &mut out);
        }
    }
    out
}

/// Workspace symbols (`SymbolInformation[]` or `WorkspaceSymbol[]`).
pub fn workspace_symbols(result: &Value) -> Vec<Sym> {
    result
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| {
                    let name = v.get("name").and_then(Value::as_str)?;
                    let loc = v.get("location")?;
                    let path = loc
                        .get("uri")
                        .and_then(Value::as_str)
                        .and_then(uri::to_path);
                    let line = loc
                        .pointer("/range/start/line")
                        .and_then(Value::as_u64)
                        .map_or(0, |l| l as usize + 1);
                    Some(Sym {
                        name: name.to_string(),
                        kind: symbol_kind(v.get("kind").and_then(Value::as_u64).unwrap_or(0)),
                        path,
                        line,
                        depth: 0,
                        container: v
                            .get("containerName")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(str::to_string),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One diagnostic, ready to show and to key in the ledger.
#[derive(Clone, Debug)]
pub struct Diag {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub severity: u8,
    pub code: String,
    pub message: String,
    pub source: String,
    /// The trimmed text of the source line the diagnostic starts on (empty when unknown):
    /// tells the ledger which of two same-message diagnostics is the new one.
    pub at: String,
}

impl Diag {
    pub fn from_lsp(path: &Path, v: &Value, text: &str, enc: Encoding) -> Diag {
        let (line0, col) = start_of(v.get("range"));
        let src = line_text(text, line0 + 1).unwrap_or("");
        let byte = enc.byte(src, col);
        let code = match v.get("code") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        Diag {
            path: path.to_path_buf(),
            line: line0 + 1,
            column: src[..byte].chars().count() + 1,
            severity: v.get("severity").and_then(Value::as_u64).unwrap_or(1) as u8,
            code,
            message: v
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            source: v
                .get("source")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            at: src.trim().to_string(),
        }
    }

    pub fn key(&self) -> crate::ledger::Key {
        (
            self.severity,
            self.code.clone(),
            crate::ledger::key_message(&self.message),
        )
    }

    /// How the ledger holds it: its key and its line's text.
    pub fn mark(&self) -> crate::ledger::Mark {
        (self.key(), self.at.clone())
    }

    /// Its severity as results carry it: LSP's 1 error, 2 warning, 3 info, 4 hint (any other
    /// number: error).
    pub fn lsp_severity(&self) -> LspSeverity {
        match self.severity {
            2 => LspSeverity::Warning,
            3 => LspSeverity::Info,
            4 => LspSeverity::Hint,
            _ => LspSeverity::Error,
        }
    }

    /// As results carry it.
    pub fn to_result(&self, base: &Path) -> LspDiagnostic {
        LspDiagnostic {
            path: show_path(&self.path, base),
            line: self.line as u64,
            column: self.column as u64,
            severity: self.lsp_severity(),
            code: self.code.clone(),
            message: self.message.clone(),
            source: self.source.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use toolvisor_protocol::render::OUTSIDE_NOTE;

    #[test]
    fn an_outline_reads_in_the_order_of_the_lines_it_shows() {
        // clangd: `typedef struct {…} Name;` at 1297–1305 gives the name's symbol (range from
        // the typedef, name at 1305) and the anonymous struct's (1297), in that order.
        let at = |l: u64| json!({"start": {"line": l, "character": 0}, "end": {"line": l, "character": 1}});
        let result = json!([
            {"name": "MMH3Hasher32", "kind": 5, "range": at(1296), "selectionRange": at(1304)},
            {"name": "(anonymous struct)", "kind": 23, "range": at(1296), "selectionRange": at(1296)},
            {"name": "init", "kind": 12, "range": at(1309), "selectionRange": at(1309)},
        ]);
        let lines: Vec<usize> = document_symbols(&result).iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![1297, 1305, 1310]);
    }

    #[test]
    fn an_outline_sent_by_name_is_shown_in_the_files_order() {
        let sym = |name: &str, line: u64, children: Value| {
            json!({"name": name, "kind": 12, "children": children,
                "range": {"start": {"line": line, "character": 0}, "end": {"line": line + 1, "character": 0}},
                "selectionRange": {"start": {"line": line, "character": 9}, "end": {"line": line, "character": 12}}})
        };
        let sent = json!([
            sym("alpha", 9, json!([])),
            sym(
                "zeta",
                0,
                json!([sym("inner_b", 3, json!([])), sym("inner_a", 5, json!([]))])
            ),
        ]);
        let shown: Vec<(String, usize, usize)> = document_symbols(&sent)
            .into_iter()
            .map(|s| (s.name, s.line, s.depth))
            .collect();
        assert_eq!(
            shown,
            vec![
                ("zeta".into(), 1, 0),
                ("inner_b".into(), 4, 1),
                ("inner_a".into(), 6, 1),
                ("alpha".into(), 10, 0),
            ]
        );
    }

    #[test]
    fn long_lines_are_cut_around_the_match() {
        assert_eq!(
            cut_line("    x = f(1)\n", 9),
            ("x = f(1)".to_string(), false)
        );
        let long = format!("{}enlist(7){}", "a".repeat(5000), "b".repeat(5000));
        let (shown, cut) = cut_line(&long, 5001);
        assert!(cut);
        assert!(shown.contains("enlist(7)"), "{shown}");
        assert!(shown.starts_with('…') && shown.ends_with('…'), "{shown}");
        assert_eq!(shown.chars().count(), LINE_SHOWN_MAX + 2);
        // At the very start or end: one cut end only.
        let (head, _) = cut_line(&long, 1);
        assert!(!head.starts_with('…') && head.ends_with('…'));
        let (tail, _) = cut_line(&long, 10_009);
        assert!(tail.starts_with('…') && !tail.ends_with('…'), "{tail}");
        // Multi-byte characters are cut on character boundaries.
        let (k, _) = cut_line(&"한".repeat(1000), 500);
        assert_eq!(k.chars().filter(|c| *c == '한').count(), LINE_SHOWN_MAX);
    }

    #[test]
    fn a_location_outside_is_named_but_its_text_is_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("in.py");
        let outside = dir.path().join("out.py");
        std::fs::write(&inside, "a = 1\n").unwrap();
        std::fs::write(&outside, "secret = 2\n").unwrap();
        // An open document (another conversation may have opened it) is not quoted either.
        let open = |p: &Path| (p == outside.as_path()).then(|| "secret = 3\n".to_string());
        let readable = |p: &Path| p == inside.as_path();
        let read = |p: &Path| std::fs::read_to_string(p).ok();
        let mut sources = Sources::new(&open, &readable, &read);
        let range = json!({"start": {"line": 0, "character": 4}});
        let pairs = vec![
            (uri::from_path(&inside), range.clone()),
            (uri::from_path(&outside), range),
        ];
        let locs = resolve_locs(&pairs, Encoding::Utf16, &mut sources);
        let (text, items) = loc_lines(&locs, dir.path());
        assert!(text.contains("in.py:1: a = 1"), "{text}");
        assert!(
            text.contains(&format!("out.py:1: {OUTSIDE_NOTE}")),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        assert!(items[1].outside);
        assert_eq!(items[1].text, "");
        assert_eq!(items[1].column, 5);
        assert_eq!(sources.line(&outside, 0), None);
    }

    #[test]
    fn a_locations_text_is_its_items_lines_as_it_always_read() {
        let loc = |file: &str, line, column, text: &str, outside| Loc {
            path: PathBuf::from("/w").join(file),
            line,
            column,
            text: text.into(),
            outside,
        };
        let long = format!("{}enlist(7){}", "a".repeat(300), "b".repeat(300));
        let locs = [
            loc("a.py", 1, 5, "    x = f(1)   ", false),
            loc("a.py", 1, 9, "    x = f(1)   ", false),
            loc("a.py", 2, 301, &long, false),
            loc("b.py", 7, 3, "", true),
        ];
        let (text, items) = loc_lines(&locs, Path::new("/w"));
        let (cut, _) = cut_line(&long, 301);
        assert_eq!(
            text,
            format!(
                "a.py:1: x = f(1)\na.py:2: {cut}\nb.py:7: (outside the workdir: text not read)\n(lines longer than 200 characters are cut around the match: …)\n"
            )
        );
        // The list keeps both locations of one line, each line as read (untrimmed when whole).
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].text, "    x = f(1)   ");
        assert_eq!(items[2].text, cut);
        assert_eq!(items[2].line_chars, Some(609));
    }

    #[test]
    fn reads_every_location_shape_and_hover_shape() {
        let loc = json!({"uri": "file:///a.py", "range": {"start": {"line": 1, "character": 0}}});
        let link = json!({"targetUri": "file:///b.py", "targetRange": {}, "targetSelectionRange": {"start": {"line": 2, "character": 4}}});
        assert_eq!(locations(&loc).len(), 1);
        assert_eq!(locations(&json!([loc, link])).len(), 2);
        assert_eq!(locations(&Value::Null).len(), 0);
        assert_eq!(
            hover_markdown(&json!({"contents": {"kind": "markdown", "value": "**x**"}})),
            "**x**"
        );
        assert_eq!(
            hover_markdown(
                &json!({"contents": [{"language": "python", "value": "def f()"}, "doc"]})
            ),
            "```python\ndef f()\n```\n\ndoc"
        );
        let nested = json!([{"name": "A", "kind": 5, "range": {}, "selectionRange": {"start": {"line": 0}},
            "children": [{"name": "m", "kind": 6, "range": {}, "selectionRange": {"start": {"line": 1}}}]}]);
        let syms = document_symbols(&nested);
        assert_eq!(
            (syms[1].name.as_str(), syms[1].depth, syms[1].kind),
            ("m", 1, "method")
        );
        // A function's parameters and locals (pyright lists them) are not the outline; a
        // class's attributes and a function defined in a function are.
        let at = |l: u64| json!({"start": {"line": l}});
        let python = json!([
            {"name": "CONST", "kind": 14, "range": {}, "selectionRange": at(0)},
            {"name": "C", "kind": 5, "range": {}, "selectionRange": at(1), "children": [
                {"name": "attr", "kind": 13, "range": {}, "selectionRange": at(2)},
                {"name": "m", "kind": 6, "range": {}, "selectionRange": at(3), "children": [
                    {"name": "self", "kind": 13, "range": {}, "selectionRange": at(3)}]}]},
            {"name": "f", "kind": 12, "range": {}, "selectionRange": at(5), "children": [
                {"name": "x", "kind": 13, "range": {}, "selectionRange": at(5)},
                {"name": "LIMIT", "kind": 14, "range": {}, "selectionRange": at(6)},
                {"name": "inner", "kind": 12, "range": {}, "selectionRange": at(7), "children": [
                    {"name": "y", "kind": 13, "range": {}, "selectionRange": at(7)}]}]}]);
        let names: Vec<String> = document_symbols(&python)
            .iter()
            .map(|s| s.name.clone())
            .collect();
        assert_eq!(names, ["CONST", "C", "attr", "m", "f", "inner"]);
    }

    #[test]
    fn a_diagnostic_carries_its_severity_as_lsp_numbers_it() {
        let severities: Vec<LspSeverity> = (0..=5u8)
            .map(|n| {
                Diag {
                    path: PathBuf::from("/w/a.rs"),
                    line: 1,
                    column: 1,
                    severity: n,
                    code: String::new(),
                    message: "m".into(),
                    source: String::new(),
                    at: String::new(),
                }
                .lsp_severity()
            })
            .collect();
        use LspSeverity::*;
        assert_eq!(severities, [Error, Error, Warning, Info, Hint, Error]);
    }
}
