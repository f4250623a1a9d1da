//! `lsp check_edit`: the diagnostics a proposed edit would produce, nothing written. The
//! server is shown the proposed text as an unsaved version (`didChange`), asked for that
//! version's diagnostics, and then given the disk text back as a newer version — by a drop
//! guard ([`Restore`]), so an error, a timeout or a cancelled call puts it back too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toolvisor_files::paths::Access;
use toolvisor_jsonrpc::RpcError;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspCheckEdit, LspCheckedDiagnostic, LspServed};
use toolvisor_protocol::tools::LspArgs;

use crate::answers::{self, Diag};
use crate::call::{CallCtx, Opened};
use crate::config::language_id;
use crate::lock;
use crate::server::{Conn, Published, ServerShared};
use crate::servers::Servers;
use crate::uri;

fn invalid(msg: String, hint: &str) -> ToolError {
    ToolError::new(ErrorKind::InvalidArgs, msg, hint)
}

/// Holds the document's sync lock while the server sees a proposed text, and gives the
/// server the disk text back when dropped — however the check ends.
pub struct Restore<'a> {
    shared: &'a ServerShared,
    conn: Arc<Conn>,
    path: PathBuf,
    uri: String,
    disk: String,
    language_id: String,
    shown: bool,
    /// The diagnostics sequence number when the proposal was shown, and every document's
    /// published diagnostics then: another document's publish after it was computed against
    /// the proposal (pyright re-checks the importers of a changed module), so the drop puts
    /// the disk-time publish back.
    seq_shown: u64,
    published: HashMap<String, Published>,
    // Dropped last: the restore is sent before another sync may run.
    _sync: tokio::sync::MutexGuard<'a, ()>,
}

impl<'a> Restore<'a> {
    pub fn new(
        shared: &'a ServerShared,
        sync: tokio::sync::MutexGuard<'a, ()>,
        conn: Arc<Conn>,
        path: &Path,
        disk: String,
        language_id: String,
    ) -> Self {
        Restore {
            shared,
            conn,
            path: path.to_path_buf(),
            uri: uri::from_path(path),
            disk,
            language_id,
            shown: false,
            seq_shown: 0,
            published: HashMap::new(),
            _sync: sync,
        }
    }

    /// Show the server `text` as a new, unsaved version of the document (`didChange` only:
    /// no `didSave`, so no server checks the disk for it). Returns that version.
    pub fn show(&mut self, text: &str) -> Result<i32, RpcError> {
        let mut docs = lock(&self.shared.docs);
        if self.conn.client.is_closed() {
            return Err(RpcError::StreamClosed);
        }
        let doc = docs
            .get_mut(&self.uri)
            .filter(|d| d.generation == self.conn.generation && d.text == self.disk)
            .ok_or(RpcError::StreamClosed)?;
        let version = doc.version + 1;
        self.seq_shown = self.shared.diags.seq();
        self.published = lock(&self.shared.diags.published).clone();
        // Marked first: from here on the drop restores, even if the send fails half-way.
        self.shown = true;
        self.conn.client.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": self.uri, "version": version},
                   "contentChanges": [{"text": text}]}),
        )?;
        doc.version = version;
        doc.text = text.to_string();
        doc.changed_seq = self.shared.diags.seq();
        Ok(version)
    }
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if !self.shown {
            return;
        }
        // The disk text as a newer version (didChange + didSave, as any sync sends).
        match self
            .shared
            .sync_text(&self.conn, &self.path, &self.disk, &self.language_id)
        {
            Ok(_) => {
                let mut diags = lock(&self.shared.diags.published);
                let tainted: Vec<String> = diags
                    .iter()
                    .filter(|(u, p)| **u != self.uri && p.seq > self.seq_shown)
                    .map(|(u, _)| u.clone())
                    .collect();
                for u in tainted {
                    match self.published.get(&u) {
                        Some(p) => diags.insert(u, p.clone()),
                        None => diags.remove(&u),
                    };
                }
            }
            Err(e) => {
                // Not sent (a dead or stuck connection): the record keeps the proposed text
                // and forgets the disk stamp, so the next sync of any document of this server
                // (`refresh_open` re-reads a document without a stamp) or a re-open after a
                // restart sends the disk text again.
                tracing::warn!(server = self.shared.id, error = %e, path = %self.path.display(),
                    "check_edit could not restore the disk text yet; the next sync will");
                if let Some(doc) = lock(&self.shared.docs).get_mut(&self.uri) {
                    doc.disk = None;
                }
            }
        }
    }
}

/// The proposed text: `old_text` replaced by `new_text` where `old_text` occurs exactly once,
/// else `new_text` as the whole file.
pub fn proposed(disk: &str, shown: &str, args: &LspArgs) -> Result<String, ToolError> {
    let new = args.new_text.as_deref().ok_or_else(|| {
        invalid(
            "lsp check_edit: missing required argument `new_text`".into(),
            "give `new_text` (the whole proposed file), or `old_text` and its replacement `new_text`",
        )
    })?;
    let Some(old) = args.old_text.as_deref() else {
        return Ok(new.to_string());
    };
    if old.is_empty() {
        return Err(invalid(
            "lsp check_edit: `old_text` is empty".into(),
            "give text copied from the file, or leave `old_text` out to check a whole new file",
        ));
    }
    match disk.matches(old).count() {
        1 => Ok(disk.replacen(old, new, 1)),
        0 => Err(invalid(
            format!("lsp check_edit: `old_text` is not in {shown}"),
            "copy it from the file as it is now (whitespace included)",
        )),
        n => Err(invalid(
            format!("lsp check_edit: `old_text` occurs {n} times in {shown}"),
            "give more surrounding lines so it occurs once",
        )),
    }
}

impl Servers {
    /// `lsp check_edit {file, new_text, old_text?}`.
    pub(crate) async fn check_edit(
        &self,
        ctx: &CallCtx,
        args: &LspArgs,
    ) -> Result<LspCheckEdit, ToolError> {
        let file = args.file.as_deref().ok_or_else(|| {
            invalid(
                "lsp check_edit: missing required argument `file`".into(),
                "check_edit needs `file` and `new_text` (and `old_text` for a replacement)",
            )
        })?;
        let path = ctx.resolve("lsp", file, Access::Read)?;
        let shown = answers::show_path(&path, &ctx.workdir);
        let mut opened = self.open(&path, &ctx.run).await?;
        let text = proposed(&opened.text, &shown, args)?;
        // The disk text's diagnostics first: what the edit adds is what is not among them.
        let before = self.file_diagnostics(&mut opened).await?;
        let (after, request_ms) = if text == opened.text {
            (before.clone(), 0.0)
        } else {
            self.diagnostics_of(&opened, &text).await?
        };
        let mut known: Vec<_> = before.iter().map(Diag::key).collect();
        let base = &ctx.workdir;
        let (mut new_text, mut items) = (String::new(), Vec::new());
        let mut new_count = 0;
        for d in &after {
            let key = d.key();
            let is_new = match known.iter().position(|k| *k == key) {
                Some(i) => {
                    known.swap_remove(i);
                    false
                }
                None => true,
            };
            let diagnostic = d.to_result(base);
            if is_new {
                new_count += 1;
                new_text.push_str(&diagnostic.line());
                new_text.push('\n');
            }
            items.push(LspCheckedDiagnostic {
                diagnostic,
                new: is_new,
            });
        }
        let gone = known.len();
        let mut text_out = if new_count == 0 {
            format!("the edit brings no new diagnostics to {shown}\n")
        } else {
            format!("the edit would bring {new_count} new diagnostics to {shown}:\n{new_text}")
        };
        if gone > 0 {
            text_out.push_str(&format!("and clear {gone} of the current ones\n"));
        }
        text_out.push_str("(nothing was written; the server has the disk text again)\n");
        let mut server = self.server_of(&opened);
        server.request_ms = Some(request_ms);
        let served = LspServed::of(server, false, false);
        Ok(LspCheckEdit {
            text: text_out,
            diagnostics: items,
            new: new_count,
            cleared: gone as u64,
            served,
        })
    }

    /// The diagnostics of `text` shown to the server as an unsaved version of `opened`'s
    /// document, the disk text restored afterwards (see [`Restore`]), and the server's own
    /// share in ms (proposal sent → its diagnostics in hand).
    async fn diagnostics_of(
        &self,
        opened: &Opened,
        text: &str,
    ) -> Result<(Vec<Diag>, f64), ToolError> {
        let shared = &opened.shared;
        let ext = opened
            .path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("");
        let lang = language_id(&shared.language, ext);
        let sync = shared.sync_lock.lock().await;
        let mut guard = Restore::new(
            shared,
            sync,
            opened.conn.clone(),
            &opened.path,
            opened.text.clone(),
            lang,
        );
        let seq_before = shared.diags.seq();
        let asked = std::time::Instant::now();
        let version = guard.show(text).map_err(|e| {
            ToolError::new(
                ErrorKind::NotReady,
                format!(
                    "language server {} could not be shown the proposed text: {e}",
                    shared.id
                ),
                "the server restarted or changed the file meanwhile; retry",
            )
        })?;
        let proposed = Opened {
            shared: shared.clone(),
            conn: opened.conn.clone(),
            path: opened.path.clone(),
            uri: opened.uri.clone(),
            text: text.to_string(),
            version,
            changed: true,
            seq_before,
            run: opened.run.clone(),
            asked: None,
        };
        // Asked on this connection only (no re-open on a crash: the sync lock is held).
        // typescript-language-server's asked of tsserver (`diagnostics::tsserver_items`);
        // pulled where the server takes pulls, statically or by dynamic registration (as
        // `diagnostic_items` decides): pyright publishes no pushes once it registered pulls.
        let pulled_from_tsserver = match crate::diagnostics::asks_tsserver(&proposed.conn) {
            true => crate::diagnostics::tsserver_items(&proposed).await?,
            false => None,
        };
        let items = if let Some(items) = pulled_from_tsserver {
            items
        } else if shared.diags.pulls(&proposed.conn) {
            let params = json!({"textDocument": {"uri": proposed.uri}});
            let r = proposed
                .conn
                .client
                .request("textDocument/diagnostic", params, shared.waits.request)
                .await
                .map_err(|e| crate::ops::rpc_error(shared, e))?;
            r.get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        } else {
            self.pushed(&proposed).await?
        };
        let server_ms = asked.elapsed().as_secs_f64() * 1000.0;
        // Let the server finish publishing what the proposal did to other open documents
        // before the disk text goes back, so the guard can put their disk-time diagnostics
        // back (with no other document open there is nothing to wait for).
        let others_open = lock(&shared.docs).len() > 1;
        if others_open {
            quiet(shared).await;
        }
        drop(guard);
        let enc = proposed.conn.encoding;
        let mut diags: Vec<Diag> = items
            .iter()
            .map(|v| Diag::from_lsp(&proposed.path, v, text, enc))
            .collect();
        diags.sort_by_key(|d| (d.line, d.column));
        Ok((diags, server_ms))
    }
}

/// Wait until no diagnostics were published for `settle` (at most the diagnostics wait).
async fn quiet(shared: &ServerShared) {
    let deadline = tokio::time::Instant::now() + shared.waits.diagnostics;
    let mut events = shared.subscribe();
    loop {
        let seq = shared.diags.seq();
        let until = (tokio::time::Instant::now() + shared.waits.settle).min(deadline);
        loop {
            match tokio::time::timeout_at(until, events.changed()).await {
                Ok(Ok(())) if shared.diags.seq() == seq => continue,
                Ok(Ok(())) => break,
                _ => return,
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn args(old: Option<&str>, new: Option<&str>) -> LspArgs {
        LspArgs {
            op: toolvisor_protocol::tools::LspOp::CheckEdit,
            file: Some("a.py".into()),
            line: None,
            end_line: None,
            symbol: None,
            query: None,
            occurrence: None,
            old_text: old.map(str::to_string),
            new_text: new.map(str::to_string),
            offset: None,
            depth: None,
        }
    }

    #[test]
    fn the_proposed_text_replaces_one_occurrence_or_is_the_whole_file() {
        let disk = "x = 1\ny = 2\ny = 2\n";
        assert_eq!(proposed(disk, "a.py", &args(None, Some("z"))).unwrap(), "z");
        assert_eq!(
            proposed(disk, "a.py", &args(Some("x = 1"), Some("x = 'a'"))).unwrap(),
            "x = 'a'\ny = 2\ny = 2\n"
        );
        let e = proposed(disk, "a.py", &args(Some("y = 2"), Some("q"))).unwrap_err();
        assert!(e.message.contains("occurs 2 times"), "{e}");
        let e = proposed(disk, "a.py", &args(Some("nope"), Some("q"))).unwrap_err();
        assert!(e.message.contains("not in a.py"), "{e}");
        let e = proposed(disk, "a.py", &args(Some("x"), None)).unwrap_err();
        assert!(e.message.contains("`new_text`"), "{e}");
    }

    /// What the fake server's stdin got so far.
    async fn sent(peer: &mut tokio::io::DuplexStream) -> String {
        let mut buf = vec![0u8; 64 * 1024];
        let mut out = String::new();
        while let Ok(Ok(n)) =
            tokio::time::timeout(std::time::Duration::from_millis(200), peer.read(&mut buf)).await
        {
            if n == 0 {
                break;
            }
            out.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        out
    }

    #[tokio::test]
    async fn a_dropped_check_gives_the_server_the_disk_text_back_as_a_newer_version() {
        let s = crate::server::tests::shared("pyright-langserver");
        let mut peer = crate::server::tests::connect(&s);
        let conn = s.conn().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a.py");
        std::fs::write(&path, "x = 1\n").unwrap();
        s.sync_text(&conn, &path, "x = 1\n", "python").unwrap();
        let u = uri::from_path(&path);
        // An importer's diagnostics: clean for the disk text, broken while it saw the proposal.
        let importer = "file:///w/main.py".to_string();
        let published = |items: Vec<Value>, seq: u64| Published {
            version: 1,
            versioned: true,
            items,
            seq,
            at: std::time::Instant::now(),
        };
        lock(&s.diags.published).insert(importer.clone(), published(vec![], 0));
        {
            let sync = s.sync_lock.lock().await;
            let mut guard = Restore::new(
                &s,
                sync,
                conn.clone(),
                &path,
                "x = 1\n".into(),
                "python".into(),
            );
            assert_eq!(guard.show("x = undefined\n").unwrap(), 2);
            assert_eq!(s.doc(&u).unwrap().text, "x = undefined\n");
            let during = s.diags.seq() + 1;
            lock(&s.diags.published).insert(
                importer.clone(),
                published(vec![json!({"message": "m"})], during),
            );
            // The call is cancelled or fails here: the guard is dropped.
        }
        let doc = s.doc(&u).unwrap();
        assert_eq!((doc.version, doc.text.as_str()), (3, "x = 1\n"));
        assert_eq!(
            s.diags.get(&importer).unwrap().items,
            Vec::<Value>::new(),
            "the importer's disk-time diagnostics are back"
        );
        assert!(s.sync_lock.try_lock().is_ok(), "the sync lock is released");
        let wire = sent(&mut peer[0]).await;
        let shown = wire
            .find("x = undefined")
            .expect("the proposed text was sent");
        let back = wire[shown..]
            .find(r#""version":3"#)
            .expect("the disk text went back as version 3");
        assert!(
            wire[shown + back..].contains(r#""text":"x = 1\n""#),
            "{wire}"
        );
        assert!(
            !wire[..shown].contains("didSave"),
            "no save of the proposed text"
        );
    }
}
