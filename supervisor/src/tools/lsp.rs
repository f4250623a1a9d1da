//! Handlers of the language-server tools: `lsp`, `lsp_rename`, `synced_write`. The work is in
//! `toolvisor-lsp`; this module parses arguments and names the caller (workdir, run, and the
//! file tools' scope every path of these tools goes through).

use std::sync::Arc;

use serde_json::Value as Json;
use toolvisor_lsp::CallCtx as LspCtx;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::tools::{LspArgs, LspRenameArgs, SyncedWriteArgs};

use crate::daemon::Daemon;
use crate::registry::ToolSpec;
use crate::session::CallCtx;

/// The run whose diagnostics ledger a call folds into (the conversation when the client
/// named no run).
pub(crate) fn run_of(ctx: &CallCtx) -> String {
    let run = &ctx.session.hello.run_id;
    if run.is_empty() {
        format!("conversation:{}", ctx.conversation)
    } else {
        run.clone()
    }
}

/// The workdir's real path: servers report canonical paths, and answers show paths relative
/// to it.
pub(crate) fn real_workdir(ctx: &CallCtx) -> std::path::PathBuf {
    std::fs::canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone())
}

/// The caller as the lsp worker sees it, with the file tools' scope for `ctx`'s workdir.
fn lsp_ctx(daemon: &Daemon, ctx: &CallCtx, tool: &str) -> Result<LspCtx, ToolError> {
    let scope = daemon
        .files
        .scope(&ctx.workdir)
        .map_err(|e| e.to_tool_error(tool))?;
    Ok(LspCtx {
        workdir: scope.root().to_path_buf(),
        run: run_of(ctx),
        scope,
        journal: daemon.files.journal.clone(),
    })
}

/// The approval line of `lsp trust`: "trust /path? language servers and checkers will run
/// its build scripts", naming every root it would trust.
pub(crate) fn trust_summary(daemon: &Daemon, ctx: &CallCtx, args: &Json) -> String {
    let lsp_ctx = match lsp_ctx(daemon, ctx, "lsp") {
        Ok(c) => c,
        Err(e) => {
            return format!(
                "trust a project root for run {}? ({})",
                run_of(ctx),
                e.message
            );
        }
    };
    let file = args.get("file").and_then(Json::as_str);
    let roots: Vec<String> = match daemon.lsp.trust_targets(&lsp_ctx, file) {
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

pub async fn run(
    daemon: &Arc<Daemon>,
    ctx: &CallCtx,
    spec: &ToolSpec,
    args: Json,
) -> Result<Json, ToolError> {
    let lsp_ctx = lsp_ctx(daemon, ctx, spec.name)?;
    match spec.name {
        "lsp" => {
            let args: LspArgs = super::parse("lsp", args)?;
            daemon.lsp.lsp(&lsp_ctx, args).await
        }
        "lsp_rename" => {
            let args: LspRenameArgs = super::parse("lsp_rename", args)?;
            daemon.lsp.rename(&lsp_ctx, args).await
        }
        "synced_write" => {
            let args: SyncedWriteArgs = super::parse("synced_write", args)?;
            daemon.lsp.synced_write(&lsp_ctx, &args.path).await
        }
        other => Err(super::no_worker(other)),
    }
}

/// The language-server tools' declarations.
pub(crate) fn declare() -> Vec<crate::registry::ToolSpec> {
    use toolvisor_protocol::tools::{LspArgs, LspOp, LspRenameArgs, SyncedWriteArgs};
    use toolvisor_protocol::wire::Tier;

    use crate::registry::{Approval, ToolSpec};

    // Attached: the language-server supervisor is part of every daemon; whether a server can
    // run for a given checkout is `lsp status`'s business, not the surface's.
    vec![
        ToolSpec::new::<LspArgs>(
            "lsp",
            Tier::Read,
            "language_servers",
            "Language-server queries: diagnostics, definition, type_definition, implementation, references, hover, symbols, code_actions, status, reload; trust (asks the user to let servers and checkers run this project's code for the run). Positions are a 1-based line plus a symbol substring.",
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
        ToolSpec::new::<SyncedWriteArgs>(
            "synced_write",
            Tier::Read,
            "language_servers",
            "Tell the language servers a file was written by the harness; returns diagnostics new for this run.",
        ),
    ]
}
