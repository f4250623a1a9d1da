//! Locations no file tool reaches, wherever they lie: the originals of a sensitive data-hub
//! collection and the hub's own files (its database and notes hold what was made from them).
//! `Scope::resolve` refuses a path in one (`Error::Protected`), and every walk (`grep`,
//! `find`, the structural tools) and listing (`ls`) leaves them out, counting what it left.
//!
//! The locations are `FilesConfig::protected`, filled by `supervisor/src/tools/files.rs`: the
//! daemon's state directory always, and, once a collection is sensitive, every sensitive
//! collection's folder of originals and the hub's directory. `Scope::resolve` refuses them
//! (`Error::Protected`, `out_of_scope`) before any I/O, wherever they lie; `Scope::open_found` and
//! `found_beneath` refuse them; every walker (`find`, `grep`, the structural walk) installs
//! `walk_filter`, so nothing below one is listed or read; `ls` leaves them out. No refusal or note
//! names the collection or the real location (`skipped_note`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The protected locations, as real paths (symlinks of their existing part resolved).
#[derive(Clone, Debug, Default)]
pub struct Protected(Arc<Vec<PathBuf>>);

impl Protected {
    /// A relative path counts from the daemon's working directory (as the daemon itself
    /// opens it); one that does not exist (yet) is kept where it would be, so a write cannot
    /// create it.
    pub fn new(paths: &[PathBuf]) -> Protected {
        let mut real: Vec<PathBuf> = paths
            .iter()
            .filter_map(|p| std::path::absolute(p).ok())
            .filter_map(|p| crate::real::real_path(&p).ok())
            .collect();
        real.sort();
        real.dedup();
        Protected(Arc::new(real))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the real path `real` is a protected location or lies beneath one.
    pub fn covers(&self, real: &Path) -> bool {
        self.0.iter().any(|p| real.starts_with(p))
    }

    /// A filter for a walk: false for an entry below the walk's start that is protected
    /// (the walk then neither yields nor descends into it), counted in `skipped`.
    pub fn walk_filter(
        &self,
        skipped: Arc<AtomicUsize>,
    ) -> impl Fn(&ignore::DirEntry) -> bool + Send + Sync + 'static {
        let me = self.clone();
        move |e| {
            if e.depth() > 0 && me.covers(e.path()) {
                skipped.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            true
        }
    }
}

/// The note a walk or listing adds when it left protected paths out: how many, and why,
/// never which.
pub fn skipped_note(n: usize) -> String {
    let what = if n == 1 { "path was" } else { "paths were" };
    format!(
        "{n} {what} left out: they lie in a location kept private (the daemon's state, a sensitive data-hub collection's originals or the hub's own files), which no tool reaches"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::paths::{Access, Scope};
    use crate::search::{FindRequest, GrepRequest, SearchLimits, Visibility};

    /// A workdir with a sensitive collection's folder `hr` in it (and a link to it), a
    /// folder beside it whose name starts the same, and an ordinary one.
    fn project() -> (tempfile::TempDir, Scope) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap().join("proj");
        for (path, text) in [
            ("hr/salaries.md", "# Salaries\nzebracorn budget\n"),
            ("hr/deep/.hidden.md", "zebracorn hidden\n"),
            ("hr2/open.md", "zebracorn is a word here\n"),
            ("docs/readme.md", "zebracorn in the open\n"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        std::os::unix::fs::symlink(root.join("hr"), root.join("to-hr")).unwrap();
        let scope = Scope::new(&root, &[], false)
            .unwrap()
            .protecting(&[root.join("hr")]);
        (d, scope)
    }

    #[test]
    fn every_path_into_a_protected_location_is_refused_without_showing_where_it_is() {
        let (_d, s) = project();
        for p in [
            "hr",
            "hr/salaries.md",
            "hr/new.md",
            "hr/deep/more/new.md",
            "to-hr/salaries.md",
            "docs/../hr/salaries.md",
        ] {
            for access in [Access::Read, Access::Write] {
                let e = s.resolve(p, access).unwrap_err();
                assert!(matches!(e, Error::Protected { .. }), "{p}: {e}");
                let t = e.to_tool_error("read");
                assert_eq!(t.kind, toolvisor_protocol::ErrorKind::OutOfScope, "{p}");
                assert!(t.message.contains(p), "names the path as given: {t}");
                assert!(
                    !t.message.contains(&s.root().display().to_string()),
                    "never the real location: {t}"
                );
            }
        }
        assert!(s.resolve("hr2/open.md", Access::Read).is_ok());
        assert!(s.resolve(".", Access::Read).is_ok());
        let inside = s.root().join("hr/salaries.md");
        assert!(!s.found_beneath(&inside, None));
        assert!(s.open_found(&inside).is_err());

        // Outside the workdir it is refused as outside; opened up, as protected still.
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("x.md"), "x").unwrap();
        let x = out.path().join("x.md").display().to_string();
        let closed = Scope::new(s.root(), &[], false)
            .unwrap()
            .protecting(&[out.path().to_path_buf()]);
        assert!(matches!(
            closed.resolve(&x, Access::Read),
            Err(Error::Outside { .. })
        ));
        let open = Scope::new(s.root(), &[], true)
            .unwrap()
            .protecting(&[out.path().to_path_buf()]);
        assert!(matches!(
            open.resolve(&x, Access::Read),
            Err(Error::Protected { .. })
        ));
    }

    #[test]
    fn walks_and_listings_leave_a_protected_location_out_and_count_it() {
        let (_d, s) = project();
        let all = Visibility {
            hidden: true,
            ignored: true,
        };
        let req = GrepRequest {
            pattern: "zebracorn",
            path: None,
            glob: None,
            case: Default::default(),
            context: 0,
            max_results: 100,
            visibility: all,
            multiline: false,
        };
        let g =
            crate::search::grep(&s, &req, &SearchLimits::default(), Default::default()).unwrap();
        assert_eq!(g.files_with_matches, 2, "{}", g.output);
        assert!(!g.output.contains("hr/"), "{}", g.output);
        assert!(g.output.contains("hr2/open.md"), "{}", g.output);
        assert_eq!(g.skipped_protected, 1, "the folder, not descended into");
        assert!(g.notes.iter().any(|n| n.contains("1 path was left out")));

        let req = FindRequest {
            pattern: "*",
            path: None,
            visibility: all,
            max_results: 100,
        };
        let f =
            crate::search::find(&s, &req, &SearchLimits::default(), Default::default()).unwrap();
        assert!(
            f.paths.iter().all(|p| p != "hr/" && !p.starts_with("hr/")),
            "{:?}",
            f.paths
        );
        assert!(
            f.paths.contains(&"hr2/open.md".to_string()),
            "{:?}",
            f.paths
        );
        assert_eq!(f.skipped_protected, 1);

        let l = crate::list::ls(&s, None, 100).unwrap();
        let names: Vec<_> = l.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["docs/", "hr2/", "to-hr"]);
        assert_eq!((l.total, l.skipped_protected), (3, 1));
        assert!(matches!(
            crate::list::ls(&s, Some("to-hr"), 100),
            Err(Error::Protected { .. })
        ));
    }

    #[test]
    fn covers_the_location_and_what_is_beneath_it_through_symlinks_and_before_it_exists() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(real.join("proj/hr")).unwrap();
        std::os::unix::fs::symlink(real.join("proj/hr"), real.join("hr-link")).unwrap();
        let p = Protected::new(&[real.join("hr-link"), real.join("proj/later/new")]);
        assert!(p.covers(&real.join("proj/hr")));
        assert!(p.covers(&real.join("proj/hr/a.md")));
        assert!(p.covers(&real.join("proj/later/new/b.md")));
        assert!(
            !p.covers(&real.join("proj/hr2/a.md")),
            "a prefix of a name is not beneath"
        );
        assert!(!p.covers(&real.join("proj")));
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        assert!(Protected::new(&[PathBuf::from("relative")]).covers(&cwd.join("relative/x")));
        assert!(skipped_note(1).starts_with("1 path was left out"));
        assert!(skipped_note(3).starts_with("3 paths were left out"));
    }
}
