//! Diagnostics folded into file writes: the baseline taken before a write (`before_write`),
//! the diagnostics new for the run after it (`after_write`), and `synced_write`.
//!
//! Every write tool calls `before_write` with the files it is about to write, before it writes
//! them: `write`, `edit` and `apply_patch` (`supervisor/src/tools/files.rs`), `lsp_rename`
//! (`edit.rs`), `lsp_edit` (`lsp_edit.rs`) and `resolve accept`
//! (`supervisor/src/tools/structural.rs`). Where the run's ledger holds nothing for a file, the
//! diagnostics the file has then become the run's baseline, so a first write reports only what it
//! introduced. A new write tool that folds in diagnostics (`after_write`) must call it too.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};

use crate::ops::CallCtx;
use crate::render::{self, Diag};
use crate::servers::{LanguageServers, NoServer, not_ready};

impl LanguageServers {
    /// Before a write: the diagnostics each of `paths` has now (its text before the write)
    /// become `run`'s baseline for it, where the run holds none yet, so a first write reports
    /// only what it introduced, not what was already there. A file that does not exist yet,
    /// that no server covers or whose server gives no diagnostics within
    /// `diagnostics_wait_s` gets no baseline (the write then reports all its diagnostics).
    /// Never fails: the write goes ahead whatever happens here.
    pub async fn before_write(&self, run: &str, paths: &[PathBuf]) {
        let wait = Duration::from_secs(self.config.diagnostics_wait_s);
        for path in paths {
            if self.ledger.knows(run, path) || !path.is_file() || self.plan(path, run).is_err() {
                continue;
            }
            self.baseline(run, path, wait).await;
        }
        self.dependents_before(run, paths, wait).await;
    }

    /// `path`'s diagnostics now become `run`'s baseline for it (at most `wait`).
    pub(crate) async fn baseline(&self, run: &str, path: &Path, wait: Duration) {
        let taken = tokio::time::timeout(wait, async {
            let mut opened = self.open(path, run).await?;
            self.file_diagnostics(&mut opened).await
        })
        .await;
        match taken {
            Ok(Ok(diags)) => {
                let marks: Vec<_> = diags
                    .iter()
                    .filter(|d| d.severity != 4)
                    .map(Diag::mark)
                    .collect();
                self.ledger.fold(run, path, &marks);
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
    pub async fn after_write(&self, run: &str, workdir: &Path, paths: &[PathBuf]) -> Value {
        let mut text = String::new();
        let mut new_items = Vec::new();
        let mut notes = Vec::new();
        let mut checking_off: Vec<String> = Vec::new();
        let mut involved: Vec<(std::sync::Arc<crate::server::ServerShared>, u64)> = Vec::new();
        let (written, gone): (Vec<&PathBuf>, Vec<&PathBuf>) =
            paths.iter().partition(|p| p.exists());
        for path in gone {
            // Its server learns of the deletion when a dependent is opened (the root watch
            // hands every change on disk over first).
            if let Ok(plan) = self.plan(path, run) {
                let shared = self.shared(&plan);
                if !involved
                    .iter()
                    .any(|(s, _)| std::sync::Arc::ptr_eq(s, &shared))
                {
                    let seq = shared.diags.seq();
                    involved.push((shared, seq));
                }
            }
        }
        for path in written {
            let shown = render::show_path(path, workdir);
            match self.plan(path, run) {
                Err(NoServer::NoLanguage { .. }) => {
                    notes.push(format!(
                        "{shown}: no diagnostics: no language server covers this file type"
                    ));
                    continue;
                }
                Err(e) => {
                    notes.push(format!("{shown}: no diagnostics: {e}"));
                    continue;
                }
                Ok(plan) => {
                    // A file the server does not check in this build: its silence is no "it
                    // compiles".
                    // Only files under the workdir are read to find where a module is
                    // declared (the written one passed the write's scope).
                    let (shared, file, within) =
                        (self.shared(&plan), path.clone(), workdir.to_path_buf());
                    let left_out = tokio::task::spawn_blocking(move || {
                        crate::hidden_uses::left_out_of_build(&shared, &file, &|p| {
                            p.starts_with(&within)
                        })
                    })
                    .await
                    .ok()
                    .flatten();
                    if let Some(why) = left_out {
                        notes.push(format!(
                            "{shown}: {why}: no diagnostics here does not mean it compiles; build for its platform or with its feature to check it"
                        ));
                    }
                }
            }
            // A write waits at most `diagnostics_wait_s` for its diagnostics (a server still
            // starting or indexing a large project must not hold the write's answer for the
            // full `ready_wait_s`); past it the write answers with a note.
            let wait = Duration::from_secs(self.config.diagnostics_wait_s);
            let result = tokio::time::timeout(wait, async {
                let mut opened = self.open(path, run).await?;
                if !involved
                    .iter()
                    .any(|(s, _)| std::sync::Arc::ptr_eq(s, &opened.shared))
                {
                    involved.push((opened.shared.clone(), opened.seq_before));
                }
                if let Some(off) = opened.shared.checking_off()
                    && !checking_off.contains(&off)
                {
                    checking_off.push(off);
                }
                self.file_diagnostics(&mut opened).await
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
                    let fresh = self.ledger.fold(run, path, &marks);
                    for i in fresh {
                        text.push_str(&diags[i].line_text(workdir));
                        text.push('\n');
                        new_items.push(diags[i].to_json(workdir));
                    }
                }
                Err(e) => notes.push(format!(
                    "{shown}: no diagnostics: {} ({})",
                    e.message, e.kind
                )),
            }
        }
        // The files the write may have broken besides the written ones.
        let wait = Duration::from_secs(self.config.diagnostics_wait_s);
        let deps = self.dependents_after(run, paths, &involved, wait).await;
        for d in &deps.new {
            text.push_str(&d.line_text(workdir));
            text.push('\n');
            new_items.push(d.to_json(workdir));
        }
        if new_items.is_empty() && notes.is_empty() {
            text.push_str("no new diagnostics\n");
        }
        for n in &notes {
            text.push_str(n);
            text.push('\n');
        }
        for line in &deps.lines {
            text.push_str(line);
            text.push('\n');
        }
        for off in &checking_off {
            text.push_str(&format!("({off})\n"));
        }
        let checked: Vec<String> = deps
            .checked
            .iter()
            .map(|p| render::show_path(p, workdir))
            .collect();
        let mut answer = json!({"text": text, "new": new_items, "notes": notes,
            "dependents": {"checked": checked, "max": crate::dependents::DEPENDENTS_MAX}});
        if !checking_off.is_empty() {
            answer["checking_off"] = json!(checking_off);
        }
        answer
    }

    /// `synced_write {path}`.
    pub async fn synced_write(&self, ctx: &CallCtx, path: &str) -> Result<Value, ToolError> {
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
            .after_write(&ctx.run, &ctx.workdir, std::slice::from_ref(&p))
            .await;
        Ok(
            json!({"path": render::show_path(&p, &ctx.workdir), "text": diags["text"],
            "diagnostics": diags}),
        )
    }
}
