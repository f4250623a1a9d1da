//! The `lsp` operations, `synced_write`, and the diagnostics-on-write fold used by the file
//! tools. Every answer names the server and its state; an empty answer comes only from a
//! server that is ready and settled.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolvisor_files::Error as FilesError;
use toolvisor_files::Scope;
use toolvisor_files::paths::Access;
use toolvisor_jsonrpc::RpcError;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::LspArgs;

use crate::config::language_id;
use crate::position;
use crate::render::{self, Diag, Sources};
use crate::server::{Conn, ServerShared};
use crate::servers::{LanguageServers, NoServer, not_ready};
use crate::uri;

pub const REFERENCES_MAX: usize = 50;
pub const WORKSPACE_SYMBOLS_MAX: usize = 100;
pub const DOCUMENT_SYMBOLS_MAX: usize = 200;
pub const CODE_ACTIONS_MAX: usize = 50;

/// Who is calling: the workdir relative paths resolve against, the run whose ledger
/// diagnostics are folded into, and the file tools' scope every path goes through.
#[derive(Clone, Debug)]
pub struct CallCtx {
    /// The workdir's real path (`scope.root()`): answers show paths relative to it.
    pub workdir: PathBuf,
    pub run: String,
    /// The same confinement as the file tools (`[files] read_roots`,
    /// `allow_outside_workdir`): file arguments resolve through it (reads for `lsp` and
    /// `synced_write`, writes for `lsp_rename`), every file a workspace edit touches is
    /// checked for writing, and no text is read from a location outside it.
    pub scope: Scope,
    /// The crash journal of multi-file writes (`lsp_rename`), as `apply_patch` uses it.
    pub journal: Option<std::sync::Arc<toolvisor_files::journal::Journal>>,
}

impl CallCtx {
    /// The real path of a file argument of `tool`, if `access` to it is in scope; else the
    /// file tools' `out_of_scope` answer.
    pub fn resolve(&self, tool: &str, file: &str, access: Access) -> Result<PathBuf, ToolError> {
        self.scope
            .resolve(file, access)
            .map(|r| r.real)
            .map_err(|e| e.to_tool_error(tool))
    }

    /// Like [`CallCtx::resolve`] for a path a server named (absolute).
    pub fn check(&self, path: &Path, access: Access) -> Result<PathBuf, FilesError> {
        let text = path
            .to_str()
            .ok_or_else(|| FilesError::bad("path", format!("{} is not UTF-8", path.display())))?;
        self.scope.resolve(text, access).map(|r| r.real)
    }

    /// Whether toolvisor may read text from `path` (a location a server named) to show it.
    pub fn may_read(&self, path: &Path) -> bool {
        self.check(path, Access::Read).is_ok()
    }

    /// The text of `path`, a real path already checked, opened beneath the scope's root
    /// (`Scope::open_found`), never by name: a directory on it swapped for a symbolic link
    /// since the check is not followed.
    pub fn read_text(&self, path: &Path) -> std::io::Result<String> {
        use std::io::Read as _;
        let mut text = String::new();
        self.scope.open_found(path)?.read_to_string(&mut text)?;
        Ok(text)
    }
}

/// A file synced to its server, ready for a request.
pub struct Opened {
    pub shared: Arc<ServerShared>,
    pub conn: Arc<Conn>,
    pub path: PathBuf,
    pub uri: String,
    pub text: String,
    pub version: i32,
    /// Whether the sync sent anything (the server's view changed).
    pub changed: bool,
    /// The highest diagnostics sequence number seen before the sync.
    pub seq_before: u64,
    /// The run it was opened for (its trust picks the server's mode).
    pub run: String,
}

fn invalid(msg: String, hint: &str) -> ToolError {
    ToolError::new(ErrorKind::InvalidArgs, msg, hint)
}

pub(crate) fn rpc_error(shared: &ServerShared, e: RpcError) -> ToolError {
    match e {
        RpcError::Timeout { method, after_ms } => ToolError::new(
            ErrorKind::Timeout,
            format!(
                "language server {} did not answer `{method}` within {} s (the request was cancelled)",
                shared.id,
                after_ms / 1000
            ),
            "the server may be stuck on a large project; retry, or `lsp reload` it",
        ),
        RpcError::StreamClosed => ToolError::new(
            ErrorKind::ResourceFailed,
            format!("language server {} crashed while answering", shared.id),
            "it is being restarted; retry the call",
        ),
        // Method Not Found: the server does not implement the request at all (pylsp has no
        // `workspace/symbol`); nothing about the caller's position or file is wrong.
        RpcError::Server {
            method,
            code: -32601,
            message,
        } => ToolError::new(
            ErrorKind::NotAvailable,
            format!(
                "language server {} does not implement `{method}`: {message} (code -32601)",
                shared.id
            ),
            "this server cannot answer that op; use another op or another server (`[lsp]` servers), or grep",
        ),
        RpcError::Server {
            method,
            code,
            message,
        } => {
            let kind = match code {
                -32602 | -32803 => ErrorKind::InvalidArgs,
                -32802..=-32800 => ErrorKind::NotReady,
                _ => ErrorKind::ResourceFailed,
            };
            ToolError::new(
                kind,
                format!(
                    "language server {} refused `{method}`: {message} (code {code})",
                    shared.id
                ),
                "check the position; `lsp status` shows the server's state",
            )
        }
        RpcError::Encode { method, message } => ToolError::new(
            ErrorKind::Internal,
            format!("cannot encode `{method}`: {message}"),
            "report this as a bug",
        ),
        RpcError::Backlog { method, queued } => ToolError::new(
            ErrorKind::ResourceFailed,
            format!(
                "language server {} is not reading its input: `{method}` was not sent ({queued} messages already wait)",
                shared.id
            ),
            "the server looks stuck; `lsp reload` it",
        ),
    }
}

impl LanguageServers {
    /// Read `path` from disk and make the view of `run`'s server (full or restricted, by the
    /// run's trust in the root) equal it.
    pub async fn open(&self, path: &Path, run: &str) -> Result<Opened, ToolError> {
        let plan = self.plan(path, run).map_err(|e| e.to_error())?;
        let shared = self.shared(&plan);
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let lang_id = language_id(&plan.language, ext);
        for attempt in 0..2 {
            let conn = self.ensure(&shared).await?;
            let _sync = shared.sync_lock.lock().await;
            let synced = shared
                .sync_from_disk(&conn, path, &lang_id)
                .await
                .map_err(|e| {
                    if crate::server::is_moved(&e) {
                        return ToolError::new(
                            ErrorKind::OutOfScope,
                            format!(
                                "cannot read {}: its path changed since it was checked (a directory on it is a symbolic link now, or it leads out of the server's root {}); not followed",
                                path.display(),
                                shared.root.display()
                            ),
                            "call again with the file's real path",
                        );
                    }
                    ToolError::new(
                        if e.kind() == std::io::ErrorKind::NotFound {
                            ErrorKind::NotFound
                        } else {
                            ErrorKind::Io
                        },
                        format!("cannot read {}: {e}", path.display()),
                        "check the path (relative paths start at the workdir)",
                    )
                })?;
            let (text, seq_before) = (synced.text, synced.seq_before);
            match synced.result {
                Ok((version, changed)) => {
                    return Ok(Opened {
                        uri: uri::from_path(path),
                        shared: shared.clone(),
                        conn,
                        path: path.to_path_buf(),
                        text,
                        version,
                        changed,
                        seq_before,
                        run: run.to_string(),
                    });
                }
                Err(e) if attempt == 0 => {
                    tracing::info!(server = shared.id, error = %e, "sync hit a dead connection; waiting for the restart");
                    continue;
                }
                Err(e) => return Err(rpc_error(&shared, e)),
            }
        }
        unreachable!("the loop returns")
    }

    /// A request on an opened file; a crash in between is waited out once (the restart
    /// re-opens the documents), so the caller gets the answer of the new incarnation.
    pub async fn request(
        &self,
        opened: &mut Opened,
        method: &str,
        params: Value,
    ) -> Result<Value, ToolError> {
        let shared = opened.shared.clone();
        // Counted on the server's node while it is answered (the tree's CALLS column).
        let _call = shared.status.enqueue();
        let mut retried = false;
        loop {
            let result = opened
                .conn
                .client
                .request(method, params.clone(), shared.waits.request)
                .await;
            match result {
                Ok(v) => return Ok(v),
                Err(RpcError::StreamClosed) if !retried => {
                    retried = true;
                    tracing::info!(
                        server = shared.id,
                        method,
                        "server died during a request; retrying after its restart"
                    );
                    let path = opened.path.clone();
                    let run = opened.run.clone();
                    *opened = self.open(&path, &run).await?;
                    self.ready(&opened.shared).await?;
                }
                Err(RpcError::Server {
                    code: -32801 | -32802,
                    ..
                }) if !retried => {
                    retried = true;
                    self.ready(&shared).await?;
                }
                Err(e) => return Err(rpc_error(&shared, e)),
            }
        }
    }

    /// The `server` object of an answer (for the ops in other modules).
    pub(crate) fn server_info_of(&self, opened: &Opened) -> Value {
        self.server_info(opened)
    }

    fn server_info(&self, opened: &Opened) -> Value {
        json!({
            "id": opened.shared.id,
            "language": opened.shared.language,
            "root": opened.shared.root.display().to_string(),
            "name": opened.conn.name,
            "pid": opened.conn.pid,
            "state": opened.shared.readiness().word(),
            "position_encoding": opened.conn.encoding.name(),
        })
    }

    /// `lsp {op, ...}`.
    pub async fn lsp(&self, ctx: &CallCtx, args: LspArgs) -> Result<Value, ToolError> {
        match args.op.as_str() {
            "status" => {
                let from = match args.file.as_deref() {
                    Some(f) => ctx.resolve("lsp", f, Access::Read)?,
                    None => ctx.workdir.clone(),
                };
                Ok(self.status(&from, &ctx.run).await)
            }
            "reload" => self.reload(ctx, args.file.as_deref()).await,
            "trust" => self.trust_roots_for_run(ctx, args.file.as_deref()),
            "diagnostics" => {
                let file = need(&args.file, "diagnostics", "file")?;
                if file == "*" {
                    return self.project_check(ctx).await;
                }
                let path = ctx.resolve("lsp", file, Access::Read)?;
                let mut opened = self.open(&path, &ctx.run).await?;
                let diags = self.file_diagnostics(&mut opened).await?;
                let base = &ctx.workdir;
                let mut text: String = diags.iter().map(|d| d.line_text(base) + "\n").collect();
                if diags.is_empty() {
                    text = format!("no diagnostics in {}\n", render::show_path(&path, base));
                }
                Ok(
                    json!({"text": text, "diagnostics": diags.iter().map(|d| d.to_json(base)).collect::<Vec<_>>(),
                    "server": self.server_info(&opened)}),
                )
            }
            "symbols" => match (&args.query, &args.file) {
                (Some(q), _) => self.workspace_symbols(ctx, q, args.file.as_deref()).await,
                (None, Some(f)) => self.document_symbols(ctx, f).await,
                (None, None) => Err(invalid(
                    "lsp symbols: give `query` (workspace search) or `file` (document outline)"
                        .into(),
                    "e.g. {\"op\":\"symbols\",\"query\":\"Parser\"} or {\"op\":\"symbols\",\"file\":\"src/app.py\"}",
                )),
            },
            "definition" | "type_definition" | "implementation" | "references" | "hover"
            | "code_actions" => self.navigate(ctx, &args).await,
            "call_hierarchy" => self.call_hierarchy(ctx, &args).await,
            "check_edit" => self.check_edit(ctx, &args).await,
            other => Err(invalid(
                format!("lsp: unknown op {other:?}"),
                "see the tool's schema",
            )),
        }
    }

    /// The roots `lsp trust` would trust: every language's root found from `file` (or the
    /// workdir), each with the languages it is the root of.
    /// `file` goes through the call's scope like every other path.
    pub fn trust_targets(
        &self,
        ctx: &CallCtx,
        file: Option<&str>,
    ) -> Result<Vec<(PathBuf, Vec<String>)>, ToolError> {
        let from = match file {
            Some(f) => ctx.resolve("lsp", f, Access::Read)?,
            None => ctx.workdir.clone(),
        };
        let mut roots: Vec<(PathBuf, Vec<String>)> = Vec::new();
        for (language, spec) in self.languages() {
            let Some(root) = crate::locate::find_root(&from, &spec.markers) else {
                continue;
            };
            let root = std::fs::canonicalize(&root).unwrap_or(root);
            match roots.iter_mut().find(|(r, _)| *r == root) {
                Some((_, langs)) => langs.push(language.clone()),
                None => roots.push((root, vec![language.clone()])),
            }
        }
        Ok(roots)
    }

    /// `lsp trust`: trust the roots found from `file` (or the workdir) for the calling run.
    /// The daemon asks the user first (the approval gate); from then on this run's servers
    /// for those roots start in full mode and `diagnostics "*"` runs the project's checker.
    /// Other runs keep their restricted servers: trust is per run.
    fn trust_roots_for_run(&self, ctx: &CallCtx, file: Option<&str>) -> Result<Value, ToolError> {
        let targets = self.trust_targets(ctx, file)?;
        if targets.is_empty() {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                "no project root found from here: no language's root marker in this directory or any parent",
                "pass `file` inside the project to trust, or list its directory in the daemon config's [trust] roots",
            ));
        }
        let mut text = String::new();
        let mut roots = Vec::new();
        for (root, languages) in &targets {
            let newly = self.trust.grant(root, &ctx.run);
            text.push_str(&format!(
                "{} {} for run {} ({}): language servers and checkers may run its project code\n",
                root.display(),
                if newly {
                    "trusted"
                } else {
                    "was already trusted"
                },
                ctx.run,
                languages.join(", ")
            ));
            roots.push(
                json!({"root": root.display().to_string(), "languages": languages, "newly": newly}),
            );
        }
        Ok(json!({"text": text, "run": ctx.run, "trusted": roots}))
    }

    async fn reload(&self, ctx: &CallCtx, file: Option<&str>) -> Result<Value, ToolError> {
        let targets: Vec<Arc<ServerShared>> = match file {
            Some(f) => {
                let path = ctx.resolve("lsp", f, Access::Read)?;
                let plan = self.plan(&path, &ctx.run).map_err(|e| e.to_error())?;
                vec![self.shared(&plan)]
            }
            None => self
                .all()
                .into_iter()
                .filter(|s| ctx.workdir.starts_with(&s.root) || s.root.starts_with(&ctx.workdir))
                .collect(),
        };
        if targets.is_empty() {
            return Ok(
                json!({"text": "no language server runs for this workdir; nothing to reload\n", "reloaded": []}),
            );
        }
        let mut done = Vec::new();
        for s in targets {
            self.stop(&s, "reloaded by `lsp reload`").await;
            self.ensure_inner(&s, true).await?;
            done.push(s.id.clone());
        }
        Ok(json!({"text": format!("restarted: {}\n", done.join(", ")), "reloaded": done}))
    }

    /// The current diagnostics of an opened file: pulled where the server supports it, else
    /// the push for the current version (waited for, then settled).
    pub async fn file_diagnostics(&self, opened: &mut Opened) -> Result<Vec<Diag>, ToolError> {
        let items = self.diagnostic_items(opened).await?;
        let enc = opened.conn.encoding;
        let mut diags: Vec<Diag> = items
            .iter()
            .map(|v| Diag::from_lsp(&opened.path, v, &opened.text, enc))
            .collect();
        diags.sort_by_key(|d| (d.line, d.column));
        Ok(diags)
    }

    /// The raw LSP diagnostics of the current version of an opened file.
    pub async fn diagnostic_items(&self, opened: &mut Opened) -> Result<Vec<Value>, ToolError> {
        self.ready(&opened.shared).await?;
        if opened.shared.pulls(&opened.conn) {
            let params = json!({"textDocument": {"uri": opened.uri}});
            let r = self
                .request(opened, "textDocument/diagnostic", params)
                .await?;
            Ok(r.get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default())
        } else {
            self.pushed(opened).await
        }
    }

    pub(crate) async fn pushed(&self, opened: &Opened) -> Result<Vec<Value>, ToolError> {
        let shared = &opened.shared;
        let deadline = Instant::now() + shared.waits.diagnostics;
        let settle = shared.waits.settle;
        let mut events = shared.subscribe();
        loop {
            events.borrow_and_update();
            let now = Instant::now();
            if let Some(p) = shared.diagnostics(&opened.uri) {
                let fresh = if opened.changed {
                    p.seq > opened.seq_before && p.version >= opened.version
                } else if p.seq <= shared.changed_seq() && now < shared.quiet_at() {
                    // The document is as the server last saw it, but another one changed
                    // after this list was published: its imports may have. Current once
                    // the server publishes it again, or has been quiet for `settle` (it
                    // found nothing to publish for it).
                    false
                } else {
                    p.version >= opened.version
                };
                if fresh {
                    // A versioned publish is definitive; an unversioned one may be followed
                    // by another for the same change (lint on change, then on save).
                    if p.versioned || now >= p.at + settle {
                        return Ok(p.items);
                    }
                    let until = (p.at + settle).min(deadline);
                    let _ = tokio::time::timeout_at(until.into(), events.changed()).await;
                    if Instant::now() >= deadline {
                        return Ok(p.items);
                    }
                    continue;
                }
            }
            if now >= deadline {
                return Err(not_ready(format!(
                    "language server {} published no diagnostics for version {} of {} within {} s",
                    shared.id,
                    opened.version,
                    opened.path.display(),
                    shared.waits.diagnostics.as_secs()
                )));
            }
            // Woken by a publish or other activity, or when the server has been quiet long
            // enough for an unchanged document's list to count as current.
            let until = deadline.min(shared.quiet_at().max(now + Duration::from_millis(10)));
            let _ = tokio::time::timeout_at(until.into(), events.changed()).await;
        }
    }

    async fn navigate(&self, ctx: &CallCtx, args: &LspArgs) -> Result<Value, ToolError> {
        let op = args.op.as_str();
        let file = need(&args.file, op, "file")?;
        let line = args.line.ok_or_else(|| {
            invalid(
                format!("lsp {op}: missing required argument `line`"),
                "navigation needs `file`, `line` (1-based) and `symbol` (a substring on that line)",
            )
        })? as usize;
        let symbol = args
            .symbol
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                invalid(
                    format!(
                        "lsp {op}: missing required argument `symbol`; a position is never guessed"
                    ),
                    "give `symbol`: a substring naming the symbol on that line, copied from it",
                )
            })?;
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let mut opened = self.open(&path, &ctx.run).await?;
        let shown = render::show_path(&path, &ctx.workdir);
        let (src, byte) = position::locate(
            &opened.text,
            &shown,
            line,
            symbol,
            args.occurrence.map(|o| o as usize),
        )?;
        let enc = opened.conn.encoding;
        let pos = json!({"line": line - 1, "character": enc.column(&src, byte)});
        let end = json!({"line": line - 1, "character": enc.column(&src, byte + symbol.len())});
        let (method, cap) = match op {
            "definition" => ("textDocument/definition", "definitionProvider"),
            "type_definition" => ("textDocument/typeDefinition", "typeDefinitionProvider"),
            "implementation" => ("textDocument/implementation", "implementationProvider"),
            "references" => ("textDocument/references", "referencesProvider"),
            "hover" => ("textDocument/hover", "hoverProvider"),
            _ => ("textDocument/codeAction", "codeActionProvider"),
        };
        if !opened.conn.supports(cap) {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                format!(
                    "{} ({}) does not support {op}",
                    opened.conn.name, opened.shared.id
                ),
                "use another op, or grep",
            ));
        }
        // References and implementations are index-wide: a partial list from a server still
        // indexing looks complete, so they wait for readiness first. File-local answers are
        // asked at once; an empty one from a server that is not ready and settled waits and
        // asks again below.
        let index_wide = matches!(op, "references" | "implementation");
        if index_wide {
            self.ready_for(&opened.shared, &opened.uri).await?;
        }
        let mut params = json!({"textDocument": {"uri": opened.uri}, "position": pos});
        if op == "references" {
            params["context"] = json!({"includeDeclaration": true});
        }
        if op == "code_actions" {
            // The server matches its fixes to the diagnostics we send: get this version's.
            let diags = self
                .diagnostic_items(&mut opened)
                .await?
                .into_iter()
                .filter(|d| {
                    let s = d.pointer("/range/start/line").and_then(Value::as_u64);
                    let e = d.pointer("/range/end/line").and_then(Value::as_u64);
                    // Overlapping the line or its neighbours: parsers report a missing token
                    // at the next one (clangd puts "expected ';'" on the following line).
                    let l = (line - 1) as u64;
                    matches!((s, e), (Some(s), Some(e)) if s <= l + 1 && l <= e + 1)
                })
                .collect::<Vec<_>>();
            params = json!({"textDocument": {"uri": opened.uri}, "range": {"start": pos, "end": end},
                "context": {"diagnostics": diags}});
        }
        let mut asked = Instant::now();
        let mut result = self.request(&mut opened, method, params.clone()).await?;
        if !index_wide && is_empty(&result) && !opened.shared.settled() {
            self.ready(&opened.shared).await?;
            asked = Instant::now();
            result = self.request(&mut opened, method, params).await?;
        }
        let mut server = self.server_info(&opened);
        // The server's own share of the call (request sent → answer parsed), for the
        // added-latency figure in docs/BENCHMARKS.md.
        server["request_ms"] = json!(asked.elapsed().as_secs_f64() * 1000.0);
        let base = &ctx.workdir;
        let here = format!("`{symbol}` at {shown}:{line}");
        let gap = match index_wide {
            true => index_gap(&opened.shared, &opened.path, Some(symbol)).await,
            false => None,
        };
        match op {
            "hover" => {
                let md = if result.is_null() {
                    String::new()
                } else {
                    render::hover_markdown(&result)
                };
                let text = if md.is_empty() {
                    format!("no hover information for {here}\n")
                } else {
                    md.clone() + "\n"
                };
                Ok(json!({"text": text, "markdown": md, "server": server}))
            }
            "code_actions" => {
                let raw = result.as_array().cloned().unwrap_or_default();
                let (ordered, text, actions) =
                    crate::actions::render(raw, &opened.uri, line as u64, CODE_ACTIONS_MAX, &here);
                self.actions.remember(
                    &ctx.run,
                    crate::actions::Listed {
                        server: opened.shared.id.clone(),
                        path: opened.path.clone(),
                        uri: opened.uri.clone(),
                        version: opened.version,
                        actions: ordered,
                    },
                );
                Ok(json!({"text": text, "actions": actions, "server": server}))
            }
            _ => {
                let pairs = render::locations(&result);
                let open_text = |p: &Path| opened.shared.doc(&uri::from_path(p)).map(|d| d.text);
                let readable = |p: &Path| ctx.may_read(p);
                let read = |p: &Path| ctx.read_text(p).ok();
                let mut sources = Sources::new(&open_text, &readable, &read);
                let locs = render::resolve_locs(&pairs, enc, &mut sources);
                let total = locs.len();
                let cut = op == "references" && total > REFERENCES_MAX;
                let shown_locs = if cut {
                    &locs[..REFERENCES_MAX]
                } else {
                    &locs[..]
                };
                let (mut text, items) = render::loc_lines(shown_locs, base);
                if total == 0 {
                    text = format!("no {} found for {here}\n", op.replace('_', " "));
                } else if cut {
                    text.push_str(&format!(
                        "(showing {REFERENCES_MAX} of {total} references; the list was cut)\n"
                    ));
                }
                let mut answer = json!({"text": text, "locations": items, "total": total, "truncated": cut, "server": server});
                if index_wide {
                    mark_coverage(&mut answer, gap);
                }
                Ok(answer)
            }
        }
    }

    async fn document_symbols(&self, ctx: &CallCtx, file: &str) -> Result<Value, ToolError> {
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let mut opened = self.open(&path, &ctx.run).await?;
        let params = json!({"textDocument": {"uri": opened.uri}});
        let mut result = self
            .request(&mut opened, "textDocument/documentSymbol", params.clone())
            .await?;
        if is_empty(&result) && !opened.shared.settled() {
            self.ready(&opened.shared).await?;
            result = self
                .request(&mut opened, "textDocument/documentSymbol", params)
                .await?;
        }
        let syms = render::document_symbols(&result);
        let total = syms.len();
        let cut = total > DOCUMENT_SYMBOLS_MAX;
        let mut text = String::new();
        let mut items = Vec::new();
        for s in syms.iter().take(DOCUMENT_SYMBOLS_MAX) {
            text.push_str(&format!(
                "{}{}: {} {}\n",
                "  ".repeat(s.depth),
                s.line,
                s.kind,
                s.name
            ));
            items.push(json!({"name": s.name, "kind": s.kind, "line": s.line, "depth": s.depth}));
        }
        if total == 0 {
            text = format!("no symbols in {}\n", render::show_path(&path, &ctx.workdir));
        } else if cut {
            text.push_str(&format!(
                "(showing {DOCUMENT_SYMBOLS_MAX} of {total} symbols)\n"
            ));
        }
        Ok(
            json!({"text": text, "symbols": items, "total": total, "truncated": cut,
            "server": self.server_info(&opened)}),
        )
    }

    async fn workspace_symbols(
        &self,
        ctx: &CallCtx,
        query: &str,
        file: Option<&str>,
    ) -> Result<Value, ToolError> {
        // The server to ask: the one covering `file`, else the servers running for the workdir,
        // else the first language whose root and binary are found from the workdir.
        let mut opened = match file {
            Some(f) => {
                self.open(&ctx.resolve("lsp", f, Access::Read)?, &ctx.run)
                    .await?
            }
            None => self.open_any(ctx).await?,
        };
        require(
            &opened,
            "workspaceSymbolProvider",
            "workspace symbols (`symbols` with `query`)",
        )?;
        self.ready_for(&opened.shared, &opened.uri).await?;
        let result = self
            .request(&mut opened, "workspace/symbol", json!({"query": query}))
            .await?;
        let gap = index_gap(&opened.shared, &opened.path, None).await;
        let syms = render::workspace_symbols(&result);
        let total = syms.len();
        let cut = total > WORKSPACE_SYMBOLS_MAX;
        let mut text = String::new();
        let mut items = Vec::new();
        let open_text = |p: &Path| opened.shared.doc(&uri::from_path(p)).map(|d| d.text);
        let readable = |p: &Path| ctx.may_read(p);
        let read = |p: &Path| ctx.read_text(p).ok();
        let mut sources = Sources::new(&open_text, &readable, &read);
        for s in syms.iter().take(WORKSPACE_SYMBOLS_MAX) {
            let shown = s
                .path
                .as_ref()
                .map(|p| render::show_path(p, &ctx.workdir))
                .unwrap_or_default();
            let outside = s.path.as_ref().is_some_and(|p| !sources.readable(p));
            let src = if outside {
                render::OUTSIDE_NOTE.to_string()
            } else {
                s.path
                    .as_ref()
                    .and_then(|p| sources.line(p, s.line.saturating_sub(1)))
                    .unwrap_or_default()
            };
            text.push_str(&format!(
                "{shown}:{}: {} {}{} — {}\n",
                s.line,
                s.kind,
                s.name,
                s.container
                    .as_ref()
                    .map(|c| format!(" (in {c})"))
                    .unwrap_or_default(),
                src.trim()
            ));
            items.push(
                json!({"name": s.name, "kind": s.kind, "path": shown, "line": s.line,
                "container": s.container, "outside": outside}),
            );
        }
        if total == 0 {
            text = format!("no workspace symbols match {query:?}\n");
        } else if cut {
            text.push_str(&format!(
                "(showing {WORKSPACE_SYMBOLS_MAX} of {total} symbols; refine the query)\n"
            ));
        }
        let mut answer = json!({"text": text, "symbols": items, "total": total, "truncated": cut,
            "server": self.server_info(&opened)});
        mark_coverage(&mut answer, gap);
        Ok(answer)
    }

    /// A server for the workdir when no file is named: one already running for it, else the
    /// first language that would start there (a source file of it is opened).
    async fn open_any(&self, ctx: &CallCtx) -> Result<Opened, ToolError> {
        let running = self.all().into_iter().find(|s| {
            s.conn().is_some()
                && (ctx.workdir.starts_with(&s.root) || s.root.starts_with(&ctx.workdir))
        });
        let mut reasons = Vec::new();
        let candidates: Vec<String> = match &running {
            Some(s) => vec![s.language.clone()],
            None => self.languages().keys().cloned().collect(),
        };
        for language in candidates {
            let spec = &self.languages()[&language];
            match find_source_off_thread(ctx, &spec.extensions).await {
                Some(file) => match self.plan(&file, &ctx.run) {
                    Ok(_) => return self.open(&file, &ctx.run).await,
                    Err(e) => reasons.push(e.to_string()),
                },
                None => reasons.push(format!(
                    "{language}: no source file under {}",
                    ctx.workdir.display()
                )),
            }
        }
        Err(ToolError::new(
            ErrorKind::NotAvailable,
            format!(
                "no language server can search this workspace: {}",
                reasons.join("; ")
            ),
            "pass `file` to pick the server; `lsp status` says why servers do not start",
        ))
    }

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
            let taken = tokio::time::timeout(wait, async {
                let mut opened = self.open(path, run).await?;
                self.file_diagnostics(&mut opened).await
            })
            .await;
            match taken {
                Ok(Ok(diags)) => {
                    let keys: Vec<_> = diags
                        .iter()
                        .filter(|d| d.severity != 4)
                        .map(Diag::key)
                        .collect();
                    self.ledger.fold(run, path, &keys);
                }
                Ok(Err(e)) => {
                    tracing::info!(path = %path.display(), error = %e.message, "no diagnostics baseline before the write");
                }
                Err(_) => {
                    tracing::info!(path = %path.display(), "no diagnostics baseline before the write: timed out");
                }
            }
        }
    }

    /// Sync `paths` (just written) and return the diagnostics new for `run`; where no server
    /// covers a file, say why. Never fails the write: problems become notes.
    pub async fn after_write(&self, run: &str, workdir: &Path, paths: &[PathBuf]) -> Value {
        let mut text = String::new();
        let mut new_items = Vec::new();
        let mut notes = Vec::new();
        for path in paths {
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
                Ok(_) => {}
            }
            // A write waits at most `diagnostics_wait_s` for its diagnostics (a server still
            // starting or indexing a large project must not hold the write's answer for the
            // full `ready_wait_s`); past it the write answers with a note.
            let wait = Duration::from_secs(self.config.diagnostics_wait_s);
            let result = tokio::time::timeout(wait, async {
                let mut opened = self.open(path, run).await?;
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
                    let keys: Vec<_> = diags.iter().map(Diag::key).collect();
                    let fresh = self.ledger.fold(run, path, &keys);
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
        if new_items.is_empty() && notes.is_empty() {
            text.push_str("no new diagnostics\n");
        }
        for n in &notes {
            text.push_str(n);
            text.push('\n');
        }
        json!({"text": text, "new": new_items, "notes": notes})
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

/// Why an index-wide answer about `path` from `shared` may cover less than the project, and
/// what fixes it; `None` when the server's index covers the project as far as toolvisor can
/// tell.
///
/// clangd indexes in the background only the files its compilation database lists
/// (`compile_commands.json`, looked up in the file's directory, its parents up to the root and
/// their `build/` directories, as clangd does); with `compile_flags.txt` alone or no database
/// it knows only the files open in it and what they include, so `references` misses every
/// other file.
///
/// pylsp's references come from jedi, which has no index: it greps the project for the name
/// and stops after 30 files that mention it or 2,000 files opened, and does not look in other
/// files at all for names of 2 characters or fewer; the same count is made here (`symbol`:
/// the name asked about) to tell when that cut applies.
pub(crate) async fn index_gap(
    shared: &ServerShared,
    path: &Path,
    symbol: Option<&str>,
) -> Option<String> {
    let program = shared
        .program
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if program.starts_with("pylsp") {
        let symbol = symbol?.to_string();
        let root = shared.root.clone();
        return tokio::task::spawn_blocking(move || jedi_gap(&root, &symbol))
            .await
            .ok()
            .flatten();
    }
    if !program.starts_with("clangd") {
        return None;
    }
    let (root, path) = (shared.root.clone(), path.to_path_buf());
    let has_database = tokio::task::spawn_blocking(move || {
        path.ancestors()
            .skip(1)
            .take_while(|d| d.starts_with(&root))
            .any(|d| {
                d.join("compile_commands.json").is_file()
                    || d.join("build/compile_commands.json").is_file()
            })
    })
    .await
    .unwrap_or(false);
    (!has_database).then(|| {
        "clangd indexes only the files listed in a compile_commands.json and this project has none (compile_flags.txt alone is not a list of files): the answer covers only the files open in the server and what they include; create compile_commands.json in the root or build/ (CMake: -DCMAKE_EXPORT_COMPILE_COMMANDS=ON; make: `bear -- make`), then `lsp reload`".to_string()
    })
}

/// jedi's search limits (`jedi/inference/references.py`): files that mention the name it
/// parses, files it opens.
const JEDI_PARSED_FILES: usize = 30;
const JEDI_OPENED_FILES: usize = 2000;

/// Whether jedi's search for `symbol` under `root` is cut short (see [`index_gap`]): counts the
/// Python files and those mentioning `symbol` as a word, as jedi walks them (hidden
/// directories and jedi's ignored folders skipped), up to its limits.
fn jedi_gap(root: &Path, symbol: &str) -> Option<String> {
    if symbol.chars().count() <= 2 {
        return Some(format!(
            "pylsp (jedi) does not search other files for names of 2 characters or fewer, so `{symbol}` was looked up in this file only; use grep for the rest"
        ));
    }
    let word = |text: &str| {
        text.match_indices(symbol).any(|(i, _)| {
            let before = text[..i].chars().next_back();
            let after = text[i + symbol.len()..].chars().next();
            let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            !is_word(before) && !is_word(after)
        })
    };
    let (mut opened, mut mentioning) = (0usize, 0usize);
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                let ignored = [".tox", ".venv", ".mypy_cache", "venv", "__pycache__"];
                if !name.starts_with('.') && !ignored.contains(&name.as_str()) {
                    dirs.push(e.path());
                }
            } else if kind.is_file() && name.ends_with(".py") {
                opened += 1;
                if std::fs::read_to_string(e.path()).is_ok_and(|t| word(&t)) {
                    mentioning += 1;
                }
                if mentioning > JEDI_PARSED_FILES || opened > JEDI_OPENED_FILES {
                    return Some(format!(
                        "pylsp (jedi) has no index: it searches at most {JEDI_PARSED_FILES} files that mention `{symbol}` and opens at most {JEDI_OPENED_FILES} Python files, and this project has more, so some files were not searched; use pyright (the default Python server) for complete references, or grep"
                    ));
                }
            }
        }
    }
    None
}

/// Adds `complete` (and `partial_reason`) to an index-wide answer, and says so in its text.
pub(crate) fn mark_coverage(answer: &mut Value, gap: Option<String>) {
    answer["complete"] = json!(gap.is_none());
    if let Some(reason) = gap {
        let text = answer["text"].as_str().unwrap_or("").to_string();
        answer["text"] = json!(format!("{text}(partial: {reason})\n"));
        answer["partial_reason"] = json!(reason);
    }
}

/// An answer that says "nothing": null, an empty list, a hover without contents.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(_) if v.get("contents").is_some() => render::hover_markdown(v).is_empty(),
        _ => false,
    }
}

/// `not_available` unless the server of `opened` advertises `cap`: names the server (its
/// program and id) and the capability it lacks, so the caller knows which op to use instead.
pub fn require(opened: &Opened, cap: &str, what: &str) -> Result<(), ToolError> {
    if opened.conn.supports(cap) {
        return Ok(());
    }
    Err(ToolError::new(
        ErrorKind::NotAvailable,
        format!(
            "{} ({}) does not offer {what}: it does not advertise `{cap}`",
            opened.conn.name, opened.shared.id
        ),
        "use another op or grep; a project can configure another server for the language (`[lsp]`)",
    ))
}

fn need<'a>(v: &'a Option<String>, op: &str, field: &str) -> Result<&'a str, ToolError> {
    v.as_deref().ok_or_else(|| {
        invalid(
            format!("lsp {op}: missing required argument `{field}`"),
            &format!("`{op}` needs `{field}`"),
        )
    })
}

/// [`find_source`] on the blocking pool: its walk reads up to 5,000 directory entries.
async fn find_source_off_thread(ctx: &CallCtx, extensions: &[String]) -> Option<PathBuf> {
    let (ctx, extensions) = (ctx.clone(), extensions.to_vec());
    tokio::task::spawn_blocking(move || find_source(&ctx, &extensions))
        .await
        .ok()
        .flatten()
}

/// A source file with one of `extensions` under the workdir (shallow first, bounded):
/// regular files only, symbolic links neither followed nor opened, so the file is in scope.
fn find_source(ctx: &CallCtx, extensions: &[String]) -> Option<PathBuf> {
    let mut queue = std::collections::VecDeque::from([(ctx.workdir.clone(), 0)]);
    let mut seen = 0;
    while let Some((d, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            seen += 1;
            if seen > 5000 {
                return None;
            }
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(kind) = e.file_type() else {
                continue;
            };
            if kind.is_dir() {
                if depth < 4 && !name.starts_with('.') && name != "node_modules" && name != "target"
                {
                    queue.push_back((p, depth + 1));
                }
            } else if kind.is_file()
                && p.extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| extensions.iter().any(|e| e == x))
                && ctx.may_read(&p)
            {
                return Some(p);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_the_server_lacks_is_not_available_naming_server_and_method() {
        let shared = crate::server::tests::shared("pylsp");
        let e = rpc_error(
            &shared,
            RpcError::Server {
                method: "workspace/symbol".into(),
                code: -32601,
                message: "Method Not Found: workspace/symbol".into(),
            },
        );
        assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
        assert!(e.message.contains(&shared.id), "{e}");
        assert!(e.message.contains("`workspace/symbol`"), "{e}");
        assert!(!e.hint.contains("position"), "{e}");
        // Other server errors keep their kinds.
        let e = rpc_error(
            &shared,
            RpcError::Server {
                method: "textDocument/hover".into(),
                code: -32603,
                message: "boom".into(),
            },
        );
        assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    }
}
