//! The files a server asked to be told about (`client/registerCapability` of
//! `workspace/didChangeWatchedFiles`): its watchers' glob patterns (a string matched against
//! the absolute path, or a `RelativePattern` under a base URI) and kinds, by registration id.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use crate::uri;
use crate::watch::Change;

struct FileWatcher {
    base: Option<PathBuf>,
    glob: GlobMatcher,
    /// `WatchKind` bits: 1 create, 2 change, 4 delete.
    kind: u64,
}

impl FileWatcher {
    fn parse(w: &Value) -> Option<FileWatcher> {
        let (base, pattern) = match w.get("globPattern")? {
            Value::String(p) => (None, p.clone()),
            rel => {
                let base = match rel.get("baseUri")? {
                    Value::String(u) => u.clone(),
                    folder => folder.get("uri")?.as_str()?.to_string(),
                };
                (
                    Some(uri::to_path(&base)?),
                    rel.get("pattern")?.as_str()?.to_string(),
                )
            }
        };
        let glob = GlobBuilder::new(&pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| tracing::debug!(pattern, error = %e, "a watcher's glob does not parse"))
            .ok()?
            .compile_matcher();
        Some(FileWatcher {
            base,
            glob,
            kind: w.get("kind").and_then(Value::as_u64).unwrap_or(7),
        })
    }

    fn matches(&self, path: &Path, change: Change) -> bool {
        let bit = match change {
            Change::Created => 1,
            Change::Changed => 2,
            Change::Deleted => 4,
        };
        if self.kind & bit == 0 {
            return false;
        }
        match &self.base {
            Some(base) => path
                .strip_prefix(base)
                .is_ok_and(|rel| self.glob.is_match(rel)),
            None => self.glob.is_match(path),
        }
    }
}

/// The watchers of one server incarnation, by registration id.
#[derive(Default)]
pub struct FileWatchers {
    by_id: HashMap<String, Vec<FileWatcher>>,
}

impl FileWatchers {
    /// Record registration `id` (its `registerOptions.watchers`).
    pub fn register(&mut self, id: &str, options: Option<&Value>) {
        let watchers: Vec<FileWatcher> = options
            .and_then(|o| o.get("watchers"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(FileWatcher::parse)
            .collect();
        tracing::debug!(id, watchers = watchers.len(), options = ?options, "server watches files");
        self.by_id.insert(id.to_string(), watchers);
    }

    pub fn unregister(&mut self, id: &str) {
        self.by_id.remove(id);
    }

    pub fn clear(&mut self) {
        self.by_id.clear();
    }

    /// Whether the server asked to hear of `change` to `path`.
    pub fn matches(&self, path: &Path, change: Change) -> bool {
        self.by_id
            .values()
            .flatten()
            .any(|w| w.matches(path, change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_globs_match_absolute_paths_and_relative_ones_their_base() {
        let mut w = FileWatchers::default();
        w.register(
            "pyright",
            Some(&json!({"watchers": [{"globPattern": "**/*.{py,pyi}", "kind": 7}]})),
        );
        assert!(w.matches(Path::new("/src/p/a/b.py"), Change::Created));
        assert!(!w.matches(Path::new("/src/p/a/b.rs"), Change::Created));
        w.register(
            "ts",
            Some(&json!({"watchers": [{"globPattern": {"baseUri": "file:///src/web", "pattern": "src/*.ts"}, "kind": 4}]})),
        );
        assert!(w.matches(Path::new("/src/web/src/x.ts"), Change::Deleted));
        assert!(
            !w.matches(Path::new("/src/web/src/x.ts"), Change::Changed),
            "kind 4 is deletions only"
        );
        assert!(
            !w.matches(Path::new("/src/web/src/deep/x.ts"), Change::Deleted),
            "`*` stays in one directory"
        );
        assert!(!w.matches(Path::new("/elsewhere/src/x.ts"), Change::Deleted));
        w.register(
            "folder",
            Some(&json!({"watchers": [{"globPattern": {"baseUri": {"uri": "file:///r", "name": "r"}, "pattern": "**/Cargo.toml"}}]})),
        );
        assert!(w.matches(Path::new("/r/crates/a/Cargo.toml"), Change::Changed));
        w.unregister("pyright");
        assert!(!w.matches(Path::new("/src/p/a/b.py"), Change::Created));
    }
}
