//! Handlers of the structural tools: `ast_grep`, `ast_edit`, `resolve`. Matching, rewriting
//! and the staged-edit store are in `toolvisor-structural`; this module resolves paths through
//! the file tools' `Scope` (reads for `ast_grep`, writes for `ast_edit`, every file again at
//! `resolve accept`) and hands that scope to the library, which opens every file beneath it
//! and writes an accept through the file tools' journaled multi-file writer; it runs the work
//! on blocking threads (a cancelled search stops its walk; an accept always runs to its end,
//! so it stays all-or-nothing), and turns results and errors into the tools' JSON.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use toolvisor_files::Scope;
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    AstEditFile, AstEditResult, AstGrepResult, AstMatch, AstSkipped, ResolveResult,
};
use toolvisor_protocol::tools::{AstEditArgs, AstGrepArgs, ResolveAction, ResolveArgs};
use toolvisor_structural::Error;
use toolvisor_structural::rewrite::{self, Proposal, shown};
use toolvisor_structural::search::{self, SearchRequest};

use toolvisor_files::Files;
use toolvisor_lsp::LanguageServers;
use toolvisor_structural::store::{EditStore, Staged};

use super::{CallCtx, Services};

/// Default of `max_results` for both tools.
const DEFAULT_MAX_RESULTS: usize = 50;
/// Characters of unified diff shown by `ast_edit`.
const PREVIEW_CHARS: usize = 6_000;
/// Files named in the one-line summary of `ast_edit`.
const SUMMARY_FILES: usize = 5;

/// The structural tools' context: the file tools' state (every path goes through its
/// scope), the staged-edit store, and the language servers that fold diagnostics into an
/// accept (`None`: an accept carries no diagnostics).
pub(crate) struct StructuralTools<'a> {
    pub files: &'a Arc<Files>,
    pub edits: &'a Arc<EditStore>,
    pub diagnostics: Option<&'a LanguageServers>,
    /// What `ast_grep` remembers between searches.
    pub cache: Option<&'a Arc<toolvisor_structural::cache::SearchCache>>,
    /// The daemon's parse budget and minified-file rule.
    pub limits: toolvisor_structural::budget::Limits,
}

impl<'a> StructuralTools<'a> {
    pub fn of(services: &'a Services) -> Self {
        StructuralTools {
            files: &services.files,
            edits: &services.edits,
            diagnostics: Some(&services.lsp),
            cache: Some(&services.search_cache),
            limits: services.structural_limits.clone(),
        }
    }
}

/// `ast_edit`'s approval line: what will be rewritten where.
fn edit_summary(_: &Services, _: &CallCtx, a: &AstEditArgs) -> String {
    let path = a.path.as_deref().unwrap_or("the workdir");
    let language = a
        .language
        .as_deref()
        .map(|l| format!(" ({l})"))
        .unwrap_or_default();
    format!(
        "ast_edit: stage `{}` → `{}` in {path}{language} (nothing is written until resolve)",
        a.pattern, a.rewrite
    )
}

/// `resolve`'s approval line: which edit is accepted or discarded.
fn resolve_summary(_: &Services, _: &CallCtx, a: &ResolveArgs) -> String {
    let action = serde_json::to_value(a.action)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!("resolve: {action} {}", a.edit_id)
}

/// Sets its flag when dropped: a cancelled call drops its future, and the walk sees the flag.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The run's file scope and the real location of `path` (the workdir when absent) for
/// `access`: the same confinement, `out_of_scope` answer and `[files] allow_outside_workdir`
/// switch as the file tools. Blocking (it resolves symbolic links).
fn scoped(
    files: &toolvisor_files::Files,
    tool: &str,
    workdir: &Path,
    path: Option<&str>,
    access: Access,
) -> Result<(Scope, PathBuf), ToolError> {
    let scope = files.scope(workdir).map_err(|e| e.to_tool_error(tool))?;
    let given = path.map(str::trim).filter(|p| !p.is_empty()).unwrap_or(".");
    let real = scope
        .resolve(given, access)
        .map_err(|e| e.to_tool_error(tool))?
        .real;
    Ok((scope, real))
}

/// Run blocking structural work with a cancel flag the walk checks.
async fn blocking<T: Send + 'static>(
    tool: &str,
    work: impl FnOnce(&AtomicBool) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let flag = Arc::new(AtomicBool::new(false));
    let _cancel = CancelOnDrop(flag.clone());
    tokio::task::spawn_blocking(move || work(&flag))
        .await
        .map_err(|e| {
            ToolError::new(
                ErrorKind::Internal,
                format!("{tool}: the worker thread failed: {e}"),
                "report this as a bug; nothing was written",
            )
        })?
}

/// A tool error for a library error, with what to do about it.
fn tool_error(tool: &str, workdir: &Path, err: Error) -> ToolError {
    use ErrorKind as K;
    if let Error::Refused { source, .. } = &err
        && let Some(outside) = source.downcast_ref::<toolvisor_files::Error>()
    {
        // The file scope's own answer (kind, hint), with what it means for the edit.
        let mut e = outside.to_tool_error(tool);
        e.message = format!("{tool}: {err}");
        if matches!(outside, toolvisor_files::Error::Outside { .. }) {
            e.hint = "the edit is still staged: discard it, or put the file back as it was staged; the operator can lift this with `[files] allow_outside_workdir`".into();
        }
        return e;
    }
    let message = format!("{tool}: {err}");
    let (kind, hint) = match &err {
        Error::UnknownLanguage { .. } => (K::InvalidArgs, "pass one of the listed ids as `language`".to_string()),
        Error::LanguageUnknownForFile { .. } => (
            K::InvalidArgs,
            "pass `language` (e.g. \"python\"); `toolvisor tools --json` lists the ids".to_string(),
        ),
        Error::LanguageRequired { found, .. } => (
            K::InvalidArgs,
            match found.first() {
                Some((id, _)) => format!(
                    "pass `language` (\"{id}\" has the most files here), or point `path` at a file or a directory of one language"
                ),
                None => "point `path` at source files, or pass `language`".to_string(),
            },
        ),
        Error::NotRegular { .. } => (
            K::InvalidArgs,
            "ast_grep and ast_edit read regular files only (a FIFO's reader would wait for a writer for ever); read it with `bash` if you mean to, or name a source file or directory".to_string(),
        ),
        Error::PathNotFound { .. } => (
            K::NotFound,
            format!(
                "relative paths start at the workdir {}; check the spelling",
                workdir.display()
            ),
        ),
        Error::PatternInvalid { language, .. } => (
            K::InvalidArgs,
            format!(
                "write the pattern as valid {language} code forming one node: $NAME stands for one node, $$$NAME for a run (arguments, statements); several statements need their enclosing block"
            ),
        ),
        Error::RewriteUnbound { .. } => (
            K::InvalidArgs,
            "use only metavariables the pattern binds, or bind the missing one in the pattern".to_string(),
        ),
        Error::TooManyReplacements { found, .. } => (
            K::InvalidArgs,
            format!(
                "if all {found} are intended, raise max_results (at most 10000); otherwise narrow `pattern` or `path`. A partial rewrite is never staged"
            ),
        ),
        Error::EditNotFound { .. } => (
            K::NotFound,
            "edit ids come from ast_edit in this conversation; edits of other conversations are not visible".to_string(),
        ),
        Error::EditResolved { .. } => (
            K::NotFound,
            "a resolved edit cannot be resolved again; stage a new one with ast_edit".to_string(),
        ),
        Error::Conflict { .. } => (
            K::Conflict,
            "the edit is still staged: discard it and run ast_edit again on the current files".to_string(),
        ),
        Error::WriteFailed { unrestored, .. } if !unrestored.is_empty() => (
            K::Io,
            "check the files named as not restored by hand; the edit is still staged".to_string(),
        ),
        Error::WriteFailed { .. } => (
            K::Io,
            "fix the cause (permissions, disk space) and resolve again: the edit is still staged".to_string(),
        ),
        Error::Refused { .. } => (
            K::OutOfScope,
            "the edit is still staged; discard it, or ask the operator to widen the workdir's scope".to_string(),
        ),
        Error::Io { .. } | Error::Store { .. } => (
            K::Io,
            "check the path's permissions and the disk; nothing was written".to_string(),
        ),
        Error::Cancelled => (K::Cancelled, "the call was cancelled".to_string()),
        Error::Busy { .. } => (
            K::Busy,
            format!(
                "retry when other structural calls have finished, or narrow `path`; the operator can raise `[structural] parse_budget_bytes` (memory grows with it: a tree costs many times its source) or `parse_wait_ms`; see {}",
                toolvisor_structural::budget::BUDGET_KEY
            ),
        ),
        Error::Minified { .. } => (
            K::InvalidArgs,
            "a minified file's syntax tree takes gigabytes: search it with `grep`, or point at its unminified source; the operator can raise `[structural] max_minified_bytes` or `max_line_bytes`".to_string(),
        ),
    };
    ToolError::new(kind, message, hint)
}

fn max_results(value: Option<u64>) -> usize {
    value.map_or(DEFAULT_MAX_RESULTS, |n| n.clamp(1, 10_000) as usize)
}

fn skipped_list(skipped: &[search::Skipped], workdir: &Path) -> Vec<AstSkipped> {
    skipped
        .iter()
        .map(|s| AstSkipped {
            path: shown(&s.path, workdir),
            why: s.why.clone(),
        })
        .collect()
}

pub(crate) async fn ast_grep(
    cx: &StructuralTools<'_>,
    ctx: &CallCtx,
    args: AstGrepArgs,
) -> Result<AstGrepResult, ToolError> {
    let given = ctx.workdir.clone();
    let files = cx.files.clone();
    let max = max_results(args.max_results);
    let cache = cx.cache.cloned();
    let limits = cx.limits.clone();
    let (workdir, result) = blocking("ast_grep", move |cancel| {
        // Reads may reach the read roots; the walk never follows a symbolic link, so it
        // stays under the resolved root.
        let (scope, root) = scoped(
            &files,
            "ast_grep",
            &given,
            args.path.as_deref(),
            Access::Read,
        )?;
        let workdir = scope.root().to_path_buf();
        let result = search::search_cached(
            &SearchRequest {
                pattern: &args.pattern,
                language: args.language.as_deref(),
                path: &root,
                scope: &scope,
                max_results: max,
                prefilter: true,
                threads: threads(),
                cancel: Some(cancel),
                limits,
            },
            cache.as_deref(),
        )
        .map_err(|e| tool_error("ast_grep", &workdir, e))?;
        Ok((workdir, result))
    })
    .await?;
    let matches: Vec<AstMatch> = result
        .matches
        .iter()
        .map(|m| {
            let path = shown(&m.path, &workdir);
            AstMatch {
                location: format!("{path}:{}:{}", m.line, m.column),
                path,
                line: m.line as u64,
                column: m.column as u64,
                end_line: m.end_line as u64,
                end_column: m.end_column as u64,
                text: m.text.clone(),
                captures: m.captures.clone(),
            }
        })
        .collect();
    let summary = if result.total == 0 {
        format!(
            "no match in {} {} files",
            result.files_searched, result.language
        )
    } else if result.truncated {
        format!(
            "{} matches in {} files; showing the first {} (by path and position): raise max_results or narrow path to see the rest",
            result.total,
            result.files_matched,
            result.matches.len()
        )
    } else {
        format!(
            "{} match{} in {} file{}",
            result.total,
            if result.total == 1 { "" } else { "es" },
            result.files_matched,
            if result.files_matched == 1 { "" } else { "s" }
        )
    };
    Ok(AstGrepResult {
        summary,
        language: result.language.to_string(),
        language_note: result.language_note,
        pattern_context: result.pattern_context,
        shown: matches.len() as u64,
        matches,
        total: result.total as u64,
        truncated: result.truncated,
        files_searched: result.files_searched as u64,
        files_parsed: result.files_parsed as u64,
        files_cached: result.files_cached as u64,
        files_matched: result.files_matched as u64,
        skipped: skipped_list(&result.skipped, &workdir),
        skipped_total: result.skipped_total as u64,
    })
}

pub(crate) async fn ast_edit(
    cx: &StructuralTools<'_>,
    ctx: &CallCtx,
    args: AstEditArgs,
) -> Result<AstEditResult, ToolError> {
    let given = ctx.workdir.clone();
    let files = cx.files.clone();
    let max = max_results(args.max_results);
    let store = cx.edits.clone();
    let conversation = ctx.conversation.clone();
    let limits = cx.limits.clone();
    let (workdir, proposal, staged, preview) = blocking("ast_edit", move |cancel| {
        let (scope, root) = scoped(
            &files,
            "ast_edit",
            &given,
            args.path.as_deref(),
            Access::Write,
        )?;
        let workdir = scope.root().to_path_buf();
        let fail = |e| tool_error("ast_edit", &workdir, e);
        let proposal = rewrite::propose(
            &SearchRequest {
                pattern: &args.pattern,
                language: args.language.as_deref(),
                path: &root,
                scope: &scope,
                max_results: max,
                prefilter: true,
                threads: threads(),
                cancel: Some(cancel),
                limits,
            },
            &args.rewrite,
        )
        .map_err(fail)?;
        if cancel.load(Ordering::Relaxed) {
            return Err(fail(Error::Cancelled));
        }
        let staged = if proposal.files.is_empty() {
            None
        } else {
            Some(
                store
                    .stage(&conversation, &args.pattern, &args.rewrite, &proposal)
                    .map_err(fail)?,
            )
        };
        let preview = rewrite::preview(&proposal.files, &workdir, PREVIEW_CHARS);
        Ok((workdir, proposal, staged, preview))
    })
    .await?;
    let files: Vec<AstEditFile> = proposal
        .files
        .iter()
        .map(|f| AstEditFile {
            path: shown(&f.path, &workdir),
            replacements: f.replacements as u64,
        })
        .collect();
    let notes = proposal_notes(&proposal);
    let Some(staged) = staged else {
        return Ok(nothing_staged(&proposal, files, notes, &workdir));
    };
    let summary = staged_summary(&staged, &proposal, &workdir);
    Ok(AstEditResult {
        edit_id: Some(staged.id),
        summary,
        replacements: staged.replacements as u64,
        files,
        preview: Some(preview.diff),
        preview_truncated: Some(preview.truncated),
        language: proposal.language.to_string(),
        language_note: proposal.language_note,
        pattern_context: proposal.pattern_context,
        notes,
        files_searched: proposal.files_searched as u64,
        skipped: skipped_list(&proposal.skipped, &workdir),
        skipped_total: proposal.skipped_total as u64,
    })
}

/// The answer when the rewrite changes nothing: no edit is staged.
fn nothing_staged(
    proposal: &Proposal,
    files: Vec<AstEditFile>,
    notes: Vec<String>,
    workdir: &Path,
) -> AstEditResult {
    AstEditResult {
        edit_id: None,
        summary: format!(
            "(proposed) 0 replacements: nothing to change in {} {} files; nothing was staged",
            proposal.files_searched, proposal.language
        ),
        replacements: 0,
        files,
        preview: None,
        preview_truncated: None,
        language: proposal.language.to_string(),
        language_note: proposal.language_note.clone(),
        pattern_context: proposal.pattern_context.clone(),
        notes,
        files_searched: proposal.files_searched as u64,
        skipped: skipped_list(&proposal.skipped, workdir),
        skipped_total: proposal.skipped_total as u64,
    }
}

/// What the model should know about matches the proposal left alone: nested in another
/// replaced match, or already reading as the rewrite.
fn proposal_notes(proposal: &Proposal) -> Vec<String> {
    let mut notes = Vec::new();
    if proposal.nested > 0 {
        notes.push(format!(
            "{} match(es) lie inside another replaced match and were not rewritten on their own (the outer rewrite keeps their original text); accept, then run ast_edit again to rewrite them",
            proposal.nested
        ));
    }
    if proposal.unchanged > 0 {
        notes.push(format!(
            "{} match(es) already read as the rewrite: nothing to change there",
            proposal.unchanged
        ));
    }
    notes
}

/// The staged edit in one line: its replacements and first files, and how to resolve it.
fn staged_summary(staged: &Staged, proposal: &Proposal, workdir: &Path) -> String {
    let mut named: Vec<String> = proposal
        .files
        .iter()
        .take(SUMMARY_FILES)
        .map(|f| format!("{} {}", shown(&f.path, workdir), f.replacements))
        .collect();
    if proposal.files.len() > SUMMARY_FILES {
        named.push("…".into());
    }
    format!(
        "(proposed) {} replacement{} in {} file{} ({}); nothing is written yet … call resolve with edit_id \"{}\" (action \"accept\" writes every file or none, \"discard\" drops it)",
        staged.replacements,
        if staged.replacements == 1 { "" } else { "s" },
        staged.files,
        if staged.files == 1 { "" } else { "s" },
        named.join(", "),
        staged.id
    )
}

pub(crate) async fn resolve(
    cx: &StructuralTools<'_>,
    ctx: &CallCtx,
    args: ResolveArgs,
) -> Result<ResolveResult, ToolError> {
    let given = ctx.workdir.clone();
    let files = cx.files.clone();
    let store = cx.edits.clone();
    let conversation = ctx.conversation.clone();
    let id = args.edit_id.trim().to_string();
    match args.action {
        ResolveAction::Discard => {
            let (workdir, info) = blocking("resolve", move |_| {
                let workdir = std::fs::canonicalize(&given).unwrap_or(given);
                let info = store
                    .discard(&conversation, &id)
                    .map_err(|e| tool_error("resolve", &workdir, e))?;
                Ok((workdir, info))
            })
            .await?;
            Ok(ResolveResult {
                summary: format!(
                    "discarded {}: nothing was written ({} replacements in {} files dropped)",
                    info.id,
                    info.replacements,
                    info.files.len()
                ),
                edit_id: info.id,
                action: ResolveAction::Discard,
                files: Some(info.files.iter().map(|(p, _)| shown(p, &workdir)).collect()),
                written: None,
                replacements: None,
                diagnostics: None,
            })
        }
        ResolveAction::Accept => {
            // The diagnostics the staged files have now are the run's baseline where it has
            // none, so the accept reports only what the edit introduced.
            if let Some(lsp) = cx.diagnostics {
                let (store, conversation, id) = (store.clone(), conversation.clone(), id.clone());
                let staged = tokio::task::spawn_blocking(move || store.get(&conversation, &id))
                    .await
                    .ok()
                    .and_then(Result::ok);
                if let Some(info) = staged {
                    let paths: Vec<_> = info.files.into_iter().map(|(p, _)| p).collect();
                    lsp.before_write(&ctx.run(), &paths).await;
                }
            }
            // The blocking task runs to its end even if this call is cancelled, so an accept
            // is never cut between two writes.
            let (workdir, accepted) = blocking("resolve", move |_| {
                // Every file is checked again now, with the scope of this call: the edit may
                // have been staged under another configuration, or a file swapped for a
                // symbolic link since.
                let scope = files
                    .scope(&given)
                    .map_err(|e| e.to_tool_error("resolve"))?;
                let workdir = scope.root().to_path_buf();
                let accepted = store
                    .accept(&conversation, &id, &scope, files.journal.as_deref())
                    .map_err(|e| tool_error("resolve", &workdir, e))?;
                Ok((workdir, accepted))
            })
            .await?;
            // The same path as `write`/`edit`/`apply_patch`: only diagnostics new for this run.
            let diagnostics = match cx.diagnostics {
                Some(lsp) => Some(
                    lsp.after_write(&ctx.run(), &ctx.real_workdir(), &accepted.written)
                        .await,
                ),
                None => None,
            };
            Ok(ResolveResult {
                summary: format!(
                    "accepted {}: wrote {} replacements in {} files",
                    accepted.id,
                    accepted.replacements,
                    accepted.written.len()
                ),
                edit_id: accepted.id,
                action: ResolveAction::Accept,
                files: None,
                written: Some(
                    accepted
                        .written
                        .iter()
                        .map(|p| shown(p, &workdir))
                        .collect(),
                ),
                replacements: Some(accepted.replacements as u64),
                diagnostics,
            })
        }
    }
}

/// The structural tools' declarations (the tree-sitter grammars are linked in: attached).
pub(crate) fn declare() -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    vec![
        ToolSpec::new(
            "ast_grep",
            Tier::Read,
            "structural",
            "Structural code search (ast-grep): `$NAME` one node, `$$$NAME` siblings, `$_` any node; matches with captures.",
            |s, ctx, a| Box::pin(async move { ast_grep(&StructuralTools::of(s), ctx, a).await }),
        ),
        ToolSpec::new(
            "ast_edit",
            Tier::Write,
            "structural",
            "Stage a structural rewrite (ast-grep pattern to template); returns an edit_id and a diff for resolve.",
            |s, ctx, a| Box::pin(async move { ast_edit(&StructuralTools::of(s), ctx, a).await }),
        ).additive()
        .approval(Approval::Always)
        .summary(edit_summary),
        ToolSpec::new(
            "resolve",
            Tier::Write,
            "structural",
            "Accept (all files or none) or discard an edit ast_edit staged.",
            |s, ctx, a| Box::pin(async move { resolve(&StructuralTools::of(s), ctx, a).await }),
        )
        .approval(Approval::Always)
        .summary(resolve_summary),
    ]
}
