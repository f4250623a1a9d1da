//! The position ops of `lsp` — definition, type_definition, implementation, references,
//! hover, code_actions — as one question to the server ([`Servers::navigate`]) and one
//! answer per kind: hover's markdown, code actions, or locations. What varies per op (the LSP
//! request and the capability it needs, whether the answer is index-wide, how long a list it
//! shows) is [`Position`]'s, matched on the op enum, never on its name.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    LspCodeActions, LspHover, LspLocations, LspResult, LspServed, LspServer,
};
use toolvisor_protocol::tools::{LspArgs, LspOp};

use crate::actions::memory::Memory;
use crate::answers::{self, Sources};
use crate::call::{CallCtx, Opened};
use crate::coverage::mark_partial;
use crate::ops::{CODE_ACTIONS_MAX, Page, REFERENCES_MAX};
use crate::position;
use crate::servers::Servers;
use crate::uri;

/// What a position op asks and how its answer reads.
pub(crate) trait Position {
    /// The LSP request and the server capability it needs.
    fn request(self) -> (&'static str, &'static str);
    /// Whether the answer covers the whole project (so it waits for the index and may miss
    /// what the index lacks), rather than one file.
    fn index_wide(self) -> bool;
    /// The locations shown at most per page (`offset` pages on), or `None` for all.
    fn page_max(self) -> Option<usize>;
}

impl Position for LspOp {
    fn request(self) -> (&'static str, &'static str) {
        match self {
            LspOp::Definition => ("textDocument/definition", "definitionProvider"),
            LspOp::TypeDefinition => ("textDocument/typeDefinition", "typeDefinitionProvider"),
            LspOp::Implementation => ("textDocument/implementation", "implementationProvider"),
            LspOp::References => ("textDocument/references", "referencesProvider"),
            LspOp::Hover => ("textDocument/hover", "hoverProvider"),
            _ => ("textDocument/codeAction", "codeActionProvider"),
        }
    }

    fn index_wide(self) -> bool {
        matches!(self, LspOp::References | LspOp::Implementation)
    }

    fn page_max(self) -> Option<usize> {
        (self == LspOp::References).then_some(REFERENCES_MAX)
    }
}

/// A position op's question and the server's answer, for the renderings.
struct Asked<'a> {
    opened: Opened,
    result: Value,
    /// The server facts the answer carries (`server_of`, with the request's milliseconds).
    server: LspServer,
    /// "`symbol` at file:line", for the texts.
    here: String,
    shown: String,
    line: usize,
    src: String,
    byte: usize,
    symbol: &'a str,
    /// What an index-wide answer may miss (the index, roots it could not ask).
    gap: Option<String>,
    merged: Option<crate::roots::Merged>,
}

impl Servers {
    /// A position op: the symbol located on its line, the server asked (an index-wide
    /// question waits for the index and is asked of enclosing roots too), the answer rendered
    /// as the op reads.
    /// Code actions listed are remembered for the run in `actions`.
    pub(crate) async fn navigate(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
        actions: &Memory,
    ) -> Result<LspResult, ToolError> {
        let op = args.op;
        let crate::at::At {
            mut opened,
            shown,
            line,
            src,
            byte,
            symbol,
        } = self
            .open_at(
                ctx,
                args,
                "navigation needs `file`, `line` (1-based) and `symbol` (a substring naming the symbol on that line, copied from it)",
            )
            .await?;
        let enc = opened.conn.encoding;
        let pos = json!({"line": line - 1, "character": enc.column(&src, byte)});
        let (method, cap) = op.request();
        if !opened.conn.supports(cap) {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!(
                    "{} ({}) does not support {op}",
                    opened.conn.name, opened.shared.id
                ),
                "use another op, or grep",
            ));
        }
        // An index-wide answer from a server still indexing looks complete while partial, so
        // it waits for readiness first. File-local answers are asked at once; an empty one
        // from a server that is not ready and settled waits and is asked again.
        if op.index_wide() {
            self.ready_for(&opened.shared, &opened.uri).await?;
        }
        let mut params = json!({"textDocument": {"uri": opened.uri}, "position": pos});
        match op {
            LspOp::References => params["context"] = json!({"includeDeclaration": true}),
            LspOp::CodeActions => {
                let end =
                    json!({"line": line - 1, "character": enc.column(&src, byte + symbol.len())});
                params = self.code_action_params(&mut opened, line, pos, end).await?;
            }
            _ => {}
        }
        let (mut result, request_ms) = if op.index_wide() {
            let asked = Instant::now();
            let result = self.request(&mut opened, method, params.clone()).await?;
            (result, asked.elapsed().as_secs_f64() * 1000.0)
        } else {
            self.ask_settled(&mut opened, method, params.clone(), |_| false)
                .await?
        };
        let mut server = self.server_of(&opened);
        // The server's own share of the call (request sent → answer parsed), for the
        // added-latency figure in docs/BENCHMARKS.md.
        server.request_ms = Some(request_ms);
        let (merged, gap) = match op.index_wide() {
            true => {
                let at = crate::roots::At {
                    line: line - 1,
                    src: &src,
                    byte,
                };
                // An index-wide question from a root nested in others of its language is
                // asked of the enclosing roots' servers too, and their answers merged.
                let merged = self.ask_enclosing(ctx, &opened, method, &params, at).await;
                crate::roots::merge_into(&mut result, &merged.answers);
                // The name the server searched: the word at the position, whatever the query
                // looked like (`"is_list_like ="` and `"is_list_like"` are one question).
                let word = position::word_at(&src, byte, symbol.len());
                let mut gap = self
                    .index_gap(
                        &ctx.workdir,
                        &opened.shared,
                        &opened.path,
                        Some(word),
                        merged.covered,
                        op == LspOp::References,
                    )
                    .await;
                for note in &merged.failed {
                    gap = Some(gap.map_or(note.clone(), |g| format!("{g}; {note}")));
                }
                (Some(merged), gap)
            }
            false => (None, None),
        };
        let asked = Asked {
            here: format!("`{symbol}` at {shown}:{line}"),
            opened,
            result,
            server,
            shown,
            line,
            src,
            byte,
            symbol: &symbol,
            gap,
            merged,
        };
        match op {
            LspOp::Hover => Ok(LspResult::Hover(hover(asked))),
            LspOp::CodeActions => Ok(LspResult::CodeActions(code_actions(ctx, asked, actions))),
            _ => Ok(LspResult::Locations(
                self.locations(ctx, args, asked).await?,
            )),
        }
    }

    /// A code action request's parameters: the range of the symbol and the diagnostics of
    /// this version on or next to the line (the server matches its fixes to them; parsers
    /// report a missing token at the next line: clangd puts "expected ';'" there).
    async fn code_action_params(
        &self,
        opened: &mut Opened,
        line: usize,
        start: Value,
        end: Value,
    ) -> Result<Value, ToolError> {
        let l = (line - 1) as u64;
        let diags: Vec<Value> = self
            .diagnostic_items(opened)
            .await?
            .into_iter()
            .filter(|d| {
                let s = d.pointer("/range/start/line").and_then(Value::as_u64);
                let e = d.pointer("/range/end/line").and_then(Value::as_u64);
                matches!((s, e), (Some(s), Some(e)) if s <= l + 1 && l <= e + 1)
            })
            .collect();
        Ok(
            json!({"textDocument": {"uri": opened.uri}, "range": {"start": start, "end": end},
            "context": {"diagnostics": diags}}),
        )
    }

    /// Locations (definition, type_definition, implementation, references), paged where the
    /// op pages, with what the answer may miss: the index's gap, the uses the server cannot
    /// see (references), a name imported through a stub that lacks it (pyright). (A symbol
    /// inside a longer name never gets here: `position::locate_name` refuses it.)
    async fn locations(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
        a: Asked<'_>,
    ) -> Result<LspLocations, ToolError> {
        let op = args.op;
        let base = &ctx.workdir;
        let enc = a.opened.conn.encoding;
        let pairs = answers::locations(&a.result);
        let open_text = |p: &Path| a.opened.shared.doc(&uri::from_path(p)).map(|d| d.text);
        let readable = |p: &Path| ctx.may_read(p);
        let read = |p: &Path| ctx.read_text(p).ok();
        let locs = {
            let mut sources = Sources::new(&open_text, &readable, &read);
            answers::resolve_locs(&pairs, enc, &mut sources)
        };
        let total = locs.len();
        let page = match op.page_max() {
            Some(max) => Page::of(args.offset, total, max),
            None => Page::whole(total),
        };
        let (mut text, items) = answers::loc_lines(&locs[page.from..page.to], base);
        let word = position::word_at(&a.src, a.byte, a.symbol.len());
        if total == 0 {
            text = format!(
                "no {} found for {}\n",
                op.to_string().replace('_', " "),
                a.here
            );
        } else if let Some(note) = page.note(total, "references") {
            text.push_str(&format!("({note})\n"));
        }
        // Uses the server cannot see (inside macros, compiled-out code, behind stubs): named.
        let gap = match op {
            LspOp::References => {
                let seen = locs
                    .iter()
                    .map(|l| (l.path.clone(), l.line as u32))
                    .collect();
                let missed = "read them (or grep) before relying on this list";
                let hidden = self
                    .hidden_gap(ctx, &a.opened, word, seen, missed, false)
                    .await;
                // A list that leaves out the very place asked about is the server's list of
                // some other thing, or of nothing: it could not tell what the name there is.
                let asked = locs
                    .iter()
                    .any(|l| l.path == a.opened.path && l.line == a.line);
                let unresolved = (!asked).then(|| {
                    format!(
                        "the server's references leave out the place asked about ({}): it could not resolve `{word}` there (an import it cannot follow, a module that is gone, a name it does not know), so its uses elsewhere are not listed; check the import with `lsp diagnostics`, or grep for `{word}`",
                        a.here
                    )
                });
                crate::hidden_uses::join(crate::hidden_uses::join(a.gap, unresolved), hidden)
            }
            _ => a.gap,
        };
        let (mut roots, mut merged) = (None, None);
        if let Some(m) = a.merged.filter(|m| !m.roots.is_empty()) {
            let shown = crate::roots::say_merged(&mut text, &a.opened.shared.root, &m, base);
            (roots, merged) = (Some(shown), Some(true));
        }
        // pyright links a name imported from a module with a stub through the stub; one the
        // stub lacks is linked to nothing, and "no definition" is not so.
        let defines = matches!(
            op,
            LspOp::Definition | LspOp::TypeDefinition | LspOp::Implementation
        );
        let stub = if total == 0
            && defines
            && a.opened.shared.flavor.pyright
            && let Some((at, module)) =
                crate::hidden_uses::python::imported_at(&a.opened.text, word)
        {
            Some(format!(
                "`{word}` is imported here from `{module}` ({}:{at}), and pyright linked that import to nothing: a stub of `{module}` that does not declare it hides the module's own definition; grep for `def {word}` or `class {word}` in that module",
                a.shown
            ))
        } else {
            None
        };
        // What an index-wide answer may miss and the stub's gap, said once together.
        let gap = crate::hidden_uses::join(gap.filter(|_| op.index_wide()), stub);
        let mut partial_reason = None;
        mark_partial(&mut text, total == 0, &mut partial_reason, gap);
        let page = page.of_total(total);
        let served = LspServed::of(a.server, partial_reason.is_some(), page.truncated);
        Ok(LspLocations {
            text,
            locations: items,
            page,
            served,
            partial_reason,
            roots,
            merged,
        })
    }
}

/// Hover: the server's markdown, or that it has none.
fn hover(a: Asked<'_>) -> LspHover {
    let md = match a.result.is_null() {
        true => String::new(),
        false => answers::hover_markdown(&a.result),
    };
    let text = match md.is_empty() {
        true => format!("no hover information for {}\n", a.here),
        false => md.clone() + "\n",
    };
    let served = LspServed::of(a.server, false, false);
    LspHover {
        text,
        markdown: md,
        served,
    }
}

/// Code actions, numbered and remembered for the run in `memory` (`lsp_edit apply_code_action`).
fn code_actions(ctx: &CallCtx, a: Asked<'_>, memory: &Memory) -> LspCodeActions {
    let raw = a.result.as_array().cloned().unwrap_or_default();
    let (ordered, text, actions) =
        crate::actions::render(raw, &a.opened.uri, a.line as u64, CODE_ACTIONS_MAX, &a.here);
    memory.remember(
        &ctx.run,
        crate::actions::memory::Listed {
            server: a.opened.shared.id.clone(),
            path: a.opened.path.clone(),
            version: a.opened.version,
            actions: ordered,
        },
    );
    let served = LspServed::of(a.server, false, false);
    LspCodeActions {
        text,
        actions,
        served,
    }
}
