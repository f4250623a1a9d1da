//! Handlers of the language-server tools: `lsp`, `lsp_rename`, `lsp_edit`, `synced_write`. The work is in
//! `toolvisor-lsp`; this module parses arguments and names the caller (workdir, run, and the
//! file tools' scope every path of these tools goes through).

use toolvisor_files::Files;
use toolvisor_lsp::CallCtx as LspCtx;
use toolvisor_lsp::LanguageServers;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::tools::{LspArgs, LspEditArgs, LspEditOp, LspRenameArgs, SyncedWriteArgs};

use super::{CallCtx, Services};

/// The language-server tools' context: the servers, and the file tools' state whose scope
/// every path of these tools goes through.
pub(crate) struct LspTools<'a> {
    pub lsp: &'a LanguageServers,
    pub files: &'a Files,
}

impl<'a> LspTools<'a> {
    pub fn of(services: &'a Services) -> Self {
        LspTools {
            lsp: &services.lsp,
            files: &services.files,
        }
    }
}

/// The caller as the lsp worker sees it, with the file tools' scope for `ctx`'s workdir.
fn lsp_ctx(files: &Files, ctx: &CallCtx, tool: &str) -> Result<LspCtx, ToolError> {
    let scope = files
        .scope(&ctx.workdir)
        .map_err(|e| e.to_tool_error(tool))?;
    Ok(LspCtx {
        workdir: scope.root().to_path_buf(),
        run: ctx.run(),
        scope,
        journal: files.journal.clone(),
    })
}

/// The approval line of `lsp trust`: "trust /path? language servers and checkers will run
/// its build scripts", naming every root it would trust. (Only `trust` asks for approval.)
fn lsp_summary(s: &Services, ctx: &CallCtx, a: &LspArgs) -> String {
    let cx = LspTools::of(s);
    let lsp_ctx = match lsp_ctx(cx.files, ctx, "lsp") {
        Ok(c) => c,
        Err(e) => {
            return format!(
                "trust a project root for run {}? ({})",
                ctx.run(),
                e.message
            );
        }
    };
    let roots: Vec<String> = match cx.lsp.trust_targets(&lsp_ctx, a.file.as_deref()) {
        Ok(targets) => targets
            .into_iter()
            .map(|(root, _)| root.display().to_string())
            .collect(),
        // The call itself answers the error; the prompt only must not name a wrong root.
        Err(e) => {
            return format!(
                "trust a project root for run {}? ({})",
                lsp_ctx.run, e.message
            );
        }
    };
    let what = if roots.is_empty() {
        "no project root found from here".to_string()
    } else {
        roots.join(", ")
    };
    format!(
        "trust {what} for run {}? language servers and checkers will run its build scripts, proc macros and project-local tools",
        lsp_ctx.run
    )
}

/// The approval line of `lsp_edit`: for `apply_code_action` the action the index stands for
/// in this run's last `code_actions` answer (title and file), else the op, file, symbol path
/// and the first line of the new text.
fn edit_summary(s: &Services, ctx: &CallCtx, a: &LspEditArgs) -> String {
    let cx = LspTools::of(s);
    if a.op == LspEditOp::ApplyCodeAction {
        return match (a.index, cx.lsp.actions_of(&ctx.run())) {
            (Some(i), Some((file, titles))) => match titles.get(i as usize) {
                Some(title) => format!("lsp_edit: apply code action [{i}] \"{title}\" to {file}"),
                None => format!(
                    "lsp_edit: apply code action [{i}] (not in this run's last code_actions answer)"
                ),
            },
            (i, _) => format!("lsp_edit: apply code action {i:?}"),
        };
    }
    let op = serde_json::to_value(a.op)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let first = a
        .text
        .as_deref()
        .and_then(|t| t.lines().next())
        .unwrap_or("");
    format!(
        "lsp_edit {op} {}{}{}",
        a.file.as_deref().unwrap_or(""),
        a.symbol_path
            .as_deref()
            .map(|p| format!(" `{p}`"))
            .unwrap_or_default(),
        if first.is_empty() {
            String::new()
        } else {
            format!(": {first}")
        }
    )
}

pub(crate) async fn lsp(
    cx: &LspTools<'_>,
    ctx: &CallCtx,
    a: LspArgs,
) -> Result<toolvisor_protocol::results::LspResult, ToolError> {
    let lsp_ctx = lsp_ctx(cx.files, ctx, "lsp")?;
    cx.lsp.lsp(&lsp_ctx, a).await
}

pub(crate) async fn rename(
    cx: &LspTools<'_>,
    ctx: &CallCtx,
    a: LspRenameArgs,
) -> Result<toolvisor_protocol::results::LspRenameResult, ToolError> {
    let lsp_ctx = lsp_ctx(cx.files, ctx, "lsp_rename")?;
    cx.lsp.rename(&lsp_ctx, a).await
}

pub(crate) async fn edit(
    cx: &LspTools<'_>,
    ctx: &CallCtx,
    a: LspEditArgs,
) -> Result<toolvisor_protocol::results::LspEditResult, ToolError> {
    let lsp_ctx = lsp_ctx(cx.files, ctx, "lsp_edit")?;
    cx.lsp.lsp_edit(&lsp_ctx, a).await
}

pub(crate) async fn synced_write(
    cx: &LspTools<'_>,
    ctx: &CallCtx,
    a: SyncedWriteArgs,
) -> Result<toolvisor_protocol::results::SyncedWriteResult, ToolError> {
    let lsp_ctx = lsp_ctx(cx.files, ctx, "synced_write")?;
    cx.lsp.synced_write(&lsp_ctx, &a.path).await
}

/// A rename's preview writes nothing: it needs no approval.
fn preview(a: &LspRenameArgs) -> bool {
    a.dry_run == Some(true)
}

/// What the user is asked to approve for a rename: the symbol, the new name, and the
/// previewed edit's size when this run previewed it.
fn rename_summary(s: &Services, ctx: &CallCtx, a: &LspRenameArgs) -> String {
    let mut text = format!(
        "rename `{}` ({}:{}) to `{}`",
        a.symbol, a.file, a.line, a.new_name
    );
    if let Some((edits, files)) = s.lsp.previewed(&ctx.run(), a) {
        text.push_str(&format!(": {edits} edits in {files} files, as previewed"));
    }
    text
}

/// The language-server tools' declarations.
pub(crate) fn declare() -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::tools::LspOp;
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    // Attached: the language-server supervisor is part of every daemon; whether a server can
    // run for a given checkout is `lsp status`'s business, not the surface's.
    vec![
        ToolSpec::new(
            "lsp",
            Tier::Read,
            "language_servers",
            "Language-server queries at a 1-based line and a symbol on it; diagnostics of \"*\": the project; check_edit: an edit's diagnostics.",
            |s, ctx, a| Box::pin(async move { lsp(&LspTools::of(s), ctx, a).await }),
        )
        .approval(Approval::ops(&[LspOp::Trust]))
        .op_tier(&[LspOp::Trust], Tier::Write)
        .summary(lsp_summary),
        ToolSpec::new(
            "lsp_rename",
            Tier::Write,
            "language_servers",
            "Rename a symbol project-wide through the language server, all files or none; dry_run previews.",
            |s, ctx, a| Box::pin(async move { rename(&LspTools::of(s), ctx, a).await }),
        )
        .approval(Approval::unless(preview, "`dry_run` is true"))
        .summary(rename_summary),
        // Its own write-tier tool, not write ops of `lsp`: a read-tier surface is then not
        // even shown a tool that writes, and every op of it asks for approval.
        ToolSpec::new(
            "lsp_edit",
            Tier::Write,
            "language_servers",
            "Edit through the language server, all files or none: a code action, a symbol's body, lines around it, format.",
            |s, ctx, a| Box::pin(async move { edit(&LspTools::of(s), ctx, a).await }),
        )
        .approval(Approval::Always)
        .summary(edit_summary),
        ToolSpec::new(
            "synced_write",
            Tier::Read,
            "language_servers",
            "Tell the language servers the harness wrote a file; returns new diagnostics.",
            |s, ctx, a| Box::pin(async move { synced_write(&LspTools::of(s), ctx, a).await }),
        ),
    ]
}
