//! Handlers of the language-server tools: `lsp`, `lsp_rename`, `synced_write`. The work is in
//! `toolvisor-lsp`; this module parses arguments and names the caller (workdir, run).

use std::sync::Arc;

use serde_json::Value as Json;
use toolvisor_lsp::CallCtx as LspCtx;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::tools::{LspArgs, LspRenameArgs, SyncedWriteArgs};

use crate::daemon::Daemon;
use crate::registry::ToolSpec;
use crate::session::CallCtx;

/// The caller as the lsp worker sees it: the ledger is per run (the conversation when the
/// client named no run).
pub(crate) fn lsp_ctx(ctx: &CallCtx) -> LspCtx {
    let run = &ctx.session.hello.run_id;
    LspCtx {
        // Servers report canonical paths; a canonical workdir keeps answers relative to it.
        workdir: std::fs::canonicalize(&ctx.workdir).unwrap_or_else(|_| ctx.workdir.clone()),
        run: if run.is_empty() {
            format!("conversation:{}", ctx.conversation)
        } else {
            run.clone()
        },
    }
}

/// The approval line of `lsp trust`: "trust /path? language servers and checkers will run
/// its build scripts", naming every root it would trust.
pub(crate) fn trust_summary(daemon: &Daemon, ctx: &CallCtx, args: &Json) -> String {
    let lsp_ctx = lsp_ctx(ctx);
    let file = args.get("file").and_then(Json::as_str);
    let roots: Vec<String> = daemon
        .lsp
        .trust_targets(&lsp_ctx, file)
        .into_iter()
        .map(|(root, _)| root.display().to_string())
        .collect();
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
    let lsp_ctx = lsp_ctx(ctx);
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
