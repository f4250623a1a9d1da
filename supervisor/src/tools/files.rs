//! Handlers of the file and search tools (`read`, `ls`, `find`, `grep`, `write`, `edit`,
//! `apply_patch`) and of `tool_result_read`, plus `finish`: the one place every tool result
//! passes through on its way out, where secrets are masked and large results are stored
//! and projected. The work is in `toolvisor-files`; it blocks, so it runs on tokio's
//! blocking pool, and a dropped call stops a running search.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use toolvisor_files::image::ImageLimits;
use toolvisor_files::paths::Access;
use toolvisor_files::read::ReadLimits;
use toolvisor_files::search::{Case, FindRequest, GrepRequest, SearchLimits, Visibility};
use toolvisor_files::secrets::Secrets;
use toolvisor_files::store::{ResultStore, StoreConfig};
use toolvisor_files::{Cancel, Changed, Files, FilesConfig};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    ApplyPatchResult, EditResult, FindResult, GrepResult, LsEntry, LsResult, ReadResult,
    ToolResultReadResult, WriteResult,
};
use toolvisor_protocol::tools::{
    ApplyPatchArgs, EditArgs, FindArgs, GrepArgs, GrepCase, LsArgs, ReadArgs, ToolResultReadArgs,
    WriteArgs,
};

use super::spec::Passage;
use super::{CallCtx, Services};
use crate::config::Config;
use toolvisor_lsp::LanguageServers;

/// The file tools' state, from the configuration: limits, confinement, the result store
/// under `<state_dir>/results`, and the secrets known from the daemon's environment.
pub fn open(config: &Config, state_dir: &std::path::Path) -> Result<Files, String> {
    let f = &config.files;
    let r = &config.input_limits.images.resize;
    let files = FilesConfig {
        allow_outside_workdir: f.allow_outside_workdir,
        read_roots: f.read_roots.clone(),
        read: ReadLimits {
            default_lines: f.read_max_lines,
            max_chars: f.read_max_chars,
            max_line_chars: f.read_max_line_chars,
            ..ReadLimits::default()
        },
        images: ImageLimits {
            max_width: r.max_width.min(u64::from(u32::MAX)) as u32,
            max_height: r.max_height.min(u64::from(u32::MAX)) as u32,
            max_bytes: r.max_bytes as usize,
            jpeg_quality: r.jpeg_quality.clamp(1, 100) as u8,
        },
        search: SearchLimits {
            timeout: Duration::from_secs(f.search_timeout_s),
            max_line_chars: f.grep_max_line_chars,
            threads: 0,
        },
        ls_max_entries: f.ls_max_entries,
        protected: protected_locations(config, state_dir),
    };
    if !files.protected.is_empty() {
        // Counted, not listed: the paths would name the sensitive collections' folders.
        tracing::info!(
            locations = files.protected.len(),
            "the file tools keep sensitive data-hub collections out of reach"
        );
    }
    let st = &config.result_store;
    let mut store = StoreConfig::new(state_dir.join("results"));
    store.inline_chars = st.inline_chars;
    store.projection_chars = st.projection_chars;
    store.max_result_bytes = st.max_result_bytes;
    store.max_bytes_per_conversation = st.max_bytes_per_conversation;
    store.max_total_bytes = st.max_total_bytes;
    store.keep = Duration::from_secs(st.keep_s);
    // The model hub's token is a secret wherever it comes from: `[models] token` (not an
    // environment variable, so it is added by name) or `$HF_TOKEN` (named too, in case the
    // patterns were narrowed).
    // So is the inference endpoint's key (`[inference] api_key` or its variable).
    let mut names = config.secrets.env.clone();
    names.extend([
        "HF_TOKEN".to_string(),
        "models.token".to_string(),
        toolvisor_inference::config::API_KEY_VAR.to_string(),
        "inference.api_key".to_string(),
    ]);
    let config_token = config
        .models
        .token
        .clone()
        .map(|t| ("models.token".to_string(), t));
    let config_key = config
        .inference
        .api_key
        .clone()
        .map(|k| ("inference.api_key".to_string(), k));
    let secrets = Secrets::from_vars(
        std::env::vars().chain(config_token).chain(config_key),
        &names,
        &config.secrets.patterns,
        config.secrets.min_length,
    )?
    .with_formats(config.secrets.formats);
    if !secrets.is_empty() {
        tracing::info!(names = ?secrets.names(), "secret values are masked in tool results");
    }
    let store = ResultStore::open(store, secrets).map_err(|e| {
        format!(
            "cannot open the result store under {}: {e}",
            state_dir.display()
        )
    })?;
    let journal_dir = state_dir.join("journal");
    let journal = toolvisor_files::journal::Journal::open(&journal_dir).map_err(|e| {
        format!(
            "cannot open the write journal {}: {e}",
            journal_dir.display()
        )
    })?;
    Ok(Files {
        config: files,
        store,
        journal: Some(Arc::new(journal)),
    })
}

/// Where no file tool may reach: the daemon's own state directory (other conversations'
/// stored results and staged edits, the audit log, the journal: a state dir under the
/// workdir must not make them readable), every sensitive collection's folder of originals
/// and, when there is one, the data hub's own directory (its database and notes hold what was
/// made from them). Wherever they lie; the scope refuses them, and walks leave them out.
fn protected_locations(config: &Config, state_dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = vec![state_dir.to_path_buf()];
    let sensitive: Vec<&toolvisor_data::hub::CollectionConfig> = config
        .data
        .collections
        .values()
        .filter(|c| c.sensitive)
        .collect();
    if sensitive.is_empty() {
        return out;
    }
    out.extend(sensitive.iter().filter_map(|c| c.path.clone()));
    out.push(config.data_dir(state_dir));
    out
}

/// A count argument as the walkers take it (the schema bounds it well below `usize::MAX`).
fn count(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Sets the flag when dropped: a cancelled (dropped) call stops its blocking search.
struct CancelOnDrop(Cancel);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Run blocking file work off the async threads; its error becomes the tool's `ToolError`.
async fn blocking<T: Send + 'static>(
    tool: &'static str,
    work: impl FnOnce() -> toolvisor_files::Result<T> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result.map_err(|e| e.to_tool_error(tool)),
        Err(e) => Err(ToolError::new(
            ErrorKind::Internal,
            format!("{tool}: the worker thread failed: {e}"),
            "report this as a bug; the file was not changed unless the result says so",
        )),
    }
}

/// The file tools' context: the file tools' state (confinement, limits, result store,
/// journal), the largest frame a `tool_result_read` page may fill, and the language servers
/// that fold diagnostics into writes (`None`: writes carry no diagnostics).
pub(crate) struct FileTools<'a> {
    pub files: &'a Arc<Files>,
    pub max_frame: usize,
    pub diagnostics: Option<&'a LanguageServers>,
}

impl<'a> FileTools<'a> {
    pub fn of(services: &'a Services) -> Self {
        FileTools {
            files: &services.files,
            max_frame: services.config.max_frame as usize,
            diagnostics: Some(&services.lsp),
        }
    }
}

/// `read`.
pub(crate) async fn run_read(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    ReadArgs {
        path,
        offset,
        limit,
    }: ReadArgs,
) -> Result<ReadResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    blocking("read", move || {
        let scope = files.scope(&workdir)?;
        let c = &files.config;
        toolvisor_files::read::read(&scope, &path, offset, limit, &c.read, &c.images)
    })
    .await
}

/// `ls`.
pub(crate) async fn run_ls(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    LsArgs { path }: LsArgs,
) -> Result<LsResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    blocking("ls", move || {
        let scope = files.scope(&workdir)?;
        let l = toolvisor_files::list::ls(&scope, path.as_deref(), files.config.ls_max_entries)?;
        let entries = l
            .entries
            .into_iter()
            .map(|e| LsEntry {
                name: e.name,
                kind: e.kind,
                size: e.size,
                target: e.target,
                executable: e.executable.then_some(true),
            })
            .collect();
        let (skipped_protected, notes) = protected_note(l.skipped_protected);
        Ok(LsResult {
            path: l.path,
            entries,
            total: l.total as u64,
            truncated: l.truncated,
            skipped_protected,
            notes,
        })
    })
    .await
}

/// `find`.
pub(crate) async fn run_find(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    args: FindArgs,
) -> Result<FindResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    let (pattern, path) = (args.pattern, args.path);
    let visibility = Visibility {
        hidden: args.hidden.unwrap_or(false),
        ignored: args.ignored.unwrap_or(false),
    };
    let max_results = count(args.max_results.unwrap_or(1000).max(1));
    blocking("find", move || {
            let scope = files.scope(&workdir)?;
            let req = FindRequest {
                pattern: &pattern,
                path: path.as_deref(),
                visibility,
                max_results,
            };
            let r = toolvisor_files::search::find(&scope, &req, &files.config.search, cancel)?;
            let (skipped_protected, notes) = protected_note(r.skipped_protected);
            let note = r.truncated.then(|| format!(
                "{} paths matched; the first {max_results} in path order are listed (raise max_results or narrow the pattern)",
                r.total
            ));
            Ok(FindResult {
                path: r.path,
                pattern,
                paths: r.paths,
                total: r.total as u64,
                truncated: r.truncated,
                timed_out: r.timed_out,
                errors: some(r.errors),
                skipped_protected,
                notes,
                note,
            })
        })
        .await
}

/// `grep`.
pub(crate) async fn run_grep(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    args: GrepArgs,
) -> Result<GrepResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    let (pattern, path, glob) = (args.pattern, args.path, args.glob);
    let case = match args.case.unwrap_or_default() {
        GrepCase::Insensitive => Case::Insensitive,
        GrepCase::Smart => Case::Smart,
        GrepCase::Sensitive => Case::Sensitive,
    };
    let context = count(args.context.unwrap_or(0));
    let max_results = count(args.max_results.unwrap_or(200).max(1));
    let visibility = Visibility {
        hidden: args.hidden.unwrap_or(false),
        ignored: args.ignored.unwrap_or(false),
    };
    let multiline = args.multiline.unwrap_or(false);
    blocking("grep", move || {
        let scope = files.scope(&workdir)?;
        let req = GrepRequest {
            pattern: &pattern,
            path: path.as_deref(),
            glob: glob.as_deref(),
            case,
            context,
            max_results,
            visibility,
            multiline,
        };
        let r = toolvisor_files::search::grep(&scope, &req, &files.config.search, cancel)?;
        Ok(GrepResult {
            path: r.path,
            pattern,
            output: r.output,
            matches: r.matches as u64,
            files_with_matches: r.files_with_matches as u64,
            files_searched: r.files_searched as u64,
            skipped_binary: r.skipped_binary as u64,
            truncated: r.truncated,
            timed_out: r.timed_out,
            errors: some(r.errors),
            notes: some(r.notes),
            skipped_protected: (r.skipped_protected > 0).then_some(r.skipped_protected as u64),
        })
    })
    .await
}

/// `write`.
pub(crate) async fn run_write(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    WriteArgs { path, content }: WriteArgs,
) -> Result<WriteResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    before_write(cx, ctx, vec![path.clone()]).await;
    let (mut result, changed) = blocking("write", move || {
        let scope = files.scope(&workdir)?;
        let w = toolvisor_files::write::write(&scope, &path, &content)?;
        let result = WriteResult {
            path: w.changed.display.clone(),
            status: w.changed.status,
            bytes: w.bytes,
            lines: w.lines,
            previous_bytes: w.previous_bytes,
            diagnostics: None,
        };
        Ok((result, vec![w.changed]))
    })
    .await?;
    result.diagnostics = after_write(cx, ctx, &changed).await;
    Ok(result)
}

/// `edit`.
pub(crate) async fn run_edit(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    EditArgs {
        path,
        old_text,
        new_text,
        replace_all,
    }: EditArgs,
) -> Result<EditResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    let replace_all = replace_all.unwrap_or(false);
    before_write(cx, ctx, vec![path.clone()]).await;
    let (mut result, changed) = blocking("edit", move || {
        let scope = files.scope(&workdir)?;
        let e = toolvisor_files::edit::edit(&scope, &path, &old_text, &new_text, replace_all)?;
        let result = EditResult {
            path: e.changed.display.clone(),
            replacements: e.replacements as u64,
            lines: e.lines.iter().map(|&l| l as u64).collect(),
            diff: e.diff,
            notes: some(e.notes),
            diagnostics: None,
        };
        Ok((result, vec![e.changed]))
    })
    .await?;
    result.diagnostics = after_write(cx, ctx, &changed).await;
    Ok(result)
}

/// `apply_patch`.
pub(crate) async fn run_apply_patch(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    ApplyPatchArgs { patch }: ApplyPatchArgs,
) -> Result<ApplyPatchResult, ToolError> {
    let files = cx.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    before_write(cx, ctx, toolvisor_files::patch::targets(&patch)).await;
    let (mut result, changed) = blocking("apply_patch", move || {
        let scope = files.scope(&workdir)?;
        let r = toolvisor_files::patch::apply_patch(&scope, &patch, files.journal.as_deref())?;
        let result = ApplyPatchResult {
            files: r.files,
            notes: some(r.notes),
            diagnostics: None,
        };
        Ok((result, r.changed))
    })
    .await?;
    result.diagnostics = after_write(cx, ctx, &changed).await;
    Ok(result)
}

/// `tool_result_read`.
pub(crate) async fn run_tool_result_read(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    args: ToolResultReadArgs,
) -> Result<ToolResultReadResult, ToolError> {
    let files = cx.files.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    let (reference, offset, limit) = (
        args.reference,
        args.offset.map(count),
        args.limit.map(count),
    );
    let conversation = ctx.conversation.clone();
    let max_frame = cx.max_frame;
    blocking("tool_result_read", move || {
        files
            .store
            .read(&conversation, &reference, offset, limit, max_frame)
    })
    .await
}

/// Where every write-tier file tool starts, with the paths it is about to write (as the
/// caller named them): the diagnostics those files have now become the run's baseline where
/// it has none (`LanguageServers::before_write`), so the first write of a file reports only
/// what it introduced. A path out of scope or not there yet is skipped (the write itself
/// answers for it); never fails.
async fn before_write(cx: &FileTools<'_>, ctx: &CallCtx, paths: Vec<String>) {
    let Some(lsp) = cx.diagnostics else {
        return;
    };
    let files = cx.files.clone();
    let workdir = ctx.workdir.clone();
    let reals = tokio::task::spawn_blocking(move || {
        let Ok(scope) = files.scope(&workdir) else {
            return Vec::new();
        };
        paths
            .iter()
            .filter_map(|p| scope.resolve(p, Access::Write).ok())
            .map(|r| r.real)
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    if !reals.is_empty() {
        lsp.before_write(&ctx.run(), &reals).await;
    }
}

/// Where every write-tier file tool ends, with the files it changed (`Changed`: the real
/// path, how it is shown, created / modified / deleted): the one place diagnostics on write
/// are made, for its result's `diagnostics` (`None` without language servers or files).
async fn after_write(
    cx: &FileTools<'_>,
    ctx: &CallCtx,
    changed: &[Changed],
) -> Option<toolvisor_protocol::results::WriteDiagnostics> {
    for c in changed {
        tracing::debug!(conversation = ctx.conversation, path = %c.path.display(), status = c.status.as_str(), "file written");
    }
    // Diagnostics on write: sync every written file through its language server and fold in
    // only what is new for this run (never fails the write; reasons become notes). A deleted
    // file (a move's old name too) has none of its own, but what imported it may break.
    let paths: Vec<std::path::PathBuf> = changed.iter().map(|c| c.path.clone()).collect();
    let lsp = cx.diagnostics.filter(|_| !paths.is_empty())?;
    Some(
        lsp.after_write(&ctx.run(), &ctx.real_workdir(), &paths)
            .await,
    )
}

/// `ls` and `find` left protected paths out: how many (`skipped_protected`) and why, in
/// `notes` (`grep` says it in its own notes); both absent when none was.
fn protected_note(skipped: usize) -> (Option<u64>, Option<Vec<String>>) {
    if skipped == 0 {
        return (None, None);
    }
    (
        Some(skipped as u64),
        Some(vec![toolvisor_files::protect::skipped_note(skipped)]),
    )
}

/// A list a result leaves out when it is empty.
fn some<T>(list: Vec<T>) -> Option<Vec<T>> {
    (!list.is_empty()).then_some(list)
}

/// Streamed output (`event` frames) on its way to the client: known secrets masked, as in
/// results. A secret cut in two by a chunk boundary is not recognised in either half; the
/// call's final result, masked whole, is the reliable record.
pub(crate) fn mask_stream(secrets: &Secrets, text: String) -> String {
    if secrets.is_empty() {
        return text;
    }
    let mut counts = std::collections::BTreeMap::new();
    secrets.mask_str(&text, &mut counts).unwrap_or(text)
}

/// A tool's error on its way to the client: known secrets masked in its message and hint,
/// as in results (an `out_of_scope` quotes where a link leads, which may hold one).
pub(crate) fn mask_error(files: &Files, mut e: ToolError) -> ToolError {
    let secrets = files.store.secrets();
    if secrets.is_empty() {
        return e;
    }
    e.message = mask_stream(secrets, std::mem::take(&mut e.message));
    e.hint = mask_stream(secrets, std::mem::take(&mut e.hint));
    e
}

/// Every tool's result on its way to the client: known secrets masked, and a result longer
/// than `result_store.inline_chars` stored under `<state_dir>/results/<conversation>/` and
/// replaced by a bounded projection with refs (`tool_result_read`). What the tool's spec says
/// passes (`Passage`: `tool_result_read`'s pages, already bounded and masked; `eval`'s
/// figures, bounded by `kernels.image_bytes`) and an image (bounded by the model's limits)
/// pass whole.
pub async fn finish(
    files: &Arc<Files>,
    conversation: &str,
    tool: &str,
    passage: Passage,
    mut value: Json,
) -> Result<Json, ToolError> {
    if passage == Passage::Whole || value.get("kind").is_some_and(|k| k == "image") {
        return Ok(value);
    }
    // A field that passes whole (`eval`'s `images`): the store masks and projects the rest.
    if let Passage::FieldWhole(field) = passage
        && let Some(whole) = value.as_object_mut().and_then(|m| m.remove(field))
    {
        let mut rest = Box::pin(finish(files, conversation, tool, Passage::Stored, value)).await?;
        if let Some(map) = rest.as_object_mut() {
            map.insert(field.into(), whole);
        }
        return Ok(rest);
    }
    let files = files.clone();
    if files.store.surely_fits(&value) {
        if files.store.secrets().is_empty() {
            return Ok(value);
        }
        return Ok(files.store.finish(conversation, tool, value));
    }
    let conversation = conversation.to_string();
    let name = tool.to_string();
    tokio::task::spawn_blocking(move || files.store.finish(&conversation, &name, value))
        .await
        .map_err(|e| {
            ToolError::new(
                ErrorKind::Internal,
                format!("{tool}: its result could not be stored or projected: {e}"),
                "report this as a bug; run the tool again with a narrower request",
            )
        })
}

/// The file and search tools' declarations, and `tool_result_read` (all in-process:
/// attached).
pub(crate) fn declare() -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    vec![
        ToolSpec::new(
            "read",
            Tier::Read,
            "files",
            "Read a text file with line numbers, or an image (PNG, JPEG, GIF, WebP).",
            |s, ctx, a| Box::pin(async move { run_read(&FileTools::of(s), ctx, a).await }),
        ),
        ToolSpec::new(
            "ls",
            Tier::Read,
            "files",
            "List a directory: name (dirs end in /), type, size, link target.",
            |s, ctx, a| Box::pin(async move { run_ls(&FileTools::of(s), ctx, a).await }),
        ),
        ToolSpec::new(
            "find",
            Tier::Read,
            "files",
            "Find files by glob (`*.rs` names, `src/**/*.rs` paths); ignored and hidden ones only if asked.",
            |s, ctx, a| Box::pin(async move { run_find(&FileTools::of(s), ctx, a).await }),
        ),
        ToolSpec::new(
            "grep",
            Tier::Read,
            "files",
            "Regex search (Rust syntax) in files, skipping ignored, hidden and binary ones.",
            |s, ctx, a| Box::pin(async move { run_grep(&FileTools::of(s), ctx, a).await }),
        ),
        ToolSpec::new(
            "write",
            Tier::Write,
            "files",
            "Create or replace a file; parent directories are created.",
            |s, ctx, a| Box::pin(async move { run_write(&FileTools::of(s), ctx, a).await }),
        )
        .idempotent(true)
        .approval(Approval::Always),
        ToolSpec::new(
            "edit",
            Tier::Write,
            "files",
            "Replace an exact text in a file (once, or every occurrence); returns a diff.",
            |s, ctx, a| Box::pin(async move { run_edit(&FileTools::of(s), ctx, a).await }),
        )
        .approval(Approval::Always),
        ToolSpec::new(
            "apply_patch",
            Tier::Write,
            "files",
            "Apply a unified diff or a `*** Begin Patch` patch; every hunk applies or nothing is written.",
            |s, ctx, a| Box::pin(async move { run_apply_patch(&FileTools::of(s), ctx, a).await }),
        )
        .approval(Approval::Always),
        ToolSpec::new(
            "tool_result_read",
            Tier::Read,
            "result_store",
            "Read more of a result cut short, by its ref.",
            |s, ctx, a| Box::pin(async move { run_tool_result_read(&FileTools::of(s), ctx, a).await }),
        )
        .passage(Passage::Whole),
    ]
}
