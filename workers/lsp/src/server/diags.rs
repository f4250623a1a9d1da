//! The diagnostics a server published, numbered so a caller can tell fresh from stale, and
//! whether the server answers pulls (`textDocument/diagnostic`, advertised at `initialize` or
//! registered since). Kept across restarts: the last publish of a file stands until the new
//! incarnation publishes anew.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;

use super::{Conn, Published};
use crate::lock;

/// One server's published diagnostics and its registered methods.
#[derive(Debug, Default)]
pub(crate) struct DiagStore {
    /// The latest publish per document URI.
    pub published: Mutex<HashMap<String, Published>>,
    /// Counter over all publishes of this server.
    seq: AtomicU64,
    /// `seq` when a change to any document was last sent: a publish for a document that did
    /// not change is current only if it came after that (its imports may have).
    changed_seq: AtomicU64,
    /// When a change was last sent (see `changed_seq`).
    changed_at: Mutex<Option<Instant>>,
    /// Methods the current incarnation registered dynamically (`client/registerCapability`),
    /// e.g. pyright's `textDocument/diagnostic` (pull diagnostics). Registration id → method
    /// (a server may register anew and then drop the old id), and whether its options say
    /// `workspaceDiagnostics` (the server answers `workspace/diagnostic`).
    registered: Mutex<HashMap<String, (String, bool)>>,
}

impl DiagStore {
    /// The latest publish for `uri`.
    pub fn get(&self, uri: &str) -> Option<Published> {
        lock(&self.published).get(uri).cloned()
    }

    /// The number of the latest publish.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::SeqCst)
    }

    /// `seq` when a change to any document was last sent to the server.
    pub fn changed_seq(&self) -> u64 {
        self.changed_seq.load(Ordering::SeqCst)
    }

    /// A change to some document was sent: publishes before it may be out of date for
    /// every document, not only the changed one.
    pub fn mark_changed(&self) {
        self.changed_seq.store(self.seq(), Ordering::SeqCst);
        *lock(&self.changed_at) = Some(Instant::now());
    }

    /// When a change to some document was last sent to the server.
    pub fn changed_at(&self) -> Option<Instant> {
        *lock(&self.changed_at)
    }

    /// Record a publish for `uri`: `named` is the version the server named, `current` the
    /// document's version as last sent. Returns its number.
    pub fn record(&self, uri: &str, named: Option<i32>, current: i32, items: Vec<Value>) -> u64 {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        lock(&self.published).insert(
            uri.to_string(),
            Published {
                version: named.unwrap_or(current),
                versioned: named.is_some(),
                items,
                seq,
                at: Instant::now(),
            },
        );
        seq
    }

    /// The server rebuilt `uri` as `version` and published nothing, because nothing in it
    /// changed (clangd, for a file sent again unchanged): its last list stands for `version`,
    /// recorded as a publish of its own. Nothing when it never published for `uri`.
    pub fn restate(&self, uri: &str, version: i32) {
        if let Some(p) = self.get(uri) {
            self.record(uri, Some(version), version, p.items);
        }
    }

    /// Whether the server answers `textDocument/diagnostic` (pull diagnostics): advertised
    /// in `initialize`, or registered since (pyright registers it when the client allows it).
    pub fn pulls(&self, conn: &Conn) -> bool {
        conn.supports("diagnosticProvider")
            || lock(&self.registered)
                .values()
                .any(|(m, _)| m == "textDocument/diagnostic")
    }

    /// Whether the server answers `workspace/diagnostic` (the whole project's pull):
    /// `diagnosticProvider.workspaceDiagnostics` in `initialize` or in a registration's options.
    pub fn pulls_workspace(&self, conn: &Conn) -> bool {
        conn.caps
            .pointer("/diagnosticProvider/workspaceDiagnostics")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            || lock(&self.registered)
                .values()
                .any(|(m, ws)| m == "textDocument/diagnostic" && *ws)
    }

    /// A registration (`add`, with its `registerOptions`) or its end.
    pub fn registration(&self, id: &str, method: &str, options: Option<&Value>, add: bool) {
        let mut registered = lock(&self.registered);
        if add {
            let ws = options
                .and_then(|o| o.get("workspaceDiagnostics"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            registered.insert(id.to_string(), (method.to_string(), ws));
        } else {
            registered.remove(id);
        }
    }

    /// A new incarnation registers anew.
    pub fn clear_registrations(&self) {
        lock(&self.registered).clear();
    }
}
