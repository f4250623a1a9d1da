//! Handlers of the file and search tools (`read`, `ls`, `find`, `grep`, `write`, `edit`,
//! `apply_patch`) and of `tool_result_read`, plus `finish`: the one place every tool result
//! passes through on its way out, where secrets are masked and large results are stored
//! and projected. The work is in `toolvisor-files`; it blocks, so it runs on tokio's
//! blocking pool, and a dropped call stops a running search.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_files::image::ImageLimits;
use toolvisor_files::read::{ReadLimits, ReadOutput};
use toolvisor_files::search::{Case, FindRequest, GrepRequest, SearchLimits, Visibility};
use toolvisor_files::secrets::Secrets;
use toolvisor_files::store::{ResultStore, StoreConfig};
use toolvisor_files::{Cancel, Changed, Files, FilesConfig};
use toolvisor_protocol::error::{ErrorKind, ToolError};

use crate::config::Config;
use crate::daemon::Daemon;
use crate::registry::ToolSpec;
use crate::session::CallCtx;

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
    };
    let st = &config.result_store;
    let mut store = StoreConfig::new(state_dir.join("results"));
    store.inline_chars = st.inline_chars;
    store.projection_chars = st.projection_chars;
    store.max_result_bytes = st.max_result_bytes;
    store.max_bytes_per_conversation = st.max_bytes_per_conversation;
    store.max_total_bytes = st.max_total_bytes;
    store.keep = Duration::from_secs(st.keep_s);
    let secrets = Secrets::from_env(
        &config.secrets.env,
        &config.secrets.patterns,
        config.secrets.min_length,
    )?;
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

fn s<'a>(args: &'a Json, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Json::as_str)
}
/// An integer argument; one past `i64` (2^63 and up) is refused rather than read as absent,
/// which made `read` with `offset` 2^63 silently start at line 1.
fn int(tool: &str, args: &Json, key: &str) -> Result<Option<i64>, ToolError> {
    match args.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "{tool}: argument `{key}` = {v} is out of range (at most {})",
                    i64::MAX
                ),
                format!(
                    "pass a smaller `{key}`; `toolvisor tools --json` shows the schema of `{tool}`"
                ),
            )
        }),
    }
}
fn flag(args: &Json, key: &str) -> bool {
    args.get(key).and_then(Json::as_bool).unwrap_or(false)
}
fn need<'a>(tool: &str, args: &'a Json, key: &str) -> Result<&'a str, ToolError> {
    s(args, key).ok_or_else(|| {
        ToolError::new(
            ErrorKind::InvalidArgs,
            format!("{tool}: missing required argument `{key}`"),
            format!("`toolvisor tools --json` shows the schema of `{tool}`"),
        )
    })
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

pub async fn run(
    daemon: &Arc<Daemon>,
    ctx: &CallCtx,
    spec: &ToolSpec,
    args: Json,
) -> Result<Json, ToolError> {
    let files = daemon.files.clone();
    let workdir: PathBuf = ctx.workdir.clone();
    let cancel = Cancel::default();
    let _stop_on_drop = CancelOnDrop(cancel.clone());
    match spec.name {
        "read" => {
            let path = need("read", &args, "path")?.to_string();
            let (offset, limit) = (int("read", &args, "offset")?, int("read", &args, "limit")?);
            blocking("read", move || {
                let scope = files.scope(&workdir)?;
                let c = &files.config;
                let out = toolvisor_files::read::read(
                    &scope,
                    &path,
                    offset,
                    limit.map(|l| l.max(0) as u64),
                    &c.read,
                    &c.images,
                )?;
                Ok(read_json(out))
            })
            .await
        }
        "ls" => {
            let path = s(&args, "path").map(str::to_string);
            blocking("ls", move || {
                let scope = files.scope(&workdir)?;
                let l = toolvisor_files::list::ls(
                    &scope,
                    path.as_deref(),
                    files.config.ls_max_entries,
                )?;
                let entries: Vec<Json> = l
                    .entries
                    .iter()
                    .map(|e| {
                        let mut v = json!({"name": e.name, "type": e.kind});
                        if let Some(size) = e.size {
                            v["size"] = json!(size);
                        }
                        if let Some(t) = &e.target {
                            v["target"] = json!(t);
                        }
                        if e.executable {
                            v["executable"] = json!(true);
                        }
                        v
                    })
                    .collect();
                Ok(
                    json!({"path": l.path, "entries": entries, "total": l.total, "truncated": l.truncated}),
                )
            })
            .await
        }
        "find" => {
            let pattern = need("find", &args, "pattern")?.to_string();
            let path = s(&args, "path").map(str::to_string);
            let visibility = Visibility {
                hidden: flag(&args, "hidden"),
                ignored: flag(&args, "ignored"),
            };
            let max_results = int("find", &args, "max_results")?.unwrap_or(1000).max(1) as usize;
            blocking("find", move || {
                let scope = files.scope(&workdir)?;
                let req = FindRequest {
                    pattern: &pattern,
                    path: path.as_deref(),
                    visibility,
                    max_results,
                };
                let r = toolvisor_files::search::find(&scope, &req, &files.config.search, cancel)?;
                let mut v = json!({
                    "path": r.path, "pattern": pattern, "paths": r.paths, "total": r.total,
                    "truncated": r.truncated, "timed_out": r.timed_out,
                });
                if !r.errors.is_empty() {
                    v["errors"] = json!(r.errors);
                }
                if r.truncated {
                    v["note"] = json!(format!(
                        "{} paths matched; the first {max_results} in path order are listed (raise max_results or narrow the pattern)",
                        r.total
                    ));
                }
                Ok(v)
            })
            .await
        }
        "grep" => {
            let pattern = need("grep", &args, "pattern")?.to_string();
            let path = s(&args, "path").map(str::to_string);
            let glob = s(&args, "glob").map(str::to_string);
            let case = match s(&args, "case") {
                Some("insensitive") => Case::Insensitive,
                Some("smart") => Case::Smart,
                _ => Case::Sensitive,
            };
            let context = int("grep", &args, "context")?.unwrap_or(0).max(0) as usize;
            let max_results = int("grep", &args, "max_results")?.unwrap_or(200).max(1) as usize;
            let visibility = Visibility {
                hidden: flag(&args, "hidden"),
                ignored: flag(&args, "ignored"),
            };
            let multiline = flag(&args, "multiline");
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
                let mut v = json!({
                    "path": r.path, "pattern": pattern, "output": r.output, "matches": r.matches,
                    "files_with_matches": r.files_with_matches, "files_searched": r.files_searched,
                    "skipped_binary": r.skipped_binary, "truncated": r.truncated, "timed_out": r.timed_out,
                });
                if !r.errors.is_empty() {
                    v["errors"] = json!(r.errors);
                }
                if !r.notes.is_empty() {
                    v["notes"] = json!(r.notes);
                }
                Ok(v)
            })
            .await
        }
        "write" => {
            let path = need("write", &args, "path")?.to_string();
            let content = need("write", &args, "content")?.to_string();
            let (value, changed) = blocking("write", move || {
                let scope = files.scope(&workdir)?;
                let w = toolvisor_files::write::write(&scope, &path, &content)?;
                let v = json!({
                    "path": w.changed.display, "status": w.changed.status.as_str(),
                    "bytes": w.bytes, "lines": w.lines, "previous_bytes": w.previous_bytes,
                });
                Ok((v, vec![w.changed]))
            })
            .await?;
            after_write(daemon, ctx, &changed, value).await
        }
        "edit" => {
            let path = need("edit", &args, "path")?.to_string();
            let old_text = need("edit", &args, "old_text")?.to_string();
            let new_text = need("edit", &args, "new_text")?.to_string();
            let replace_all = flag(&args, "replace_all");
            let (value, changed) = blocking("edit", move || {
                let scope = files.scope(&workdir)?;
                let e =
                    toolvisor_files::edit::edit(&scope, &path, &old_text, &new_text, replace_all)?;
                let mut v = json!({
                    "path": e.changed.display, "replacements": e.replacements, "lines": e.lines,
                    "diff": e.diff,
                });
                if !e.notes.is_empty() {
                    v["notes"] = json!(e.notes);
                }
                Ok((v, vec![e.changed]))
            })
            .await?;
            after_write(daemon, ctx, &changed, value).await
        }
        "apply_patch" => {
            let patch = need("apply_patch", &args, "patch")?.to_string();
            let (value, changed) = blocking("apply_patch", move || {
                let scope = files.scope(&workdir)?;
                let r =
                    toolvisor_files::patch::apply_patch(&scope, &patch, files.journal.as_deref())?;
                let list: Vec<Json> = r
                    .files
                    .iter()
                    .map(|f| {
                        let mut v = json!({"path": f.changed.display, "status": f.changed.status.as_str(),
                            "hunks": f.hunks, "added": f.added, "removed": f.removed});
                        if let Some(from) = &f.moved_from {
                            v["moved_from"] = json!(from);
                        }
                        v
                    })
                    .collect();
                let mut v = json!({"files": list});
                if !r.notes.is_empty() {
                    v["notes"] = json!(r.notes);
                }
                Ok((v, r.changed()))
            })
            .await?;
            after_write(daemon, ctx, &changed, value).await
        }
        "tool_result_read" => {
            let reference = need("tool_result_read", &args, "ref")?.to_string();
            let offset = int("tool_result_read", &args, "offset")?.map(|o| o.max(0) as usize);
            let limit = int("tool_result_read", &args, "limit")?.map(|l| l.max(0) as usize);
            let conversation = ctx.conversation.clone();
            let max_frame = daemon.config.max_frame as usize;
            blocking("tool_result_read", move || {
                let sl = files
                    .store
                    .read(&conversation, &reference, offset, limit, max_frame)?;
                Ok(json!({
                    "ref": sl.reference, "text": sl.text, "offset": sl.offset,
                    "next_offset": sl.next_offset, "total_chars": sl.total_chars, "eof": sl.eof,
                    "source_tool": sl.source_tool, "content_type": sl.content_type,
                    "storage_kind": sl.storage_kind, "masked": sl.masked,
                    "envelope_clamped": sl.envelope_clamped,
                }))
            })
            .await
        }
        other => Err(super::no_worker(other)),
    }
}

fn read_json(out: ReadOutput) -> Json {
    match out {
        ReadOutput::Text(t) => {
            let mut v = json!({
                "path": t.path, "kind": "text", "content": t.content, "offset": t.offset,
                "lines": t.lines, "total_lines": t.total_lines, "next_offset": t.next_offset,
                "eof": t.eof, "size_bytes": t.size_bytes,
            });
            if t.cut_lines > 0 {
                v["cut_lines"] = json!(t.cut_lines);
            }
            if t.invalid_utf8 > 0 {
                v["invalid_utf8"] = json!(t.invalid_utf8);
            }
            if t.crlf {
                v["line_endings"] = json!("crlf");
            }
            if !t.notes.is_empty() {
                v["notes"] = json!(t.notes);
            }
            v
        }
        ReadOutput::Image(i) => {
            let source = json!({"format": i.source_format, "width": i.source_width,
                "height": i.source_height, "bytes": i.source_bytes});
            match i.image {
                Some(img) => json!({
                    "kind": "image", "mime_type": img.mime_type, "data": img.data,
                    "width": img.width, "height": img.height, "transformed": img.transformed,
                    "source": source, "note": i.note,
                }),
                None => json!({"kind": "image_omitted", "source": source, "note": i.note}),
            }
        }
    }
}

/// Where every write-tier file tool ends, with the files it changed (`Changed`: the real
/// path, how it is shown, created / modified / deleted) and the result it is about to
/// return: the one place diagnostics on write are folded in.
async fn after_write(
    daemon: &Arc<Daemon>,
    ctx: &CallCtx,
    changed: &[Changed],
    mut value: Json,
) -> Result<Json, ToolError> {
    for c in changed {
        tracing::debug!(conversation = ctx.conversation, path = %c.path.display(), status = c.status.as_str(), "file written");
    }
    // Diagnostics on write: sync every written file through its language server and fold in
    // only what is new for this run (never fails the write; reasons become notes).
    let paths: Vec<std::path::PathBuf> = changed
        .iter()
        .filter(|c| c.status != toolvisor_files::ChangeKind::Deleted)
        .map(|c| c.path.clone())
        .collect();
    if !paths.is_empty() {
        let (run, workdir) = (super::lsp::run_of(ctx), super::lsp::real_workdir(ctx));
        let diagnostics = daemon.lsp.after_write(&run, &workdir, &paths).await;
        if let Some(map) = value.as_object_mut() {
            map.insert("diagnostics".into(), diagnostics);
        }
    }
    Ok(value)
}

/// Streamed output (`event` frames) on its way to the client: known secrets masked, as in
/// results. A secret cut in two by a chunk boundary is not recognised in either half; the
/// call's final result, masked whole, is the reliable record.
pub(crate) fn mask_stream(daemon: &Daemon, text: String) -> String {
    let secrets = daemon.files.store.secrets();
    if secrets.is_empty() {
        return text;
    }
    let mut counts = std::collections::BTreeMap::new();
    secrets.mask_str(&text, &mut counts).unwrap_or(text)
}

/// Every tool's result on its way to the client: known secrets masked, and a result longer
/// than `result_store.inline_chars` stored under `<state_dir>/results/<conversation>/` and
/// replaced by a bounded projection with refs (`tool_result_read`). Images (already bounded
/// by the model's limits), `eval`'s figures and `tool_result_read` pages (already bounded and
/// masked) pass.
pub async fn finish(
    daemon: &Arc<Daemon>,
    ctx: &CallCtx,
    tool: &str,
    mut value: Json,
) -> Result<Json, ToolError> {
    if tool == "tool_result_read" || value.get("kind").is_some_and(|k| k == "image") {
        return Ok(value);
    }
    // `eval`'s figures (an `images` list, bounded by `kernels.image_bytes`) pass whole: the
    // store masks and projects the rest of the result.
    if tool == "eval"
        && let Some(images) = value.as_object_mut().and_then(|m| m.remove("images"))
    {
        let mut rest = Box::pin(finish(daemon, ctx, tool, value)).await?;
        if let Some(map) = rest.as_object_mut() {
            map.insert("images".into(), images);
        }
        return Ok(rest);
    }
    let files = daemon.files.clone();
    if files.store.surely_fits(&value) {
        if files.store.secrets().is_empty() {
            return Ok(value);
        }
        return Ok(files.store.finish(&ctx.conversation, tool, value));
    }
    let conversation = ctx.conversation.clone();
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
