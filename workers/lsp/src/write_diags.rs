//! Diagnostics folded into file writes, methods of [`Diagnostics`] (the run ledger's owner)
//! given the [`Servers`] they ask: the baseline taken before a write (`before_write`), the
//! diagnostics new for the run after it (`after_write`), and `synced_write`.
//!
//! Every write tool calls `before_write` with the files it is about to write, before it writes
//! them: `write`, `edit` and `apply_patch` (`supervisor/src/tools/files.rs`), `lsp_rename`
//! (`edit.rs`), `lsp_edit` (`lsp_edit.rs`) and `resolve accept`
//! (`supervisor/src/tools/structural.rs`). Where the run's ledger holds nothing for a file, the
//! diagnostics the file has then become the run's baseline, so a first write reports only what it
//! introduced. A new write tool that folds in diagnostics (`after_write`) must call it too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    LspDependents, LspDiagnostic, SyncedWriteResult, WriteDiagnostics,
};

use crate::answers::{self, Diag};
use crate::call::CallCtx;
use crate::diagnostics::Diagnostics;
use crate::server::ServerShared;
use crate::servers::{NoServer, Servers, not_ready};

impl Diagnostics {
    /// Before a write: the diagnostics each of `paths` has now (its text before the write)
    /// become `run`'s baseline for it, where the run holds none yet, so a first write reports
    /// only what it introduced, not what was already there. A file that does not exist yet,
    /// that no server covers or whose server gives no diagnostics within
    /// `diagnostics_wait_s` gets no baseline (the write then reports all its diagnostics).
    /// Never fails: the write goes ahead whatever happens here.
    pub async fn before_write(&self, servers: &Servers, run: &str, paths: &[PathBuf]) {
        let wait = Duration::from_secs(servers.config.diagnostics_wait_s);
        for path in paths {
            if self.ledger().knows(run, path) || !path.is_file() || servers.plan(path, run).is_err()
            {
                continue;
            }
            self.baseline(servers, run, path, wait).await;
        }
        self.dependents_before(servers, run, paths, wait).await;
    }

    /// `path`'s diagnostics now become `run`'s baseline for it (at most `wait`).
    pub(crate) async fn baseline(&self, servers: &Servers, run: &str, path: &Path, wait: Duration) {
        let taken = tokio::time::timeout(wait, async {
            let mut opened = servers.open(path, run).await?;
            servers.file_diagnostics(&mut opened).await
        })
        .await;
        match taken {
            Ok(Ok(diags)) => {
                let marks: Vec<_> = diags
                    .iter()
                    .filter(|d| d.severity != 4)
                    .map(Diag::mark)
                    .collect();
                self.ledger().fold(run, path, &marks);
            }
            Ok(Err(e)) => {
                tracing::info!(path = %path.display(), error = %e.message, "no diagnostics baseline before the write");
            }
            Err(_) => {
                tracing::info!(path = %path.display(), "no diagnostics baseline before the write: timed out");
            }
        }
    }

    /// Sync `paths` (just written; a path no longer there was deleted, or moved away) and
    /// return the diagnostics new for `run`: the written files' own and their dependents'
    /// (the importers of a deleted file too); where no server covers a file, say why. Never
    /// fails the write: problems become notes.
    pub async fn after_write(
        &self,
        servers: &Servers,
        run: &str,
        workdir: &Path,
        paths: &[PathBuf],
    ) -> WriteDiagnostics {
        let mut got = Gathered::default();
        let (written, gone): (Vec<&PathBuf>, Vec<&PathBuf>) =
            paths.iter().partition(|p| p.exists());
        for path in gone {
            // Its server learns of the deletion when a dependent is opened (the root watch
            // hands every change on disk over first).
            if let Ok(plan) = servers.plan(path, run) {
                let shared = servers.shared(&plan);
                let seq = shared.diags.seq();
                got.involve(&shared, seq);
            }
        }
        for path in written {
            self.written_file(servers, run, workdir, path, &mut got)
                .await;
        }
        // The files the write may have broken besides the written ones.
        let wait = Duration::from_secs(servers.config.diagnostics_wait_s);
        let deps = self
            .dependents_after(servers, run, paths, &got.involved, wait)
            .await;
        got.answer(&deps, workdir)
    }

    /// One written file's new diagnostics into `got`, or a note on why there are none.
    async fn written_file(
        &self,
        servers: &Servers,
        run: &str,
        workdir: &Path,
        path: &Path,
        got: &mut Gathered,
    ) {
        let shown = answers::show_path(path, workdir);
        match servers.plan(path, run) {
            Err(NoServer::NoLanguage { .. }) => {
                got.notes.push(format!(
                    "{shown}: no diagnostics: no language server covers this file type"
                ));
                return;
            }
            Err(e) => {
                got.notes.push(format!("{shown}: no diagnostics: {e}"));
                return;
            }
            Ok(plan) => {
                // A file the server does not check in this build: its silence is no "it
                // compiles". Only files under the workdir are read to find where a module is
                // declared (the written one passed the write's scope).
                let (shared, file, within) = (
                    servers.shared(&plan),
                    path.to_path_buf(),
                    workdir.to_path_buf(),
                );
                let left_out = tokio::task::spawn_blocking(move || {
                    crate::hidden_uses::left_out_of_build(&shared, &file, &|p| {
                        p.starts_with(&within)
                    })
                })
                .await
                .ok()
                .flatten();
                if let Some(why) = left_out {
                    got.notes.push(format!(
                        "{shown}: {why}: no diagnostics here does not mean it compiles; build for its platform or with its feature to check it"
                    ));
                }
            }
        }
        // A write waits at most `diagnostics_wait_s` for its diagnostics (a server still
        // starting or indexing a large project must not hold the write's answer for the
        // full `ready_wait_s`); past it the write answers with a note.
        let wait = Duration::from_secs(servers.config.diagnostics_wait_s);
        let result = tokio::time::timeout(wait, async {
            let mut opened = servers.open(path, run).await?;
            got.involve(&opened.shared, opened.seq_before);
            if let Some(off) = opened.shared.checking_off()
                && !got.checking_off.contains(&off)
            {
                got.checking_off.push(off);
            }
            servers.file_diagnostics(&mut opened).await
        })
        .await
        .unwrap_or_else(|_| {
            Err(not_ready(format!(
                "the server gave no diagnostics within {} s",
                wait.as_secs()
            )))
        });
        match result {
            Ok(diags) => {
                // Hints (unused, deprecated, style) are left to `lsp diagnostics`: a write's
                // result carries errors, warnings and information only.
                let diags: Vec<Diag> = diags.into_iter().filter(|d| d.severity != 4).collect();
                let marks: Vec<_> = diags.iter().map(Diag::mark).collect();
                for i in self.ledger().fold(run, path, &marks) {
                    got.add_new(&diags[i], workdir);
                }
            }
            Err(e) => got.notes.push(format!(
                "{shown}: no diagnostics: {} ({})",
                e.message, e.kind
            )),
        }
    }

    /// `synced_write {path}`.
    pub async fn synced_write(
        &self,
        servers: &Servers,
        ctx: &CallCtx,
        path: &str,
    ) -> Result<SyncedWriteResult, ToolError> {
        // It reads the file and shows its diagnostics: a read, confined like `read`.
        let p = ctx.resolve("synced_write", path, Access::Read)?;
        if !p.is_file() {
            return Err(ToolError::new(
                ErrorKind::NotFound,
                format!("{} is not a file", p.display()),
                "call synced_write after writing the file, with its path",
            ));
        }
        let diags = self
            .after_write(servers, &ctx.run, &ctx.workdir, std::slice::from_ref(&p))
            .await;
        Ok(SyncedWriteResult {
            path: answers::show_path(&p, &ctx.workdir),
            text: diags.text.clone(),
            diagnostics: diags,
        })
    }
}

/// What [`Diagnostics::after_write`] gathers before it words its answer.
#[derive(Default)]
struct Gathered {
    /// One line per new diagnostic, in the order found.
    text: String,
    new_items: Vec<LspDiagnostic>,
    notes: Vec<String>,
    /// Why a server's type checking is off, once each.
    checking_off: Vec<String>,
    /// Each server of the write with its diagnostics sequence number before the write's sync.
    involved: Vec<(Arc<ServerShared>, u64)>,
}

impl Gathered {
    fn involve(&mut self, shared: &Arc<ServerShared>, seq: u64) {
        if !self.involved.iter().any(|(s, _)| Arc::ptr_eq(s, shared)) {
            self.involved.push((shared.clone(), seq));
        }
    }

    fn add_new(&mut self, d: &Diag, workdir: &Path) {
        let item = d.to_result(workdir);
        self.text.push_str(&item.line());
        self.text.push('\n');
        self.new_items.push(item);
    }

    /// The write's `diagnostics`: the new ones (the dependents' after the written files'),
    /// else "no new diagnostics", then the notes, what else was checked, what is off.
    fn answer(
        mut self,
        deps: &crate::dependents::DependentsReport,
        workdir: &Path,
    ) -> WriteDiagnostics {
        for d in &deps.new {
            self.add_new(d, workdir);
        }
        let mut text = self.text;
        if self.new_items.is_empty() && self.notes.is_empty() {
            text.push_str("no new diagnostics\n");
        }
        for line in self.notes.iter().chain(&deps.lines) {
            text.push_str(line);
            text.push('\n');
        }
        for off in &self.checking_off {
            text.push_str(&format!("({off})\n"));
        }
        let checked: Vec<String> = deps
            .checked
            .iter()
            .map(|p| answers::show_path(p, workdir))
            .collect();
        WriteDiagnostics {
            text,
            new: self.new_items,
            notes: self.notes,
            dependents: LspDependents {
                checked,
                max: crate::dependents::DEPENDENTS_MAX as u64,
            },
            checking_off: (!self.checking_off.is_empty()).then_some(self.checking_off),
        }
    }
}
