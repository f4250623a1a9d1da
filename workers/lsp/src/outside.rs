//! Changes made on disk outside the daemon, handed to a server before every query, so the
//! next answer reflects the disk: `workspace/didChangeWatchedFiles` for the files the server
//! registered watchers for; for a server that watches nothing and keeps an index it does not
//! refresh (clangd), the changed source files are opened in it (at most
//! [`OPENED_PER_QUERY_MAX`] per query, their diagnostics waited for, so its index has them; a
//! deleted one as an empty document, which hides what its index held for the file);
//! open documents are synced by `ServerShared::refresh_open` as before. What could not be
//! handed over is kept in `ServerShared::unseen` and makes index-wide answers partial.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::config::language_id;
use crate::lock;
use crate::server::{Conn, ServerShared, read_doc, root_scope};
use crate::servers::Servers;
use crate::uri;
use crate::watch::Change;

/// Files opened for a server that does not watch files, per query at most.
pub const OPENED_PER_QUERY_MAX: usize = 64;
/// The longest wait before a query for a busy watcher (its first walk of the root, a large new
/// directory tree, a stream of events).
pub const WATCH_WAIT: Duration = Duration::from_secs(2);

impl Servers {
    /// Hand the server `changes`, every change made on disk before this call, taken once
    /// the root watch caught up with the disk (`ServerShared::sync_from_disk`; see the module doc). An
    /// overflow (more changed than the watcher holds) is the caller's: it restarts the server
    /// so it reads the disk anew.
    ///
    /// Callers hold `shared.sync_lock`.
    pub(crate) async fn catch_up(
        &self,
        shared: &Arc<ServerShared>,
        conn: &Arc<Conn>,
        changes: Vec<(std::path::PathBuf, Change)>,
    ) {
        if changes.is_empty() {
            return;
        }
        let extensions = self
            .languages()
            .get(&shared.language)
            .map(|s| s.extensions.clone())
            .unwrap_or_default();
        let is_source = |p: &std::path::Path| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| extensions.iter().any(|x| x == e))
        };
        let mut events = Vec::new();
        let mut to_open = Vec::new();
        let mut sources_changed = false;
        {
            let watchers = lock(&shared.file_watchers);
            for (path, mut change) in changes {
                let open = shared.doc(&uri::from_path(&path)).is_some();
                // A file moved over an open document (an atomic write) replaced a file the
                // server knew: a change, not a new file (rust-analyzer reloads its workspace
                // for a new one).
                if open && change == Change::Created {
                    change = Change::Changed;
                }
                if watchers.matches(&path, change) {
                    sources_changed |= is_source(&path);
                    events.push(json!({"uri": uri::from_path(&path), "type": change as u8}));
                    continue;
                }
                if !shared.flavor.opens_unwatched() || !is_source(&path) || open {
                    continue;
                }
                to_open.push((path, change));
            }
        }
        if !events.is_empty() {
            tracing::debug!(
                server = shared.id,
                files = events.len(),
                "telling the server of files changed on disk"
            );
            let _ = conn.client.notify(
                "workspace/didChangeWatchedFiles",
                json!({"changes": events}),
            );
            shared.note_change();
            // A server that checks only after a save (rust-analyzer's `cargo check`) is sent
            // one before the next diagnostics are read (`Servers::diagnostic_items`).
            if sources_changed && shared.checks_on_save() {
                lock(&shared.checks).outside_pending = true;
            }
        }
        if !to_open.is_empty() {
            self.open_unwatched(shared, conn, to_open).await;
        }
    }

    /// Open `paths` (changed on disk) in a server that does not watch files, at most
    /// [`OPENED_PER_QUERY_MAX`] (the rest are `unseen`), and wait (bounded by the
    /// diagnostics wait) until it has published diagnostics for each: it has parsed and
    /// indexed them then.
    async fn open_unwatched(
        &self,
        shared: &Arc<ServerShared>,
        conn: &Arc<Conn>,
        paths: Vec<(PathBuf, Change)>,
    ) {
        let (s, c) = (shared.clone(), conn.clone());
        let opened = tokio::task::spawn_blocking(move || {
            let Ok(scope) = root_scope(&s.root) else {
                return Vec::new();
            };
            let mut opened = Vec::new();
            for (path, change) in paths {
                if opened.len() >= OPENED_PER_QUERY_MAX {
                    lock(&s.unseen).insert(path);
                    continue;
                }
                let text = match (change, read_doc(&scope, &path)) {
                    (_, Ok(text)) => text,
                    // Deleted: an empty document hides what the index held for it.
                    (Change::Deleted, Err(_)) => String::new(),
                    (_, Err(_)) => continue,
                };
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
                let id = language_id(&s.language, ext);
                if s.sync_text(&c, &path, &text, &id).is_ok() {
                    lock(&s.unseen).remove(&path);
                    opened.push(uri::from_path(&path));
                }
            }
            opened
        })
        .await
        .unwrap_or_default();
        if opened.is_empty() {
            return;
        }
        tracing::debug!(
            server = shared.id,
            files = opened.len(),
            "opened files changed on disk in a server that does not watch files"
        );
        self.wait_published(shared, &opened, |d| d.opened_seq).await;
    }

    /// Until the server has published diagnostics for each of `uris` (open documents whose
    /// changed text was just sent) since that change: it has rebuilt them, and its index has
    /// their new text. Bounded by the diagnostics wait.
    pub(crate) async fn wait_rebuilt(&self, shared: &Arc<ServerShared>, uris: &[String]) {
        self.wait_published(shared, uris, |d| d.changed_seq).await;
    }

    /// Until each of `uris` has a publish after its `since` (a diagnostics sequence number of
    /// its document), at most the diagnostics wait.
    async fn wait_published(
        &self,
        shared: &Arc<ServerShared>,
        uris: &[String],
        since: fn(&crate::server::Doc) -> u64,
    ) {
        let deadline = Instant::now() + shared.waits.diagnostics;
        let mut events = shared.subscribe();
        loop {
            events.borrow_and_update();
            let waiting = uris.iter().any(|u| {
                let since = shared.doc(u).map_or(0, |d| since(&d));
                shared.diags.get(u).is_none_or(|p| p.seq <= since)
            });
            if !waiting || Instant::now() >= deadline {
                return;
            }
            let _ = tokio::time::timeout_at(deadline.into(), events.changed()).await;
        }
    }
}
