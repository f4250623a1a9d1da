//! One language server: the state that outlives its restarts ([`ServerShared`]: open
//! documents, published diagnostics, readiness, the current connection) and the actor of one
//! incarnation ([`ServerActor`]: owns the process guard, initializes, re-opens documents after a
//! crash, and fails when the server's stream ends so the supervisor restarts it).
//!
//! Calls never go through the actor's mailbox: they use the current connection directly,
//! concurrently, and the actor's mailbox only carries lifecycle messages (exit, TTL).
//!
//! Readiness (`readiness`, `settled`): an empty answer, and any index-wide answer (references,
//! implementations, workspace symbols), comes only from a server that is ready and settled, else
//! the caller gets `not_ready`, `timeout` or `resource_failed`. Ready means connected, no
//! `$/progress` open, the configured ready log line seen when there is one (pyright's "Found N
//! source files"), and quiescent when the server reports status (rust-analyzer's
//! `experimental/serverStatus`); settled adds `settle_ms` of quiet. A server that loads projects
//! lazily (typescript-language-server) must also have published diagnostics for the document since
//! it was opened in this incarnation before an index-wide answer about it (`project_loaded`):
//! measured, tsserver loads a project only after the first `didOpen`, its "Initializing JS/TS
//! language features" progress begins ~1.3 s after `initialize` (after a `settle_ms` of quiet), and
//! `references` before its end answers from the opened file only; the first diagnostics for the
//! file come after the load.
//!
//! The disk is the truth for documents: before every query the queried file and every other open
//! document whose file changed are synced (`sync_from_disk`: the read, `refresh_open`'s stats and
//! reads, `sync_text`, all on the blocking pool), so no answer comes from text the server saw
//! before a write. Every document's text is read beneath the server root's handle (`root_scope`,
//! `read_doc`), never by name: a document lies under its root by the start rule, and a directory on
//! its path swapped for a symbolic link after the caller's scope check is refused (`out_of_scope`)
//! or, for another open document, left as the server last saw it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;
use toolvisor_jsonrpc::{RpcClient, StderrTail};
use toolvisor_kit::status::NodeStatus;
use toolvisor_kit::ttl::Ttl;
use toolvisor_protocol::tree::NodeState;

use crate::position::Encoding;
use crate::uri;

/// What [`ServerShared::sync_from_disk`] read and did.
pub struct Synced {
    /// The file's text as read.
    pub text: String,
    /// The highest diagnostics sequence number seen before the sync.
    pub seq_before: u64,
    /// The document's version and whether anything was sent, or why the sync failed.
    pub result: Result<(i32, bool), toolvisor_jsonrpc::RpcError>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Timeouts and waits of one server.
#[derive(Clone, Debug)]
pub struct Waits {
    pub init: Duration,
    pub request: Duration,
    pub ready: Duration,
    pub settle: Duration,
    pub diagnostics: Duration,
}

/// A live connection to one incarnation.
#[derive(Debug)]
pub struct Conn {
    pub client: RpcClient,
    /// The server's `capabilities` from `initialize`.
    pub caps: Value,
    pub encoding: Encoding,
    pub pid: u32,
    /// Which incarnation (bumped on every start).
    pub generation: u64,
    /// `serverInfo.name`, else the program name.
    pub name: String,
}

impl Conn {
    /// Whether the server advertises a capability (present and not `false`).
    pub fn supports(&self, cap: &str) -> bool {
        self.caps
            .get(cap)
            .is_some_and(|v| !v.is_null() && *v != Value::Bool(false))
    }
}

/// A document as last sent to the server.
#[derive(Clone, Debug)]
pub struct Doc {
    pub version: i32,
    pub text: String,
    pub language_id: String,
    /// The incarnation it is open in.
    pub generation: u64,
    /// The file's (mtime, length) when `text` was read from it.
    pub disk: Option<(std::time::SystemTime, u64)>,
    /// `diag_seq` when it was opened in its incarnation: a publish after it shows the server
    /// has loaded the document's project (see [`ServerShared::project_loaded`]).
    pub opened_seq: u64,
    /// `diag_seq` when its text last changed for the server: a publish after it is for the
    /// current text.
    pub changed_seq: u64,
    /// The number of its last didSave (`Checks::saved`), 0 if none was sent.
    pub saved: u64,
}

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

/// The latest `publishDiagnostics` for one document.
#[derive(Clone, Debug)]
pub struct Published {
    /// The version the server named, or the document's version when it arrived.
    pub version: i32,
    /// Whether the server named the version itself.
    pub versioned: bool,
    pub items: Vec<Value>,
    /// Counter over all publishes of this server, to tell fresh from stale.
    pub seq: u64,
    pub at: Instant,
}

/// How far a server is from answering truthfully.
#[derive(Clone, Debug, PartialEq)]
pub enum Readiness {
    /// No live connection (starting or restarting).
    Starting,
    /// Connected but busy: `$/progress` begun and not ended, or rust-analyzer not quiescent.
    Indexing(String),
    Ready,
}

impl Readiness {
    pub fn word(&self) -> &'static str {
        match self {
            Readiness::Starting => "starting",
            Readiness::Indexing(_) => "indexing",
            Readiness::Ready => "ready",
        }
    }
}

/// Everything about one (language, root) server that survives its restarts.
pub struct ServerShared {
    pub id: String,
    pub language: String,
    pub root: PathBuf,
    pub command: Vec<String>,
    pub program: PathBuf,
    pub init_options: Option<Value>,
    /// The restricted mode's settings (an untrusted root): sent as `initializationOptions`
    /// and answered to every `workspace/configuration` item.
    pub restricted: Option<Value>,
    /// Environment set on the server on top of the launcher's (restricted mode's).
    pub env: Vec<(String, String)>,
    pub status: Arc<NodeStatus>,
    pub waits: Waits,
    conn: watch::Sender<Option<Arc<Conn>>>,
    /// Bumped on every progress, status, diagnostics or connection change.
    events: watch::Sender<u64>,
    pub(crate) docs: Mutex<HashMap<String, Doc>>,
    /// Serializes document syncs so versions reach the server in order.
    pub sync_lock: tokio::sync::Mutex<()>,
    /// Serializes starts of this server.
    pub start_lock: tokio::sync::Mutex<()>,
    pub(crate) diags: Mutex<HashMap<String, Published>>,
    diag_seq: AtomicU64,
    /// `diag_seq` when a change to any document was last sent: a publish for a document
    /// that did not change is current only if it came after that (its imports may have).
    changed_seq: AtomicU64,
    /// Methods the current incarnation registered dynamically (`client/registerCapability`),
    /// e.g. pyright's `textDocument/diagnostic` (pull diagnostics).
    /// Registration id → method (a server may register anew and then drop the old id).
    registered: Mutex<HashMap<String, String>>,
    /// The files the current incarnation asked to hear of (`workspace/didChangeWatchedFiles`).
    pub(crate) file_watchers: Mutex<crate::watched::FileWatchers>,
    /// What changed on disk under the root, watched while an incarnation runs (started
    /// before its process, dropped when it ends: a stopped server holds no inotify instance,
    /// and a new one reads the disk itself).
    pub(crate) watch: Mutex<Option<Arc<crate::watch::RootWatch>>>,
    /// Files changed on disk that this incarnation could not be told of (a server that
    /// does not watch files, past the cap of files opened for it): index-wide answers say so.
    pub(crate) unseen: Mutex<std::collections::BTreeSet<PathBuf>>,
    /// Saves sent and the checks they start (rust-analyzer's `cargo check`).
    pub(crate) checks: Mutex<crate::checks::Checks>,
    progress: Mutex<BTreeMap<String, String>>,
    /// rust-analyzer's `experimental/serverStatus`: `Some(true)` once quiescent.
    quiescent: Mutex<Option<bool>>,
    expects_status: bool,
    /// typescript-language-server loads a document's project lazily, after it is opened, and
    /// answers index-wide requests from the files loaded so far until then: a document's
    /// project counts as loaded once the server published diagnostics for it (it does so
    /// only after loading the project, an empty list included).
    loads_projects_lazily: bool,
    /// A log line some servers write when their workspace scan is done (pyright: "Found N
    /// source files"); until it comes, the server counts as indexing.
    ready_log: Option<&'static str>,
    seen_ready_log: Mutex<bool>,
    last_activity: Mutex<Instant>,
    pub(crate) ttl: Mutex<Ttl>,
    pub(crate) stderr: Mutex<StderrTail>,
    pub(crate) generation: AtomicU64,
    pub(crate) started: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for ServerShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerShared")
            .field("id", &self.id)
            .finish()
    }
}

impl ServerShared {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: String,
        language: String,
        root: PathBuf,
        command: Vec<String>,
        program: PathBuf,
        init_options: Option<Value>,
        restricted: Option<Value>,
        env: Vec<(String, String)>,
        status: Arc<NodeStatus>,
        waits: Waits,
        idle_ttl: Option<Duration>,
    ) -> Arc<Self> {
        let program_name = program
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let expects_status = program_name.contains("rust-analyzer");
        let loads_projects_lazily = program_name.contains("typescript-language-server");
        // pyright answers "cannot rename" or "no definition" for files its workspace scan has
        // not found yet, and reports the scan only in a log line.
        let ready_log = program_name
            .starts_with("pyright")
            .then_some(" source file");
        Arc::new(ServerShared {
            id,
            language,
            root,
            command,
            program,
            init_options,
            restricted,
            env,
            status,
            waits,
            conn: watch::channel(None).0,
            events: watch::channel(0).0,
            docs: Mutex::new(HashMap::new()),
            sync_lock: tokio::sync::Mutex::new(()),
            start_lock: tokio::sync::Mutex::new(()),
            diags: Mutex::new(HashMap::new()),
            diag_seq: AtomicU64::new(0),
            changed_seq: AtomicU64::new(0),
            registered: Mutex::new(HashMap::new()),
            file_watchers: Mutex::new(Default::default()),
            watch: Mutex::new(None),
            unseen: Mutex::new(Default::default()),
            checks: Mutex::new(Default::default()),
            progress: Mutex::new(BTreeMap::new()),
            quiescent: Mutex::new(None),
            expects_status,
            loads_projects_lazily,
            ready_log,
            seen_ready_log: Mutex::new(false),
            last_activity: Mutex::new(Instant::now()),
            ttl: Mutex::new(Ttl::new(Instant::now(), idle_ttl, None)),
            stderr: Mutex::new(StderrTail::default()),
            generation: AtomicU64::new(0),
            started: Mutex::new(None),
        })
    }

    fn bump(&self) {
        self.events.send_modify(|n| *n += 1);
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.events.subscribe()
    }

    /// The live connection, if any.
    pub fn conn(&self) -> Option<Arc<Conn>> {
        self.conn.borrow().clone().filter(|c| !c.client.is_closed())
    }

    pub(crate) fn set_conn(&self, conn: Option<Arc<Conn>>) {
        self.conn.send_replace(conn);
        self.bump();
    }

    /// Drop the connection of incarnation `generation` (it closed); false when it was gone
    /// already (a stop cleared it first).
    pub(crate) fn clear_conn(&self, generation: u64) -> bool {
        let cleared = self.conn.send_if_modified(|c| {
            if c.as_ref().is_some_and(|c| c.generation == generation) {
                *c = None;
                true
            } else {
                false
            }
        });
        if cleared {
            self.progress_clear();
            lock(&self.watch).take();
            self.bump();
        }
        cleared
    }

    pub(crate) fn progress_clear(&self) {
        lock(&self.progress).clear();
        lock(&self.registered).clear();
        lock(&self.file_watchers).clear();
        lock(&self.checks).restart();
        *lock(&self.quiescent) = None;
        *lock(&self.seen_ready_log) = false;
    }

    pub fn stderr_tail(&self) -> String {
        lock(&self.stderr).text()
    }

    pub fn uptime(&self) -> Option<Duration> {
        lock(&self.started).map(|t| t.elapsed())
    }

    pub fn touch(&self) {
        let deadline = {
            let mut ttl = lock(&self.ttl);
            ttl.touch(Instant::now());
            ttl.deadline()
        };
        self.status.update(|i| {
            if !matches!(i.state, NodeState::Exited | NodeState::Failed) {
                i.ttl_deadline = deadline;
            }
        });
    }

    /// Mark activity: readiness waits for `settle` of quiet after it.
    pub fn activity(&self) {
        *lock(&self.last_activity) = Instant::now();
        self.bump();
    }

    pub fn readiness(&self) -> Readiness {
        if self.conn().is_none() {
            return Readiness::Starting;
        }
        if let Some(title) = lock(&self.progress).values().next() {
            return Readiness::Indexing(title.clone());
        }
        if self.ready_log.is_some() && !*lock(&self.seen_ready_log) {
            return Readiness::Indexing("scanning the workspace for source files".into());
        }
        if self.expects_status && *lock(&self.quiescent) != Some(true) {
            return Readiness::Indexing("loading the workspace (not quiescent yet)".into());
        }
        Readiness::Ready
    }

    /// Whether the server has loaded the project of document `uri`, for servers that load
    /// projects lazily (typescript-language-server): it published diagnostics for the
    /// document since it was opened in this incarnation. Always true for other servers.
    pub fn project_loaded(&self, uri: &str) -> bool {
        if !self.loads_projects_lazily {
            return true;
        }
        let Some(opened_seq) = self.doc(uri).map(|d| d.opened_seq) else {
            return false;
        };
        self.diagnostics(uri).is_some_and(|p| p.seq > opened_seq)
    }

    /// [`ServerShared::wait_ready`], and then until the project of document `uri` is loaded
    /// ([`ServerShared::project_loaded`]) or `deadline`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads state and waits on a watch channel.
    pub async fn wait_ready_for(&self, uri: &str, deadline: Instant) -> Result<(), Readiness> {
        let mut events = self.subscribe();
        loop {
            self.wait_ready(deadline).await?;
            events.borrow_and_update();
            if self.project_loaded(uri) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Readiness::Indexing(format!(
                    "loading the project of {} (no diagnostics published for it since it was opened)",
                    uri::to_path(uri)
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| uri.to_string())
                )));
            }
            let _ = tokio::time::timeout_at(deadline.into(), events.changed()).await;
        }
    }

    /// Ready, and quiet for `settle` since the last activity.
    pub fn settled(&self) -> bool {
        self.readiness() == Readiness::Ready
            && lock(&self.last_activity).elapsed() >= self.waits.settle
    }

    /// Wait until ready and settled, or `deadline`; `Err` carries the readiness at the end.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads state and waits on a watch channel.
    pub async fn wait_ready(&self, deadline: Instant) -> Result<(), Readiness> {
        let mut events = self.subscribe();
        loop {
            events.borrow_and_update();
            let now = Instant::now();
            match self.readiness() {
                Readiness::Ready => {
                    let quiet_at = *lock(&self.last_activity) + self.waits.settle;
                    if now >= quiet_at {
                        return Ok(());
                    }
                    if now >= deadline {
                        return Err(Readiness::Indexing("settling".into()));
                    }
                    let until = quiet_at.min(deadline);
                    let _ = tokio::time::timeout_at(until.into(), events.changed()).await;
                }
                other => {
                    if now >= deadline {
                        return Err(other);
                    }
                    let _ = tokio::time::timeout_at(deadline.into(), events.changed()).await;
                }
            }
        }
    }

    /// Wait for a live connection until `deadline`.
    pub async fn wait_conn(&self, deadline: Instant) -> Option<Arc<Conn>> {
        let mut events = self.subscribe();
        loop {
            events.borrow_and_update();
            if let Some(c) = self.conn() {
                return Some(c);
            }
            if Instant::now() >= deadline {
                return None;
            }
            let _ = tokio::time::timeout_at(deadline.into(), events.changed()).await;
        }
    }

    pub fn doc(&self, uri: &str) -> Option<Doc> {
        lock(&self.docs).get(uri).cloned()
    }

    pub fn diagnostics(&self, uri: &str) -> Option<Published> {
        lock(&self.diags).get(uri).cloned()
    }

    pub fn diag_seq(&self) -> u64 {
        self.diag_seq.load(Ordering::SeqCst)
    }

    /// `diag_seq` when a change to any document was last sent to the server.
    pub fn changed_seq(&self) -> u64 {
        self.changed_seq.load(Ordering::SeqCst)
    }

    /// When the server has been quiet for `settle` (no progress, log, change or publish).
    pub fn quiet_at(&self) -> Instant {
        *lock(&self.last_activity) + self.waits.settle
    }

    /// A change to some document was sent: publishes before it may be out of date for every
    /// document, not only the changed one.
    pub(crate) fn note_change(&self) {
        self.changed_seq.store(self.diag_seq(), Ordering::SeqCst);
        self.activity();
    }

    /// Whether the server keeps an index of files it is not told about and watches no files
    /// itself (clangd: its background index is built once; a file changed on disk is seen
    /// only when it is opened): such files are opened for it (`crate::outside`), a deleted
    /// one as an empty document, which hides what the index held for it.
    pub fn opens_unwatched(&self) -> bool {
        self.program
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("clangd"))
    }

    /// Whether the server checks the project after every save and pushes what it finds
    /// (rust-analyzer's `cargo check`, unless its settings turn it off: the restricted mode of
    /// an untrusted root does).
    pub fn checks_on_save(&self) -> bool {
        self.is_rust_analyzer()
            && crate::checks::check_on_save(self.restricted.as_ref().or(self.init_options.as_ref()))
    }

    /// Why type checking is off for this server's diagnostics, where it is.
    pub fn checking_off(&self) -> Option<String> {
        if !self.is_rust_analyzer() || self.checks_on_save() {
            return None;
        }
        Some(if self.restricted.is_some() {
            format!(
                "type checking is off: {} is untrusted, so rust-analyzer runs in its restricted mode, without `cargo check` (which runs build scripts); unresolved names, type and borrow errors are not reported, only rust-analyzer's own diagnostics; trust the root (`lsp {{\"op\":\"trust\"}}`, the user approves) for compile errors",
                self.root.display()
            )
        } else {
            "type checking is off: rust-analyzer's checkOnSave is off in its settings, so `cargo check` errors are not reported".to_string()
        })
    }

    fn is_rust_analyzer(&self) -> bool {
        self.expects_status
    }

    /// Whether the server answers `textDocument/diagnostic` (pull diagnostics): advertised
    /// in `initialize`, or registered since (pyright registers it when the client allows it).
    pub fn pulls(&self, conn: &Conn) -> bool {
        conn.supports("diagnosticProvider")
            || lock(&self.registered)
                .values()
                .any(|m| m == "textDocument/diagnostic")
    }

    /// Record a `client/registerCapability` or `client/unregisterCapability`.
    pub(crate) fn register(&self, params: &Value, add: bool) {
        let list = params
            .get("registrations")
            .or_else(|| params.get("unregisterations"))
            .and_then(Value::as_array);
        let mut registered = lock(&self.registered);
        for r in list.into_iter().flatten() {
            let id = r.get("id").and_then(Value::as_str).unwrap_or("");
            let method = r.get("method").and_then(Value::as_str).unwrap_or("");
            if add {
                registered.insert(id.to_string(), method.to_string());
            } else {
                registered.remove(id);
            }
            if method == "workspace/didChangeWatchedFiles" || !add {
                let mut watchers = lock(&self.file_watchers);
                match add {
                    true => watchers.register(id, r.get("registerOptions")),
                    false => watchers.unregister(id),
                }
            }
        }
    }

    /// Reads `path`, brings the other open documents in line with the disk
    /// ([`ServerShared::refresh_open`]) and syncs `path`'s text ([`ServerShared::sync_text`]),
    /// all on the blocking pool: the reads and stats never hold an async worker thread (a
    /// slow disk, a FIFO, a huge file).
    ///
    /// Callers hold `sync_lock`.
    pub async fn sync_from_disk(
        self: &Arc<Self>,
        conn: &Arc<Conn>,
        path: &Path,
        language_id: &str,
    ) -> std::io::Result<Synced> {
        let (shared, conn) = (self.clone(), conn.clone());
        let (path, language_id) = (path.to_path_buf(), language_id.to_string());
        tokio::task::spawn_blocking(move || {
            let scope = root_scope(&shared.root)?;
            let text = read_doc(&scope, &path)?;
            let seq_before = shared.diag_seq();
            shared.refresh_open(&scope, &conn, &uri::from_path(&path));
            let result = shared.sync_text(&conn, &path, &text, &language_id);
            Ok(Synced {
                text,
                seq_before,
                result,
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
                doc.changed_seq = self.diag_seq();
                doc.saved = lock(&self.checks).saved();
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
                let existing_saved = existing.map_or(0, |d| d.saved);
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
                        opened_seq: self.diag_seq(),
                        changed_seq: self.diag_seq(),
                        saved: existing_saved,
                    },
                );
                drop(docs);
                self.note_change();
                Ok((version, true))
            }
        }
    }

    /// Bring every other open document in line with the disk (another tool, the harness or
    /// a person may have changed it): changed → didChange + didSave, deleted → didClose.
    /// Otherwise the server would answer from stale text.
    ///
    /// Every text is read beneath `scope` (the root's, [`root_scope`]); a document whose path
    /// now leads through a symbolic link is left as the server last saw it.
    ///
    /// Callers hold `sync_lock`.
    fn refresh_open(&self, scope: &toolvisor_files::Scope, conn: &Conn, except: &str) {
        let mut docs = lock(&self.docs);
        let mut closed = Vec::new();
        let mut sent = false;
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
                    doc.changed_seq = self.diag_seq();
                    doc.saved = lock(&self.checks).saved();
                    sent = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.opens_unwatched() => {
                    // Closing it would bring back what the server's index held for the
                    // file before; an empty open document stands in for the deleted file.
                    doc.disk = None;
                    if !doc.text.is_empty() {
                        doc.version += 1;
                        doc.text.clear();
                        doc.changed_seq = self.diag_seq();
                        let _ = conn.client.notify(
                            "textDocument/didChange",
                            json!({"textDocument": {"uri": u, "version": doc.version},
                                   "contentChanges": [{"text": ""}]}),
                        );
                        sent = true;
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
        sent |= !closed.is_empty();
        for u in closed {
            docs.remove(&u);
        }
        drop(docs);
        if sent {
            self.note_change();
        }
    }

    /// Re-open every document known to this server in a new incarnation.
    pub(crate) fn reopen_all(&self, conn: &Conn) {
        let mut docs = lock(&self.docs);
        let seq = self.diag_seq();
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

    pub(crate) fn publish(&self, params: &Value) {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return;
        };
        let named = params
            .get("version")
            .and_then(Value::as_i64)
            .and_then(|v| i32::try_from(v).ok());
        let current = lock(&self.docs).get(uri).map(|d| d.version).unwrap_or(0);
        let items = params
            .get("diagnostics")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let seq = self.diag_seq.fetch_add(1, Ordering::SeqCst) + 1;
        tracing::debug!(server = self.id, uri, version = ?named, current, items = items.len(), seq, "diagnostics published");
        lock(&self.diags).insert(
            uri.to_string(),
            Published {
                version: named.unwrap_or(current),
                versioned: named.is_some(),
                items,
                seq,
                at: Instant::now(),
            },
        );
        // A server publishing is busy: waits for quiet wait this out too.
        self.activity();
    }

    pub(crate) fn progress(&self, params: &Value) {
        let token = match params.get("token") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return,
        };
        let value = params.get("value").cloned().unwrap_or(Value::Null);
        match value.get("kind").and_then(Value::as_str) {
            Some("begin") => {
                let title = value
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("working")
                    .to_string();
                tracing::debug!(server = self.id, token, title, "server progress begins");
                if crate::checks::is_check(&token, &title) {
                    lock(&self.checks).begin(&token);
                }
                lock(&self.progress).insert(token, title);
            }
            Some("report") => {
                if let Some(msg) = value.get("message").and_then(Value::as_str) {
                    let mut p = lock(&self.progress);
                    if let Some(t) = p.get_mut(&token) {
                        let title = t.split(" — ").next().unwrap_or("").to_string();
                        *t = format!("{title} — {msg}");
                    }
                }
            }
            Some("end") => {
                tracing::debug!(server = self.id, token, "server progress ends");
                lock(&self.checks).end(&token);
                lock(&self.progress).remove(&token);
            }
            _ => return,
        }
        self.activity();
        self.show_state();
    }

    pub(crate) fn log_message(&self, params: &Value) {
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        tracing::debug!(server = self.id, message, "server message");
        // Servers log while they set up (pyright: "Searching for source files", "Found N
        // source files"): that is activity the settle waits out.
        if self.ready_log.is_some_and(|p| message.contains(p)) {
            *lock(&self.seen_ready_log) = true;
            self.show_state();
        }
        self.activity();
    }

    pub(crate) fn server_status(&self, params: &Value) {
        let quiescent = params.get("quiescent").and_then(Value::as_bool);
        *lock(&self.quiescent) = quiescent;
        self.activity();
        self.show_state();
    }

    /// Mirror readiness into the tree node.
    pub fn show_state(&self) {
        let r = self.readiness();
        let name = self.command.first().cloned().unwrap_or_default();
        self.status.update(|i| {
            if matches!(i.state, NodeState::Ready | NodeState::Busy) {
                i.state = match r {
                    Readiness::Ready => NodeState::Ready,
                    _ => NodeState::Busy,
                };
            }
            i.detail = match &r {
                Readiness::Indexing(what) => format!("{name}: indexing: {what}"),
                other => format!("{name}: {}", other.word()),
            };
        });
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
pub(crate) mod tests;
