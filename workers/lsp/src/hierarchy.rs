//! `lsp call_hierarchy`: who calls a symbol and what it calls, addressed by line + symbol
//! like the other position ops (`textDocument/prepareCallHierarchy`, then
//! `callHierarchy/incomingCalls` and `callHierarchy/outgoingCalls`), each list bounded.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    LspCallHierarchy, LspIncomingCall, LspOutgoingCall, LspServed, LspUnlistedCall,
};
use toolvisor_protocol::tools::LspArgs;

use crate::coverage::mark_partial;

use crate::answers::{self, Sources};
use crate::call::{CallCtx, Opened};
use crate::ops::{Page, require};
use crate::position;
use crate::servers::Servers;
use crate::uri;

/// Calls listed per direction; the total is always counted.
pub const CALLS_MAX: usize = 50;

fn missing(field: &str) -> ToolError {
    ToolError::new(
        ErrorKind::InvalidArgs,
        format!("lsp call_hierarchy: missing required argument `{field}`"),
        "call_hierarchy needs `file`, `line` (1-based) and `symbol` (a substring on that line naming the function)",
    )
}

/// One end of a call (or a type of a type hierarchy): where it is and the line there.
pub(crate) struct Site {
    pub path: String,
    pub line: u64,
    pub name: String,
    pub kind: &'static str,
    /// The source line, trimmed and cut around the name when long; empty when `outside`.
    pub text: String,
    pub outside: bool,
}

/// The site of a hierarchy item (`uri`, `name`, `kind`) at `range`; `None` for an item
/// without a file URI or a range.
pub(crate) fn site(
    item: &Value,
    range: &Value,
    ctx: &CallCtx,
    sources: &mut Sources<'_>,
) -> Option<(Site, std::path::PathBuf)> {
    let u = item.get("uri").and_then(Value::as_str)?;
    let p = uri::to_path(u)?;
    let line0 = range.pointer("/start/line").and_then(Value::as_u64)?;
    let outside = !sources.readable(&p);
    let text = sources.line(&p, line0 as usize).unwrap_or_default();
    Some((
        Site {
            path: answers::show_path(&p, &ctx.workdir),
            line: line0 + 1,
            name: item
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            kind: answers::symbol_kind(item.get("kind").and_then(Value::as_u64).unwrap_or(0)),
            text: {
                let column = range
                    .pointer("/start/character")
                    .and_then(Value::as_u64)
                    .unwrap_or(0) as usize
                    + 1;
                answers::cut_line(&text, column).0
            },
            outside,
        },
        p,
    ))
}

/// The incoming call sites of an `incomingCalls` answer, once each (by file and start
/// position), grouped by (file, line, caller) with the calls on that line; and the number of
/// distinct call sites.
fn incoming_sites(
    incoming: &Value,
    ctx: &CallCtx,
    sources: &mut Sources<'_>,
) -> (Vec<(Site, usize)>, usize) {
    let mut seen = std::collections::HashSet::new();
    let mut lines: Vec<(Site, usize)> = Vec::new();
    for call in incoming.as_array().into_iter().flatten() {
        let Some(from) = call.get("from") else {
            continue;
        };
        let ranges: Vec<Value> = match call.get("fromRanges").and_then(Value::as_array) {
            Some(r) if !r.is_empty() => r.clone(),
            _ => vec![from.get("selectionRange").cloned().unwrap_or(Value::Null)],
        };
        let uri = from.get("uri").and_then(Value::as_str).unwrap_or("");
        for r in ranges {
            let start = r.get("start").cloned().unwrap_or(Value::Null);
            if !seen.insert((uri.to_string(), start.to_string())) {
                continue;
            }
            let Some((s, _)) = site(from, &r, ctx, sources) else {
                continue;
            };
            match lines
                .iter_mut()
                .find(|(l, _)| l.path == s.path && l.line == s.line && l.name == s.name)
            {
                Some((_, n)) => *n += 1,
                None => lines.push((s, 1)),
            }
        }
    }
    lines.sort_by(|(a, _), (b, _)| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let total = lines.iter().map(|(_, n)| n).sum();
    (lines, total)
}

impl Servers {
    /// `lsp call_hierarchy {file, line, symbol, occurrence?}`.
    pub async fn call_hierarchy(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspCallHierarchy, ToolError> {
        let file = args.file.as_deref().ok_or_else(|| missing("file"))?;
        let line = args.line.ok_or_else(|| missing("line"))? as usize;
        let symbol = args
            .symbol
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| missing("symbol"))?;
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let mut opened = self.open(&path, &ctx.run).await?;
        let shown = answers::show_path(&path, &ctx.workdir);
        let (src, byte) = position::locate_name(
            &opened.text,
            &shown,
            line,
            symbol,
            args.occurrence.map(|o| o as usize),
        )?;
        require(&opened, "callHierarchyProvider", "call hierarchy")?;
        // Callers are index-wide: a list from a server still indexing looks complete.
        self.ready(&opened.shared).await?;
        let enc = opened.conn.encoding;
        let pos = json!({"line": line - 1, "character": enc.column(&src, byte)});
        let here = format!("`{symbol}` at {shown}:{line}");
        let params = json!({"textDocument": {"uri": opened.uri}, "position": pos});
        let asked = Instant::now();
        let items = self
            .request(
                &mut opened,
                "textDocument/prepareCallHierarchy",
                params.clone(),
            )
            .await?;
        let Some(item) = items.as_array().and_then(|a| a.first()).cloned() else {
            let e = ToolError::new(
                ErrorKind::InvalidArgs,
                format!("{here} is not a function or method the server can show calls of"),
                "point at the name of a function, method or constructor (its definition or a call)",
            );
            return Err(crate::hidden_uses::explain_switched_off(
                ctx,
                &opened.shared,
                &opened.path,
                e,
            )
            .await);
        };
        let incoming = self
            .request(
                &mut opened,
                "callHierarchy/incomingCalls",
                json!({"item": item}),
            )
            .await?;
        // A server may implement only one direction: the other is a note, not a failure.
        let outgoing = match self
            .request(
                &mut opened,
                "callHierarchy/outgoingCalls",
                json!({"item": item}),
            )
            .await
        {
            Ok(v) => Ok(v),
            Err(e) if e.kind == ErrorKind::NotAvailable => Err(e.message),
            Err(e) => return Err(e),
        };
        let request_ms = asked.elapsed().as_secs_f64() * 1000.0;
        let calls = Calls {
            item: &item,
            incoming: &incoming,
            outgoing,
            offset: args.offset,
        };
        let (mut answer, unlisted) = self.render_calls(ctx, &opened, calls, request_ms);
        // Callers are index-wide: what the server's index misses, and the uses it cannot
        // see (a module switched off, a macro, a nested project), make them partial.
        let word = position::word_at(&src, byte, symbol.len());
        let mut seen = call_sites(&item, &incoming);
        // clangd's item is the declaration asked from (a header's prototype): the definition
        // in a source file is no call either, even in a conditional branch the scan names.
        if opened.shared.flavor.clangd {
            seen.extend(self.definitions(&mut opened, &params).await);
        }
        let gap = self
            .use_gap(
                ctx,
                &opened,
                word,
                seen,
                "read them (or grep) before relying on the incoming calls",
                true,
            )
            .await;
        // Calls in its body the outgoing list leaves out make it partial too, named.
        let gap = match (gap, unlisted) {
            (Some(g), Some(u)) => Some(format!("{g}; outgoing: {u}")),
            (None, Some(u)) => Some(format!("outgoing: {u}")),
            (g, None) => g,
        };
        mark_partial(&mut answer.text, false, &mut answer.partial_reason, gap);
        let cut = answer.incoming_truncated || answer.outgoing_truncated;
        let partial = answer.partial_reason.is_some();
        let server = answer.served.server.clone();
        answer.served = LspServed::of(server, partial, cut);
        Ok(answer)
    }

    /// The (file, 1-based line) of every definition and declaration the server names at
    /// `params`' position; none when it answers neither.
    async fn definitions(
        &self,
        opened: &mut Opened,
        params: &Value,
    ) -> std::collections::HashSet<(PathBuf, u32)> {
        let mut lines = std::collections::HashSet::new();
        for method in ["textDocument/definition", "textDocument/declaration"] {
            let Ok(answer) = self.request(opened, method, params.clone()).await else {
                continue;
            };
            for (uri, range) in crate::answers::locations(&answer) {
                if let (Some(path), Some(line)) = (
                    uri::to_path(&uri),
                    range.pointer("/start/line").and_then(Value::as_u64),
                ) {
                    lines.insert((path, line as u32 + 1));
                }
            }
        }
        lines
    }

    fn render_calls(
        &self,
        ctx: &CallCtx,
        opened: &Opened,
        calls: Calls<'_>,
        request_ms: f64,
    ) -> (LspCallHierarchy, Option<String>) {
        let Calls {
            item,
            incoming,
            outgoing,
            offset,
        } = calls;
        let open_text = |p: &Path| opened.shared.doc(&uri::from_path(p)).map(|d| d.text);
        let readable = |p: &Path| ctx.may_read(p);
        let read = |p: &Path| ctx.read_text(p).ok();
        let mut sources = Sources::new(&open_text, &readable, &read);
        let name = item.get("name").and_then(Value::as_str).unwrap_or("");
        let mut text = String::new();
        // Incoming: each caller, at each of its call sites (its `fromRanges`), each site once
        // (pyright lists a method call twice: once for the call, once for the member access),
        // and one line per caller and source line, with how many calls it holds.
        let (callers, in_total) = incoming_sites(incoming, ctx, &mut sources);
        let in_page = Page::of(offset, callers.len(), CALLS_MAX);
        let in_cut = in_page.cut(callers.len());
        let (lines, in_items) = incoming_lines(name, &callers, in_total, in_page);
        text.push_str(&lines);
        // Outgoing: each callee, where it is defined, and how often this symbol calls it.
        let out = match outgoing {
            Err(why) => {
                text.push_str(&format!("outgoing calls: not offered ({why})\n"));
                Outgoing {
                    note: Some(why),
                    ..Outgoing::default()
                }
            }
            Ok(outgoing) => {
                let out = outgoing_calls(name, &outgoing, offset, ctx, &mut sources);
                text.push_str(&out.text);
                Outgoing {
                    unlisted: unlisted_of(item, &outgoing, opened, &mut sources),
                    ..out
                }
            }
        };
        let Outgoing {
            items: out_items,
            total: out_total,
            cut: out_cut,
            note: out_note,
            next: out_next,
            unlisted,
            ..
        } = out;
        let mut server = self.server_of(opened);
        server.request_ms = Some(request_ms);
        let (offset, next_offset) = match in_cut || out_cut {
            true => {
                let next = [in_page.next(callers.len()), out_next]
                    .into_iter()
                    .flatten()
                    .max();
                (Some(in_page.from as u64), next.map(|n| n as u64))
            }
            false => (None, None),
        };
        let listed = (!unlisted.is_empty()).then(|| {
            unlisted
                .iter()
                .take(crate::unlisted_calls::UNLISTED_SHOWN_MAX)
                .map(|u| LspUnlistedCall {
                    line: u.line as u64,
                    callee: u.callee.clone(),
                })
                .collect()
        });
        let unlisted_line =
            (!unlisted.is_empty()).then(|| crate::unlisted_calls::unlisted_line(&unlisted));
        // What it rests on is set by the caller, once it knows what the answer may miss.
        let answer = LspCallHierarchy {
            text,
            symbol: name.to_string(),
            incoming: in_items,
            incoming_total: in_total as u64,
            incoming_truncated: in_cut,
            outgoing: out_items,
            outgoing_total: out_total as u64,
            outgoing_truncated: out_cut,
            outgoing_note: out_note,
            outgoing_unlisted: listed,
            outgoing_unlisted_total: (!unlisted.is_empty()).then_some(unlisted.len() as u64),
            partial_reason: None,
            offset,
            next_offset,
            served: LspServed::of(server, false, true),
        };
        (answer, unlisted_line)
    }
}

/// The lines a call hierarchy's answer accounts for: the item's own (its declaration) and
/// each incoming call site, as (file, 1-based line).
fn call_sites(item: &Value, incoming: &Value) -> std::collections::HashSet<(PathBuf, u32)> {
    let line = |r: &Value| {
        r.pointer("/start/line")
            .and_then(Value::as_u64)
            .map(|l| l as u32 + 1)
    };
    let mut seen = std::collections::HashSet::new();
    if let Some(path) = item
        .get("uri")
        .and_then(Value::as_str)
        .and_then(uri::to_path)
    {
        for r in ["selectionRange", "range"] {
            if let Some(l) = item.get(r).and_then(line) {
                seen.insert((path.clone(), l));
            }
        }
    }
    for call in incoming.as_array().into_iter().flatten() {
        let Some(path) = call
            .pointer("/from/uri")
            .and_then(Value::as_str)
            .and_then(uri::to_path)
        else {
            continue;
        };
        for r in call
            .get("fromRanges")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(l) = line(r) {
                seen.insert((path.clone(), l));
            }
        }
    }
    seen
}

/// How many of `ranges` start at distinct positions.
fn distinct_starts(ranges: &[Value]) -> usize {
    let starts: std::collections::HashSet<String> = ranges
        .iter()
        .map(|r| r.get("start").map(Value::to_string).unwrap_or_default())
        .collect();
    starts.len()
}

/// The outgoing calls with one entry per function called from the same sites: pyright
/// answers each `@overload` declaration of a function as a callee of its own, with the same
/// call sites; the declaration that comes last in its file (the implementation) stands for
/// them.
fn one_per_overload_set(outgoing: &Value) -> Vec<&Value> {
    let calls: Vec<&Value> = outgoing.as_array().into_iter().flatten().collect();
    fn key(c: &Value) -> (&str, &str, String) {
        (
            c.pointer("/to/name").and_then(Value::as_str).unwrap_or(""),
            c.pointer("/to/uri").and_then(Value::as_str).unwrap_or(""),
            c.get("fromRanges")
                .map(Value::to_string)
                .unwrap_or_default(),
        )
    }
    let line = |c: &Value| {
        c.pointer("/to/selectionRange/start/line")
            .or_else(|| c.pointer("/to/range/start/line"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    calls
        .iter()
        .copied()
        .filter(|c| !calls.iter().any(|o| key(o) == key(c) && line(o) > line(c)))
        .collect()
}

/// The outgoing half of a call hierarchy's answer.
#[derive(Default)]
struct Outgoing {
    /// Its lines of the answer's text.
    text: String,
    items: Vec<LspOutgoingCall>,
    /// Callees in all.
    total: usize,
    cut: bool,
    /// Why outgoing calls are not offered.
    note: Option<String>,
    next: Option<usize>,
    unlisted: Vec<crate::unlisted_calls::Unlisted>,
}

/// The incoming part of the text (the callers of `name`, `total` call sites in all, the
/// page `page` of `callers`' lines) and its items.
fn incoming_lines(
    name: &str,
    callers: &[(Site, usize)],
    in_total: usize,
    in_page: Page,
) -> (String, Vec<LspIncomingCall>) {
    let mut out = String::new();
    out.push_str(&format!("incoming calls of {name} ({in_total}):\n"));
    if callers.is_empty() {
        out.push_str("  none found\n");
    }
    let mut in_items = Vec::new();
    for (s, calls) in &callers[in_page.from..in_page.to] {
        let item = LspIncomingCall {
            path: s.path.clone(),
            line: s.line,
            caller: s.name.clone(),
            calls: *calls as u64,
            kind: s.kind.to_string(),
            text: s.text.clone(),
            outside: s.outside,
        };
        out.push_str(&format!("  {}\n", item.line()));
        in_items.push(item);
    }
    if let Some(note) = in_page.note(callers.len(), "lines with calls") {
        out.push_str(&format!("  ({note})\n"));
    }
    (out, in_items)
}

/// Each callee of `outgoing` (one per overload set) of the function `name`, where it is
/// defined and how often it is called, sorted by place, the page from `offset`.
fn outgoing_calls(
    name: &str,
    outgoing: &Value,
    offset: Option<u64>,
    ctx: &CallCtx,
    sources: &mut Sources<'_>,
) -> Outgoing {
    let mut callees = Vec::new();
    for call in one_per_overload_set(outgoing) {
        let Some(to) = call.get("to") else {
            continue;
        };
        let r = to
            .get("selectionRange")
            .or_else(|| to.get("range"))
            .cloned()
            .unwrap_or(Value::Null);
        // Each call site once: tsserver gives a method call's span twice.
        let calls = call
            .get("fromRanges")
            .and_then(Value::as_array)
            .map_or(1, |r| distinct_starts(r).max(1));
        if let Some((s, _)) = site(to, &r, ctx, sources) {
            callees.push((s, calls));
        }
    }
    callees.sort_by(|(a, _), (b, _)| (&a.path, a.line).cmp(&(&b.path, b.line)));
    let total = callees.len();
    let page = Page::of(offset, total, CALLS_MAX);
    let mut out = Outgoing {
        total,
        cut: page.cut(total),
        next: page.next(total),
        ..Outgoing::default()
    };
    out.text
        .push_str(&format!("outgoing calls of {name} ({total}):\n"));
    if callees.is_empty() {
        out.text.push_str("  none found\n");
    }
    for (s, calls) in &callees[page.from..page.to] {
        let item = LspOutgoingCall {
            callee: s.name.clone(),
            kind: s.kind.to_string(),
            path: s.path.clone(),
            line: s.line,
            calls: *calls as u64,
            text: s.text.clone(),
            outside: s.outside,
        };
        out.text.push_str(&format!("  {}\n", item.line()));
        out.items.push(item);
    }
    if let Some(note) = page.note(total, "callees") {
        out.text.push_str(&format!("  ({note})\n"));
    }
    out
}

/// The calls in the body of `item` (the function asked about) that `outgoing` does not list
/// ([`crate::unlisted_calls`]); none where its file cannot be read or its language is not
/// one whose gaps are known.
fn unlisted_of(
    item: &Value,
    outgoing: &Value,
    opened: &Opened,
    sources: &mut Sources<'_>,
) -> Vec<crate::unlisted_calls::Unlisted> {
    let Some(path) = item
        .get("uri")
        .and_then(Value::as_str)
        .and_then(uri::to_path)
    else {
        return Vec::new();
    };
    let listed: Vec<Value> = outgoing
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("fromRanges").and_then(Value::as_array))
        .flatten()
        .cloned()
        .collect();
    let Some(text) = sources.text(&path) else {
        return Vec::new();
    };
    crate::unlisted_calls::unlisted_calls(&path, text, item, &listed, opened.conn.encoding)
        .unwrap_or_default()
}

/// What `render_calls` shows: the item, its incoming calls, its outgoing calls (or why a
/// server offers none), and the page asked for.
struct Calls<'a> {
    item: &'a Value,
    incoming: &'a Value,
    outgoing: Result<Value, String>,
    offset: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_site_given_twice_is_one_call() {
        // tsserver's outgoing calls give a method call's span twice (immer's `handleValue`:
        // `has` called once, listed at the same offset two times).
        let at = |l: u64, c: u64| json!({"start": {"line": l, "character": c}, "end": {"line": l, "character": c + 3}});
        assert_eq!(distinct_starts(&[at(4, 8), at(4, 8)]), 1);
        assert_eq!(distinct_starts(&[at(4, 8), at(4, 8), at(9, 2)]), 2);
        assert_eq!(distinct_starts(&[]), 0);
    }

    #[test]
    fn overload_declarations_called_from_the_same_sites_are_one_callee() {
        let call = |name: &str, line: u64, from: u64| {
            json!({"to": {"name": name, "uri": "file:///m.py",
                "selectionRange": {"start": {"line": line, "character": 4}}},
                "fromRanges": [{"start": {"line": from, "character": 4}}]})
        };
        // Two @overload declarations and the implementation of `f`, called once at line 20;
        // `g`, called at another site.
        let outgoing = json!([
            call("f", 3, 20),
            call("f", 6, 20),
            call("f", 9, 20),
            call("g", 12, 21)
        ]);
        let kept: Vec<(String, u64)> = one_per_overload_set(&outgoing)
            .into_iter()
            .map(|c| {
                (
                    c["to"]["name"].as_str().unwrap().to_string(),
                    c["to"]["selectionRange"]["start"]["line"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(kept, vec![("f".into(), 9), ("g".into(), 12)]);
    }
}
