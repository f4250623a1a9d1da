//! One language server: the state that outlives its restarts ([`ServerShared`]: open
//! documents, published diagnostics, readiness, the current connection) and the actor of one
//! incarnation ([`ServerActor`]: owns the process guard, initializes, re-opens documents after a
//! crash, and fails when the server's stream ends so the supervisor restarts it).
//!
//! `ServerShared` is split by what it owns: the connection, readiness and the waits for it
//! stay here; published diagnostics and registrations are `server/diags.rs`, the server's
//! account of its work `server/progress.rs`, its server-specific habits `server/flavor.rs`,
//! and the documents kept equal to the disk `server/sync.rs`.
//!
//! Calls never go through the actor's mailbox: they use the current connection directly,
//! concurrently, and the actor's mailbox only carries lifecycle messages (exit, TTL).
//!
//! Readiness (`readiness`, `settled`): an empty answer, and any index-wide answer (references,
//! implementations, workspace symbols), comes only from a server that is ready and settled, else
//! the caller gets `not_ready`, `timeout` or `resource_failed`. Ready means connected, no
//! `$/progress` open, the configured ready log line seen when there is one (pyright's "Found N
//! source files"), quiescent when the server reports status (rust-analyzer's
//! `experimental/serverStatus`), and for clangd, once a file under a compilation database that
//! lists files is opened, its first background index pass ended (`server/progress.rs`: its first
//! word of it can come after the settle on a loaded machine); settled adds `settle_ms` of quiet. A
//! server that loads projects lazily (typescript-language-server) must also have published
//! diagnostics for the document since it was opened in this incarnation before an index-wide answer
//! about it (`project_loaded`): measured, tsserver loads a project only after the first `didOpen`,
//! its "Initializing JS/TS language features" progress begins ~1.3 s after `initialize` (after a
//! `settle_ms` of quiet), and `references` before its end answers from the opened file only; the
//! first diagnostics for the file come after the load.
//!
//! The disk is the truth for documents: before every query the queried file and every other open
//! document whose file changed are synced (`sync_from_disk`: the read, `refresh_open`'s stats and
//! reads, `sync_text`, all on the blocking pool), so no answer comes from text the server saw
//! before a write. Every document's text is read beneath the server root's handle (`root_scope`,
//! `read_doc`), never by name: a document lies under its root by the start rule, and a directory on
//! its path swapped for a symbolic link after the caller's scope check is refused (`out_of_scope`)
//! or, for another open document, left as the server last saw it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;
use toolvisor_jsonrpc::{RpcClient, StderrTail};
use toolvisor_kit::status::NodeStatus;
use toolvisor_kit::ttl::Ttl;
use toolvisor_protocol::tree::NodeState;

use crate::lock;
use crate::position::Encoding;
use crate::uri;

mod cdb;
mod diags;
mod flavor;
mod progress;
mod sync;

pub(crate) use diags::DiagStore;
pub(crate) use flavor::Flavor;
use progress::{Progress, Step};
pub(crate) use sync::{is_moved, read_doc, root_scope};

/// What [`ServerShared::sync_from_disk`] read and did.
pub struct Synced {
    /// The file's text as read.
    pub text: String,
    /// The highest diagnostics sequence number seen before the sync.
    pub seq_before: u64,
    /// The document's version and whether anything was sent, or why the sync failed.
    pub result: Result<(i32, bool), toolvisor_jsonrpc::RpcError>,
    /// What changed on disk under the root before the sync, taken once the root watch
    /// caught up with the disk (none without a watch), for the caller to hand to the server.
    pub outside: Result<Vec<(std::path::PathBuf, crate::watch::Change)>, crate::watch::Lost>,
    /// The other open documents whose text changed on disk and was sent again.
    pub refreshed: Vec<String>,
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
    /// Set once the server refused the standard type hierarchy and answered its own earlier
    /// protocol (clangd 14): later calls ask that at once.
    pub legacy_type_hierarchy: std::sync::atomic::AtomicBool,
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
    /// `DiagStore::seq` when it was opened in its incarnation: a publish after it shows the server
    /// has loaded the document's project (see [`ServerShared::project_loaded`]).
    pub opened_seq: u64,
    /// `DiagStore::seq` when its text last changed for the server: a publish after it is for the
    /// current text.
    pub changed_seq: u64,
    /// The number of its last didSave (`Checks::saved`), 0 if none was sent.
    pub saved: u64,
    /// [`ServerShared::header_changes`] once its own text was last sent: a larger count means
    /// a file it may include changed since (clangd answers from the old one until the document
    /// itself is sent again: `ServerShared::resend`).
    pub seen_changes: u64,
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

/// clangd's file statuses, numbered: per URI the number of its last busy status ("parsing
/// includes", "running Build AST", …) and of its last `idle`, with when that came.
#[derive(Debug, Default)]
pub(crate) struct FileStatus {
    seq: u64,
    files: HashMap<String, (u64, u64, Option<Instant>)>,
}

impl FileStatus {
    /// The number of the latest status.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// When `uri`, busy after status `since`, went idle and has stayed so (`None`: it has not
    /// yet).
    pub fn idle_since(&self, uri: &str, since: u64) -> Option<Instant> {
        let &(busy, idle, at) = self.files.get(uri)?;
        (busy > since && idle > busy).then_some(at).flatten()
    }
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
    /// What the server published, numbered, and whether it answers pulls.
    pub(crate) diags: DiagStore,
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
    /// The server's own account of its work in this incarnation.
    progress: Progress,
    /// What clangd's compilation databases list (`server/cdb.rs`).
    pub(crate) databases: Arc<cdb::Databases>,
    /// Which server this is, where that changes how it is read.
    pub(crate) flavor: Flavor,
    last_activity: Mutex<Instant>,
    /// Changes of files another may include (`#include`: any but a C or C++ unit) sent to the
    /// server so far: see [`Doc::seen_changes`].
    header_changes: AtomicU64,
    /// clangd's account of each file's work (`textDocument/clangd.fileStatus`), numbered.
    pub(crate) file_status: Mutex<FileStatus>,
    /// The `last_activity` at which the open documents were last pulled because the server
    /// sat idle with work open ([`ServerShared::pull_what_it_waits_for`]): once per quiet
    /// spell.
    pulled_idle: Mutex<Option<Instant>>,
    pub(crate) ttl: Mutex<Ttl>,
    pub(crate) stderr: Mutex<StderrTail>,
    pub(crate) generation: AtomicU64,
    pub(crate) started: Mutex<Option<Instant>>,
    /// Resident bytes the server's process tree may hold (`crate::memory`); `None`: no limit.
    pub memory_limit: Option<u64>,
    /// The incarnation the memory watchdog killed, and the report of it.
    pub(crate) memory_kill: Mutex<Option<(u64, String)>>,
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
        memory_limit: Option<u64>,
    ) -> Arc<Self> {
        let flavor = Flavor::of(&program, command.get(1..).unwrap_or_default());
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
            diags: DiagStore::default(),
            file_watchers: Mutex::new(Default::default()),
            watch: Mutex::new(None),
            unseen: Mutex::new(Default::default()),
            checks: Mutex::new(Default::default()),
            progress: Progress::new(&flavor),
            databases: Default::default(),
            flavor,
            last_activity: Mutex::new(Instant::now()),
            header_changes: AtomicU64::new(0),
            file_status: Mutex::new(FileStatus::default()),
            pulled_idle: Mutex::new(None),
            ttl: Mutex::new(Ttl::new(Instant::now(), idle_ttl, None)),
            stderr: Mutex::new(StderrTail::default()),
            generation: AtomicU64::new(0),
            started: Mutex::new(None),
            memory_limit,
            memory_kill: Mutex::new(None),
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
            self.new_incarnation();
            lock(&self.watch).take();
            self.bump();
        }
        cleared
    }

    /// Forget what the previous incarnation said of itself: its work, registrations,
    /// watched files and checks.
    pub(crate) fn new_incarnation(&self) {
        self.progress.clear();
        self.diags.clear_registrations();
        lock(&self.file_watchers).clear();
        lock(&self.checks).restart();
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
        match self.progress.busy() {
            Some(what) => Readiness::Indexing(what),
            None => Readiness::Ready,
        }
    }

    /// Whether the server has loaded the project of document `uri`, for servers that load
    /// projects lazily (typescript-language-server): it published diagnostics for the
    /// document since it was opened in this incarnation. Always true for other servers.
    pub fn project_loaded(&self, uri: &str) -> bool {
        if !self.flavor.loads_projects_lazily {
            return true;
        }
        let Some(opened_seq) = self.doc(uri).map(|d| d.opened_seq) else {
            return false;
        };
        self.diags.get(uri).is_some_and(|p| p.seq > opened_seq)
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
                    // Work open and the server quiet: maybe it waits to be asked.
                    let mut until = self
                        .progress
                        .gives_up_at()
                        .unwrap_or(deadline)
                        .min(deadline);
                    if matches!(other, Readiness::Indexing(_)) {
                        let quiet_at = self.quiet_at();
                        if now >= quiet_at {
                            self.pull_what_it_waits_for();
                        } else {
                            until = until.min(quiet_at);
                        }
                    }
                    let _ = tokio::time::timeout_at(until.into(), events.changed()).await;
                }
            }
        }
    }

    /// A server that answers pulls may keep work open until it is asked: pyright, told the
    /// client pulls diagnostics, keeps its "N files to analyze" progress open after a file
    /// changes or goes until each open document is pulled, and idles meanwhile. Once per
    /// quiet spell with work open, every document open in this incarnation is pulled (in a
    /// task, one after another, each bounded by the request timeout; the answers are not
    /// kept: a call pulls its own). Nothing happens for a server that does not pull.
    fn pull_what_it_waits_for(&self) {
        let Some(conn) = self.conn() else {
            return;
        };
        if !self.diags.pulls(&conn) {
            return;
        }
        let at = *lock(&self.last_activity);
        {
            let mut pulled = lock(&self.pulled_idle);
            if *pulled == Some(at) {
                return;
            }
            *pulled = Some(at);
        }
        let mut uris: Vec<String> = lock(&self.docs)
            .iter()
            .filter(|(_, d)| d.generation == conn.generation)
            .map(|(uri, _)| uri.clone())
            .collect();
        if uris.is_empty() {
            return;
        }
        uris.sort();
        tracing::debug!(
            server = %self.id,
            documents = uris.len(),
            "idle with work open: pulling the open documents' diagnostics"
        );
        let timeout = self.waits.request;
        tokio::spawn(async move {
            for uri in uris {
                let params = json!({"textDocument": {"uri": uri}});
                if conn
                    .client
                    .request("textDocument/diagnostic", params, timeout)
                    .await
                    .is_err()
                    && conn.client.is_closed()
                {
                    break;
                }
            }
        });
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

    /// When the server has been quiet for `settle` (no progress, log, change or publish).
    pub fn quiet_at(&self) -> Instant {
        *lock(&self.last_activity) + self.waits.settle
    }

    /// A change to some document was sent: publishes before it may be out of date for every
    /// document, not only the changed one.
    pub(crate) fn note_change(&self) {
        self.diags.mark_changed();
        self.activity();
    }

    /// The text of `path` was sent to the server: counted when another file may include it.
    pub(crate) fn note_header(&self, path: &std::path::Path) {
        const UNITS: [&str; 7] = ["c", "cc", "cpp", "cxx", "c++", "m", "mm"];
        let unit = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| UNITS.contains(&e));
        if !unit {
            self.header_changes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Changes of includable files sent so far (see [`Doc::seen_changes`]).
    pub(crate) fn header_changes(&self) -> u64 {
        self.header_changes
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the server checks the project after every save and pushes what it finds
    /// (rust-analyzer's `cargo check`, unless its settings turn it off: the restricted mode of
    /// an untrusted root does).
    pub fn checks_on_save(&self) -> bool {
        self.flavor.rust_analyzer
            && crate::checks::check_on_save(self.restricted.as_ref().or(self.init_options.as_ref()))
    }

    /// Why type checking is off for this server's diagnostics, where it is.
    pub fn checking_off(&self) -> Option<String> {
        if !self.flavor.rust_analyzer || self.checks_on_save() {
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

    /// Record a `client/registerCapability` or `client/unregisterCapability`.
    pub(crate) fn register(&self, params: &Value, add: bool) {
        let list = params
            .get("registrations")
            .or_else(|| params.get("unregisterations"))
            .and_then(Value::as_array);
        for r in list.into_iter().flatten() {
            let id = r.get("id").and_then(Value::as_str).unwrap_or("");
            let method = r.get("method").and_then(Value::as_str).unwrap_or("");
            self.diags
                .registration(id, method, r.get("registerOptions"), add);
            if method == "workspace/didChangeWatchedFiles" || !add {
                let mut watchers = lock(&self.file_watchers);
                match add {
                    true => watchers.register(id, r.get("registerOptions")),
                    false => watchers.unregister(id),
                }
            }
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
        let count = items.len();
        let seq = self.diags.record(uri, named, current, items);
        tracing::debug!(server = self.id, uri, version = ?named, current, items = count, seq, "diagnostics published");
        // A server publishing is busy: waits for quiet wait this out too.
        self.activity();
    }

    pub(crate) fn progress(&self, params: &Value) {
        match self.progress.apply(&self.id, params) {
            Some(Step::Begin { token, title }) if crate::checks::is_check(&token, &title) => {
                lock(&self.checks).begin(&token)
            }
            Some(Step::Begin { .. } | Step::Report) => {}
            Some(Step::End { token }) => lock(&self.checks).end(&token),
            None => return,
        }
        self.activity();
        self.show_state();
    }

    pub(crate) fn log_message(&self, params: &Value) {
        let message = params.get("message").and_then(Value::as_str).unwrap_or("");
        tracing::debug!(server = self.id, message, "server message");
        // Servers log while they set up (pyright: "Searching for source files", "Found N
        // source files"): that is activity the settle waits out.
        if self.progress.log_line(message) {
            self.show_state();
        }
        self.activity();
    }

    /// clangd's `textDocument/clangd.fileStatus` for a file: busy or `idle`. Not activity for
    /// the settle (clangd reports every request it runs), but waiters are woken.
    pub(crate) fn file_status(&self, params: &Value) {
        let Some(uri) = params.get("uri").and_then(Value::as_str) else {
            return;
        };
        let idle = params.get("state").and_then(Value::as_str) == Some("idle");
        {
            let mut st = lock(&self.file_status);
            st.seq += 1;
            let seq = st.seq;
            let entry = st.files.entry(uri.to_string()).or_default();
            if idle {
                if entry.1 < entry.0 {
                    entry.2 = Some(Instant::now());
                }
                entry.1 = seq;
            } else {
                entry.0 = seq;
            }
        }
        self.bump();
    }

    pub(crate) fn server_status(&self, params: &Value) {
        self.progress.status(params);
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
