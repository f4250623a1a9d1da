//! The generic rendering: a result's JSON as a model reads it, by rules over its keys. The
//! rendering of a result that is not its tool's result type (a result replaced by its
//! preview, a tool this build does not know); each result type's own rendering
//! ([`super::Render`]) reads as these rules read its JSON, and shares their helpers.
//!
//! Rules, one renderer for every tool:
//! - A header line of the result's scalar facts (`total: 12 · complete: true`), nulls left
//!   out, and `false` left out for the flags whose absence says it (`truncated`, `timed_out`,
//!   `outside`, `eof` is kept); `readiness` only when the server was not ready (with how far
//!   along it is, when it gives a count) for an answer not complete; the language server
//!   block only as `server: NAME starting` on a result without `readiness`; a reason
//!   (`partial_reason`) the `text` already says is not said again.
//! - The result's own rendering when it has one (`text`: lsp's `path:line: text` lines, a
//!   write's diagnostics), else its main body (`content` of `read`, `output` of `grep`,
//!   `stdout` of `bash`) verbatim, no JSON escaping; the lists that `text` already renders
//!   (locations, diagnostics, symbols…) and a hover's `markdown` (the same as its `text`) are
//!   not repeated, nor is a part whose own `text` it holds (an edit's `diagnostics`);
//!   `images` (eval's figures: where each went) and `masked` (what secrets were masked) always are.
//! - Other multi-line strings as blocks under their key; lists of plain values one per line
//!   (or on one line when short); a list of objects one object per line: a location
//!   (`path` + `line` + `text`) as `path:line: text`, anything else as `key=value` pairs;
//!   nested objects indented.
//!
//! Dropped: duplicates, nulls, and what no model acts on: an absolute path beside its relative
//! one (`abs_path`), process ids and timings (`pid`, `wall_ms`…), a search's cache and parse
//! counts, the HTML twin of a plain-text rendering (`text/html` beside `text/plain`), a
//! `…_truncated: false` and a zero count of things left out (`lines_not_shown: 0`).
//! Completeness, truncation, refs and next offsets (the next step) all stay in the header.

use serde_json::{Map, Value as Json};

/// Keys whose `false` says nothing (absent means false); so does any `…_truncated`.
const QUIET_FALSE: &[&str] = &["truncated", "timed_out", "outside", "projected", "cached"];

/// Whether `false` at `k` says nothing.
pub(super) fn quiet_false(k: &str) -> bool {
    QUIET_FALSE.contains(&k) || k.ends_with("_truncated")
}

/// Counts of things left out or skipped whose `0` says nothing.
pub(super) const QUIET_ZERO: &[&str] = &[
    "lines_not_shown",
    "skipped_total",
    "skipped_binary",
    "skipped_protected",
    "cleared",
    "truncated",
];

/// Keys no model acts on, dropped wherever they are.
pub(super) const UNUSED: &[&str] = &[
    "pid",
    "wall_ms",
    "elapsed_ms",
    "duration_ms",
    "files_cached",
    "files_parsed",
];

/// Whether `k` of `map` is left out of the rendering: a key of [`UNUSED`], an absolute path
/// beside its relative one, the HTML twin of a plain-text rendering.
fn unused(map: &Map<String, Json>, k: &str) -> bool {
    UNUSED.contains(&k)
        || (k == "abs_path" && map.contains_key("path"))
        || (k == "text/html" && map.contains_key("text/plain"))
}

/// Keys of a result's main body, in order of preference, when it has no `text` (`stdout`: a
/// `bash` result not of its type, from another build, reads as one of its type).
const BODY: &[&str] = &["content", "output", "stdout"];

/// The model's text of `tool`'s result `value`.
pub fn json(tool: &str, value: &Json) -> String {
    let Json::Object(map) = value else {
        return scalar(value);
    };
    let mut out = String::new();
    let has_text = map.get("text").is_some_and(Json::is_string);
    let body_key = if has_text {
        Some("text")
    } else {
        BODY.iter()
            .copied()
            .find(|k| map.get(*k).is_some_and(Json::is_string))
    };
    // The header: every scalar fact.
    let mut header = Vec::new();
    for (k, v) in map {
        if Some(k.as_str()) == body_key || unused(map, k) {
            continue;
        }
        match v {
            Json::Null => {}
            Json::Bool(false) if quiet_false(k) => {}
            Json::Number(n) if n.as_u64() == Some(0) && QUIET_ZERO.contains(&k.as_str()) => {}
            // As a served answer's readiness reads from its type (`render/lsp.rs`).
            Json::String(s) if k == "readiness" => {
                let indexing = map
                    .get("server")
                    .and_then(|o| o.get("indexing"))
                    .and_then(Json::as_str);
                let complete = map.get("complete") == Some(&Json::Bool(true));
                if let Some(reads) = readiness(s, indexing, complete) {
                    header.push(format!("readiness: {reads}"));
                }
            }
            Json::String(s) if said_in_text(map, k, s) => {}
            Json::String(s) if is_block(s) => {}
            Json::String(s) if s.is_empty() => {}
            Json::String(_) | Json::Bool(_) | Json::Number(_) => {
                header.push(format!("{k}: {}", scalar(v)));
            }
            // Which server answered changes nothing a model does; whether it was ready is
            // `readiness`. Only a server not yet ready, on a result without `readiness`, shows.
            Json::Object(o)
                if k == "server"
                    && !map.contains_key("readiness")
                    && o.get("state").and_then(Json::as_str) == Some("starting") =>
            {
                header.push(server(o))
            }
            _ => {}
        }
    }
    if !header.is_empty() {
        out.push_str(&format!("{tool}: {}\n", header.join(" · ")));
    }
    if let Some(k) = body_key
        && let Some(Json::String(body)) = map.get(k)
    {
        push_block(&mut out, body);
    }
    // What is left: long strings, lists and objects.
    for (k, v) in map {
        if Some(k.as_str()) == body_key || k == "server" || unused(map, k) {
            continue;
        }
        if has_text && (k == "markdown" || (v.is_array() && k != "images" && k != "masked")) {
            continue;
        }
        match v {
            Json::String(s) if said_in_text(map, k, s) => {}
            Json::String(s) if is_block(s) => {
                out.push_str(&format!("{k}:\n"));
                push_block(&mut out, s);
            }
            Json::Array(items) if !items.is_empty() => list(&mut out, k, items, ""),
            // A part whose own rendering the result's `text` already holds (an edit's
            // `diagnostics`, with its dependents) is not written twice.
            Json::Object(o) if rendered_in(map, o) => {}
            Json::Object(o) if !o.is_empty() => {
                out.push_str(&format!("{k}:\n"));
                object(&mut out, o, "  ");
            }
            _ => {}
        }
    }
    if out.ends_with('\n') {
        out.pop();
    }
    out
}

/// How an answer's `readiness` reads (after `readiness: `), when it says anything: a ready
/// server is what `complete: true` rests on anyway, and an answer complete says nothing
/// more; a server still at work says what it is doing, once, with how far along when it
/// gives a count (`indexing (23 files to analyze)`; a phase without one, `scanning the
/// workspace…`, adds nothing to `indexing`). A typed lsp answer (`render/lsp.rs`) reads so too.
pub(super) fn readiness(readiness: &str, indexing: Option<&str>, complete: bool) -> Option<String> {
    if readiness == "ready" || complete {
        return None;
    }
    match indexing.filter(|d| d.chars().any(|c| c.is_ascii_digit())) {
        Some(doing) => Some(format!("{readiness} ({doing})")),
        None => Some(readiness.to_string()),
    }
}

/// Whether a string is written as a block under its key (more than one line, or longer than
/// 160 characters) rather than as a fact of the header.
pub(super) fn is_block(s: &str) -> bool {
    s.contains('\n') || s.chars().count() > 160
}

/// Whether `s` at `k` is a reason (`partial_reason`, `source_reason`: why an answer may
/// cover less) that the result's `text` already says.
fn said_in_text(map: &Map<String, Json>, k: &str, s: &str) -> bool {
    k.ends_with("_reason")
        && map
            .get("text")
            .and_then(Json::as_str)
            .is_some_and(|text| says_reason(text, s))
}

/// Whether `text` says `reason` as its notes do, at the end of a parenthesis (`(partial:
/// {reason})`, `(source: …; {reason})`): not a chance match in a quoted source line.
pub(super) fn says_reason(text: &str, reason: &str) -> bool {
    let reason = reason.trim();
    !reason.is_empty() && text.contains(&format!("{reason})"))
}

/// Whether `part` has a `text` of its own that the result's `text` (in `map`) contains.
fn rendered_in(map: &Map<String, Json>, part: &Map<String, Json>) -> bool {
    let whole = map.get("text").and_then(Json::as_str).unwrap_or_default();
    part.get("text")
        .and_then(Json::as_str)
        .map(str::trim)
        .is_some_and(|t| !t.is_empty() && whole.contains(t))
}

pub(super) fn push_block(out: &mut String, text: &str) {
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

pub(super) fn scalar(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        Json::Null => "null".into(),
        other => other.to_string(),
    }
}

/// `server: pyright-langserver ready` from a language server's block (its root is the
/// absolute path the result's relative paths are already relative to, or above it).
fn server(o: &Map<String, Json>) -> String {
    let parts: Vec<String> = ["name", "state"]
        .iter()
        .filter_map(|k| o.get(*k).and_then(Json::as_str).map(str::to_string))
        .collect();
    format!("server: {}", parts.join(" "))
}

pub(super) fn list(out: &mut String, key: &str, items: &[Json], indent: &str) {
    let plain = items
        .iter()
        .all(|i| matches!(i, Json::String(_) | Json::Number(_) | Json::Bool(_)));
    if plain {
        let texts: Vec<String> = items.iter().map(scalar).collect();
        let one_line = texts.iter().map(|t| t.len() + 2).sum::<usize>() <= 100
            && texts.iter().all(|t| !t.contains('\n'));
        if one_line {
            out.push_str(&format!("{indent}{key}: {}\n", texts.join(", ")));
        } else {
            out.push_str(&format!("{indent}{key} ({}):\n", items.len()));
            for t in texts {
                out.push_str(&format!("{indent}  {t}\n"));
            }
        }
        return;
    }
    out.push_str(&format!("{indent}{key} ({}):\n", items.len()));
    for item in items {
        match item {
            Json::Object(o) => out.push_str(&format!("{indent}  {}\n", line(o))),
            other => out.push_str(&format!("{indent}  {}\n", scalar(other))),
        }
    }
}

/// One object on one line: a location as `path:line: text`, else `k=v` pairs (the name first).
fn line(o: &Map<String, Json>) -> String {
    let s = |k: &str| o.get(k).and_then(Json::as_str);
    if let (Some(path), Some(line), Some(text)) = (s("path"), o.get("line"), s("text")) {
        let mut rest: Vec<String> = Vec::new();
        for (k, v) in o {
            if matches!(
                k.as_str(),
                "path"
                    | "line"
                    | "text"
                    | "column"
                    | "end_line"
                    | "end_column"
                    | "abs_path"
                    | "location"
            ) {
                continue;
            }
            if let Some(p) = pair(k, v) {
                rest.push(p);
            }
        }
        let text = text.replace('\n', "⏎");
        let tail = if rest.is_empty() {
            String::new()
        } else {
            format!("  [{}]", rest.join(" "))
        };
        return format!("{path}:{}: {text}{tail}", scalar(line));
    }
    // A directory entry (`ls`): `name  3138` for a file, `name/` for a directory, the rest
    // (a link's target, a mode) as pairs after it.
    if let (Some(name), Some(kind)) = (s("name"), s("type")) {
        let mut parts = vec![match kind {
            "dir" if name.ends_with('/') => name.to_string(),
            "dir" => format!("{name}/"),
            "file" => match o.get("size") {
                Some(size) => format!("{name}  {}", scalar(size)),
                None => name.to_string(),
            },
            other => format!("{name} ({other})"),
        }];
        for (k, v) in o {
            if matches!(k.as_str(), "name" | "type" | "size") || unused(o, k) {
                continue;
            }
            if let Some(p) = pair(k, v) {
                parts.push(p);
            }
        }
        return parts.join(" ");
    }
    let mut parts = Vec::new();
    if let Some(name) = s("name") {
        parts.push(name.to_string());
    }
    for (k, v) in o {
        if (k == "name" && v.is_string()) || unused(o, k) {
            continue;
        }
        if let Some(p) = pair(k, v) {
            parts.push(p);
        }
    }
    parts.join(" ")
}

fn pair(k: &str, v: &Json) -> Option<String> {
    match v {
        Json::Null => None,
        Json::Bool(false) if quiet_false(k) => None,
        Json::String(s) if s.is_empty() => None,
        Json::String(s) => Some(format!("{k}={}", s.replace('\n', "⏎"))),
        Json::Array(a) if a.is_empty() => None,
        Json::Object(o) if o.is_empty() => None,
        Json::Array(a) if a.iter().all(|i| !i.is_object() && !i.is_array()) => Some(format!(
            "{k}=[{}]",
            a.iter().map(scalar).collect::<Vec<_>>().join(", ")
        )),
        Json::Object(o) if o.values().all(|i| !i.is_object() && !i.is_array()) => Some(format!(
            "{k}={{{}}}",
            o.iter()
                .filter(|(a, v)| !v.is_null() && !unused(o, a))
                .map(|(a, b)| format!("{a}={}", scalar(b).replace('\n', "⏎")))
                .collect::<Vec<_>>()
                .join(" ")
        )),
        Json::Array(_) | Json::Object(_) => Some(format!("{k}={v}")),
        other => Some(format!("{k}={other}")),
    }
}

pub(super) fn object(out: &mut String, o: &Map<String, Json>, indent: &str) {
    // An object with its own `text` (a write's `diagnostics`) reads as that text, its lists
    // and objects (the diagnostics, the dependents checked) being what the text renders.
    let text = o.get("text").and_then(Json::as_str);
    if let Some(text) = text {
        for l in text.lines() {
            out.push_str(&format!("{indent}{l}\n"));
        }
    }
    for (k, v) in o {
        if (text.is_some() && (k == "text" || v.is_array() || v.is_object())) || unused(o, k) {
            continue;
        }
        match v {
            Json::Null => {}
            Json::Bool(false) if quiet_false(k) => {}
            Json::String(s) if s.contains('\n') => {
                out.push_str(&format!("{indent}{k}:\n"));
                for l in s.lines() {
                    out.push_str(&format!("{indent}  {l}\n"));
                }
            }
            Json::Array(items) if items.is_empty() => {}
            Json::Array(items) => list(out, k, items, indent),
            Json::Object(inner) if inner.is_empty() => {}
            Json::Object(inner) => {
                out.push_str(&format!("{indent}{k}:\n"));
                object(out, inner, &format!("{indent}  "));
            }
            other => out.push_str(&format!("{indent}{k}: {}\n", scalar(other))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reason_is_said_once_but_not_hidden_by_a_chance_match() {
        let said = json!({"complete": false, "partial_reason": "x = f()",
            "text": "lib/a.py:3: x = f()\n(partial: x = f())\n"});
        assert_eq!(
            json("lsp", &said).matches("x = f()").count(),
            2,
            "the line and the note"
        );
        let quoted = json!({"complete": false, "partial_reason": "x = f()",
            "text": "lib/a.py:3: x = f()\n"});
        assert!(json("lsp", &quoted).contains("partial_reason: x = f()"));
    }

    #[test]
    fn a_location_list_with_its_own_text_is_not_repeated() {
        let v = json!({"complete": true, "total": 2, "truncated": false,
            "locations": [{"abs_path": "/r/a.py", "path": "a.py", "line": 3, "column": 5, "outside": false, "text": "x = f()"}],
            "server": {"name": "pyright-langserver", "state": "ready", "root": "/r", "pid": 7},
            "text": "a.py:3: x = f()\nb.py:9: f()\n"});
        assert_eq!(
            json("lsp", &v),
            "lsp: complete: true · total: 2\na.py:3: x = f()\nb.py:9: f()"
        );
    }

    #[test]
    fn a_server_at_work_is_said_once_and_a_ready_one_not_at_all() {
        let v = json!({"complete": false, "readiness": "indexing", "total": 0,
            "server": {"name": "pyright-langserver", "state": "indexing", "indexing": "23 files to analyze"},
            "text": "no references found\n"});
        assert_eq!(
            json("lsp", &v),
            "lsp: complete: false · readiness: indexing (23 files to analyze) · total: 0\nno references found"
        );
        // An edit's server, whatever its state, is not the model's business; one starting is.
        let phase = json!({"complete": false, "readiness": "indexing", "total": 1,
            "server": {"name": "pyright-langserver", "state": "indexing", "indexing": "scanning the workspace for source files"},
            "text": "a.py:3: def f():\n"});
        assert_eq!(
            json("lsp", &phase),
            "lsp: complete: false · readiness: indexing · total: 1\na.py:3: def f():"
        );
        let edit = json!({"edits": 1, "server": {"name": "pyright-langserver", "state": "indexing"}, "text": "done\n"});
        assert_eq!(json("lsp_edit", &edit), "lsp_edit: edits: 1\ndone");
        let starting = json!({"edits": 1, "server": {"name": "pyright-langserver", "state": "starting"}, "text": "done\n"});
        assert_eq!(
            json("lsp_edit", &starting),
            "lsp_edit: edits: 1 · server: pyright-langserver starting\ndone"
        );
    }

    #[test]
    fn an_edits_diagnostics_its_text_already_holds_are_not_written_twice() {
        // As lsp_edit answered it (pyright, a dependent checked).
        let diag = "pkg/m.py:6:12: error: Type \"str\" is not assignable [reportReturnType] (Pyright)\n(also checked the 1 file that import m)\n";
        let v = json!({"edits": 1, "files": [{"edits": 1, "path": "pkg/m.py"}],
            "diagnostics": {"dependents": {"checked": ["pkg/u.py"], "max": 20},
                "new": [{"line": 6, "path": "pkg/m.py", "message": "Type \"str\" is not assignable"}],
                "notes": [], "text": diag},
            "text": format!("replaced function `f` (pkg/m.py:1-2): 1 edit\n{diag}")});
        assert_eq!(
            json("lsp_edit", &v),
            format!(
                "lsp_edit: edits: 1\nreplaced function `f` (pkg/m.py:1-2): 1 edit\n{}",
                diag.trim_end()
            )
        );
        // Diagnostics the text does not hold are still written.
        let mut other = v.clone();
        other["text"] = json!("replaced function `f`\n");
        assert!(json("lsp_edit", &other).contains("diagnostics:\n"));
    }

    #[test]
    fn a_part_with_its_own_text_reads_as_that_text() {
        // As `edit` answered it: the dependents checked are the text's last line, not a list.
        let v = json!({"path": "m.py", "replacements": 1, "diff": "--- a/m.py\n+++ b/m.py\n",
            "diagnostics": {"dependents": {"checked": ["a.py", "b.py"], "max": 20}, "new": [],
                "notes": [], "text": "no new diagnostics\n(also checked the 2 importing files)\n"}});
        assert_eq!(
            json("edit", &v),
            "edit: path: m.py · replacements: 1\ndiagnostics:\n  no new diagnostics\n  (also checked the 2 importing files)\ndiff:\n--- a/m.py\n+++ b/m.py"
        );
    }

    #[test]
    fn bash_shows_its_streams_and_the_facts_that_matter() {
        let v = json!({"exit_code": null, "signal": 9, "stderr": "boom\n", "stderr_bytes": 5,
            "stdout": "out\n", "stdout_bytes": 4, "timed_out": true, "truncated": false, "wall_ms": 1000});
        assert_eq!(
            json("bash", &v),
            "bash: signal: 9 · stderr_bytes: 5 · stdout_bytes: 4 · timed_out: true\nout\nstderr:\nboom"
        );
    }

    #[test]
    fn objects_in_lists_are_one_line_each_and_nested_ones_indented() {
        let v = json!({"entries": [{"name": "a.py", "size": 3, "type": "file"}, {"name": "d/", "type": "dir"}],
            "path": ".", "total": 2, "truncated": true,
            "diagnostics": {"new": [], "notes": ["checked 1 file"]}});
        assert_eq!(
            json("ls", &v),
            "ls: path: . · total: 2 · truncated: true\ndiagnostics:\n  notes: checked 1 file\nentries (2):\n  a.py  3\n  d/"
        );
    }

    #[test]
    fn pids_timings_absolute_twins_and_html_twins_are_left_out() {
        let v = json!({"text": "   n\n0  0\n<Figure>\n", "status": "ok", "cell": 2, "wall_ms": 41,
            "outputs": [{"type": "result", "at": 0, "data": {"text/plain": "   n\n0  0", "text/html": "<table></table>"}}],
            "images": [{"mime": "image/png", "bytes": 70, "width": 1, "height": 1, "shown": "as image content"}],
            "kernel": {"pid": 4242, "version": "3.11.7", "cells": 2, "fresh": false}});
        let text = json("eval", &v);
        assert_eq!(
            text,
            "eval: cell: 2 · status: ok\n   n\n0  0\n<Figure>\nimages (1):\n  bytes=70 height=1 mime=image/png shown=as image content width=1\nkernel:\n  cells: 2\n  fresh: false\n  version: 3.11.7"
        );
        let v = json!({"entries": [{"abs_path": "/r/a.py", "path": "a.py", "kind": "file"}], "abs_path": "/r", "path": "."});
        assert!(!json("ls", &v).contains("/r"), "{}", json("ls", &v));
    }
}
