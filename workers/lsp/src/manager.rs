//! The language-server manager ([`LanguageServers`]): one field per concern, each owning its
//! state — the servers and their documents ([`Servers`]: the table, the start rule, trust,
//! document sync, and the ops that ask the servers and keep nothing: navigation and the checks),
//! the diagnostics ([`Diagnostics`]: the run ledger, and the write diagnostics), the edits and
//! renames ([`Edits`]: each run's last code actions and rename preview). Its methods are the
//! entry points the daemon calls (`lsp`, `lsp_rename`, `lsp_edit`, `synced_write`, the write
//! diagnostics, `trust_targets`, `previewed`, `actions_of`), each handed to the concern that
//! owns it with the others it needs.

use std::path::{Path, PathBuf};

use ractor::ActorRef;
use toolvisor_files::paths::Access;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::restart::RestartPolicy;
use toolvisor_kit::status::TreeNotifier;
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::results::{
    LspChecking, LspEditResult, LspFileDiagnostics, LspRenameResult, LspResult, LspServed,
    SyncedWriteResult, WriteDiagnostics,
};
use toolvisor_protocol::tools::{LspArgs, LspEditArgs, LspOp, LspRenameArgs};

use crate::answers;
use crate::call::CallCtx;
use crate::config::LspConfig;
use crate::diagnostics::Diagnostics;
use crate::edit::Edits;
use crate::ops::{invalid, need};
use crate::servers::Servers;

/// The language-server manager: the servers and their roots ([`Servers`]), the diagnostics
/// ledger ([`Diagnostics`]) and the edits' memories ([`Edits`]).
pub struct LanguageServers {
    servers: Servers,
    /// The diagnostics ledger of each run: what a write newly brings.
    diagnostics: Diagnostics,
    /// Each run's last `code_actions` answer and `lsp_rename` preview.
    edits: Edits,
}

impl LanguageServers {
    pub fn new(
        supervisor: ActorRef<SupervisorMsg>,
        launcher: Launcher,
        config: LspConfig,
        notifier: TreeNotifier,
        policy: RestartPolicy,
        trusted_roots: &[PathBuf],
    ) -> Self {
        let diagnostics = Diagnostics::new(&config);
        LanguageServers {
            servers: Servers::new(
                supervisor,
                launcher,
                config,
                notifier,
                policy,
                trusted_roots,
            ),
            diagnostics,
            edits: Edits::default(),
        }
    }

    /// `lsp {op, ...}`: every answer from a server says what it rests on (`readiness`,
    /// `complete`: `LspServed::of`, set where each answer is built).
    pub async fn lsp(&self, ctx: &CallCtx, args: LspArgs) -> Result<LspResult, ToolError> {
        match args.op {
            LspOp::Status => {
                let from = match args.file.as_deref() {
                    Some(f) => ctx.resolve("lsp", f, Access::Read)?,
                    None => ctx.workdir.clone(),
                };
                Ok(LspResult::Status(
                    self.servers.status(&from, &ctx.run, &ctx.workdir).await,
                ))
            }
            LspOp::Reload => Ok(LspResult::Reload(
                self.servers.reload(ctx, args.file.as_deref()).await?,
            )),
            LspOp::Trust => Ok(LspResult::Trust(
                self.servers
                    .trust_roots_for_run(ctx, args.file.as_deref())?,
            )),
            LspOp::Diagnostics => {
                let file = need(&args.file, "diagnostics", "file")?;
                if file == "*" {
                    return Ok(LspResult::ProjectCheck(
                        self.servers.project_check(ctx).await?,
                    ));
                }
                let path = ctx.resolve("lsp", file, Access::Read)?;
                let mut opened = self.servers.open(&path, &ctx.run).await?;
                let diags = self.servers.file_diagnostics(&mut opened).await?;
                let base = &ctx.workdir;
                let items: Vec<_> = diags.iter().map(|d| d.to_result(base)).collect();
                let mut text: String = items.iter().map(|d| d.line() + "\n").collect();
                if diags.is_empty() {
                    text = format!("no diagnostics in {}\n", answers::show_path(&path, base));
                }
                let off = opened.shared.checking_off();
                if let Some(off) = &off {
                    text.push_str(&format!("({off})\n"));
                }
                let server = self.servers.server_of(&opened);
                let served = LspServed::of(server, false, false);
                Ok(LspResult::Diagnostics(LspFileDiagnostics {
                    text,
                    diagnostics: items,
                    checking: match off {
                        Some(_) => LspChecking::Off,
                        None => LspChecking::On,
                    },
                    checking_off: off,
                    served,
                }))
            }
            LspOp::Symbols => match (&args.query, &args.file) {
                (Some(q), _) => Ok(LspResult::WorkspaceSymbols(
                    self.servers
                        .workspace_symbols(ctx, q, args.file.as_deref(), args.offset)
                        .await?,
                )),
                (None, Some(f)) => Ok(LspResult::DocumentSymbols(
                    self.servers
                        .document_symbols(ctx, f, args.offset, args.depth)
                        .await?,
                )),
                (None, None) => Err(invalid(
                    "lsp symbols: give `query` (workspace search) or `file` (document outline)"
                        .into(),
                    "e.g. {\"op\":\"symbols\",\"query\":\"Parser\"} or {\"op\":\"symbols\",\"file\":\"src/app.py\"}",
                )),
            },
            LspOp::Definition
            | LspOp::TypeDefinition
            | LspOp::Implementation
            | LspOp::References
            | LspOp::Hover
            | LspOp::CodeActions => {
                self.servers
                    .navigate(ctx, &args, self.edits.actions())
                    .await
            }
            LspOp::CallHierarchy => Ok(LspResult::CallHierarchy(
                self.servers.call_hierarchy(ctx, &args).await?,
            )),
            LspOp::TypeHierarchy => Ok(LspResult::TypeHierarchy(
                self.servers.type_hierarchy(ctx, &args).await?,
            )),
            LspOp::SignatureHelp => Ok(LspResult::SignatureHelp(
                self.servers.signature_help(ctx, &args).await?,
            )),
            LspOp::Completions => Ok(LspResult::Completions(
                self.servers.completions(ctx, &args).await?,
            )),
            LspOp::InlayHints => Ok(LspResult::InlayHints(
                self.servers.inlay_hints(ctx, &args).await?,
            )),
            LspOp::WorkspaceDiagnostics => self.servers.workspace_diagnostics(ctx, &args).await,
            LspOp::CheckEdit => Ok(LspResult::CheckEdit(
                self.servers.check_edit(ctx, &args).await?,
            )),
        }
    }

    /// The roots `lsp trust` would trust from `file` (or the workdir), each with its languages
    /// ([`Servers::trust_targets`]).
    pub fn trust_targets(
        &self,
        ctx: &CallCtx,
        file: Option<&str>,
    ) -> Result<Vec<(PathBuf, Vec<String>)>, ToolError> {
        self.servers.trust_targets(ctx, file)
    }

    /// Before a write of `paths` ([`Diagnostics::before_write`]).
    pub async fn before_write(&self, run: &str, paths: &[PathBuf]) {
        self.diagnostics
            .before_write(&self.servers, run, paths)
            .await
    }

    /// After a write of `paths`: the diagnostics new for `run` ([`Diagnostics::after_write`]).
    pub async fn after_write(
        &self,
        run: &str,
        workdir: &Path,
        paths: &[PathBuf],
    ) -> WriteDiagnostics {
        self.diagnostics
            .after_write(&self.servers, run, workdir, paths)
            .await
    }

    /// `synced_write {path}` ([`Diagnostics::synced_write`]).
    pub async fn synced_write(
        &self,
        ctx: &CallCtx,
        path: &str,
    ) -> Result<SyncedWriteResult, ToolError> {
        self.diagnostics
            .synced_write(&self.servers, ctx, path)
            .await
    }

    /// `lsp_rename {file, line, symbol, new_name}` ([`Edits::rename`]).
    pub async fn rename(
        &self,
        ctx: &CallCtx,
        args: LspRenameArgs,
    ) -> Result<LspRenameResult, ToolError> {
        self.edits
            .rename(&self.servers, &self.diagnostics, ctx, args)
            .await
    }

    /// The (edits, files) of `run`'s preview of this rename, if it previewed it (for the
    /// approval's summary).
    pub fn previewed(&self, run: &str, args: &LspRenameArgs) -> Option<(usize, usize)> {
        self.edits.previewed(run, args)
    }

    /// `lsp_edit {op, ...}` ([`Edits::lsp_edit`]).
    pub async fn lsp_edit(
        &self,
        ctx: &CallCtx,
        args: LspEditArgs,
    ) -> Result<LspEditResult, ToolError> {
        self.edits
            .lsp_edit(&self.servers, &self.diagnostics, ctx, args)
            .await
    }

    /// The file and the action titles of `run`'s last `code_actions` answer, in index order
    /// (for the approval line of `lsp_edit apply_code_action`).
    pub fn actions_of(&self, run: &str) -> Option<(String, Vec<String>)> {
        self.edits.actions_of(run)
    }
}
