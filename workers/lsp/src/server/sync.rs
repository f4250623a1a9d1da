//! Documents as the server sees them, kept equal to the disk: a queried file is read and
//! synced (`didOpen`, or `didChange` + `didSave`), every other open document whose file
//! changed is brought in line (or closed when deleted), and a new incarnation gets every
//! known document re-opened. Every text is read beneath the server root's handle, never by
//! name; the reads and stats run on the blocking pool.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use super::{Conn, Doc, ServerShared, Synced};
use crate::lock;
use crate::uri;

/// The server root's file scope: every document of a server lies under its root (the root
/// marker was found walking up from it), and its text is read beneath that root's handle
/// (`Scope::open_found`: `openat2` `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), never by name,
/// so a directory swapped for a symbolic link after the caller's scope check is not followed.
pub(crate) fn root_scope(root: &Path) -> std::io::Result<toolvisor_files::Scope> {
    toolvisor_files::Scope::new(root, &[], false).map_err(std::io::Error::other)
}

/// The text of document `path`, opened beneath `scope` (see [`root_scope`]). A path that now
/// leads through a symbolic link or out of the root is refused (`ELOOP`/`EXDEV`, see
/// [`is_moved`]).
pub(crate) fn read_doc(scope: &toolvisor_files::Scope, path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut file = scope.open_found(path)?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

/// Whether a read failed because the path changed since it was checked: a symbolic link on
/// it now (`ELOOP`), or it leads out of the server's root (`EXDEV`).
pub(crate) fn is_moved(e: &std::io::Error) -> bool {
    const ELOOP: i32 = 40;
    const EXDEV: i32 = 18;
    matches!(e.raw_os_error(), Some(ELOOP | EXDEV))
}

/// The file's (mtime, length), only to tell whether an open document changed on disk; its
/// text is always read beneath the root ([`read_doc`]).
fn disk_stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl ServerShared {
    /// Reads `path`, brings the other open documents in line with the disk
    /// ([`ServerShared::refresh_open`]) and syncs `path`'s text ([`ServerShared::sync_text`]),
    /// all on the blocking pool: the reads and stats never hold an async worker thread (a
    /// slow disk, a huge file; a FIFO is refused without waiting, `toolvisor_kit::special`). With the root's `watch`, what else changed on disk
    /// under the root is taken in the same trip: the watch catches up with the disk first,
    /// then the file is read, then the changes are taken ([`Synced::outside`]; left pending
    /// when the read fails).
    ///
    /// Callers hold `sync_lock`.
    pub async fn sync_from_disk(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        path: &Path,
        language_id: &str,
        watch: Option<Arc<crate::watch::RootWatch>>,
    ) -> std::io::Result<Synced> {
        let (shared, conn) = (self.clone(), conn.clone());
        let (path, language_id) = (path.to_path_buf(), language_id.to_string());
        tokio::task::spawn_blocking(move || {
            if let Some(w) = &watch {
                w.catch_up(crate::outside::WATCH_WAIT);
            }
            let scope = root_scope(&shared.root)?;
            let text = read_doc(&scope, &path)?;
            let outside = match &watch {
                Some(w) => w.take(),
                None => Ok(Vec::new()),
            };
            let seq_before = shared.diags.seq();
            let refreshed = shared.refresh_open(&scope, &conn, &uri::from_path(&path));
            let result = shared.sync_text(&conn, &path, &text, &language_id);
            Ok(Synced {
                text,
                seq_before,
                result,
                outside,
                refreshed,
            })
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(format!("the sync task failed: {e}"))))
    }

    /// Make the server's view of `path` equal `text`: open it, or send the change and a save.
    /// Returns the document's version and whether anything was sent.
    ///
    /// Callers hold `sync_lock`.
    pub fn sync_text(
        &self,
        conn: &Conn,
        path: &Path,
        text: &str,
        language_id: &str,
    ) -> Result<(i32, bool), toolvisor_jsonrpc::RpcError> {
        let uri = uri::from_path(path);
        // Whether an open starts clangd's first index pass: read before the lock, and only
        // until that pass is expected.
        let under_database = self.flavor.background_index
            && !self.progress.first_index_expected()
            && self.databases.lists_files(&self.root, path);
        // The lock is held across the sends (they only queue bytes), and the document is
        // changed only once they are queued: a dead connection leaves it as the live server
        // last saw it, and re-opening after a restart sends exactly that.
        let mut docs = lock(&self.docs);
        if conn.client.is_closed() {
            return Err(toolvisor_jsonrpc::RpcError::StreamClosed);
        }
        let stamp = disk_stamp(path);
        match docs.get_mut(&uri) {
            Some(doc) if doc.generation == conn.generation => {
                if doc.text == text {
                    doc.disk = stamp;
                    return Ok((doc.version, false));
                }
                let version = doc.version + 1;
                conn.client.notify(
                    "textDocument/didChange",
                    json!({"textDocument": {"uri": uri, "version": version},
                           "contentChanges": [{"text": text}]}),
                )?;
                conn.client.notify(
                    "textDocument/didSave",
                    json!({"textDocument": {"uri": uri}, "text": text}),
                )?;
                doc.version = version;
                doc.text = text.to_string();
                doc.disk = stamp;
                doc.changed_seq = self.diags.seq();
                doc.saved = lock(&self.checks).saved();
                self.note_header(path);
                doc.seen_changes = self.header_changes();
                drop(docs);
                self.note_change();
                Ok((version, true))
            }
            // Already re-opened by a newer incarnation: this connection is stale.
            Some(doc) if doc.generation > conn.generation => {
                Err(toolvisor_jsonrpc::RpcError::StreamClosed)
            }
            existing => {
                let version = existing.as_ref().map(|d| d.version + 1).unwrap_or(1);
                // Opened for the first time, its text is the disk's: what a check after a
                // save (rust-analyzer's `cargo check`, which reads the disk) published for it
                // before is for this text too (`diagnostic_items` merges it).
                let changed_seq = match existing.is_none() && self.flavor.rust_analyzer {
                    true => 0,
                    false => self.diags.seq(),
                };
                let existing_saved = existing.map_or(0, |d| d.saved);
                if under_database {
                    self.progress.opened_with_database();
                }
                conn.client.notify(
                    "textDocument/didOpen",
                    json!({"textDocument": {"uri": uri, "languageId": language_id,
                           "version": version, "text": text}}),
                )?;
                docs.insert(
                    uri.clone(),
                    Doc {
                        version,
                        text: text.to_string(),
                        language_id: language_id.to_string(),
                        generation: conn.generation,
                        disk: stamp,
                        opened_seq: self.diags.seq(),
                        changed_seq,
                        saved: existing_saved,
                        seen_changes: {
                            self.note_header(path);
                            self.header_changes()
                        },
                    },
                );
                drop(docs);
                self.note_change();
                Ok((version, true))
            }
        }
    }

    /// Send open document `uri` again as a new version with the same text, asking for its
    /// diagnostics (clangd's `wantDiagnostics`): clangd rebuilds a file's preamble (the headers
    /// it includes) only when the file itself is updated, and answers positions and
    /// diagnostics from the old headers until then. When a header it includes changed, the
    /// rebuild is published; when none did, nothing is (`ops::rebuilt` tells the two apart).
    /// Returns the new version, `None` when the document is not open in this incarnation or
    /// the connection is gone. Not a change for the other documents: the text is the same.
    ///
    /// Callers hold `sync_lock`.
    pub(crate) fn resend(&self, conn: &Conn, uri: &str) -> Option<i32> {
        let mut docs = lock(&self.docs);
        let doc = docs.get_mut(uri)?;
        if doc.generation != conn.generation {
            return None;
        }
        let version = doc.version + 1;
        conn.client
            .notify(
                "textDocument/didChange",
                json!({"textDocument": {"uri": uri, "version": version},
                       "contentChanges": [{"text": doc.text}], "wantDiagnostics": true}),
            )
            .ok()?;
        doc.version = version;
        doc.seen_changes = self.header_changes();
        drop(docs);
        self.activity();
        Some(version)
    }

    /// Bring every other open document in line with the disk (another tool, the harness or
    /// a person may have changed it): changed → didChange + didSave, deleted → didClose.
    /// Otherwise the server would answer from stale text.
    ///
    /// Every text is read beneath `scope` (the root's, [`root_scope`]); a document whose path
    /// now leads through a symbolic link is left as the server last saw it.
    ///
    /// Callers hold `sync_lock`.
    fn refresh_open(
        &self,
        scope: &toolvisor_files::Scope,
        conn: &Conn,
        except: &str,
    ) -> Vec<String> {
        let mut docs = lock(&self.docs);
        let mut closed = Vec::new();
        let mut refreshed = Vec::new();
        for (u, doc) in docs.iter_mut() {
            if u == except || doc.generation != conn.generation {
                continue;
            }
            let Some(path) = uri::to_path(u) else {
                continue;
            };
            let stamp = disk_stamp(&path);
            if stamp.is_some() && stamp == doc.disk {
                continue;
            }
            match read_doc(scope, &path) {
                Ok(text) => {
                    doc.disk = stamp;
                    if text == doc.text {
                        continue;
                    }
                    doc.version += 1;
                    doc.text = text;
                    let _ = conn.client.notify(
                        "textDocument/didChange",
                        json!({"textDocument": {"uri": u, "version": doc.version},
                               "contentChanges": [{"text": doc.text}]}),
                    );
                    let _ = conn.client.notify(
                        "textDocument/didSave",
                        json!({"textDocument": {"uri": u}, "text": doc.text}),
                    );
                    doc.changed_seq = self.diags.seq();
                    doc.saved = lock(&self.checks).saved();
                    self.note_header(&path);
                    doc.seen_changes = self.header_changes();
                    refreshed.push(u.clone());
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound
                        && self.flavor.opens_unwatched() =>
                {
                    // Closing it would bring back what the server's index held for the
                    // file before; an empty open document stands in for the deleted file.
                    doc.disk = None;
                    if !doc.text.is_empty() {
                        doc.version += 1;
                        doc.text.clear();
                        doc.changed_seq = self.diags.seq();
                        let _ = conn.client.notify(
                            "textDocument/didChange",
                            json!({"textDocument": {"uri": u, "version": doc.version},
                                   "contentChanges": [{"text": ""}]}),
                        );
                        self.note_header(&path);
                        doc.seen_changes = self.header_changes();
                        refreshed.push(u.clone());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    let _ = conn
                        .client
                        .notify("textDocument/didClose", json!({"textDocument": {"uri": u}}));
                    closed.push(u.clone());
                }
                Err(_) => {}
            }
        }
        let sent = !refreshed.is_empty() || !closed.is_empty();
        for u in closed {
            docs.remove(&u);
        }
        drop(docs);
        if sent {
            self.note_change();
        }
        refreshed
    }

    /// Re-open every document known to this server in a new incarnation.
    pub(crate) fn reopen_all(&self, conn: &Conn) {
        let mut docs = lock(&self.docs);
        let seq = self.diags.seq();
        if !docs.is_empty() {
            self.progress.reopened();
        }
        for (uri, doc) in docs.iter_mut() {
            doc.version += 1;
            doc.generation = conn.generation;
            doc.opened_seq = seq;
            doc.changed_seq = seq;
            let _ = conn.client.notify(
                "textDocument/didOpen",
                json!({"textDocument": {"uri": uri, "languageId": doc.language_id,
                       "version": doc.version, "text": doc.text}}),
            );
        }
        if !docs.is_empty() {
            tracing::info!(
                server = self.id,
                documents = docs.len(),
                "re-opened documents after a restart"
            );
        }
    }
}
