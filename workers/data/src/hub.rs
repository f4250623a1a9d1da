//! The hub as a resource of the daemon: a store actor under the `data` kind supervisor owns the
//! database and the watcher of the originals; [`DataHub`] is what tool handlers call. Until the
//! first conversion of every collection is done, searches answer `not_ready` (a partial index
//! answering "nothing found" would be a wrong answer); a database that cannot be opened (corrupt,
//! locked, unwritable) leaves the actor failed with the path, and calls get that error at once.
//!
//! The store actor is the one resource under the `data` kind supervisor: it opens the database,
//! runs the first conversion and owns the watcher of the originals, whose queue is bounded (an
//! overflow means one full rescan). `DataConfig` is `[data]`: collections, per-tier pins,
//! `reach(tier)`. `toolvisor data trash|restore` open the database directly.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::Deserialize;
use tokio::sync::mpsc;
use toolvisor_kit::restart::RestartPolicy;
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{
    self, ChildSpec, Factory, Lookup, StartCtx, StartFailed, SupervisorMsg,
};
use toolvisor_protocol::tree::NodeState;

use crate::embedder::{Embedder, LastError};
use crate::original::Root;
use crate::store::{DataError, Reach, Store, Who};

/// `[data]`: the collections and who may reach them.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataConfig {
    /// `[data.collections.NAME]`: a folder of originals (or none: a collection of notes only).
    pub collections: BTreeMap<String, CollectionConfig>,
    /// Per surface tier (`read`, `write`, `exec`): the only collections its runs may reach.
    /// A pin only narrows; a tier without one reaches every collection that is not sensitive.
    pub pin: BTreeMap<String, Vec<String>>,
    /// Originals larger than this are not converted (logged).
    pub max_file_bytes: u64,
    /// Where the database and the notes live; default `<state_dir>/data`.
    pub dir: Option<PathBuf>,
    /// A model of the store (as `load_model` names it) that embeds the documents of every
    /// collection that is not sensitive, for `search_data {mode: "hybrid"}`; none by default.
    pub embedding_model: Option<String>,
    /// Put before a query's text when it is embedded; default the model family's own
    /// (`crate::embedder::known_prefixes`: nomic-embed, e5, bge v1.5 and others), else none.
    pub query_prefix: Option<String>,
    /// Put before each chunk's text when it is embedded; default as for `query_prefix`.
    /// Changing it embeds every chunk again.
    pub document_prefix: Option<String>,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            collections: BTreeMap::new(),
            pin: BTreeMap::new(),
            max_file_bytes: 8 * 1024 * 1024,
            dir: None,
            embedding_model: None,
            query_prefix: None,
            document_prefix: None,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CollectionConfig {
    pub path: Option<PathBuf>,
    /// Unreachable through every tool, named or not; its name never appears in an answer.
    pub sensitive: bool,
}

impl DataConfig {
    /// Config errors, naming the key.
    pub fn check(&self) -> Result<(), String> {
        for (name, c) in &self.collections {
            if name.is_empty()
                || !name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
            {
                return Err(format!(
                    "data.collections.{name:?}: a collection name is letters, digits, `_` and `-`"
                ));
            }
            if let Some(p) = &c.path
                && !p.is_absolute()
            {
                return Err(format!(
                    "data.collections.{name}.path = {:?} is not an absolute path",
                    p.display().to_string()
                ));
            }
        }
        if self
            .embedding_model
            .as_deref()
            .is_some_and(|m| m.trim().is_empty())
        {
            return Err("data.embedding_model is empty: name a model of the store (`owner/name`), or leave it out".into());
        }
        for (tier, names) in &self.pin {
            if !["read", "write", "exec"].contains(&tier.as_str()) {
                return Err(format!(
                    "data.pin.{tier}: pins are per surface tier: read, write or exec"
                ));
            }
            if let Some(n) = names.iter().find(|n| !self.collections.contains_key(*n)) {
                return Err(format!(
                    "data.pin.{tier} names {n:?}, which is not a collection under [data.collections]"
                ));
            }
        }
        Ok(())
    }

    /// The prefixes (query, document) the embedding model is given: the configured ones,
    /// else its family's.
    pub fn prefixes(&self) -> (String, String) {
        let model = self.embedding_model.as_deref().unwrap_or_default();
        let (query, document) = crate::embedder::known_prefixes(model);
        (
            self.query_prefix
                .clone()
                .unwrap_or_else(|| query.to_string()),
            self.document_prefix
                .clone()
                .unwrap_or_else(|| document.to_string()),
        )
    }

    /// What the chunks' vectors are stored under: the model, and the document prefix when
    /// there is one (vectors made with another prefix are not comparable, so a changed prefix
    /// embeds every chunk again).
    pub fn vector_key(&self) -> Option<String> {
        let model = self.embedding_model.clone()?;
        let (_, document) = self.prefixes();
        Some(match document.is_empty() {
            true => model,
            false => format!("{model} (document prefix {document:?})"),
        })
    }

    pub fn enabled(&self) -> bool {
        !self.collections.is_empty()
    }

    /// The collections whose documents are embedded (`embedding_model`): never a sensitive
    /// one, whatever the pins.
    pub fn embeddable(&self) -> Reach {
        Reach::new(
            self.collections
                .iter()
                .filter(|(_, c)| !c.sensitive)
                .map(|(n, _)| n.clone()),
        )
    }

    /// The collections a run on surface `tier` may reach: never a sensitive one; only the
    /// pinned ones when its tier has a pin.
    pub fn reach(&self, tier: &str) -> Reach {
        let pin = self.pin.get(tier);
        Reach::new(
            self.collections
                .iter()
                .filter(|(_, c)| !c.sensitive)
                .filter(|(n, _)| pin.is_none_or(|p| p.contains(n)))
                .map(|(n, _)| n.clone()),
        )
    }
}

/// Facts the tools and the tree share with the store actor.
struct Shared {
    store: Mutex<Option<Arc<Mutex<Store>>>>,
    /// The first conversion of every collection finished.
    ready: AtomicBool,
    converted: AtomicU64,
    status: Arc<NodeStatus>,
    /// Told when documents may have changed (the embedding worker waits on it).
    changed: Arc<tokio::sync::Notify>,
    /// Originals found and not read (a link, a FIFO): path → (collection, why). Shown by
    /// `list_data` as warnings to runs that reach the collection.
    not_read: Mutex<BTreeMap<PathBuf, (String, String)>>,
}

impl Shared {
    fn not_read(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, (String, String)>> {
        self.not_read.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What tool handlers call.
pub struct DataHub {
    config: DataConfig,
    db_path: PathBuf,
    notes_dir: PathBuf,
    supervisor: ActorRef<SupervisorMsg>,
    shared: Arc<Shared>,
    /// The inference pool's embeddings, once the daemon set them (`start_embeddings`).
    pub(crate) embedder: OnceLock<Arc<dyn Embedder>>,
    pub(crate) embed_error: Arc<LastError>,
    /// Why the model last refused a chunk it then skipped (`Progress::skipped`).
    pub(crate) skip_reason: Arc<LastError>,
    pub(crate) embed_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Chunks embedded since the start.
    pub(crate) embedded: AtomicU64,
}

impl Drop for DataHub {
    fn drop(&mut self) {
        if let Some(t) = self
            .embed_task
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            t.abort();
        }
    }
}

/// The resource's id under the `data` supervisor.
pub const STORE_ID: &str = "hub";

/// How long changes to originals are gathered before they are converted.
const DEBOUNCE: Duration = Duration::from_millis(25);
/// Paths the watcher may queue before it asks for a full rescan instead.
const WATCH_QUEUE: usize = 4096;
/// Originals not read that `list_data` names one by one; the rest are counted.
const MAX_WARNINGS: usize = 20;

impl DataHub {
    /// The hub for `config`, its files under `dir` (the database `hub.sqlite3` and `notes/`).
    pub fn new(
        config: DataConfig,
        dir: &Path,
        supervisor: ActorRef<SupervisorMsg>,
        notifier: TreeNotifier,
    ) -> DataHub {
        let status = NodeStatus::new("data_store", STORE_ID, String::new(), notifier);
        DataHub {
            config,
            db_path: dir.join("hub.sqlite3"),
            notes_dir: dir.join("notes"),
            supervisor,
            shared: Arc::new(Shared {
                store: Mutex::new(None),
                ready: AtomicBool::new(false),
                converted: AtomicU64::new(0),
                status,
                changed: Arc::new(tokio::sync::Notify::new()),
                not_read: Mutex::new(BTreeMap::new()),
            }),
            embedder: OnceLock::new(),
            embed_error: Arc::new(LastError::default()),
            skip_reason: Arc::new(LastError::default()),
            embed_task: Mutex::new(None),
            embedded: AtomicU64::new(0),
        }
    }

    /// What the embedding worker waits on.
    pub(crate) fn shared_changes(&self) -> Arc<tokio::sync::Notify> {
        self.shared.changed.clone()
    }

    /// Tell the embedding worker documents may have changed (a tool wrote one).
    pub fn touched(&self) {
        self.shared.changed.notify_one();
    }

    /// The embeddings hybrid search uses, once the daemon set them.
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder.get().cloned()
    }

    /// Vectors the embedding worker computed since the daemon started.
    pub fn vectors_computed(&self) -> u64 {
        self.embedded.load(Ordering::Relaxed)
    }

    /// The embedding worker's last failure, if its last step failed.
    pub fn embedding_error(&self) -> Option<toolvisor_protocol::error::ToolError> {
        self.embed_error.get()
    }

    /// Why the embedding model last refused a chunk it then skipped.
    pub fn embedding_skip_reason(&self) -> Option<toolvisor_protocol::error::ToolError> {
        self.skip_reason.get()
    }

    pub fn config(&self) -> &DataConfig {
        &self.config
    }

    /// Originals of the collections in `reach` that were found and not read, each with
    /// why ("handbook/pay.md: a symbolic link …"), at most `MAX_WARNINGS` and a count of
    /// the rest. Where a link points is never said.
    pub fn warnings(&self, reach: &Reach) -> Vec<String> {
        let not_read = self.shared.not_read();
        let mine: Vec<String> = not_read
            .iter()
            .filter(|(_, (collection, _))| reach.names().iter().any(|n| n == collection))
            .map(|(path, (collection, why))| {
                let below = self
                    .config
                    .collections
                    .get(collection)
                    .and_then(|c| c.path.as_deref())
                    .and_then(|root| path.strip_prefix(root).ok())
                    .unwrap_or(path);
                format!("{collection}/{}: {why}", below.display())
            })
            .collect();
        let more = mine.len().saturating_sub(MAX_WARNINGS);
        let mut out: Vec<String> = mine.into_iter().take(MAX_WARNINGS).collect();
        if more > 0 {
            out.push(format!("… and {more} more originals not read"));
        }
        out
    }

    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// Start the store actor (once, at daemon start).
    pub async fn start(&self) -> Result<(), String> {
        let args = StoreArgs {
            config: self.config.clone(),
            db_path: self.db_path.clone(),
            notes_dir: self.notes_dir.clone(),
            shared: self.shared.clone(),
        };
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = args.clone();
            Box::pin(async move {
                Actor::spawn_linked(
                    Some(format!("data/{STORE_ID}#{}", ctx.attempt)),
                    StoreActor,
                    args,
                    ctx.supervisor,
                )
                .await
                .map(|(a, _)| a.get_cell())
                .map_err(|e| e.to_string())
            })
        });
        let spec = ChildSpec {
            id: STORE_ID.into(),
            factory,
            policy: RestartPolicy::default(),
            status: self.shared.status.clone(),
        };
        match supervise::start(&self.supervisor, spec, Duration::from_secs(30)).await {
            Ok(()) => Ok(()),
            Err(StartFailed::Child(e)) => Err(e),
            Err(StartFailed::NoAnswer(_)) => {
                Err("the data supervisor did not answer within 30 s".into())
            }
        }
    }

    /// Run `f` on the store once it serves: `not_ready` while the first conversion runs,
    /// the actor's error (naming the database) when it cannot serve.
    pub async fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, DataError> + Send + 'static,
    ) -> Result<T, HubError> {
        let store = self
            .shared
            .store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let Some(store) = store else {
            return Err(self.why_not_serving().await);
        };
        if !self.shared.ready.load(Ordering::SeqCst) {
            return Err(HubError::NotReady(format!(
                "the data hub is still converting its originals ({} documents so far)",
                self.shared.converted.load(Ordering::Relaxed)
            )));
        }
        tokio::task::spawn_blocking(move || {
            let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut store)
        })
        .await
        .map_err(|e| HubError::Failed(format!("a data hub task failed: {e}")))?
        .map_err(HubError::Data)
    }

    async fn why_not_serving(&self) -> HubError {
        let lookup = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Lookup {
                    id: STORE_ID.into(),
                    reply,
                },
                Some(Duration::from_secs(5)),
            )
            .await;
        match lookup {
            Ok(ractor::rpc::CallResult::Success(
                Lookup::Failed { last_error }
                | Lookup::Ended {
                    last_error: Some(last_error),
                },
            )) => HubError::Failed(last_error),
            Ok(ractor::rpc::CallResult::Success(Lookup::Backoff {
                last_error,
                retry_in,
            })) => HubError::NotReady(format!(
                "the data hub is restarting in {} ms after: {last_error}",
                retry_in.as_millis()
            )),
            Ok(ractor::rpc::CallResult::Success(Lookup::Starting | Lookup::Running(_))) => {
                HubError::NotReady("the data hub is starting".into())
            }
            _ => HubError::Failed("the data hub is not running".into()),
        }
    }

    /// Write a new note's original under the hub's notes directory and convert it.
    pub async fn create_note(
        &self,
        reach: &Reach,
        collection: &str,
        title: &str,
        text: &str,
        who: Who,
    ) -> Result<i64, HubError> {
        reach.narrow(Some(collection)).map_err(HubError::Data)?;
        let dir = self.notes_dir.join(collection);
        let slug: String = title
            .chars()
            .map(|c| {
                if c.is_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect::<String>()
            .split('-')
            .filter(|s| !s.is_empty())
            .take(8)
            .collect::<Vec<_>>()
            .join("-");
        let name = format!(
            "{}-{}.md",
            if slug.is_empty() { "note" } else { &slug },
            crate::store::now_ms()
        );
        let path = dir.join(name);
        let content = format!("# {title}\n\n{text}\n");
        let collection = collection.to_string();
        let max = self.config.max_file_bytes;
        let notes_root = dir.clone();
        self.with_store(move |store| {
            toolvisor_kit::private::ensure_private_dir(&dir, "the data hub's notes directory")
                .map_err(|e| DataError::Io {
                    what: "cannot make",
                    path: dir.display().to_string(),
                    source: std::io::Error::other(e.to_string()),
                })?;
            toolvisor_kit::private::write_private_file(
                &path,
                content.as_bytes(),
                "a data hub note",
                toolvisor_kit::private::Durability::Synced,
            )
            .map_err(|e| DataError::Io {
                what: "cannot write the note",
                path: path.display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?;
            let root = Root::of(&notes_root).ok_or_else(|| DataError::Io {
                what: "cannot find",
                path: notes_root.display().to_string(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })?;
            store
                .ingest(&collection, &root, &path, true, max, &who)?
                .ok_or_else(|| DataError::InvalidArgs {
                    message: "the note could not be converted".into(),
                    hint: format!("its text is over data.max_file_bytes ({max})"),
                })
        })
        .await
    }
}

/// Why a hub call did not run.
#[derive(Debug)]
pub enum HubError {
    NotReady(String),
    Failed(String),
    Data(DataError),
}

#[derive(Clone)]
struct StoreArgs {
    config: DataConfig,
    db_path: PathBuf,
    notes_dir: PathBuf,
    shared: Arc<Shared>,
}

struct StoreActor;

struct StoreState {
    _watcher: Option<notify::RecommendedWatcher>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    shared: Arc<Shared>,
}

/// One original found by the walk: its collection, its folder, its path, and whether it is
/// a note.
struct Found {
    collection: String,
    root: Root,
    path: PathBuf,
    note: bool,
}

/// The collections' folders: (collection, folder as configured, holds notes).
fn folders(config: &DataConfig, notes_dir: &Path) -> Vec<(String, PathBuf, bool)> {
    let mut out = Vec::new();
    for (name, c) in &config.collections {
        if let Some(root) = &c.path {
            out.push((name.clone(), root.clone(), false));
        }
        out.push((name.clone(), notes_dir.join(name), true));
    }
    out
}

/// The collections' originals.
fn originals(config: &DataConfig, notes_dir: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    for (collection, folder, note) in folders(config, notes_dir) {
        let Some(root) = Root::of(&folder) else {
            continue;
        };
        walk(&folder, &mut |path| {
            out.push(Found {
                collection: collection.clone(),
                root: root.clone(),
                path,
                note,
            })
        });
    }
    out
}

/// Every entry under `dir` that has a supported name, and every link, skipping
/// dot-directories and entering no linked directory. Links and special files are handed
/// on: whether an original is read is decided in one place, [`Root::open`].
fn walk(dir: &Path, found: &mut dyn FnMut(PathBuf)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        if kind.is_dir() && !hidden {
            walk(&path, found);
        } else if !hidden && (kind.is_symlink() || crate::convert::supported(&path)) {
            found(path);
        }
    }
}

/// What [`take_in`] did with an original.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Taken {
    /// Converted, or unchanged since its last conversion.
    Read,
    /// Not read under the rule (a link, a special file): its document, if any, is trashed.
    NotRead,
    /// Reading or converting failed (logged); its document, if any, stays as it was.
    Failed,
}

/// Read one original (or note) into the store under the one rule; one that is not read
/// (a link, a special file) is recorded for `list_data`'s warnings and its document, if it
/// had one, goes to the trash.
fn take_in(store: &mut Store, shared: &Shared, found: &Found, max_bytes: u64, who: &Who) -> Taken {
    let path = &found.path;
    match store.ingest(
        &found.collection,
        &found.root,
        path,
        found.note,
        max_bytes,
        who,
    ) {
        Ok(_) => {
            shared.not_read().remove(path);
            Taken::Read
        }
        Err(DataError::NotFollowed { why, .. }) => {
            tracing::warn!(path = %path.display(), why, "data hub: an original not read");
            shared
                .not_read()
                .insert(path.clone(), (found.collection.clone(), why));
            if let Err(e) = store.original_removed(path, who) {
                tracing::warn!(path = %path.display(), error = %e, "data hub: cannot trash a document whose original is not read");
            }
            Taken::NotRead
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "data hub: cannot convert");
            Taken::Failed
        }
    }
}

/// Convert every original that changed, and trash documents whose original is gone.
fn full_scan(store: &Mutex<Store>, config: &DataConfig, notes_dir: &Path, shared: &Shared) {
    let who = Who {
        conversation: "data hub".into(),
        tool: "convert".into(),
    };
    let all = originals(config, notes_dir);
    let mut present: BTreeMap<String, HashSet<String>> = BTreeMap::new();
    shared.not_read().clear();
    for found in &all {
        let mut s = store.lock().unwrap_or_else(|p| p.into_inner());
        let taken = take_in(&mut s, shared, found, config.max_file_bytes, &who);
        if taken == Taken::Read {
            shared.converted.fetch_add(1, Ordering::Relaxed);
        }
        if taken != Taken::NotRead {
            present
                .entry(found.collection.clone())
                .or_default()
                .insert(found.path.display().to_string());
        }
    }
    let mut s = store.lock().unwrap_or_else(|p| p.into_inner());
    for name in config.collections.keys() {
        let empty = HashSet::new();
        match s.originals_gone(name, present.get(name).unwrap_or(&empty), &who) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                collection = name,
                documents = n,
                "data hub: originals removed; moved to the trash"
            ),
            Err(e) => {
                tracing::warn!(collection = name, error = %e, "data hub: cannot check removed originals")
            }
        }
    }
}

fn show(shared: &Shared, store: &Mutex<Store>) {
    let n = store.lock().map(|s| s.count().unwrap_or(0)).unwrap_or(0);
    let ready = shared.ready.load(Ordering::SeqCst);
    shared.status.update(|i| {
        i.detail = format!(
            "{n} documents{}",
            if ready { "" } else { ", converting originals" }
        );
        i.state = if ready {
            NodeState::Ready
        } else {
            NodeState::Starting
        };
    });
}

/// Opens the database at `db_path`, making its private directory first.
async fn open_store(db_path: PathBuf) -> Result<Store, ActorProcessingErr> {
    let opened = tokio::task::spawn_blocking(move || {
        if let Some(dir) = db_path.parent() {
            toolvisor_kit::private::ensure_private_dir(dir, "the data hub's directory")
                .map_err(|e| e.to_string())?;
        }
        Store::open(&db_path).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("opening the data hub's database: {e}"))??;
    Ok(opened)
}

/// What the watcher of the originals reports, and the collections' roots it watches.
struct Changes {
    /// Paths that changed, bounded: past the queue, `overflow` is set instead.
    rx: mpsc::Receiver<PathBuf>,
    overflow: Arc<AtomicBool>,
    roots: Vec<(String, Root)>,
}

/// Starts watching every collection's folder; a folder that cannot be watched is logged,
/// its changes then seen at the next start.
fn watch_originals(
    config: &DataConfig,
) -> Result<(notify::RecommendedWatcher, Changes), ActorProcessingErr> {
    // Changes to originals, bounded: past the queue, one full rescan instead.
    let (tx, rx) = mpsc::channel::<PathBuf>(WATCH_QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let watch_overflow = overflow.clone();
    use notify::Watcher;
    // A linked directory is not entered: its files are not the collection's.
    let mut watcher = notify::RecommendedWatcher::new(
        move |res: notify::Result<notify::Event>| {
            if let Ok(event) = res {
                for path in event.paths {
                    if tx.try_send(path).is_err() {
                        watch_overflow.store(true, Ordering::SeqCst);
                    }
                }
            }
        },
        notify::Config::default().with_follow_symlinks(false),
    )
    .map_err(|e| format!("cannot watch the data hub's originals: {e}"))?;
    // The real form of each root is taken now: a root swapped for a link later leads
    // nowhere (every original under it then reads as reached through a link).
    let mut roots: Vec<(String, Root)> = Vec::new();
    for (name, c) in &config.collections {
        if let Some(root) = c.path.as_deref().and_then(Root::of) {
            roots.push((name.clone(), root));
        }
    }
    for (name, root) in &roots {
        let root = &root.configured;
        if let Err(e) = watcher.watch(root, notify::RecursiveMode::Recursive) {
            tracing::warn!(collection = name, path = %root.display(), error = %e, "data hub: cannot watch a collection's folder; changes there are seen at the next start");
        }
    }
    Ok((
        watcher,
        Changes {
            rx,
            overflow,
            roots,
        },
    ))
}

/// The first conversion of every collection (then the hub is ready), then the changes to
/// originals as they come, in debounced batches.
async fn follow_originals(
    store: Arc<Mutex<Store>>,
    config: DataConfig,
    notes_dir: PathBuf,
    shared: Arc<Shared>,
    changes: Changes,
) {
    let Changes {
        mut rx,
        overflow,
        roots,
    } = changes;
    let began = Instant::now();
    let (s2, sh2, c0, n0) = (
        store.clone(),
        shared.clone(),
        config.clone(),
        notes_dir.clone(),
    );
    let _ = tokio::task::spawn_blocking(move || full_scan(&s2, &c0, &n0, &sh2)).await;
    shared.ready.store(true, Ordering::SeqCst);
    shared.changed.notify_one();
    show(&shared, &store);
    tracing::info!(
        documents = shared.converted.load(Ordering::Relaxed),
        ms = began.elapsed().as_millis() as u64,
        "data hub ready"
    );
    let who = Who {
        conversation: "data hub".into(),
        tool: "watch".into(),
    };
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        tokio::time::sleep(DEBOUNCE).await;
        while let Ok(p) = rx.try_recv() {
            batch.push(p);
        }
        batch.sort();
        batch.dedup();
        let rescan = overflow.swap(false, Ordering::SeqCst);
        let (s2, c2, roots2, who2) = (store.clone(), config.clone(), roots.clone(), who.clone());
        let n2 = notes_dir.clone();
        let sh2 = shared.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if rescan {
                full_scan(&s2, &c2, &n2, &sh2);
                return;
            }
            take_changes(&s2, &sh2, &roots2, batch, c2.max_file_bytes, &who2);
        })
        .await;
        shared.changed.notify_one();
        show(&shared, &store);
    }
}

/// Takes in the originals at `batch`'s paths: a removed one's document goes to the trash,
/// a new or changed one is converted; paths outside every root and folders are skipped.
fn take_changes(
    store: &Mutex<Store>,
    shared: &Shared,
    roots: &[(String, Root)],
    batch: Vec<PathBuf>,
    max_bytes: u64,
    who: &Who,
) {
    for path in batch {
        let Some((name, root)) = roots
            .iter()
            .find(|(_, root)| path.starts_with(&root.configured))
        else {
            continue;
        };
        let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
        // What is at the path itself, not where a link there leads.
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                shared.not_read().remove(&path);
                if let Err(e) = store.original_removed(&path, who) {
                    tracing::warn!(path = %path.display(), error = %e, "data hub: cannot trash a removed original");
                }
            }
            Ok(meta) if meta.is_dir() => {}
            _ => {
                let found = Found {
                    collection: name.clone(),
                    root: root.clone(),
                    path,
                    note: false,
                };
                take_in(&mut store, shared, &found, max_bytes, who);
            }
        }
    }
}

impl Actor for StoreActor {
    type Msg = ();
    type State = StoreState;
    type Arguments = StoreArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        args: StoreArgs,
    ) -> Result<StoreState, ActorProcessingErr> {
        let opened = open_store(args.db_path.clone()).await?;
        let store = Arc::new(Mutex::new(opened));
        let shared = args.shared.clone();
        shared.ready.store(false, Ordering::SeqCst);
        shared.converted.store(0, Ordering::Relaxed);
        *shared.store.lock().unwrap_or_else(|p| p.into_inner()) = Some(store.clone());
        show(&shared, &store);
        let (watcher, changes) = watch_originals(&args.config)?;
        // The first conversion, then the changes as they come.
        let tasks = vec![tokio::spawn(follow_originals(
            store.clone(),
            args.config.clone(),
            args.notes_dir.clone(),
            shared.clone(),
            changes,
        ))];
        Ok(StoreState {
            _watcher: Some(watcher),
            tasks,
            shared,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<()>,
        state: &mut StoreState,
    ) -> Result<(), ActorProcessingErr> {
        for t in &state.tasks {
            t.abort();
        }
        state.shared.ready.store(false, Ordering::SeqCst);
        *state.shared.store.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_like: &[(&str, bool)], pin: &[(&str, &[&str])]) -> DataConfig {
        DataConfig {
            collections: toml_like
                .iter()
                .map(|(n, s)| {
                    (
                        n.to_string(),
                        CollectionConfig {
                            path: None,
                            sensitive: *s,
                        },
                    )
                })
                .collect(),
            pin: pin
                .iter()
                .map(|(t, ns)| (t.to_string(), ns.iter().map(|n| n.to_string()).collect()))
                .collect(),
            ..DataConfig::default()
        }
    }

    #[test]
    fn reach_never_includes_a_sensitive_collection_and_a_pin_only_narrows() {
        let c = config(
            &[("docs", false), ("hr", true), ("notes", false)],
            &[("read", &["notes", "hr"])],
        );
        assert_eq!(c.reach("write").names(), ["docs", "notes"]);
        assert_eq!(
            c.reach("read").names(),
            ["notes"],
            "the pin names hr: still unreachable"
        );
        assert!(c.check().is_ok());
        let bad = config(&[("docs", false)], &[("read", &["nope"])]);
        assert!(bad.check().unwrap_err().contains("data.pin.read"));
    }
}
