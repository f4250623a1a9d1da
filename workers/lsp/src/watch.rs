//! What changed on disk under a server's root, by anyone: a `git checkout`, `sed` through
//! `bash`, an editor, a vibe worker. One [`RootWatch`] per server root (inotify through
//! `notify`, one non-recursive watch per directory, hidden directories, `node_modules`,
//! `__pycache__` and `target` skipped, at most [`MAX_DIRS`] directories), whose changes are
//! taken before every query ([`RootWatch::sync`]) and handed to the server
//! (`crate::outside`).
//!
//! Taking the changes first passes a barrier: toolvisor opens a file of its own private
//! directory, watched by the same inotify instance, and waits until that open's event has
//! been processed. inotify queues events in the order they happened, so every change made
//! before the query (a `git checkout` that returned) is then in the pending set.
//!
//! A query opens the barrier, reads its file and waits for the barrier in one trip to the
//! blocking pool ([`RootWatch::open_barrier`], [`RootWatch::take_after`]), so `notify`'s thread
//! handles the barrier's event while the file is read (issue 33: the barrier and the read were
//! two trips, one after the other). The barrier's event passes where it is read, in `notify`'s
//! thread, when no earlier event waits for the watch's thread.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{Event, EventKind, RecursiveMode, Watcher};

use crate::server::lock;

/// Directories watched per root at most; past it, changes in the rest are not seen and
/// index-wide answers say so.
pub const MAX_DIRS: usize = 10_000;
/// Changed paths held between two queries at most; past it the server is restarted (it
/// reads the disk anew) instead of being told file by file.
pub const MAX_PENDING: usize = 20_000;
/// Events queued between the watcher and its thread at most; a fuller queue counts as an
/// overflow (as inotify's own).
const QUEUE: usize = 8192;
/// Directory names never watched (besides every name starting with `.`).
pub const SKIPPED_DIRS: &[&str] = &["node_modules", "__pycache__", "target"];

/// What happened to a path (the LSP `FileChangeType` numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Created = 1,
    Changed = 2,
    Deleted = 3,
}

impl Change {
    /// The change after `self` and then `next` happened to one path. A creation then a
    /// deletion stays a deletion: the "creation" may have replaced a file the server knew.
    fn then(self, next: Change) -> Change {
        use Change::*;
        match (self, next) {
            (Created, Changed) => Created,
            (Deleted, Created) | (Deleted, Changed) => Changed,
            (_, n) => n,
        }
    }
}

/// Why the changes could not be taken one by one.
#[derive(Debug, PartialEq, Eq)]
pub enum Lost {
    /// More changes than the queues hold (inotify's included): the server must re-read.
    Overflow,
}

enum Msg {
    Event(notify::Result<Event>),
    Stop,
}

#[derive(Default)]
struct Barrier {
    /// Barriers opened so far.
    issued: u64,
    /// Barriers whose open event was processed after every earlier event.
    passed: u64,
}

struct State {
    root: PathBuf,
    barrier_file: PathBuf,
    pending: Mutex<BTreeMap<PathBuf, Change>>,
    overflow: AtomicBool,
    barrier: Mutex<Barrier>,
    /// Notified under `barrier` when one passes and on an overflow, so a waiting query wakes
    /// to see it.
    passed: Condvar,
    /// Events handed to the watch's thread and not yet handled by it (1 during its first
    /// walk): while it is 0, a barrier's event passes at once where it is read.
    behind: AtomicUsize,
    /// Why the watch covers less than the root (it could not start, the directory cap).
    problem: Mutex<Option<String>>,
}

impl State {
    fn new(root: &Path, barrier_file: PathBuf, problem: Option<String>) -> State {
        State {
            root: root.to_path_buf(),
            barrier_file,
            pending: Mutex::new(BTreeMap::new()),
            overflow: AtomicBool::new(false),
            barrier: Mutex::new(Barrier::default()),
            passed: Condvar::new(),
            behind: AtomicUsize::new(1),
            problem: Mutex::new(problem),
        }
    }

    /// One more barrier passed.
    fn pass(&self) {
        lock(&self.barrier).passed += 1;
        self.passed.notify_all();
    }

    /// The changes cannot be taken one by one any more: say so, and wake the queries waiting
    /// (under the lock they check and wait under, so none misses it).
    fn overflowed(&self) {
        self.overflow.store(true, Ordering::SeqCst);
        let _checked = lock(&self.barrier);
        self.passed.notify_all();
    }
}

/// The watch of one root; stops its thread when dropped.
pub struct RootWatch {
    state: Arc<State>,
    tx: SyncSender<Msg>,
    /// Whether the watcher runs (else [`RootWatch::problem`] says why not).
    live: bool,
    /// Removed with the watch.
    _dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for RootWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootWatch")
            .field("root", &self.state.root)
            .finish()
    }
}

/// Whether a directory entry named `name` is left unwatched.
pub fn skipped(name: &str) -> bool {
    name.starts_with('.') || SKIPPED_DIRS.contains(&name)
}

impl RootWatch {
    /// Starts watching `root` on a thread of its own (the initial walk included). Never
    /// fails: a watch that cannot start says why in [`RootWatch::problem`].
    pub fn start(root: &Path) -> RootWatch {
        let (tx, rx) = sync_channel::<Msg>(QUEUE);
        match Self::begin(root, tx.clone(), rx) {
            Ok((state, dir)) => RootWatch {
                state,
                tx,
                live: true,
                _dir: Some(dir),
            },
            Err(why) => {
                tracing::warn!(root = %root.display(), why, "no file watcher for the server root");
                let state = Arc::new(State::new(
                    root,
                    PathBuf::new(),
                    Some(watch_problem(root, &why)),
                ));
                RootWatch {
                    state,
                    tx,
                    live: false,
                    _dir: None,
                }
            }
        }
    }

    /// The private barrier directory and the watcher with its barrier watch, made here so
    /// that no barrier opened after `start` can be missed; the walk runs on the thread.
    fn begin(
        root: &Path,
        feed: SyncSender<Msg>,
        rx: Receiver<Msg>,
    ) -> Result<(Arc<State>, tempfile::TempDir), String> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(|| sweep(&std::env::temp_dir()));
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| format!("cannot make its private directory ({e})"))?;
        let barrier_file = dir.path().join("barrier");
        std::fs::write(&barrier_file, b"")
            .map_err(|e| format!("cannot make its barrier file ({e})"))?;
        let state = Arc::new(State::new(root, barrier_file.clone(), None));
        let filter_state = state.clone();
        let handler = move |res: notify::Result<Event>| {
            if let Ok(ev) = &res {
                // Opens and reads are everyone's (the servers' own scans): only our barrier's
                // open matters.
                let ours = ev.paths.contains(&barrier_file);
                let read = match ev.kind {
                    EventKind::Access(AccessKind::Close(AccessMode::Write)) => false,
                    EventKind::Access(AccessKind::Open(_)) => !ours,
                    EventKind::Access(_) => true,
                    _ => false,
                };
                if read {
                    return;
                }
                // Our barrier with nothing before it still to handle: it passes here (this
                // thread hands events over one at a time, in order, so none is in between).
                if ours && filter_state.behind.load(Ordering::SeqCst) == 0 {
                    filter_state.pass();
                    return;
                }
            }
            filter_state.behind.fetch_add(1, Ordering::SeqCst);
            match feed.try_send(Msg::Event(res)) {
                Ok(()) => {}
                Err(TrySendError::Disconnected(_)) => {
                    filter_state.behind.fetch_sub(1, Ordering::SeqCst);
                }
                Err(TrySendError::Full(_)) => {
                    filter_state.behind.fetch_sub(1, Ordering::SeqCst);
                    filter_state.overflowed();
                }
            }
        };
        let mut watcher =
            notify::recommended_watcher(handler).map_err(|e| format!("cannot start ({e})"))?;
        watcher
            .watch(dir.path(), RecursiveMode::NonRecursive)
            .map_err(|e| format!("cannot watch its barrier ({e})"))?;
        let s = state.clone();
        std::thread::Builder::new()
            .name("lsp-watch".into())
            .spawn(move || run(s, watcher, rx))
            .map_err(|e| format!("cannot start its thread ({e})"))?;
        Ok((state, dir))
    }

    /// Why changes under the root may go unseen, if they may.
    pub fn problem(&self) -> Option<String> {
        lock(&self.state.problem).clone()
    }

    /// Every change made before this call, once the barrier passed (at most `wait`; a watch
    /// that cannot work returns what it has). Blocking: call it on the blocking pool.
    #[cfg(test)]
    pub fn sync(&self, wait: Duration) -> Result<Vec<(PathBuf, Change)>, Lost> {
        self.take_after(self.open_barrier(), wait)
    }

    /// Open the barrier: once it has passed, every change made before this call is pending.
    /// What to wait for ([`RootWatch::take_after`]); `None` where the watch does not run or the
    /// barrier cannot be opened (then there is nothing to wait for).
    pub fn open_barrier(&self) -> Option<u64> {
        if !self.live {
            return None;
        }
        let s = &self.state;
        let target = {
            let mut b = lock(&s.barrier);
            b.issued += 1;
            b.issued
        };
        // The open is the barrier: its event follows every earlier one in inotify's queue.
        match std::fs::File::open(&s.barrier_file) {
            Ok(_) => Some(target),
            Err(e) => {
                tracing::warn!(root = %s.root.display(), error = %e, "the watch barrier cannot be opened");
                None
            }
        }
    }

    /// Every change made before [`RootWatch::open_barrier`] returned `opened`, once that
    /// barrier passed (at most `wait`). Blocking: call it on the blocking pool.
    pub fn take_after(
        &self,
        opened: Option<u64>,
        wait: Duration,
    ) -> Result<Vec<(PathBuf, Change)>, Lost> {
        if let Some(target) = opened {
            let s = &self.state;
            let deadline = std::time::Instant::now() + wait;
            let mut b = lock(&s.barrier);
            while b.passed < target && !s.overflow.load(Ordering::SeqCst) {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    tracing::warn!(root = %s.root.display(), waited_ms = wait.as_millis() as u64, "the file watcher did not catch up in time; answering with what it has");
                    break;
                }
                b = s
                    .passed
                    .wait_timeout(b, left)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
        }
        self.take()
    }

    /// The pending changes, or that they were lost.
    fn take(&self) -> Result<Vec<(PathBuf, Change)>, Lost> {
        if self.state.overflow.swap(false, Ordering::SeqCst) {
            lock(&self.state.pending).clear();
            return Err(Lost::Overflow);
        }
        let taken = std::mem::take(&mut *lock(&self.state.pending));
        Ok(taken.into_iter().collect())
    }
}

impl Drop for RootWatch {
    fn drop(&mut self) {
        // A full queue: the thread is busy and will see the sender gone soon enough.
        let _ = self.tx.try_send(Msg::Stop);
    }
}

/// The private barrier directories' names: `<PREFIX><pid>-<random>` in the temp directory.
const PREFIX: &str = ".toolvisor-lsp-watch-";

/// Remove the barrier directories of daemons that are gone (killed before they could):
/// only ours by name, of a pid no longer alive, holding nothing but the barrier file.
fn sweep(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id()
            || toolvisor_kit::process::alive(pid)
            || !e.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        let dir = e.path();
        let only_barrier = std::fs::read_dir(&dir).is_ok_and(|mut it| {
            let names: Vec<_> = it
                .by_ref()
                .take(2)
                .flatten()
                .map(|e| e.file_name())
                .collect();
            names.len() <= 1 && names.iter().all(|n| n == "barrier")
        });
        if !only_barrier {
            continue;
        }
        let _ = std::fs::remove_file(dir.join("barrier"));
        if std::fs::remove_dir(&dir).is_ok() {
            tracing::debug!(dir = %dir.display(), pid, "removed a dead daemon's watch directory");
        }
    }
}

fn watch_problem(root: &Path, why: &str) -> String {
    format!(
        "toolvisor's file watcher of {} {why}, so changes made on disk outside the daemon may not reach the server; `lsp reload` makes it read the disk anew",
        root.display()
    )
}

/// The watcher's thread: the initial walk, then every event in order.
fn run(state: Arc<State>, mut watcher: notify::RecommendedWatcher, rx: Receiver<Msg>) {
    let mut w = Walker {
        state: &state,
        watcher: &mut watcher,
        dirs: 0,
        capped: false,
    };
    w.add_dir(&state.root.clone(), false);
    // The first walk is done: barriers may pass where they are read.
    state.behind.fetch_sub(1, Ordering::SeqCst);
    tracing::debug!(root = %state.root.display(), dirs = w.dirs, "watching the server root");
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Stop => break,
            Msg::Event(Err(e)) => {
                tracing::debug!(root = %state.root.display(), error = %e, "file watcher error");
            }
            Msg::Event(Ok(ev)) => w.handle(ev),
        }
        state.behind.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Walker<'a> {
    state: &'a State,
    watcher: &'a mut notify::RecommendedWatcher,
    dirs: usize,
    capped: bool,
}

impl Walker<'_> {
    fn handle(&mut self, ev: Event) {
        if ev.need_rescan() {
            self.state.overflowed();
            return;
        }
        if let EventKind::Access(AccessKind::Open(_)) = ev.kind {
            self.state.pass();
            return;
        }
        let paths = ev.paths;
        match ev.kind {
            EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                for p in paths {
                    self.appeared(&p);
                }
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::From)) | EventKind::Remove(_) => {
                for p in paths {
                    self.note(&p, Change::Deleted);
                }
            }
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => {
                let mut it = paths.into_iter();
                if let Some(from) = it.next() {
                    self.note(&from, Change::Deleted);
                }
                for to in it {
                    self.appeared(&to);
                }
            }
            EventKind::Modify(ModifyKind::Name(_)) => {
                for p in paths {
                    if std::fs::symlink_metadata(&p).is_ok() {
                        self.appeared(&p);
                    } else {
                        self.note(&p, Change::Deleted);
                    }
                }
            }
            EventKind::Modify(_) | EventKind::Access(AccessKind::Close(AccessMode::Write)) => {
                for p in paths {
                    if !p.is_dir() {
                        self.note(&p, Change::Changed);
                    }
                }
            }
            _ => {}
        }
    }

    /// `p` was created or moved in: a directory is watched and its files count as created.
    fn appeared(&mut self, p: &Path) {
        let is_dir = std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        if is_dir {
            if !self.is_skipped(p) {
                self.add_dir(p, true);
            }
        } else {
            self.note(p, Change::Created);
        }
    }

    fn is_skipped(&self, p: &Path) -> bool {
        let Ok(rel) = p.strip_prefix(&self.state.root) else {
            return true;
        };
        rel.components()
            .any(|c| skipped(&c.as_os_str().to_string_lossy()))
    }

    fn note(&mut self, p: &Path, change: Change) {
        if p == self.state.barrier_file || self.is_skipped(p) {
            return;
        }
        let mut pending = lock(&self.state.pending);
        match pending.get_mut(p) {
            Some(before) => *before = before.then(change),
            None => {
                if pending.len() >= MAX_PENDING {
                    drop(pending);
                    self.state.overflowed();
                    return;
                }
                pending.insert(p.to_path_buf(), change);
            }
        }
    }

    /// Watch `dir` and the directories beneath it (bounded by [`MAX_DIRS`]); with `fresh`,
    /// every file found counts as created (it appeared with its directory).
    fn add_dir(&mut self, dir: &Path, fresh: bool) {
        let mut queue = vec![dir.to_path_buf()];
        while let Some(d) = queue.pop() {
            if self.dirs >= MAX_DIRS {
                if !self.capped {
                    self.capped = true;
                    *lock(&self.state.problem) = Some(watch_problem(
                        &self.state.root,
                        &format!("watches only its first {MAX_DIRS} directories"),
                    ));
                }
                return;
            }
            if let Err(e) = self.watcher.watch(&d, RecursiveMode::NonRecursive) {
                // A directory gone since it was listed is no gap; anything else (inotify's
                // `max_user_watches` spent) is.
                if d.is_dir() {
                    tracing::warn!(dir = %d.display(), error = %e, "cannot watch a directory of a server root");
                    lock(&self.state.problem).get_or_insert_with(|| {
                        watch_problem(
                            &self.state.root,
                            &format!("cannot watch {} ({e})", d.display()),
                        )
                    });
                }
                continue;
            }
            self.dirs += 1;
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let Ok(kind) = e.file_type() else { continue };
                let name = e.file_name().to_string_lossy().to_string();
                if kind.is_dir() {
                    if !skipped(&name) {
                        queue.push(e.path());
                    }
                } else if fresh && kind.is_file() {
                    self.note(&e.path(), Change::Created);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(w: &RootWatch) -> Vec<(PathBuf, Change)> {
        w.sync(Duration::from_secs(10)).expect("no overflow")
    }

    #[test]
    fn changes_made_before_a_sync_are_all_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a.py"), "a = 1\n").unwrap();
        std::fs::create_dir(root.join(".git")).unwrap();
        let w = RootWatch::start(&root);
        assert_eq!(w.problem(), None);
        assert_eq!(sync(&w), vec![], "nothing changed yet");
        std::fs::write(root.join("a.py"), "a = 2\n").unwrap();
        std::fs::write(root.join("b.py"), "b = 1\n").unwrap();
        std::fs::write(root.join(".git/index"), "x").unwrap();
        std::fs::create_dir_all(root.join("pkg/sub")).unwrap();
        std::fs::write(root.join("pkg/sub/c.py"), "c = 1\n").unwrap();
        std::fs::write(root.join("gone.py"), "").unwrap();
        std::fs::remove_file(root.join("gone.py")).unwrap();
        let got = sync(&w);
        // The barrier passed only after every earlier event: nothing arrives later.
        assert!(
            got.contains(&(root.join("a.py"), Change::Changed)),
            "{got:?}"
        );
        assert!(
            got.contains(&(root.join("b.py"), Change::Created)),
            "{got:?}"
        );
        assert!(
            got.contains(&(root.join("pkg/sub/c.py"), Change::Created)),
            "{got:?}"
        );
        assert!(
            !got.iter().any(|(p, _)| p.starts_with(root.join(".git"))),
            "{got:?}"
        );
        assert!(
            got.contains(&(root.join("gone.py"), Change::Deleted)),
            "{got:?}"
        );
        // The new directory is watched too.
        std::fs::remove_file(root.join("pkg/sub/c.py")).unwrap();
        assert_eq!(sync(&w), vec![(root.join("pkg/sub/c.py"), Change::Deleted)]);
    }

    #[test]
    fn a_rename_over_a_file_is_a_creation_and_the_old_name_a_deletion() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a.py"), "a = 1\n").unwrap();
        let w = RootWatch::start(&root);
        assert_eq!(sync(&w), vec![]);
        std::fs::write(root.join(".a.py.tmp"), "a = 2\n").unwrap();
        std::fs::rename(root.join(".a.py.tmp"), root.join("a.py")).unwrap();
        std::fs::rename(root.join("a.py"), root.join("b.py")).unwrap();
        let got = sync(&w);
        assert!(
            got.contains(&(root.join("a.py"), Change::Deleted)),
            "{got:?}"
        );
        assert!(
            got.contains(&(root.join("b.py"), Change::Created)),
            "{got:?}"
        );
    }

    #[test]
    fn a_dead_daemons_barrier_directories_are_swept_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid that cannot be alive (above pid_max), a live one (ours), and a stranger.
        let dead = tmp.path().join(format!("{PREFIX}4999999-abc"));
        let live = tmp
            .path()
            .join(format!("{PREFIX}{}-abc", std::process::id()));
        let other = tmp.path().join(format!("{PREFIX}4999999-xyz"));
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("barrier"), "").unwrap();
        }
        std::fs::write(other.join("keep"), "not ours").unwrap();
        sweep(tmp.path());
        assert!(!dead.exists());
        assert!(live.exists(), "a live daemon's");
        assert!(
            other.join("keep").exists() && other.join("barrier").exists(),
            "a directory holding more is left whole"
        );
    }

    #[test]
    fn merging_changes_of_one_path() {
        use Change::*;
        assert_eq!(Created.then(Changed), Created);
        assert_eq!(Created.then(Deleted), Deleted);
        assert_eq!(Deleted.then(Created), Changed);
        assert_eq!(Changed.then(Deleted), Deleted);
    }
}
