//! What changed on disk under a server's root, by anyone: a `git checkout`, `sed` through
//! `bash`, an editor, a vibe worker. One [`RootWatch`] per server root: an inotify instance of
//! its own, one watch per directory (hidden directories, `node_modules`, `__pycache__` and
//! `target` skipped, at most [`MAX_DIRS`] directories), whose changes are caught up with and
//! taken before every query ([`RootWatch::catch_up`], [`RootWatch::take`]) and handed to the
//! server (`crate::outside`).
//!
//! Catching up needs no barrier and no other thread. inotify queues an event inside the
//! system call that caused it (fsnotify runs before the call returns), so every change whose
//! call returned before the query (a `git checkout` that exited) is already in the instance's
//! queue. The query reads that queue until it is empty, under the lock every reader of it
//! takes, and handles each event there: when nothing changed that is one `read` that finds
//! the queue empty (no other thread to wait for, no wakeups per query). Between queries the
//! watch's thread reads what arrives, so neither inotify's queue nor the pending set fills
//! while no query comes.
//!
//! The watch asks for no open, read or close-without-write events: the servers' own scans of
//! the root make none.
//!
//! A query waits for the watch at most its `wait` (the first walk of the root, a large new
//! directory tree being watched, a stream of events from a copy still running); past it, it
//! answers with what the watch has seen, as the barrier did.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

use crate::lock;

/// Directories watched per root at most; past it, changes in the rest are not seen and
/// index-wide answers say so.
pub const MAX_DIRS: usize = 10_000;
/// Changed paths held between two queries at most; past it the server is restarted (it
/// reads the disk anew) instead of being told file by file.
pub const MAX_PENDING: usize = 20_000;
/// Directory names never watched (besides every name starting with `.`).
pub const SKIPPED_DIRS: &[&str] = &["node_modules", "__pycache__", "target"];

/// The events asked of each directory: what changes a file's text or a directory's entries.
fn mask() -> AddWatchFlags {
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

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

/// The watched directories. Whoever reads the inotify queue holds this, so events are
/// handled one reader at a time and in the queue's order.
#[derive(Default)]
struct Dirs {
    /// The directory of each watch.
    by_wd: HashMap<WatchDescriptor, PathBuf>,
    /// Whether [`MAX_DIRS`] was reached.
    capped: bool,
    /// Whether the first walk of the root is done; `State::walk_done` is notified when it is.
    walked: bool,
}

struct State {
    root: PathBuf,
    inotify: Inotify,
    /// A lock with a deadline: a query waits for it at most its `wait`.
    dirs: parking_lot::Mutex<Dirs>,
    walk_done: parking_lot::Condvar,
    pending: Mutex<BTreeMap<PathBuf, Change>>,
    overflow: AtomicBool,
    /// Why the watch covers less than the root (it could not start, the directory cap).
    problem: Mutex<Option<String>>,
    /// The watch was dropped: a walk still running stops.
    stopping: AtomicBool,
    /// The inotify instance cannot be read any more (said in `problem`): the thread ends.
    broken: AtomicBool,
}

/// The watch of one root; stops its thread when dropped.
pub struct RootWatch {
    /// `None` when the watch could not start ([`RootWatch::problem`] says why).
    state: Option<Arc<State>>,
    /// Why it could not start.
    failed: Option<String>,
    /// Closed with the watch: the thread sees the pipe hang up and ends.
    _stop: Option<OwnedFd>,
}

impl std::fmt::Debug for RootWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootWatch")
            .field("root", &self.state.as_ref().map(|s| s.root.clone()))
            .finish()
    }
}

/// Whether a directory entry named `name` is left unwatched.
pub fn skipped(name: &str) -> bool {
    name.starts_with('.') || SKIPPED_DIRS.contains(&name)
}

impl RootWatch {
    /// Starts watching `root`; the first walk of its directories runs on the watch's thread.
    /// Never fails: a watch that cannot start says why in [`RootWatch::problem`].
    pub fn start(root: &Path) -> RootWatch {
        match Self::begin(root) {
            Ok((state, stop)) => RootWatch {
                state: Some(state),
                failed: None,
                _stop: Some(stop),
            },
            Err(why) => {
                tracing::warn!(root = %root.display(), why, "no file watcher for the server root");
                RootWatch {
                    state: None,
                    failed: Some(watch_problem(root, &why)),
                    _stop: None,
                }
            }
        }
    }

    fn begin(root: &Path) -> Result<(Arc<State>, OwnedFd), String> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| format!("cannot start ({e})"))?;
        let (stopped, stop) =
            nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("cannot start ({e})"))?;
        let state = Arc::new(State {
            root: root.to_path_buf(),
            inotify,
            dirs: parking_lot::Mutex::new(Dirs::default()),
            walk_done: parking_lot::Condvar::new(),
            pending: Mutex::new(BTreeMap::new()),
            overflow: AtomicBool::new(false),
            problem: Mutex::new(None),
            stopping: AtomicBool::new(false),
            broken: AtomicBool::new(false),
        });
        let s = state.clone();
        std::thread::Builder::new()
            .name("lsp-watch".into())
            .spawn(move || run(s, stopped))
            .map_err(|e| format!("cannot start its thread ({e})"))?;
        Ok((state, stop))
    }

    /// Why changes under the root may go unseen, if they may.
    pub fn problem(&self) -> Option<String> {
        match &self.state {
            Some(s) => lock(&s.problem).clone(),
            None => self.failed.clone(),
        }
    }

    /// Every change made before this call, taken. Blocking: call it on the blocking pool.
    #[cfg(test)]
    pub fn sync(&self) -> Result<Vec<(PathBuf, Change)>, Lost> {
        self.catch_up(Duration::from_secs(10));
        self.take()
    }

    /// Once this returns, every change made under the root before it was called is pending
    /// (see the module doc). A watch still on its first walk of the root is waited for, at
    /// most `wait`: a directory not yet watched tells nothing. Blocking (it may watch a new
    /// directory tree): call it on the blocking pool.
    pub fn catch_up(&self, wait: Duration) {
        let Some(s) = &self.state else {
            return;
        };
        let deadline = Instant::now() + wait;
        let Some(mut dirs) = s.dirs.try_lock_until(deadline) else {
            tracing::warn!(root = %s.root.display(), waited_ms = wait.as_millis() as u64, "the file watcher is busy (a large new directory, a slow disk); answering with what it has seen");
            return;
        };
        while !dirs.walked {
            if s.walk_done.wait_until(&mut dirs, deadline).timed_out() {
                tracing::warn!(root = %s.root.display(), waited_ms = wait.as_millis() as u64, "the file watcher's first walk of the root is not done; answering with what it has seen");
                break;
            }
        }
        s.drain(&mut dirs, Some(deadline));
    }

    /// The pending changes, or that they were lost.
    pub fn take(&self) -> Result<Vec<(PathBuf, Change)>, Lost> {
        let Some(s) = &self.state else {
            return Ok(Vec::new());
        };
        if s.overflow.swap(false, Ordering::SeqCst) {
            lock(&s.pending).clear();
            return Err(Lost::Overflow);
        }
        let taken = std::mem::take(&mut *lock(&s.pending));
        Ok(taken.into_iter().collect())
    }
}

impl Drop for RootWatch {
    fn drop(&mut self) {
        // The thread also sees the stop pipe hang up, once it waits on it.
        if let Some(s) = &self.state {
            s.stopping.store(true, Ordering::SeqCst);
        }
    }
}

fn watch_problem(root: &Path, why: &str) -> String {
    format!(
        "toolvisor's file watcher of {} {why}, so changes made on disk outside the daemon may not reach the server; `lsp reload` makes it read the disk anew",
        root.display()
    )
}

/// The watch's thread: the first walk, then whatever arrives until the watch is dropped.
fn run(state: Arc<State>, stopped: OwnedFd) {
    let mut queue = vec![state.root.clone()];
    while let Some(d) = queue.pop() {
        if state.stopping.load(Ordering::SeqCst) {
            return;
        }
        // A directory at a time, the queue read after each, the lock handed to a waiting
        // query: queries and events are not held up by a long walk.
        let mut dirs = state.dirs.lock();
        if !state.watch_dir(&mut dirs, &d, false, &mut queue) {
            break;
        }
        state.drain(&mut dirs, None);
        parking_lot::MutexGuard::unlock_fair(dirs);
    }
    let watched = {
        let mut dirs = state.dirs.lock();
        dirs.walked = true;
        dirs.by_wd.len()
    };
    state.walk_done.notify_all();
    tracing::debug!(root = %state.root.display(), dirs = watched, "watching the server root");
    while !state.broken.load(Ordering::SeqCst) {
        let mut fds = [
            PollFd::new(state.inotify.as_fd(), PollFlags::POLLIN),
            PollFd::new(stopped.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => {
                tracing::warn!(root = %state.root.display(), error = %e, "the file watcher's thread cannot wait; queries still catch up");
                return;
            }
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            return;
        }
        state.drain(&mut state.dirs.lock(), None);
    }
}

impl State {
    /// Read the inotify queue until it is empty and handle every event, in order; with a
    /// `deadline`, stop reading once it passed (events still arriving from a copy that runs
    /// on). The caller holds `dirs`.
    fn drain(&self, dirs: &mut Dirs, deadline: Option<Instant>) {
        while !self.broken.load(Ordering::SeqCst) {
            match self.inotify.read_events() {
                Ok(events) => {
                    for ev in events {
                        self.handle(dirs, ev);
                    }
                }
                Err(Errno::EAGAIN) => return,
                Err(Errno::EINTR) => continue,
                Err(e) => {
                    // Not seen before on Linux; a watch that cannot read says so once and stops
                    // (its thread would otherwise wake for ever on a readable descriptor).
                    tracing::warn!(root = %self.root.display(), error = %e, "cannot read the file watcher's events");
                    *lock(&self.problem) = Some(watch_problem(
                        &self.root,
                        &format!("cannot read its events ({e})"),
                    ));
                    self.broken.store(true, Ordering::SeqCst);
                    return;
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                tracing::warn!(root = %self.root.display(), "the file watcher's queue did not empty in time; answering with what it has read");
                return;
            }
        }
    }

    fn handle(&self, dirs: &mut Dirs, ev: InotifyEvent) {
        let m = ev.mask;
        if m.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            self.overflowed();
            return;
        }
        if m.contains(AddWatchFlags::IN_IGNORED) {
            // The directory is gone (or was unwatched): its number may be given out again.
            dirs.by_wd.remove(&ev.wd);
            return;
        }
        // Events of the directory itself (its deletion, its attributes) carry no name: its
        // parent's event says what happened to it.
        let (Some(dir), Some(name)) = (dirs.by_wd.get(&ev.wd), ev.name) else {
            return;
        };
        let path = dir.join(name);
        let is_dir = m.contains(AddWatchFlags::IN_ISDIR);
        if m.intersects(AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO) {
            if !is_dir {
                self.note(&path, Change::Created);
            } else if !self.is_skipped(&path) {
                self.add_tree(dirs, &path);
            }
        } else if m.intersects(AddWatchFlags::IN_DELETE | AddWatchFlags::IN_MOVED_FROM) {
            if is_dir && m.contains(AddWatchFlags::IN_MOVED_FROM) {
                // Moved away, perhaps out of the root: its watches would name paths it no
                // longer has. A move within the root watches it anew at its new name. A
                // directory already at the old name (an exchange of two, a new one made since)
                // is watched anew too: the unwatching may have taken its watch.
                self.unwatch_under(dirs, &path);
                if std::fs::symlink_metadata(&path).is_ok_and(|md| md.is_dir())
                    && !self.is_skipped(&path)
                {
                    self.add_tree(dirs, &path);
                }
            }
            self.note(&path, Change::Deleted);
        } else if !is_dir {
            self.note(&path, Change::Changed);
        }
    }

    /// The changes cannot be taken one by one any more.
    fn overflowed(&self) {
        self.overflow.store(true, Ordering::SeqCst);
    }

    fn is_skipped(&self, p: &Path) -> bool {
        let Ok(rel) = p.strip_prefix(&self.root) else {
            return true;
        };
        rel.components()
            .any(|c| skipped(&c.as_os_str().to_string_lossy()))
    }

    fn note(&self, p: &Path, change: Change) {
        if self.is_skipped(p) {
            return;
        }
        let mut pending = lock(&self.pending);
        match pending.get_mut(p) {
            Some(before) => *before = before.then(change),
            None => {
                if pending.len() >= MAX_PENDING {
                    drop(pending);
                    self.overflowed();
                    return;
                }
                pending.insert(p.to_path_buf(), change);
            }
        }
    }

    /// Watch `dir`, which appeared, and the directories beneath it; every file found in them
    /// counts as created (it appeared with its directory).
    fn add_tree(&self, dirs: &mut Dirs, dir: &Path) {
        let mut queue = vec![dir.to_path_buf()];
        while let Some(d) = queue.pop() {
            if self.stopping.load(Ordering::SeqCst) || !self.watch_dir(dirs, &d, true, &mut queue) {
                return;
            }
        }
    }

    /// Watch `d` and queue the directories in it; with `fresh`, note its files as created.
    /// False once [`MAX_DIRS`] is reached.
    fn watch_dir(&self, dirs: &mut Dirs, d: &Path, fresh: bool, queue: &mut Vec<PathBuf>) -> bool {
        if dirs.by_wd.len() >= MAX_DIRS {
            if !dirs.capped {
                dirs.capped = true;
                *lock(&self.problem) = Some(watch_problem(
                    &self.root,
                    &format!("watches only its first {MAX_DIRS} directories"),
                ));
            }
            return false;
        }
        let wd = match self.inotify.add_watch(d, mask()) {
            Ok(wd) => wd,
            Err(e) => {
                // A directory gone since it was listed is no gap; anything else (inotify's
                // `max_user_watches` spent) is.
                if d.is_dir() {
                    tracing::warn!(dir = %d.display(), error = %e, "cannot watch a directory of a server root");
                    lock(&self.problem).get_or_insert_with(|| {
                        watch_problem(&self.root, &format!("cannot watch {} ({e})", d.display()))
                    });
                }
                return true;
            }
        };
        // inotify gives a directory already watched its old number: once under this name,
        // it was listed already.
        if dirs.by_wd.insert(wd, d.to_path_buf()).as_deref() == Some(d) {
            return true;
        }
        let Ok(entries) = std::fs::read_dir(d) else {
            return true;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                if !skipped(&e.file_name().to_string_lossy()) {
                    queue.push(e.path());
                }
            } else if fresh && kind.is_file() {
                self.note(&e.path(), Change::Created);
            }
        }
        true
    }

    /// Stop watching `dir` and the directories beneath it.
    fn unwatch_under(&self, dirs: &mut Dirs, dir: &Path) {
        dirs.by_wd.retain(|wd, p| {
            if !p.starts_with(dir) {
                return true;
            }
            // Gone already when it was deleted, not moved: nothing to undo then.
            let _ = self.inotify.rm_watch(*wd);
            false
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(w: &RootWatch) -> Vec<(PathBuf, Change)> {
        w.sync().expect("no overflow")
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
        // Reading a file is no change.
        std::fs::read(root.join("a.py")).unwrap();
        let got = sync(&w);
        assert_eq!(
            got,
            vec![
                (root.join("a.py"), Change::Changed),
                (root.join("b.py"), Change::Created),
                (root.join("gone.py"), Change::Deleted),
                (root.join("pkg/sub/c.py"), Change::Created),
            ],
            "every change made before the sync, in it (nothing arrives later), and nothing under .git"
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
        assert_eq!(
            sync(&w),
            vec![
                (root.join("a.py"), Change::Deleted),
                (root.join("b.py"), Change::Created),
            ]
        );
    }

    /// A directory moved within the root is watched under its new name, and one moved out
    /// of it is not watched any more (its changes would name paths under the root).
    #[test]
    fn a_moved_directory_is_watched_where_it_went() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("a/inner")).unwrap();
        std::fs::write(root.join("a/inner/m.py"), "").unwrap();
        let root = root.canonicalize().unwrap();
        let w = RootWatch::start(&root);
        assert_eq!(sync(&w), vec![]);
        std::fs::rename(root.join("a"), root.join("b")).unwrap();
        assert_eq!(
            sync(&w),
            vec![
                (root.join("a"), Change::Deleted),
                (root.join("b/inner/m.py"), Change::Created),
            ]
        );
        std::fs::write(root.join("b/inner/m.py"), "x = 1\n").unwrap();
        assert_eq!(sync(&w), vec![(root.join("b/inner/m.py"), Change::Changed)]);
        let outside = dir.path().join("elsewhere");
        std::fs::rename(root.join("b"), &outside).unwrap();
        std::fs::write(outside.join("inner/m.py"), "x = 2\n").unwrap();
        assert_eq!(sync(&w), vec![(root.join("b"), Change::Deleted)]);
    }

    /// Two directories exchanged in one `renameat2`: each is watched at its new name (the
    /// first cut unwatched the second one's new watch when it handled its move away).
    #[test]
    fn two_exchanged_directories_are_both_watched_at_their_new_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["a", "b"] {
            std::fs::create_dir(root.join(d)).unwrap();
            std::fs::write(root.join(d).join(format!("{d}.py")), "").unwrap();
        }
        let w = RootWatch::start(&root);
        assert_eq!(sync(&w), vec![]);
        let at = std::fs::File::open(&root).unwrap();
        nix::fcntl::renameat2(&at, "a", &at, "b", nix::fcntl::RenameFlags::RENAME_EXCHANGE)
            .unwrap();
        assert!(root.join("b/a.py").exists() && root.join("a/b.py").exists());
        let got = sync(&w);
        for p in ["a", "b"] {
            assert!(got.contains(&(root.join(p), Change::Deleted)), "{got:?}");
        }
        std::fs::write(root.join("b/a.py"), "x = 1\n").unwrap();
        std::fs::write(root.join("a/b.py"), "y = 1\n").unwrap();
        assert_eq!(
            sync(&w),
            vec![
                (root.join("a/b.py"), Change::Changed),
                (root.join("b/a.py"), Change::Changed),
            ]
        );
    }

    /// A query waits for a busy watch at most its `wait`, then answers with what was seen
    /// (the watch's lock held here as a large new tree's walk would hold it).
    #[test]
    fn a_query_waits_for_a_busy_watch_no_longer_than_it_may() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let w = Arc::new(RootWatch::start(&root));
        assert_eq!(sync(&w), vec![]);
        let state = w.state.clone().unwrap();
        let held = state.dirs.lock();
        std::fs::write(root.join("late.py"), "").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let query = w.clone();
        std::thread::spawn(move || {
            query.catch_up(Duration::from_millis(50));
            tx.send(query.take()).unwrap();
        });
        let answered = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the query never gave up waiting");
        assert_eq!(answered, Ok(vec![]), "nothing seen yet: the watch is busy");
        drop(held);
        assert_eq!(sync(&w), vec![(root.join("late.py"), Change::Created)]);
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
