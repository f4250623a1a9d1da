//! Handlers of the language-server tools: `lsp`, `lsp_rename`, `lsp_edit`, `synced_write`. The work is in
//! `toolvisor-lsp`; this module parses arguments and names the caller (workdir, run, and the
//! file tools' scope every path of these tools goes through).

use serde_json::Value as Json;
use toolvisor_files::Files;
use toolvisor_lsp::CallCtx as LspCtx;
use toolvisor_lsp::LanguageServers;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::tools::{LspArgs, LspEditArgs, LspRenameArgs, SyncedWriteArgs};

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
/// its build scripts", naming every root it would trust.
pub(crate) fn trust_summary(cx: &LspTools<'_>, ctx: &CallCtx, args: &Json) -> String {
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
    let file = args.get("file").and_then(Json::as_str);
    let roots: Vec<String> = match cx.lsp.trust_targets(&lsp_ctx, file) {
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
pub(crate) fn edit_summary(cx: &LspTools<'_>, ctx: &CallCtx, args: &Json) -> String {
    let field = |k: &str| args.get(k).and_then(Json::as_str).unwrap_or("");
    let op = field("op");
    let line: String = if op == "apply_code_action" {
        let index = args.get("index").and_then(Json::as_u64);
        match (index, cx.lsp.actions_of(&ctx.run())) {
            (Some(i), Some((file, titles))) => match titles.get(i as usize) {
                Some(title) => format!("lsp_edit: apply code action [{i}] \"{title}\" to {file}"),
                None => format!(
                    "lsp_edit: apply code action [{i}] (not in this run's last code_actions answer)"
                ),
            },
            _ => format!("lsp_edit: apply code action {args}"),
        }
    } else {
        let first = field("text").lines().next().unwrap_or("");
        format!(
            "lsp_edit {op} {}{}{}",
            field("file"),
            match field("symbol_path") {
                "" => String::new(),
                p => format!(" `{p}`"),
            },
            if first.is_empty() {
                String::new()
            } else {
                format!(": {first}")
            }
        )
    };
    line.chars().take(300).collect()
}

pub async fn run(
    cx: &LspTools<'_>,
    ctx: &CallCtx,
    tool: &str,
    args: Json,
) -> Result<Json, ToolError> {
    let lsp_ctx = lsp_ctx(cx.files, ctx, tool)?;
    match tool {
        "lsp" => {
            let args: LspArgs = super::parse("lsp", args)?;
            cx.lsp.lsp(&lsp_ctx, args).await
        }
        "lsp_rename" => {
            let args: LspRenameArgs = super::parse("lsp_rename", args)?;
            cx.lsp.rename(&lsp_ctx, args).await
        }
        "lsp_edit" => {
            let args: LspEditArgs = super::parse("lsp_edit", args)?;
            cx.lsp.lsp_edit(&lsp_ctx, args).await
        }
        "synced_write" => {
            let args: SyncedWriteArgs = super::parse("synced_write", args)?;
            cx.lsp.synced_write(&lsp_ctx, &args.path).await
        }
        other => Err(super::no_worker(other)),
    }
}

/// The language-server tools' declarations.
pub(crate) fn declare() -> Vec<crate::registry::ToolSpec> {
    use toolvisor_protocol::tools::{LspArgs, LspEditArgs, LspOp, LspRenameArgs, SyncedWriteArgs};
    use toolvisor_protocol::wire::Tier;

    use crate::registry::{Approval, ToolSpec};

    // Attached: the language-server supervisor is part of every daemon; whether a server can
    // run for a given checkout is `lsp status`'s business, not the surface's.
    vec![
        ToolSpec::new::<LspArgs>(
            "lsp",
            Tier::Read,
            "language_servers",
            "Language-server queries: diagnostics, definition, type_definition, implementation, references, hover, symbols, code_actions, call_hierarchy, check_edit (the diagnostics a proposed edit would bring; nothing written), status, reload; trust (asks the user to let servers and checkers run this project's code for the run). Positions are a 1-based line plus a symbol substring.",
        )
        .approval(Approval::Ops(&[LspOp::Trust]))
        .op_tier(&[LspOp::Trust], Tier::Write),
        ToolSpec::new::<LspRenameArgs>(
            "lsp_rename",
            Tier::Write,
            "language_servers",
            "Rename a symbol project-wide through the language server; all files or none.",
        )
        .approval(Approval::Always),
        // Its own write-tier tool, not write ops of `lsp`: a read-tier surface is then not
        // even shown a tool that writes, and every op of it asks for approval.
        ToolSpec::new::<LspEditArgs>(
            "lsp_edit",
            Tier::Write,
            "language_servers",
            "Edit through the language server, all files or none: apply_code_action (by index from this run's last lsp code_actions), replace_symbol_body / insert_before_symbol / insert_after_symbol (addressed by a symbol path from the outline, e.g. Class/method), format.",
        )
        .approval(Approval::Always),
        ToolSpec::new::<SyncedWriteArgs>(
            "synced_write",
            Tier::Read,
            "language_servers",
            "Tell the language servers a file was written by the harness; returns diagnostics new for this run.",
        ),
    ]
}
