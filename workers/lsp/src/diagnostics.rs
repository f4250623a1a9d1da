//! The current diagnostics of a synced document: pulled (`textDocument/diagnostic`) where
//! the server offers it, else the `publishDiagnostics` for the synced version, waited for.
//!
//! Never a list computed for older text: pulled where the server offers `textDocument/diagnostic`
//! statically or by dynamic registration (pyright registers it: toolvisor offers
//! `diagnostic.dynamicRegistration` and tracks registrations by id), else a push whose version is
//! the synced one, published after the sync when the document changed, and, when it did not, after
//! the last change sent for any document of the server (`changed_seq`) or once the server has been
//! quiet for `settle` (`pushed`). typescript-language-server, which offers no pull, is asked
//! through tsserver itself (`tsserver_items`): its publishes lag a change to an imported file
//! by seconds, and an empty list that stays empty is never published.
//!
//! The diagnostics concern's state is [`Diagnostics`]: the run ledger (`ledger.rs`), what the
//! diagnostics folded into writes are told apart by (new for the run or already told). Its
//! methods, which take the [`Servers`] they ask, are in `write_diags.rs` (the written files
//! and `synced_write`) and `dependents.rs` (the files a write may have broken).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolvisor_protocol::error::ToolError;

use crate::answers::Diag;
use crate::call::Opened;
use crate::checks::same;
use crate::config::LspConfig;
use crate::ledger::Ledger;
use crate::lock;
use crate::servers::{Servers, not_ready};

/// Diagnostics and checks across calls: each run's ledger of what it was told, so a write
/// reports only what is new for the run.
pub struct Diagnostics {
    ledger: Ledger,
}

impl Diagnostics {
    pub fn new(config: &LspConfig) -> Self {
        Diagnostics {
            ledger: Ledger::new(
                Duration::from_secs(config.ledger_run_idle_s.max(1)),
                config.ledger_max_runs,
            ),
        }
    }

    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// What `run` was told of `paths` now names `new` for `old` (after a rename).
    pub(crate) fn renamed(&self, run: &str, paths: &[PathBuf], old: &str, new: &str) {
        self.ledger.renamed(run, paths, old, new);
    }
}

/// How long past `settle` a server that drops unchanged empty lists must have been quiet
/// after a change before a document's empty list counts as still empty: typescript-language-
/// server asks tsserver for every open file's errors about 200 ms after a change, and
/// publishes a file's list only when it is not empty or was not empty before.
const EMPTY_STAYS_EMPTY: Duration = Duration::from_millis(700);

/// When a document that did not change may count its last list as current after another
/// changed: the server quiet for `settle`, and past its [`dependents_delay`] since the change.
///
/// [`dependents_delay`]: crate::server::Flavor::dependents_delay
fn quiet_after_change(shared: &crate::server::ServerShared) -> Instant {
    let quiet = shared.quiet_at();
    let Some(delay) = shared.flavor.dependents_delay() else {
        return quiet;
    };
    // Such a server reports its diagnosing as progress: while that is open, it is at work.
    if matches!(shared.readiness(), crate::server::Readiness::Indexing(_)) {
        return Instant::now() + Duration::from_millis(50);
    }
    match shared.diags.changed_at() {
        Some(at) => quiet.max(at + delay),
        None => quiet,
    }
}

/// A source file changed on disk since the last check (`Checks::outside_pending`): a save of
/// this document starts a new check, which the caller then waits for, so the check's errors it
/// merges are of the files as they are on disk.
fn save_for_outside_changes(opened: &Opened) {
    let shared = &opened.shared;
    let mut docs = lock(&shared.docs);
    let Some(doc) = docs.get_mut(&opened.uri) else {
        return;
    };
    let mut checks = lock(&shared.checks);
    if !checks.outside_pending || doc.generation != opened.conn.generation {
        return;
    }
    let sent = opened.conn.client.notify(
        "textDocument/didSave",
        json!({"textDocument": {"uri": opened.uri}, "text": doc.text}),
    );
    if sent.is_ok() {
        checks.outside_pending = false;
        doc.saved = checks.saved();
        tracing::debug!(
            server = shared.id,
            uri = opened.uri,
            "saved to check files changed on disk"
        );
    }
}

/// typescript-language-server's command passing a request to tsserver as it is.
const TSSERVER_REQUEST: &str = "typescript.tsserverRequest";

/// Whether the server passes requests to tsserver (typescript-language-server lists the
/// command in `executeCommandProvider`).
pub(crate) fn asks_tsserver(conn: &crate::server::Conn) -> bool {
    conn.caps
        .pointer("/executeCommandProvider/commands")
        .and_then(Value::as_array)
        .is_some_and(|c| c.iter().any(|c| c == TSSERVER_REQUEST))
}

/// One tsserver diagnostic (1-based `line` and `offset` in UTF-16 units, `category`) as the LSP
/// diagnostic typescript-language-server publishes for it (`toDiagnostic`).
fn from_tsserver(d: &Value) -> Value {
    let pos = |p: Option<&Value>| {
        let n = |k: &str| {
            p.and_then(|p| p.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .saturating_sub(1)
        };
        json!({"line": n("line"), "character": n("offset")})
    };
    let severity = match d.get("category").and_then(Value::as_str) {
        Some("warning") => 2,
        Some("suggestion") => 4,
        _ => 1,
    };
    let mut tags = Vec::new();
    if d.get("reportsUnnecessary").is_some_and(|v| !v.is_null()) {
        tags.push(1);
    }
    if d.get("reportsDeprecated").is_some_and(|v| !v.is_null()) {
        tags.push(2);
    }
    json!({
        "range": {"start": pos(d.get("start")), "end": pos(d.get("end"))},
        "message": d.get("text").cloned().unwrap_or(json!("")),
        "severity": severity,
        "code": d.get("code").cloned().unwrap_or(Value::Null),
        "source": d.get("source").and_then(Value::as_str).unwrap_or("typescript"),
        "tags": tags,
    })
}

/// typescript-language-server's diagnostics of the file asked of tsserver itself, in order
/// behind every change sent before (`workspace/executeCommand` `typescript.tsserverRequest`:
/// `syntacticDiagnosticsSync`, `semanticDiagnosticsSync`, `suggestionDiagnosticsSync`, the
/// three kinds the server publishes), converted as the server converts them. tsserver brings
/// its project up to date with the changes it was sent (a file changed on disk, a `git
/// checkout`) before it answers, so this is the list for the text as synced, where the server's
/// publishes come 1–5 s after a change to an imported file, an empty list that stays empty is
/// never published, and a publish asked for an older text may arrive after a change. `None`
/// when tsserver did not answer one of them (a request cancelled by a newer change): the caller
/// waits for the push instead. Asked on the opened connection only (a caller may hold the sync
/// lock, so no re-open on a crash).
pub(crate) async fn tsserver_items(opened: &Opened) -> Result<Option<Vec<Value>>, ToolError> {
    let shared = &opened.shared;
    let _call = shared.status.enqueue();
    let mut items = Vec::new();
    for command in [
        "syntacticDiagnosticsSync",
        "semanticDiagnosticsSync",
        "suggestionDiagnosticsSync",
    ] {
        let params = json!({"command": TSSERVER_REQUEST, "arguments": [command,
            {"file": opened.uri, "includeLinePosition": false}]});
        let r = opened
            .conn
            .client
            .request("workspace/executeCommand", params, shared.waits.request)
            .await
            .map_err(|e| crate::ops::rpc_error(shared, e))?;
        let (true, Some(body)) = (
            r.get("success") == Some(&Value::Bool(true)),
            r.get("body").and_then(Value::as_array),
        ) else {
            tracing::debug!(server = shared.id, command, answer = %r, "tsserver gave no diagnostics; waiting for the push");
            return Ok(None);
        };
        items.extend(body.iter().map(from_tsserver));
    }
    Ok(Some(items))
}

impl Servers {
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

    /// The raw LSP diagnostics of the current version of an opened file. A server that
    /// checks after a save (rust-analyzer's `cargo check`) is waited for until a check that
    /// began after the document's last save has ended; a pulled list is merged with what the
    /// server pushed for the document since its text last changed (the check's errors), the
    /// same diagnostic once.
    pub async fn diagnostic_items(&self, opened: &mut Opened) -> Result<Vec<Value>, ToolError> {
        self.ready(&opened.shared).await?;
        if opened.shared.checks_on_save() {
            save_for_outside_changes(opened);
            self.wait_check(opened).await?;
        }
        if asks_tsserver(&opened.conn)
            && let Some(items) = tsserver_items(opened).await?
        {
            return Ok(items);
        }
        if !opened.shared.diags.pulls(&opened.conn) {
            return self.pushed(opened).await;
        }
        let params = json!({"textDocument": {"uri": opened.uri}});
        let r = self
            .request(opened, "textDocument/diagnostic", params)
            .await?;
        let mut items = r
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let shared = &opened.shared;
        let since = shared.doc(&opened.uri).map(|d| d.changed_seq);
        if let (Some(since), Some(p)) = (since, shared.diags.get(&opened.uri))
            && p.seq > since
        {
            for d in p.items {
                if !items.iter().any(|i| same(i, &d)) {
                    items.push(d);
                }
            }
        }
        Ok(items)
    }

    /// Until the document's last save has been checked (a check that began after it ended,
    /// then `settle_ms` of quiet for its publishes), at most `diagnostics_wait_s`.
    async fn wait_check(&self, opened: &Opened) -> Result<(), ToolError> {
        let shared = &opened.shared;
        let Some(save) = shared.doc(&opened.uri).map(|d| d.saved) else {
            return Ok(());
        };
        let deadline = Instant::now() + shared.waits.diagnostics;
        let mut events = shared.subscribe();
        loop {
            events.borrow_and_update();
            if lock(&shared.checks).covered(save) {
                break;
            }
            if Instant::now() >= deadline {
                return Err(not_ready(format!(
                    "language server {}: the `cargo check` after the last save of {} did not finish within {} s; its errors would be missing",
                    shared.id,
                    opened.path.display(),
                    shared.waits.diagnostics.as_secs()
                )));
            }
            let _ = tokio::time::timeout_at(deadline.into(), events.changed()).await;
        }
        // Its publishes come as it ends: wait for quiet.
        self.ready(shared).await
    }

    pub(crate) async fn pushed(&self, opened: &Opened) -> Result<Vec<Value>, ToolError> {
        let shared = &opened.shared;
        let deadline = Instant::now() + shared.waits.diagnostics;
        let settle = shared.waits.settle;
        // A server that publishes nothing when an empty list stays empty: after a change to a
        // document whose last list was empty (sent by this call or an earlier one: a rename
        // syncs the files it writes before their diagnostics are asked for), quiet for this
        // long means it is still empty.
        let stays_empty = shared.flavor.drops_unchanged_empty_lists();
        let mut events = shared.subscribe();
        loop {
            events.borrow_and_update();
            let now = Instant::now();
            if let Some(p) = shared.diags.get(&opened.uri) {
                if stays_empty
                    && p.items.is_empty()
                    && p.version < opened.version
                    && now >= shared.quiet_at() + EMPTY_STAYS_EMPTY
                {
                    return Ok(Vec::new());
                }
                let fresh = if opened.changed {
                    p.seq > opened.seq_before && p.version >= opened.version
                } else if p.seq <= shared.diags.changed_seq() && now < quiet_after_change(shared) {
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
            // enough for an unchanged document's list (or an empty one that stays empty) to
            // count as current.
            let quiet = if stays_empty {
                shared.quiet_at() + EMPTY_STAYS_EMPTY
            } else {
                quiet_after_change(shared)
            };
            let until = deadline.min(quiet.max(now + Duration::from_millis(10)));
            let _ = tokio::time::timeout_at(until.into(), events.changed()).await;
        }
    }
}
