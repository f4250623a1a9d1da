//! `lsp_rename` and workspace-edit application: every file of the edit is computed in memory
//! first (versions checked against what the server saw and what is on disk), then written all
//! or nothing through the journaled multi-file writer (below).
//!
//! `lsp_rename` and every `lsp_edit` op (an applied code action, a symbol edit, a format) go
//! through the one path `apply_off_thread`, on the blocking pool: `check_scope` (every file the
//! edit touches, created, renamed and deleted ones included, checked against the caller's scope
//! before anything is read or written), `plan_edit` (every new text computed and version-checked
//! first) and `write_all` (`toolvisor_files::journal::write_all`, the one multi-file writer
//! `apply_patch` and `resolve accept` use too: journaled, each file by `write_atomic` beneath the
//! scope's handle, earlier files put back when a later write fails). `lsp_rename`'s reads go
//! through the call's `Scope` (`CallCtx::read_text`).
//!
//! The edits concern's state is [`Edits`]: each run's last code actions (`actions.rs`) and
//! rename preview (`rename_preview.rs`). Its methods (`lsp_rename` here; `lsp_edit` in
//! `lsp_edit.rs`, `actions.rs` and `symbol_edit.rs`) take the [`Servers`] they ask and the
//! [`Diagnostics`] a write folds in; what asks only the server (`prepareRename`, the
//! implementations a rename leaves alone) is a method of `Servers`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspEditedFile, LspRenamePreview, LspRenameResult, LspRenamed};
use toolvisor_protocol::tools::LspRenameArgs;

use toolvisor_files::paths::Access;

use crate::actions::memory::Memory;
use crate::answers::show_path;
use crate::call::{CallCtx, Opened};
use crate::change::FileChange;
use crate::diagnostics::Diagnostics;
use crate::position::{self, Encoding};
use crate::rename_preview::Previews;
use crate::server::ServerShared;
use crate::servers::Servers;
use crate::uri;

fn conflict(msg: String) -> ToolError {
    ToolError::new(
        ErrorKind::Conflict,
        msg,
        "nothing was written; re-run the call (the server now sees the current files)",
    )
}

/// Byte offset of an LSP position in `text`.
fn offset(text: &str, pos: &Value, enc: Encoding) -> Option<usize> {
    let line = pos.get("line")?.as_u64()? as usize;
    let col = pos.get("character")?.as_u64()? as u32;
    let mut start = 0usize;
    for _ in 0..line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return Some(text.len()),
        }
    }
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let line_text = &text[start..end];
    Some(start + enc.byte(line_text, col))
}

/// Apply text edits (LSP `TextEdit[]`) to `text`.
pub fn apply_edits(text: &str, edits: &[Value], enc: Encoding) -> Result<String, String> {
    let mut spans = Vec::new();
    for e in edits {
        let range = e.get("range").ok_or("an edit without a range")?;
        let s = offset(text, &range["start"], enc).ok_or("a bad start position")?;
        let t = offset(text, &range["end"], enc).ok_or("a bad end position")?;
        if t < s {
            return Err("an edit whose end is before its start".into());
        }
        let new = e.get("newText").and_then(Value::as_str).unwrap_or("");
        spans.push((s, t, new));
    }
    spans.sort_by_key(|&(s, t, _)| (s, t));
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err("overlapping edits".into());
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (s, t, new) in spans {
        out.push_str(&text[at..s]);
        out.push_str(new);
        at = t;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// Every file a `WorkspaceEdit` touches: text edits' documents and the resource operations'
/// files (create, both ends of a rename, delete), in order of appearance.
pub(crate) fn touched_files(edit: &Value) -> Result<Vec<PathBuf>, ToolError> {
    let to_path = |u: &str| {
        uri::to_path(u).ok_or_else(|| conflict(format!("the edit names a non-file URI {u:?}")))
    };
    let mut out = Vec::new();
    if let Some(changes) = edit.get("documentChanges").and_then(Value::as_array) {
        for c in changes {
            for ptr in ["/textDocument/uri", "/uri", "/oldUri", "/newUri"] {
                if let Some(u) = c.pointer(ptr).and_then(Value::as_str) {
                    out.push(to_path(u)?);
                }
            }
        }
    } else if let Some(changes) = edit.get("changes").and_then(Value::as_object) {
        for u in changes.keys() {
            out.push(to_path(u)?);
        }
    }
    Ok(out)
}

/// The (file, 1-based line) where each text edit of a workspace edit starts.
pub(crate) fn edit_lines(edit: &Value) -> std::collections::HashSet<(PathBuf, u32)> {
    let mut out = std::collections::HashSet::new();
    let mut add = |u: Option<&str>, edits: Option<&Value>| {
        let Some(path) = u.and_then(uri::to_path) else {
            return;
        };
        for e in edits.and_then(Value::as_array).into_iter().flatten() {
            if let Some(l) = e.pointer("/range/start/line").and_then(Value::as_u64) {
                out.insert((path.clone(), l as u32 + 1));
            }
        }
    };
    if let Some(changes) = edit.get("documentChanges").and_then(Value::as_array) {
        for c in changes {
            add(
                c.pointer("/textDocument/uri").and_then(Value::as_str),
                c.get("edits"),
            );
        }
    } else if let Some(changes) = edit.get("changes").and_then(Value::as_object) {
        for (u, edits) in changes {
            add(Some(u), Some(edits));
        }
    }
    out
}

/// Refuse the whole edit when any file it touches may not be written in the caller's file
/// scope: the file tools' `out_of_scope` answer for the first such file, naming the others.
/// Returns each touched file's real path (what is read and written).
pub fn check_scope(
    ctx: &CallCtx,
    edit: &Value,
    tool: &str,
) -> Result<BTreeMap<PathBuf, PathBuf>, ToolError> {
    let mut refused: Vec<(PathBuf, toolvisor_files::Error)> = Vec::new();
    let mut reals = BTreeMap::new();
    for path in touched_files(edit)? {
        if reals.contains_key(&path) || refused.iter().any(|(p, _)| *p == path) {
            continue;
        }
        match ctx.check(&path, Access::Write) {
            Ok(real) => {
                reals.insert(path, real);
            }
            Err(e) => refused.push((path, e)),
        }
    }
    let Some((_, first)) = refused.first() else {
        return Ok(reals);
    };
    let mut err = first.to_tool_error(tool);
    if matches!(first, toolvisor_files::Error::Outside { .. }) {
        // The path came from the server, not the caller: say what can be done instead.
        err.hint = "the server's root reaches beyond the workdir: rename from a workdir that holds every file using the symbol, or edit by hand; the operator can lift this with `[files] allow_outside_workdir`".into();
    }
    let others: Vec<String> = refused[1..]
        .iter()
        .take(10)
        .map(|(p, _)| p.display().to_string())
        .collect();
    err.message = format!(
        "{}; the server's edit touches it{}, so nothing was written",
        err.message,
        match refused.len() - 1 {
            0 => String::new(),
            n if n > others.len() => format!(
                " and {n} more files outside the scope ({}, …)",
                others.join(", ")
            ),
            n => format!(" and {n} more outside the scope ({})", others.join(", ")),
        }
    );
    Err(err)
}

/// Whether an edit for version `edit` of a document is stale against the version `sent` the
/// server was last sent, given that the document's text is the disk's (checked first).
/// Version 0 is gopls's for a file as on disk, not opened in it: an edit computed on a
/// snapshot taken before the server took in our `didOpen` of that file (a rename right after
/// its preview) names version 0 while we sent 1, and the text it was computed on is the same
/// disk text, so it applies.
fn stale(edit: i64, sent: i32) -> bool {
    edit != i64::from(sent) && edit != 0
}

/// Compute every file's new text from a `WorkspaceEdit`, checking versions against what the
/// server was sent and the disk. Every file must already have passed [`check_scope`], whose
/// real paths (`reals`) are the ones read and written.
pub fn plan_edit(
    ctx: &CallCtx,
    shared: &ServerShared,
    edit: &Value,
    enc: Encoding,
    reals: &BTreeMap<PathBuf, PathBuf>,
) -> Result<Vec<FileChange>, ToolError> {
    let mut per_file: BTreeMap<PathBuf, (Vec<Value>, Option<i64>)> = BTreeMap::new();
    if let Some(changes) = edit.get("documentChanges").and_then(Value::as_array) {
        for c in changes {
            if let Some(kind) = c.get("kind").and_then(Value::as_str) {
                return Err(ToolError::new(
                    ErrorKind::NotAvailable,
                    format!(
                        "the edit needs a file operation ({kind}), which lsp_rename and lsp_edit do not apply"
                    ),
                    "nothing was written; rename the file by hand, then the symbol",
                ));
            }
            let u = c
                .pointer("/textDocument/uri")
                .and_then(Value::as_str)
                .unwrap_or("");
            let path = uri::to_path(u)
                .ok_or_else(|| conflict(format!("the edit names a non-file URI {u:?}")))?;
            let version = c.pointer("/textDocument/version").and_then(Value::as_i64);
            let entry = per_file.entry(path).or_default();
            entry.0.extend(
                c.get("edits")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            if version.is_some() {
                entry.1 = version;
            }
        }
    } else if let Some(changes) = edit.get("changes").and_then(Value::as_object) {
        for (u, edits) in changes {
            let path = uri::to_path(u)
                .ok_or_else(|| conflict(format!("the edit names a non-file URI {u:?}")))?;
            per_file
                .entry(path)
                .or_default()
                .0
                .extend(edits.as_array().cloned().unwrap_or_default());
        }
    }
    let mut out: Vec<FileChange> = Vec::new();
    let mut seen: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for (named, (edits, version)) in per_file {
        let Some(path) = reals.get(&named).cloned() else {
            return Err(ToolError::new(
                ErrorKind::Internal,
                format!(
                    "{} was not checked against the file scope before the edit",
                    named.display()
                ),
                "report this as a bug; nothing was written",
            ));
        };
        if let Some(first) = seen.insert(path.clone(), named.clone()) {
            // Two names of one file (a link and its target): two edits of the same text.
            return Err(conflict(format!(
                "the edit names {} twice ({} and {})",
                path.display(),
                first.display(),
                named.display()
            )));
        }
        // Read beneath the scope's root: a directory swapped for a link since the check is
        // not followed.
        let old = ctx
            .read_text(&path)
            .map_err(|e| conflict(format!("cannot read {}: {e}", path.display())))?;
        let doc = shared
            .doc(&uri::from_path(&named))
            .or_else(|| shared.doc(&uri::from_path(&path)));
        if let Some(doc) = doc {
            if doc.text != old {
                return Err(conflict(format!(
                    "{} changed on disk since the server read it",
                    path.display()
                )));
            }
            if let Some(v) = version
                && stale(v, doc.version)
            {
                return Err(conflict(format!(
                    "the edit is for version {v} of {} but the server has version {}",
                    path.display(),
                    doc.version
                )));
            }
        }
        let new = apply_edits(&old, &edits, enc)
            .map_err(|e| conflict(format!("cannot apply the edit to {}: {e}", path.display())))?;
        out.push(FileChange {
            path,
            old,
            new,
            edits: edits.len(),
        });
    }
    Ok(out)
}

/// Write every change or none, through the file tools' one multi-file writer: each file
/// beneath the call's scope by its real path (a path that leads elsewhere now is refused),
/// journaled first so a crash mid-way is rolled back at the next start, and the files already
/// written put back if a later write fails.
pub fn write_all(ctx: &CallCtx, changes: &[FileChange], tool: &str) -> Result<(), ToolError> {
    let mut targets = Vec::with_capacity(changes.len());
    for c in changes {
        let text = c.path.to_str().ok_or_else(|| {
            ToolError::new(
                ErrorKind::InvalidArgs,
                format!("{} is not valid UTF-8", c.path.display()),
                "rename within files whose paths are UTF-8",
            )
        })?;
        let target = ctx
            .scope
            .resolve(text, Access::Write)
            .map_err(|e| e.to_tool_error(tool))?;
        if target.real != c.path {
            return Err(ToolError::new(
                ErrorKind::Conflict,
                format!(
                    "{} now leads to {}: it changed while the edit was prepared; nothing was written",
                    c.path.display(),
                    target.real.display()
                ),
                format!("run {tool} again"),
            ));
        }
        targets.push(target);
    }
    let planned: Vec<toolvisor_files::journal::Planned<'_>> = changes
        .iter()
        .zip(&targets)
        .map(|(c, target)| toolvisor_files::journal::Planned {
            target,
            before: Some(c.old.as_bytes()),
            after: Some(c.new.as_bytes()),
        })
        .collect();
    toolvisor_files::journal::write_all(tool, ctx.scope.root(), &planned, ctx.journal.as_deref())
        .map_err(|e| e.to_tool_error(tool))
}

/// [`check_scope`], [`plan_edit`] and [`write_all`] of a server's `WorkspaceEdit`, on the
/// blocking pool: they resolve, read and write every file the edit touches, which must not
/// hold an async worker thread. Callers hold `sync_lock`.
pub async fn apply_off_thread(
    ctx: &CallCtx,
    shared: &Arc<ServerShared>,
    edit: Value,
    enc: Encoding,
    tool: &'static str,
) -> Result<Vec<FileChange>, ToolError> {
    apply_checked(ctx, shared, edit, enc, tool, None).await
}

/// The preview a rename must equal (see `rename_preview`).
struct Preview<'a> {
    previews: &'a Previews,
    args: &'a LspRenameArgs,
}

/// [`apply_off_thread`], and before anything is written the planned edit is checked
/// against the run's preview of it, when there is one.
async fn apply_checked(
    ctx: &CallCtx,
    shared: &Arc<ServerShared>,
    edit: Value,
    enc: Encoding,
    tool: &'static str,
    expect: Option<Preview<'_>>,
) -> Result<Vec<FileChange>, ToolError> {
    let changes = plan_off_thread(ctx, shared, edit, enc, tool).await?;
    if let Some(p) = expect {
        p.previews.check(&ctx.run, p.args, &changes, &ctx.workdir)?;
    }
    let ctx2 = ctx.clone();
    off_thread(tool, move || {
        write_all(&ctx2, &changes, tool)?;
        Ok(changes)
    })
    .await
}

/// [`check_scope`] and [`plan_edit`] only, on the blocking pool: what the edit would write.
async fn plan_off_thread(
    ctx: &CallCtx,
    shared: &Arc<ServerShared>,
    edit: Value,
    enc: Encoding,
    tool: &'static str,
) -> Result<Vec<FileChange>, ToolError> {
    let (ctx, shared) = (ctx.clone(), shared.clone());
    off_thread(tool, move || {
        let reals = check_scope(&ctx, &edit, tool)?;
        plan_edit(&ctx, &shared, &edit, enc, &reals)
    })
    .await
}

/// File work on the blocking pool, never on an async worker thread.
async fn off_thread<T: Send + 'static>(
    tool: &'static str,
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
        Err(ToolError::new(
            ErrorKind::Internal,
            format!("the {tool} file work failed: {e}"),
            "report this as a bug; check the files the rename names",
        ))
    })
}

/// A rename the server answered: its edit of `word`, and what it may miss (`gap`).
struct Answered<'a> {
    opened: &'a Opened,
    args: &'a LspRenameArgs,
    edit: Value,
    word: &'a str,
    gap: Option<String>,
}

/// Edits and renames across calls: each run's last `code_actions` answer (what
/// `lsp_edit apply_code_action` applies) and its last `lsp_rename` preview (what its real
/// rename must equal). Its methods take the [`Servers`] they ask and the [`Diagnostics`] a
/// write folds in.
#[derive(Default)]
pub struct Edits {
    actions: Memory,
    previews: Previews,
}

impl Edits {
    /// The run's last `code_actions` answers.
    pub(crate) fn actions(&self) -> &Memory {
        &self.actions
    }

    /// The (edits, files) of `run`'s preview of this rename, if it previewed it (for the
    /// approval's summary).
    pub fn previewed(&self, run: &str, args: &LspRenameArgs) -> Option<(usize, usize)> {
        self.previews.previewed(run, args)
    }

    /// `lsp_rename {file, line, symbol, new_name}`.
    pub async fn rename(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        args: LspRenameArgs,
    ) -> Result<LspRenameResult, ToolError> {
        // The named file is written too (it holds the symbol).
        let path = ctx.resolve("lsp_rename", &args.file, Access::Write)?;
        let mut opened = servers.open(&path, &ctx.run).await?;
        let shown = show_path(&path, &ctx.workdir);
        let line = args.line as usize;
        let (src, byte) = position::locate_name(
            &opened.text,
            &shown,
            line,
            &args.symbol,
            args.occurrence.map(|o| o as usize),
        )?;
        let word = position::word_at(&src, byte, args.symbol.len()).to_string();
        if !opened.conn.supports("renameProvider") {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!("{} does not support rename", opened.conn.name),
                "use ast_edit, or edit by hand",
            ));
        }
        servers.ready_for(&opened.shared, &opened.uri).await?;
        let enc = opened.conn.encoding;
        let pos = json!({"line": line - 1, "character": enc.column(&src, byte)});
        let doc = json!({"uri": opened.uri});
        let dry_run = args.dry_run == Some(true);
        let what = format!("`{}` at {shown}:{line}", args.symbol);
        servers
            .prepare_rename(ctx, &mut opened, &doc, &pos, &what)
            .await?;
        let edit = servers
            .request(
                &mut opened,
                "textDocument/rename",
                json!({"textDocument": doc, "position": pos, "newName": args.new_name}),
            )
            .await?;
        if edit.is_null() {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "the server found nothing to rename for `{}` at {shown}:{line}",
                    args.symbol
                ),
                "point at the symbol's name",
            ));
        }
        // A server whose index misses files renames only where it looked: say so.
        let gap = servers
            .use_gap(
                ctx,
                &opened,
                &word,
                edit_lines(&edit),
                "the rename does not change them: edit them by hand",
                false,
            )
            .await;
        let unrenamed = servers
            .unrenamed_implementations(ctx, &mut opened, &doc, &pos, &edit, &word)
            .await;
        let answered = Answered {
            opened: &opened,
            args: &args,
            edit,
            word: &word,
            gap: crate::hidden_uses::join(gap, unrenamed),
        };
        if dry_run {
            return self.preview_rename(ctx, answered).await;
        }
        self.apply_rename(servers, diagnostics, ctx, answered).await
    }

    /// `lsp_rename {dry_run: true}`: the edit planned, remembered for the run and shown,
    /// nothing written.
    async fn preview_rename(
        &self,
        ctx: &CallCtx,
        answered: Answered<'_>,
    ) -> Result<LspRenameResult, ToolError> {
        let Answered {
            opened,
            args,
            edit,
            word,
            gap,
        } = answered;
        let enc = opened.conn.encoding;
        let _sync = opened.shared.sync_lock.lock().await;
        let changes = plan_off_thread(ctx, &opened.shared, edit, enc, "lsp_rename").await?;
        drop(_sync);
        self.previews.remember(&ctx.run, args, &changes);
        let total: usize = changes.iter().map(|c| c.edits).sum();
        let (lines, files, left_out) =
            crate::rename_preview::render(&changes, &ctx.workdir, (word, &args.new_name));
        let mut text = format!(
            "preview: renaming `{}` to `{}` would make {total} edits in {} files; nothing was written\n{lines}",
            args.symbol,
            args.new_name,
            changes.len()
        );
        let (complete, partial_reason) = crate::coverage::covered(&mut text, gap);
        Ok(LspRenameResult::Preview(LspRenamePreview {
            text,
            dry_run: true,
            written: false,
            files,
            edits: total as u64,
            lines_not_shown: left_out as u64,
            complete,
            partial_reason,
        }))
    }

    /// The rename's edit written (checked against the run's preview, if any) and its new
    /// diagnostics.
    async fn apply_rename(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        answered: Answered<'_>,
    ) -> Result<LspRenameResult, ToolError> {
        let Answered {
            opened,
            args,
            edit,
            word,
            gap,
        } = answered;
        let enc = opened.conn.encoding;
        // The diagnostics the touched files have now are the run's baseline where it has
        // none, so the rename reports only errors it introduced.
        if let Ok(touched) = touched_files(&edit) {
            diagnostics.before_write(servers, &ctx.run, &touched).await;
        }
        // The server's root may be above the workdir: its edit can reach files the caller
        // may not write. All of them are checked before anything is read or written; a
        // rename this run previewed must be the edit it was shown.
        let _sync = opened.shared.sync_lock.lock().await;
        let expect = Preview {
            previews: &self.previews,
            args,
        };
        let changes =
            apply_checked(ctx, &opened.shared, edit, enc, "lsp_rename", Some(expect)).await;
        drop(_sync);
        // A rename refused for differing from its preview stays refused until previewed again.
        let changes = changes?;
        self.previews.forget(&ctx.run);
        let total: usize = changes.iter().map(|c| c.edits).sum();
        let files = edited_files(&changes, &ctx.workdir);
        let mut text = edits_line(
            &format!("renamed `{}` to `{}`", args.symbol, args.new_name),
            &changes,
            &ctx.workdir,
        );
        let paths: Vec<PathBuf> = changes.iter().map(|c| c.path.clone()).collect();
        // What the run was told of these files now names the new name.
        diagnostics.renamed(&ctx.run, &paths, word, &args.new_name);
        let diags = diagnostics
            .after_write(servers, &ctx.run, &ctx.workdir, &paths)
            .await;
        text.push_str(&diags.text);
        let (complete, partial_reason) = crate::coverage::covered(&mut text, gap);
        Ok(LspRenameResult::Renamed(LspRenamed {
            text,
            files,
            edits: total as u64,
            diagnostics: diags,
            complete,
            partial_reason,
        }))
    }
}

impl Servers {
    /// Where the server offers `prepareRename`, whether it will rename `what` at `pos` (a
    /// refusal told why when the file is a module switched off).
    async fn prepare_rename(
        &self,
        ctx: &CallCtx,
        opened: &mut Opened,
        doc: &Value,
        pos: &Value,
        what: &str,
    ) -> Result<(), ToolError> {
        if opened.conn.caps.pointer("/renameProvider/prepareProvider") != Some(&Value::Bool(true)) {
            return Ok(());
        }
        let prep = self
            .request(
                opened,
                "textDocument/prepareRename",
                json!({"textDocument": doc, "position": pos}),
            )
            .await;
        let refused = match prep {
            Ok(Value::Null) => Some(ToolError::new(
                ErrorKind::InvalidArgs,
                format!("{what} cannot be renamed (the server says so)"),
                "point at a symbol the project defines",
            )),
            Ok(_) => None,
            Err(e) => Some(e),
        };
        if let Some(e) = refused {
            let e = crate::hidden_uses::explain_switched_off(ctx, &opened.shared, &opened.path, e)
                .await;
            return Err(e);
        }
        Ok(())
    }

    /// The implementations of the renamed method the rename's `edit` leaves alone, named:
    /// gopls renames an interface method's declaration and the calls through the interface,
    /// not the methods that implement it (go-cmp's `PathStep.Values`: 7 implementations kept
    /// the old name, and the build broke). `None` where the server has no
    /// `implementationProvider`, finds none, or the edit changes each.
    async fn unrenamed_implementations(
        &self,
        ctx: &CallCtx,
        opened: &mut Opened,
        doc: &Value,
        pos: &Value,
        edit: &Value,
        word: &str,
    ) -> Option<String> {
        if !opened.conn.supports("implementationProvider") {
            return None;
        }
        let found = self
            .request(
                opened,
                "textDocument/implementation",
                json!({"textDocument": doc, "position": pos}),
            )
            .await
            .ok()?;
        let edited = edit_lines(edit);
        // Only what bears the name: gopls answers a type's interfaces, and an interface's
        // types, which a rename of the type leaves alone rightly.
        let named = |path: &Path, line: u32| {
            ctx.read_text(path).ok().is_some_and(|text| {
                position::line_text(&text, line as usize)
                    .is_some_and(|l| crate::hidden_uses::has_word(l, word))
            })
        };
        let mut left: Vec<(PathBuf, u32)> = crate::answers::locations(&found)
            .into_iter()
            .filter_map(|(u, range)| {
                let line = range.pointer("/start/line")?.as_u64()? as u32 + 1;
                Some((uri::to_path(&u)?, line))
            })
            .filter(|place| !edited.contains(place))
            .filter(|(path, line)| named(path, *line))
            .collect();
        left.sort();
        left.dedup();
        if left.is_empty() {
            return None;
        }
        let n = left.len();
        Some(format!(
            "{} finds {n} implementation{} of `{word}` the rename does not change, {}: rename each (`lsp_rename` there) or edit them by hand, or the types no longer implement it",
            opened.shared.id,
            if n == 1 { "" } else { "s" },
            crate::hidden_uses::show(&left, &ctx.workdir)
        ))
    }
}

/// Files listed by name in [`edits_line`], at most (the JSON's `files` has them all).
const EDITED_FILES_SHOWN: usize = 10;

/// The files an edit wrote, as its answer lists them.
pub(crate) fn edited_files(changes: &[FileChange], workdir: &Path) -> Vec<LspEditedFile> {
    changes
        .iter()
        .map(|c| LspEditedFile {
            path: show_path(&c.path, workdir),
            edits: c.edits as u64,
        })
        .collect()
}

/// What an edit wrote, one line (the count of edits is the answer's `edits`): `{what}` when
/// `what` names the one file changed (else `… in PATH`), `{what} in 3 files: a.py (1), b.py
/// (3), c.py (9)` for several.
pub(crate) fn edits_line(what: &str, changes: &[FileChange], workdir: &Path) -> String {
    match changes {
        [one] => {
            let shown = show_path(&one.path, workdir);
            match what.contains(&shown) {
                true => format!("{what}\n"),
                false => format!("{what} in {shown}\n"),
            }
        }
        _ => {
            let mut files: Vec<String> = changes
                .iter()
                .take(EDITED_FILES_SHOWN)
                .map(|c| format!("{} ({})", show_path(&c.path, workdir), c.edits))
                .collect();
            if changes.len() > EDITED_FILES_SHOWN {
                files.push(format!("and {} more", changes.len() - EDITED_FILES_SHOWN));
            }
            format!("{what} in {} files: {}\n", changes.len(), files.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn an_edit_of_the_disk_text_is_not_stale_an_edit_of_another_version_is() {
        assert!(!stale(3, 3));
        // gopls: a file it had not taken in as open yet (a rename right after its preview).
        assert!(!stale(0, 1));
        assert!(stale(1, 2), "an edit computed on an older text");
        assert!(stale(4, 2));
    }

    #[test]
    fn edits_apply_in_any_order_and_respect_the_encoding() {
        let text = "x = '😀'; y = x\nprint(x)\n";
        let e = |l: u64, s: u64, t: u64| json!({"range": {"start": {"line": l, "character": s}, "end": {"line": l, "character": t}}, "newText": "value"});
        // UTF-16: 😀 is two units, so the second `x` on line 0 is at 14.
        let out = apply_edits(
            text,
            &[e(1, 6, 7), e(0, 0, 1), e(0, 14, 15)],
            Encoding::Utf16,
        )
        .unwrap();
        assert_eq!(out, "value = '😀'; y = value\nprint(value)\n");
        assert!(apply_edits(text, &[e(0, 0, 3), e(0, 1, 2)], Encoding::Utf16).is_err());
    }

    fn ctx_in(dir: &Path) -> CallCtx {
        let scope = toolvisor_files::Scope::new(dir, &[], false).unwrap();
        CallCtx {
            workdir: scope.root().to_path_buf(),
            run: "r".into(),
            scope,
            journal: None,
        }
    }

    #[test]
    fn every_file_an_edit_touches_is_checked_for_writing() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let work = base.join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("a.py"), "x = 1\n").unwrap();
        let ctx = ctx_in(&work);
        let inside = uri::from_path(&work.join("a.py"));
        let outside = uri::from_path(&base.join("b.py"));
        let text_edit = |u: &str| json!({"textDocument": {"uri": u, "version": 1}, "edits": []});
        // Inside only: every file's real path.
        let changes = |uris: &[&str]| {
            let map: serde_json::Map<String, Value> =
                uris.iter().map(|u| (u.to_string(), json!([]))).collect();
            json!({ "changes": map })
        };
        let reals = check_scope(&ctx, &changes(&[&inside]), "lsp_rename").unwrap();
        assert_eq!(reals.values().collect::<Vec<_>>(), [&work.join("a.py")]);
        // A text edit, a created file, either end of a renamed file, a deleted file: each
        // outside refuses the whole edit, naming it.
        for outside_part in [
            text_edit(&outside),
            json!({"kind": "create", "uri": outside}),
            json!({"kind": "rename", "oldUri": inside, "newUri": outside}),
            json!({"kind": "rename", "oldUri": outside, "newUri": inside}),
            json!({"kind": "delete", "uri": outside}),
        ] {
            let edit = json!({"documentChanges": [text_edit(&inside), outside_part]});
            let e = check_scope(&ctx, &edit, "lsp_rename").unwrap_err();
            assert_eq!(e.kind, ErrorKind::OutOfScope, "{e}");
            assert!(e.message.starts_with("lsp_rename: "), "{e}");
            assert!(
                e.message.contains(&base.join("b.py").display().to_string()),
                "{e}"
            );
            assert!(e.message.contains("nothing was written"), "{e}");
            assert!(e.hint.contains("allow_outside_workdir"), "{e}");
        }
        let third = uri::from_path(&base.join("c.py"));
        let e =
            check_scope(&ctx, &changes(&[&inside, &outside, &third]), "lsp_rename").unwrap_err();
        assert!(e.message.contains("and 1 more"), "{e}");
    }

    #[test]
    fn write_all_writes_every_file_or_none() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let a = base.join("a.txt");
        let b = base.join("b.txt");
        std::fs::write(&a, "1").unwrap();
        std::fs::write(&b, "2").unwrap();
        let state = tempfile::tempdir().unwrap();
        let journal = std::sync::Arc::new(
            toolvisor_files::journal::Journal::open(&state.path().join("journal")).unwrap(),
        );
        let mut ctx = ctx_in(&base);
        ctx.journal = Some(journal);
        let change = |path: &std::path::Path, old: &str, new: &str| FileChange {
            path: path.to_path_buf(),
            old: old.into(),
            new: new.into(),
            edits: 1,
        };
        write_all(
            &ctx,
            &[change(&a, "1", "one"), change(&b, "2", "two")],
            "lsp_rename",
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "two");
        // A later file that cannot be written (a directory) puts back the earlier ones.
        let dir = base.join("d");
        std::fs::create_dir(&dir).unwrap();
        let bad = [change(&a, "one", "uno"), change(&dir, "", "x")];
        assert!(write_all(&ctx, &bad, "lsp_rename").is_err());
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");
        let left: Vec<_> = std::fs::read_dir(&base)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temp file left: {left:?}");
        // The journal is gone once the writes are done or undone.
        assert_eq!(
            std::fs::read_dir(state.path().join("journal"))
                .unwrap()
                .count(),
            0
        );
    }

    /// A FIFO named by a workspace edit is refused when the edit reads it, at once: nothing
    /// waits for a writer (on the old code the read blocked until the watchdog fed it).
    #[tokio::test(flavor = "current_thread")]
    async fn a_rename_refuses_a_fifo_without_waiting_on_it() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        let path = work.join("slow.py");
        let fifo = crate::server::tests::Fifo::new(&path);
        let ctx = ctx_in(&work);
        let shared = crate::server::tests::shared("pylsp");
        let edit = json!({"changes": {uri::from_path(&path): [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
             "newText": "y"}
        ]}});
        let changes = apply_off_thread(&ctx, &shared, edit, Encoding::Utf16, "lsp_rename").await;
        assert!(
            !fifo.watchdog_fired(),
            "the rename waited on the FIFO until the watchdog fed it"
        );
        let err = changes.unwrap_err();
        assert!(
            err.message
                .contains("a FIFO (named pipe), not a regular file"),
            "{err}"
        );
        assert_eq!(
            std::fs::symlink_metadata(&path)
                .map(|m| std::os::unix::fs::FileTypeExt::is_fifo(&m.file_type()))
                .ok(),
            Some(true),
            "the FIFO was replaced"
        );
    }
}
