//! Document sync before every request (`Servers::open`, `Servers::request`), the server an
//! answer names (`Servers::server_of`), `lsp reload` and `lsp trust`; the `lsp` op dispatch is
//! the manager's (`manager.rs`), each op in its own module (the position ops: `navigate.rs`).
//! Every answer names the server and its state; an empty answer comes only from a server that
//! is ready and settled.
//!
//! Before every query, every change made on disk under the server's root, by anyone, is handed to
//! the server first (`ServerShared::sync_from_disk`: the root's `RootWatch` caught up with the disk, in the
//! same trip to the blocking pool as the file's read; then `Servers::catch_up` in
//! `outside.rs`: `workspace/didChangeWatchedFiles` for what the server watches, or the file opened in a
//! server that watches nothing, clangd), or the answer says it could not be (`complete: false`). No
//! read-tier op writes a file: the language-server edits are the write-tier tools `lsp_rename` and
//! `lsp_edit` (approval always), and `check_edit` writes nothing (`check.rs`). `CallCtx` is the
//! caller's workdir, run and file `Scope`: every file argument resolves through it, and every
//! location's text is read beneath the scope's root (`CallCtx::read_text`), or not at all
//! (`call.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use toolvisor_files::paths::Access;
use toolvisor_jsonrpc::RpcError;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    LspPage, LspReload, LspServer, LspServerState, LspTrust, LspTrustedRoot,
};

use crate::answers;
use crate::call::{CallCtx, Opened};
use crate::config::language_id;
use crate::server::ServerShared;
use crate::servers::Servers;
use crate::uri;

pub const REFERENCES_MAX: usize = 50;
pub const WORKSPACE_SYMBOLS_MAX: usize = 100;
pub const DOCUMENT_SYMBOLS_MAX: usize = 200;
pub const CODE_ACTIONS_MAX: usize = 50;

pub(crate) fn invalid(msg: String, hint: &str) -> ToolError {
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

impl Servers {
    /// Read `path` from disk and make the view of `run`'s server (full or restricted, by the
    /// run's trust in the root) equal it.
    pub async fn open(&self, path: &Path, run: &str) -> Result<Opened, ToolError> {
        let plan = self.plan(path, run).map_err(|e| e.to_error())?;
        self.open_planned(&plan, path, run).await
    }

    /// [`Servers::open`] in the server of `plan` (another root's than the innermost
    /// one, for a merged answer).
    pub(crate) async fn open_planned(
        &self,
        plan: &crate::servers::Plan,
        path: &Path,
        run: &str,
    ) -> Result<Opened, ToolError> {
        let shared = self.shared(plan);
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let lang_id = language_id(&plan.language, ext);
        for attempt in 0..2 {
            let conn = self.ensure(&shared).await?;
            let sync = shared.sync_lock.lock().await;
            // The watcher's catch-up, the read and the sync in one trip to the blocking pool;
            // what else changed on disk is handed over below, before any request.
            let watch = crate::lock(&shared.watch).clone();
            let synced = shared
                .sync_from_disk(&conn, path, &lang_id, watch)
                .await
                .map_err(|e| {
                    if let Some(kind) = toolvisor_kit::special::not_regular(&e) {
                        return ToolError::new(
                            ErrorKind::InvalidArgs,
                            format!("cannot read {}: it is {kind}, not a regular file", path.display()),
                            "language servers read regular source files only (a FIFO's reader would wait for a writer for ever); read it with `bash` if you mean to",
                        );
                    }
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
            // clangd answers about another translation unit from its index, which takes a
            // changed unit's new text only once it rebuilt it: a `definition` into `lz4.c`
            // right after a line was added at its top answered the old line.
            if shared.flavor.opens_unwatched() && !synced.refreshed.is_empty() {
                self.wait_rebuilt(&shared, &synced.refreshed).await;
            }
            match synced.outside {
                Ok(changes) => self.catch_up(&shared, &conn, changes).await,
                Err(crate::watch::Lost::Overflow) => {
                    drop(sync);
                    tracing::warn!(
                        server = shared.id,
                        "more files changed on disk at once than the watcher holds; restarting the server so it reads the disk anew"
                    );
                    self.stop(&shared, "restarted: too many files changed on disk at once")
                        .await;
                    continue;
                }
            }
            let (text, mut seq_before) = (synced.text, synced.seq_before);
            match synced.result {
                Ok((mut version, mut changed)) => {
                    let uri = uri::from_path(path);
                    // clangd answers from the headers as they were when the file was last
                    // updated: after any other change, the file is sent again and its rebuild
                    // waited for.
                    let behind = shared
                        .doc(&uri)
                        .is_some_and(|d| d.seen_changes < shared.header_changes());
                    if !changed && behind && shared.flavor.clangd {
                        seq_before = shared.diags.seq();
                        let status = crate::lock(&shared.file_status).seq();
                        if let Some(v) = shared.resend(&conn, &uri) {
                            drop(sync);
                            (version, changed) = (v, true);
                            rebuilt(&shared, &uri, path, version, (seq_before, status)).await?;
                        }
                    }
                    return Ok(Opened {
                        uri,
                        shared: shared.clone(),
                        conn,
                        path: path.to_path_buf(),
                        text,
                        version,
                        changed,
                        seq_before,
                        run: run.to_string(),
                        asked: None,
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
            opened.asked = Some(opened.shared.readiness());
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

    /// The server that answers for `opened`, as it was when the request was sent.
    pub(crate) fn server_of(&self, opened: &Opened) -> LspServer {
        use crate::server::Readiness;
        let readiness = opened
            .asked
            .clone()
            .unwrap_or_else(|| opened.shared.readiness());
        LspServer {
            id: opened.shared.id.clone(),
            language: opened.shared.language.clone(),
            root: opened.shared.root.display().to_string(),
            name: opened.conn.name.clone(),
            pid: opened.conn.pid,
            state: match readiness {
                Readiness::Starting => LspServerState::Starting,
                Readiness::Indexing(_) => LspServerState::Indexing,
                Readiness::Ready => LspServerState::Ready,
            },
            position_encoding: opened.conn.encoding.into(),
            indexing: match readiness {
                Readiness::Indexing(what) => Some(what),
                _ => None,
            },
            request_ms: None,
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
    pub(crate) fn trust_roots_for_run(
        &self,
        ctx: &CallCtx,
        file: Option<&str>,
    ) -> Result<LspTrust, ToolError> {
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
            roots.push(LspTrustedRoot {
                root: root.display().to_string(),
                languages: languages.clone(),
                newly,
            });
        }
        Ok(LspTrust {
            text,
            run: ctx.run.clone(),
            trusted: roots,
        })
    }

    pub(crate) async fn reload(
        &self,
        ctx: &CallCtx,
        file: Option<&str>,
    ) -> Result<LspReload, ToolError> {
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
            return Ok(LspReload {
                text: "no language server runs for this workdir; nothing to reload\n".into(),
                reloaded: Vec::new(),
            });
        }
        let mut done = Vec::new();
        for s in targets {
            self.stop(&s, "reloaded by `lsp reload`").await;
            self.ensure_inner(&s, true).await?;
            done.push(s.id.clone());
        }
        Ok(LspReload {
            text: format!("restarted: {}\n", done.join(", ")),
            reloaded: done,
        })
    }
}

/// Until clangd has rebuilt `uri` sent again as `version` ([`ServerShared::resend`]): its
/// diagnostics for that version published (after diagnostics number `since.0`: a header it
/// includes had changed), or, when nothing changed and clangd publishes nothing, its file
/// status busy after status number `since.1`, then idle and quiet for `settle` (clangd reports
/// "parsing includes" while it checks the headers and rebuilds, and may go idle for a moment
/// between the preamble and the AST): its last list then stands for `version`. A server that
/// does neither within the diagnostics wait is `not_ready`, naming the file and what it waited
/// for.
async fn rebuilt(
    shared: &ServerShared,
    uri: &str,
    path: &Path,
    version: i32,
    since: (u64, u64),
) -> Result<(), ToolError> {
    let deadline = Instant::now() + shared.waits.diagnostics;
    let mut events = shared.subscribe();
    loop {
        events.borrow_and_update();
        if shared
            .diags
            .get(uri)
            .is_some_and(|p| p.seq > since.0 && p.version >= version)
        {
            return Ok(());
        }
        let now = Instant::now();
        let idle = crate::lock(&shared.file_status).idle_since(uri, since.1);
        if let Some(at) = idle
            && now >= at + shared.waits.settle
        {
            shared.diags.restate(uri, version);
            return Ok(());
        }
        if now >= deadline {
            return Err(ToolError::new(
                ErrorKind::NotReady,
                format!(
                    "language server {} did not rebuild {} within {} s after a file it may include changed: answering now would use the old header",
                    shared.id,
                    path.display(),
                    shared.waits.diagnostics.as_secs()
                ),
                "retry; if it stays, `lsp reload` the server",
            ));
        }
        let until = match idle {
            Some(at) => deadline.min(at + shared.waits.settle),
            None => deadline,
        };
        let _ = tokio::time::timeout_at(until.into(), events.changed()).await;
    }
}

/// One page of a list of `total` entries: `from..to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Page {
    pub from: usize,
    pub to: usize,
}

impl Page {
    /// The page starting at `offset` (0 by default) of at most `max` entries.
    pub fn of(offset: Option<u64>, total: usize, max: usize) -> Page {
        let from = usize::try_from(offset.unwrap_or(0))
            .unwrap_or(usize::MAX)
            .min(total);
        Page {
            from,
            to: (from + max).min(total),
        }
    }

    pub fn whole(total: usize) -> Page {
        Page { from: 0, to: total }
    }

    /// Not every entry is on this page.
    pub fn cut(&self, total: usize) -> bool {
        self.from > 0 || self.to < total
    }

    /// Where the next page starts, if there is one.
    pub fn next(&self, total: usize) -> Option<usize> {
        (self.to < total).then_some(self.to)
    }

    /// "showing 51–100 of 197 references; `offset: 100` shows the next", when cut.
    pub fn note(&self, total: usize, what: &str) -> Option<String> {
        if !self.cut(total) {
            return None;
        }
        let shown = if self.from == self.to {
            format!("none of {total} {what}: this page starts past its end")
        } else {
            format!("{}–{} of {total} {what}", self.from + 1, self.to)
        };
        Some(match self.next(total) {
            Some(next) => format!("showing {shown}; `offset: {next}` shows the next"),
            None => format!("showing {shown}; the last page"),
        })
    }

    /// Where the answer stands in a list of `total` (its `offset` and `next_offset` only when
    /// paged).
    pub fn of_total(&self, total: usize) -> LspPage {
        let cut = self.cut(total);
        LspPage {
            total: total as u64,
            truncated: cut,
            offset: cut.then_some(self.from as u64),
            next_offset: self.next(total).map(|n| n as u64),
        }
    }
}

/// An answer that says "nothing": null, an empty list, a hover without contents.
pub(crate) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(_) if v.get("contents").is_some() => answers::hover_markdown(v).is_empty(),
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

pub(crate) fn need<'a>(v: &'a Option<String>, op: &str, field: &str) -> Result<&'a str, ToolError> {
    v.as_deref().ok_or_else(|| {
        invalid(
            format!("lsp {op}: missing required argument `{field}`"),
            &format!("`{op}` needs `{field}`"),
        )
    })
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
