//! The per-run diagnostics ledger: which diagnostics a run has already been told about.
//!
//! Keyed by (severity, code, message) — position deliberately excluded, so a diagnostic that
//! merely moved is not news — and scoped per (run, file): the same message in another file
//! is another diagnostic. After every sync the file's entry becomes exactly what the server
//! reports now, so a diagnostic that was fixed and comes back is new again.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// (severity, code, message).
pub type Key = (u8, String, String);

#[derive(Default)]
pub struct Ledger {
    seen: Mutex<HashMap<(String, PathBuf), BTreeSet<Key>>>,
}

impl Ledger {
    /// Record the file's current diagnostics for `run`; return the indices of those that are new.
    pub fn fold(&self, run: &str, path: &Path, current: &[Key]) -> Vec<usize> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let entry = seen
            .entry((run.to_string(), path.to_path_buf()))
            .or_default();
        let mut fresh = Vec::new();
        let mut reported_now = BTreeSet::new();
        for (i, key) in current.iter().enumerate() {
            if !entry.contains(key) && !reported_now.contains(key) {
                fresh.push(i);
            }
            reported_now.insert(key.clone());
        }
        *entry = reported_now;
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(msg: &str) -> Key {
        (1, "E1".into(), msg.into())
    }

    #[test]
    fn moved_is_old_fixed_and_back_is_new() {
        let l = Ledger::default();
        let p = Path::new("/a.py");
        assert_eq!(l.fold("r", p, &[k("undefined x")]), vec![0]);
        // Same diagnostic elsewhere in the file (position is not part of the key).
        assert_eq!(l.fold("r", p, &[k("undefined x")]), Vec::<usize>::new());
        // Another run, another file: news there.
        assert_eq!(l.fold("r2", p, &[k("undefined x")]), vec![0]);
        assert_eq!(
            l.fold("r", Path::new("/b.py"), &[k("undefined x")]),
            vec![0]
        );
        // Fixed, then back.
        assert_eq!(l.fold("r", p, &[]), Vec::<usize>::new());
        assert_eq!(
            l.fold("r", p, &[k("undefined x"), k("undefined y")]),
            vec![0, 1]
        );
    }
}
