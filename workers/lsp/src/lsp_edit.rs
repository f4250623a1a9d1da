//! `lsp_edit`, the write-tier tool of edits a language server computes or addresses: the op
//! dispatch, `format`, and the one path every op's edit takes — the all-or-nothing workspace
//! edit of `lsp_rename` ([`crate::edit::apply_off_thread`]: scope checked for every file,
//! versions and disk text checked, journaled writes) with the diagnostics new for the run
//! folded in.

use std::path::PathBuf;

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspEditResult, LspFormattingOptions};
use toolvisor_protocol::tools::{LspEditArgs, LspEditOp};

use crate::answers::show_path;
use crate::call::{CallCtx, Opened};
use crate::diagnostics::Diagnostics;
use crate::edit::Edits;
use crate::edit::apply_off_thread;
use crate::ops::require;
use crate::servers::Servers;

pub(crate) fn need<'a>(
    v: &'a Option<String>,
    op: LspEditOp,
    field: &str,
) -> Result<&'a str, ToolError> {
    v.as_deref().ok_or_else(|| {
        ToolError::new(
            ErrorKind::InvalidArgs,
            format!("lsp_edit {op}: missing required argument `{field}`"),
            match op {
                LspEditOp::ApplyCodeAction => "apply_code_action needs `index` (from `lsp code_actions`)",
                LspEditOp::Format => "format needs `file`",
                _ => "symbol edits need `file`, `symbol_path` (e.g. \"Greeter/greet\", from `lsp symbols`) and `text`",
            },
        )
    })
}

impl Edits {
    /// `lsp_edit {op, ...}`.
    pub async fn lsp_edit(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        args: LspEditArgs,
    ) -> Result<LspEditResult, ToolError> {
        match args.op {
            LspEditOp::ApplyCodeAction => {
                self.apply_code_action(servers, diagnostics, ctx, &args)
                    .await
            }
            LspEditOp::ReplaceSymbolBody
            | LspEditOp::InsertBeforeSymbol
            | LspEditOp::InsertAfterSymbol => {
                self.symbol_edit(servers, diagnostics, ctx, &args).await
            }
            LspEditOp::Format => self.format(servers, diagnostics, ctx, &args).await,
        }
    }

    /// Write a server's `WorkspaceEdit` all or nothing (as `lsp_rename` does) and answer with
    /// the files, the edit count and the diagnostics new for the run. `what` leads the text.
    pub(crate) async fn write_edit(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        opened: &Opened,
        edit: Value,
        what: String,
    ) -> Result<LspEditResult, ToolError> {
        let enc = opened.conn.encoding;
        // The diagnostics the touched files have now are the run's baseline where it has
        // none, so the edit reports only errors it introduced (as `lsp_rename` does).
        if let Ok(touched) = crate::edit::touched_files(&edit) {
            diagnostics.before_write(servers, &ctx.run, &touched).await;
        }
        let sync = opened.shared.sync_lock.lock().await;
        let changes = apply_off_thread(ctx, &opened.shared, edit, enc, "lsp_edit").await?;
        drop(sync);
        let total: usize = changes.iter().map(|c| c.edits).sum();
        let files = crate::edit::edited_files(&changes, &ctx.workdir);
        let mut text = crate::edit::edits_line(&what, &changes, &ctx.workdir);
        let paths: Vec<PathBuf> = changes.iter().map(|c| c.path.clone()).collect();
        let diags = diagnostics
            .after_write(servers, &ctx.run, &ctx.workdir, &paths)
            .await;
        text.push_str(&diags.text);
        Ok(LspEditResult {
            text,
            files,
            edits: total as u64,
            diagnostics: Some(diags),
            server: servers.server_of(opened),
            command_not_run: None,
            options: None,
        })
    }

    /// `lsp_edit format {file}`: `textDocument/formatting`, written like any edit.
    async fn format(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        args: &LspEditArgs,
    ) -> Result<LspEditResult, ToolError> {
        let file = need(&args.file, args.op, "file")?;
        let path = ctx.resolve("lsp_edit", file, Access::Write)?;
        let mut opened = servers.open(&path, &ctx.run).await?;
        require(&opened, "documentFormattingProvider", "formatting")?;
        // The file's `.editorconfig`, else its own indentation: a 2-space file stays 2-space.
        let (options, indent_from) = crate::indent::formatting_options(&path, &opened.text);
        let params = json!({"textDocument": {"uri": opened.uri}, "options": options});
        let edits = servers
            .request(&mut opened, "textDocument/formatting", params)
            .await?;
        let shown = show_path(&path, &ctx.workdir);
        let edits = edits.as_array().cloned().unwrap_or_default();
        let n = &options["tabSize"];
        let indent = match options["insertSpaces"] == true {
            true => format!("indentation: {n} spaces (from {indent_from})"),
            false => format!("indentation: tabs of width {n} (from {indent_from})"),
        };
        let sent = serde_json::from_value::<LspFormattingOptions>(options.clone()).ok();
        if edits.is_empty() {
            return Ok(LspEditResult {
                text: format!("{shown} is already formatted: nothing written\n{indent}\n"),
                files: Vec::new(),
                edits: 0,
                diagnostics: None,
                server: servers.server_of(&opened),
                command_not_run: None,
                options: sent,
            });
        }
        let edit = json!({"changes": {opened.uri.clone(): edits}});
        let mut answer = self
            .write_edit(
                servers,
                diagnostics,
                ctx,
                &opened,
                edit,
                format!("formatted {shown}"),
            )
            .await?;
        answer.text.push_str(&format!("{indent}\n"));
        answer.options = sent;
        Ok(answer)
    }
}
