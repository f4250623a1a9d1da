//! `lsp symbols`: the document outline (`textDocument/documentSymbol`) and workspace symbols
//! (`workspace/symbol`), and the server picked for the workdir when no file is named.

use std::path::{Path, PathBuf};

use serde_json::json;
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    LspDocumentSymbols, LspOutlineSymbol, LspServed, LspWorkspaceSymbol, LspWorkspaceSymbols,
};

use crate::answers::{self, Sources};
use crate::call::{CallCtx, Opened};
use crate::coverage::mark_partial;
use crate::ops::{DOCUMENT_SYMBOLS_MAX, Page, WORKSPACE_SYMBOLS_MAX, is_empty, require};
use crate::servers::Servers;
use crate::uri;

impl Servers {
    /// The outline of `file`, `depth` levels deep (0: top level only, the default), each
    /// symbol with members below that depth saying how many it has.
    pub(crate) async fn document_symbols(
        &self,
        ctx: &CallCtx,
        file: &str,
        offset: Option<u64>,
        depth: Option<u64>,
    ) -> Result<LspDocumentSymbols, ToolError> {
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let mut opened = self.open(&path, &ctx.run).await?;
        let params = json!({"textDocument": {"uri": opened.uri}});
        let mut result = self
            .request(&mut opened, "textDocument/documentSymbol", params.clone())
            .await?;
        if is_empty(&result) && !opened.shared.settled() {
            self.ready(&opened.shared).await?;
            result = self
                .request(&mut opened, "textDocument/documentSymbol", params)
                .await?;
        }
        let all = answers::document_symbols(&result);
        let shown = outline(&all, depth.unwrap_or(0) as usize);
        let total = shown.len();
        let page = Page::of(offset, total, DOCUMENT_SYMBOLS_MAX);
        let mut text = String::new();
        let mut items = Vec::new();
        for (s, members) in &shown[page.from..page.to] {
            let item = LspOutlineSymbol {
                name: s.name.clone(),
                kind: s.kind.to_string(),
                line: s.line as u64,
                depth: s.depth as u64,
                members: (*members > 0).then_some(*members as u64),
            };
            text.push_str(&item.line());
            text.push('\n');
            items.push(item);
        }
        if total == 0 {
            text = format!(
                "no symbols in {}\n",
                answers::show_path(&path, &ctx.workdir)
            );
        } else if let Some(note) = page.note(total, "symbols") {
            text.push_str(&format!("({note})\n"));
        }
        if shown.iter().any(|(_, m)| *m > 0) {
            let deeper = depth.unwrap_or(0) + 1;
            text.push_str(&format!("(`depth: {deeper}` lists the members)\n"));
        }
        // The server reads an outline from the file alone: it is whole (unless paged) while
        // the server still indexes the project.
        let server = self.server_of(&opened);
        let page = page.of_total(total);
        let mut served = LspServed::of(server, false, page.truncated);
        served.complete = !page.truncated;
        Ok(LspDocumentSymbols {
            text,
            symbols: items,
            page,
            served,
        })
    }

    pub(crate) async fn workspace_symbols(
        &self,
        ctx: &CallCtx,
        query: &str,
        file: Option<&str>,
        offset: Option<u64>,
    ) -> Result<LspWorkspaceSymbols, ToolError> {
        // The server to ask: the one covering `file`, else the servers running for the workdir,
        // else the first language whose root and binary are found from the workdir.
        let mut opened = match file {
            Some(f) => {
                self.open(&ctx.resolve("lsp", f, Access::Read)?, &ctx.run)
                    .await?
            }
            None => self.open_any(ctx).await?,
        };
        require(
            &opened,
            "workspaceSymbolProvider",
            "workspace symbols (`symbols` with `query`)",
        )?;
        self.ready_for(&opened.shared, &opened.uri).await?;
        let result = self
            .request(&mut opened, "workspace/symbol", json!({"query": query}))
            .await?;
        let gap = self
            .index_gap(
                &ctx.workdir,
                &opened.shared,
                &opened.path,
                None,
                false,
                false,
            )
            .await;
        let syms = answers::workspace_symbols(&result);
        let total = syms.len();
        let page = Page::of(offset, total, WORKSPACE_SYMBOLS_MAX);
        let mut text = String::new();
        let mut items = Vec::new();
        let open_text = |p: &Path| opened.shared.doc(&uri::from_path(p)).map(|d| d.text);
        let readable = |p: &Path| ctx.may_read(p);
        let read = |p: &Path| ctx.read_text(p).ok();
        let mut sources = Sources::new(&open_text, &readable, &read);
        for s in &syms[page.from..page.to] {
            let shown = s
                .path
                .as_ref()
                .map(|p| answers::show_path(p, &ctx.workdir))
                .unwrap_or_default();
            let outside = s.path.as_ref().is_some_and(|p| !sources.readable(p));
            let src = match outside {
                true => String::new(),
                false => s
                    .path
                    .as_ref()
                    .and_then(|p| sources.line(p, s.line.saturating_sub(1)))
                    .unwrap_or_default(),
            };
            let item = LspWorkspaceSymbol {
                name: s.name.clone(),
                kind: s.kind.to_string(),
                path: shown,
                line: s.line as u64,
                container: s.container.clone(),
                outside,
            };
            text.push_str(&item.line(&answers::cut_line(&src, 1).0));
            text.push('\n');
            items.push(item);
        }
        if total == 0 {
            text = format!("no workspace symbols match {query:?}\n");
        } else if let Some(note) = page.note(total, "symbols") {
            text.push_str(&format!("({note}, or refine the query)\n"));
        }
        // A server that cuts its answer at a fixed count says nothing when it does: an
        // answer of that length may not be all there is.
        let cut = opened
            .shared
            .flavor
            .symbols_cap
            .filter(|cap| total >= *cap)
            .map(|cap| {
                format!(
                    "{} answers at most {cap} workspace symbols and gave {total}: there may be more matching {query:?}; a longer query narrows the search",
                    opened.shared.id
                )
            });
        let mut partial_reason = None;
        let gap = crate::hidden_uses::join(gap, cut);
        mark_partial(&mut text, total == 0, &mut partial_reason, gap);
        let server = self.server_of(&opened);
        let page = page.of_total(total);
        let served = LspServed::of(server, partial_reason.is_some(), page.truncated);
        Ok(LspWorkspaceSymbols {
            text,
            symbols: items,
            page,
            served,
            partial_reason,
        })
    }

    /// A server for the workdir when no file is named: one already running for it, else the
    /// first language that would start there (a source file of it is opened).
    async fn open_any(&self, ctx: &CallCtx) -> Result<Opened, ToolError> {
        let running = self.all().into_iter().find(|s| {
            s.conn().is_some()
                && (ctx.workdir.starts_with(&s.root) || s.root.starts_with(&ctx.workdir))
        });
        let mut reasons = Vec::new();
        let candidates: Vec<String> = match &running {
            Some(s) => vec![s.language.clone()],
            None => self.languages().keys().cloned().collect(),
        };
        for language in candidates {
            let spec = &self.languages()[&language];
            match find_source_off_thread(ctx, &spec.extensions).await {
                Some(file) => match self.plan(&file, &ctx.run) {
                    Ok(_) => return self.open(&file, &ctx.run).await,
                    Err(e) => reasons.push(e.to_string()),
                },
                None => reasons.push(format!(
                    "{language}: no source file under {}",
                    ctx.workdir.display()
                )),
            }
        }
        Err(ToolError::new(
            ErrorKind::NotAvailable,
            format!(
                "no language server can search this workspace: {}",
                reasons.join("; ")
            ),
            "pass `file` to pick the server; `lsp status` says why servers do not start",
        ))
    }
}

/// [`find_source`] on the blocking pool: its walk reads up to 5,000 directory entries.
async fn find_source_off_thread(ctx: &CallCtx, extensions: &[String]) -> Option<PathBuf> {
    let (ctx, extensions) = (ctx.clone(), extensions.to_vec());
    tokio::task::spawn_blocking(move || find_source(&ctx, &extensions))
        .await
        .ok()
        .flatten()
}

/// A source file with one of `extensions` under the workdir (shallow first, bounded):
/// regular files only, symbolic links neither followed nor opened, so the file is in scope.
fn find_source(ctx: &CallCtx, extensions: &[String]) -> Option<PathBuf> {
    let mut queue = std::collections::VecDeque::from([(ctx.workdir.clone(), 0)]);
    let mut seen = 0;
    while let Some((d, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            seen += 1;
            if seen > 5000 {
                return None;
            }
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(kind) = e.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth < 4 && !name.starts_with('.') && name != "node_modules" && name != "target"
                {
                    queue.push_back((p, depth + 1));
                }
            } else if kind.is_file()
                && p.extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| extensions.iter().any(|e| e == x))
                && ctx.may_read(&p)
            {
                return Some(p);
            }
        }
    }
    None
}

/// The symbols of an outline `depth` levels deep, each with the number of its direct members
/// left out (those one level deeper, when that level is not shown).
fn outline(all: &[answers::Sym], depth: usize) -> Vec<(&answers::Sym, usize)> {
    let mut shown: Vec<(&answers::Sym, usize)> = Vec::new();
    for s in all {
        if s.depth <= depth {
            shown.push((s, 0));
        } else if s.depth == depth + 1
            && let Some(last) = shown.last_mut()
        {
            last.1 += 1;
        }
    }
    shown
}
