//! What a warm daemon remembers between searches: per (pattern, file), the outcome of the last
//! search of that file — no literal of the pattern, or its matches — keyed by the file's
//! identity and version (device, inode, size, modification and change times to the
//! nanosecond), read from the descriptor the search opened. A file whose version differs is
//! searched again; a file changed in the last [`RACY`] is never remembered (a second write in
//! the same timestamp tick could otherwise keep its version); the whole cache stays within a
//! byte budget, the least recently used entries going first.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::Match;

/// Matches remembered per file at least (the tool's cap on shown matches), so a later call
/// asking for more than the first one did is still answered from the cache.
pub const REMEMBER_MATCHES: usize = 200;

/// A file changed this recently is not remembered.
pub const RACY: Duration = Duration::from_secs(2);

/// A file's identity and version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    pub fn of(meta: &std::fs::Metadata) -> Version {
        Version {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Changed too recently to be trusted as a key.
    fn racy(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let newest = self.mtime.0.max(self.ctime.0);
        newest + RACY.as_secs() as i64 >= now
    }
}

/// What searching one file gave.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Lacks a literal of the pattern (not parsed).
    Filtered,
    /// Parsed: `total` matches, the first `kept` of them (sorted) in `matches`.
    Parsed { total: usize, matches: Vec<Match> },
}

struct Entry {
    version: Version,
    outcome: Outcome,
    bytes: usize,
    used: u64,
}

/// The cache, shared by every search of the daemon.
pub struct SearchCache {
    budget: usize,
    inner: Mutex<Inner>,
    clock: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<(u64, PathBuf), Entry>,
    bytes: usize,
}

fn entry_bytes(path: &Path, outcome: &Outcome) -> usize {
    let matches = match outcome {
        Outcome::Filtered => 0,
        Outcome::Parsed { matches, .. } => matches
            .iter()
            .map(|m| {
                std::mem::size_of::<Match>()
                    + m.path.as_os_str().len()
                    + m.text.len()
                    + m.captures
                        .iter()
                        .map(|(k, v)| k.len() + v.len() + 48)
                        .sum::<usize>()
            })
            .sum(),
    };
    // The map's own overhead per entry, roughly.
    96 + path.as_os_str().len() + matches
}

impl SearchCache {
    /// A cache of at most `budget` bytes (0: remember nothing).
    pub fn new(budget: usize) -> SearchCache {
        SearchCache {
            budget,
            inner: Mutex::new(Inner::default()),
            clock: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The outcome remembered for `path` under pattern `key`, if its version is `version`
    /// and at least `keep` matches (or all of them) were kept.
    pub fn get(&self, key: u64, path: &Path, version: &Version, keep: usize) -> Option<Outcome> {
        if self.budget == 0 {
            return None;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let found = match inner.entries.get_mut(&(key, path.to_path_buf())) {
            Some(e) if e.version == *version => {
                let enough = match &e.outcome {
                    Outcome::Filtered => true,
                    Outcome::Parsed { total, matches } => matches.len() >= keep.min(*total),
                };
                if enough {
                    e.used = self.clock.fetch_add(1, Ordering::Relaxed);
                    Some(e.outcome.clone())
                } else {
                    None
                }
            }
            _ => None,
        };
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        } else {
            self.misses.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Remember `outcome` for `path` at `version` (unless the file changed too recently).
    pub fn put(&self, key: u64, path: &Path, version: Version, outcome: Outcome) {
        if self.budget == 0 || version.racy() {
            return;
        }
        let bytes = entry_bytes(path, &outcome);
        if bytes > self.budget / 16 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let used = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(old) = inner.entries.insert(
            (key, path.to_path_buf()),
            Entry {
                version,
                outcome,
                bytes,
                used,
            },
        ) {
            inner.bytes -= old.bytes;
        }
        inner.bytes += bytes;
        if inner.bytes > self.budget {
            // Drop the least recently used quarter (at least down to the budget).
            let mut ages: Vec<(u64, (u64, PathBuf))> = inner
                .entries
                .iter()
                .map(|(k, e)| (e.used, k.clone()))
                .collect();
            ages.sort_by_key(|(u, _)| *u);
            let target = self.budget - self.budget / 4;
            for (_, k) in ages {
                if inner.bytes <= target {
                    break;
                }
                if let Some(e) = inner.entries.remove(&k) {
                    inner.bytes -= e.bytes;
                }
            }
            inner.entries.shrink_to_fit();
        }
    }

    /// Bytes held now (approximate).
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }

    /// (hits, misses) since start.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }
}

/// The key of a compiled pattern: its language, text and whether the prefilter ran.
pub fn pattern_key(lang: &str, pattern: &str, context: Option<&str>, prefilter: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (lang, pattern, context, prefilter).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn old_file(dir: &Path, name: &str, text: &str) -> (PathBuf, Version) {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let past = SystemTime::now() - Duration::from_secs(60);
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(past).unwrap();
        // ctime is now: make the version look old by checking it, then shift the clock
        // argument: a fresh ctime is racy, so entries of fresh files are never stored.
        (p.clone(), Version::of(&std::fs::metadata(&p).unwrap()))
    }

    #[test]
    fn a_freshly_changed_file_is_never_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let (p, v) = old_file(dir.path(), "a.rs", "fn a() {}");
        let cache = SearchCache::new(1 << 20);
        cache.put(1, &p, v, Outcome::Filtered);
        assert!(
            cache.get(1, &p, &v, 10).is_none(),
            "its ctime is seconds old: racy"
        );
    }

    #[test]
    fn an_entry_answers_only_for_its_version_and_the_budget_holds() {
        let v = Version {
            dev: 1,
            ino: 2,
            size: 3,
            mtime: (1000, 0),
            ctime: (1000, 0),
        };
        let cache = SearchCache::new(64 * 1024);
        let p = Path::new("/x/a.rs");
        cache.put(7, p, v, Outcome::Filtered);
        assert!(matches!(cache.get(7, p, &v, 10), Some(Outcome::Filtered)));
        let newer = Version { size: 4, ..v };
        assert!(cache.get(7, p, &newer, 10).is_none());
        assert!(cache.get(8, p, &v, 10).is_none(), "another pattern");
        for i in 0..10_000 {
            cache.put(
                7,
                &PathBuf::from(format!("/x/{i}.rs")),
                v,
                Outcome::Filtered,
            );
        }
        assert!(cache.bytes() <= 64 * 1024, "{}", cache.bytes());
    }
}
