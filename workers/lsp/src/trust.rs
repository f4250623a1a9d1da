//! Workspace trust: whether a run may let language servers and checkers execute a root's
//! project code (build scripts, proc macros, plugins, project-local binaries). A root is
//! trusted when the operator's config lists it (or a directory above it), or when an approval
//! granted it to one run; everything else is untrusted and gets the restricted modes.
//!
//! A read call never runs the project code of a root its run does not trust: a server that executes
//! project code runs in its language's restricted mode there (the restricted settings are the
//! `initializationOptions` and the answer to every `workspace/configuration`, with the restricted
//! environment) or, without one, does not start (`policy_denied`); a checker that executes project
//! code is refused with `policy_denied` (`checker.rs`); and no binary is taken from inside the
//! project (`locate.rs`). Trust comes from `[trust] roots` or from an approved `lsp trust` for one
//! run. Servers are keyed by mode, so a full-mode server is never shared with an untrusted run
//! (`servers.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::lock;

/// Why a root is (not) trusted for a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustedBy {
    /// `[trust] roots` lists this directory (the root or one above it).
    Config(PathBuf),
    /// An approval granted the root to this run.
    Approval(String),
    /// Neither: restricted mode.
    No,
}

impl TrustedBy {
    pub fn trusted(&self) -> bool {
        !matches!(self, TrustedBy::No)
    }

    /// The word `lsp status` and answers use.
    pub fn describe(&self) -> String {
        match self {
            TrustedBy::Config(dir) => {
                format!("trusted by config ([trust] roots: {})", dir.display())
            }
            TrustedBy::Approval(run) => format!("trusted by approval for run {run}"),
            TrustedBy::No => "untrusted".into(),
        }
    }
}

/// The trusted roots of the config and the grants of this daemon's life, by run.
#[derive(Debug, Default)]
pub struct Trust {
    roots: Vec<PathBuf>,
    grants: Mutex<BTreeMap<PathBuf, BTreeSet<String>>>,
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

impl Trust {
    /// `roots` from `[trust] roots`; each is compared by its real path.
    pub fn new(roots: &[PathBuf]) -> Self {
        Trust {
            roots: roots.iter().map(|r| canonical(r)).collect(),
            grants: Mutex::new(BTreeMap::new()),
        }
    }

    /// Whether `run` may run `root`'s project code, and why.
    pub fn check(&self, root: &Path, run: &str) -> TrustedBy {
        let root = canonical(root);
        if let Some(dir) = self.roots.iter().find(|r| root.starts_with(r)) {
            return TrustedBy::Config(dir.clone());
        }
        if lock(&self.grants)
            .get(&root)
            .is_some_and(|runs| runs.contains(run))
        {
            return TrustedBy::Approval(run.to_string());
        }
        TrustedBy::No
    }

    /// Trust `root` for `run` until the daemon ends; false when it was trusted already.
    pub fn grant(&self, root: &Path, run: &str) -> bool {
        lock(&self.grants)
            .entry(canonical(root))
            .or_default()
            .insert(run.to_string())
    }

    /// The runs an approval granted `root` to.
    pub fn granted_runs(&self, root: &Path) -> Vec<String> {
        lock(&self.grants)
            .get(&canonical(root))
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_covers_subdirectories_and_grants_are_per_run() {
        let dir = tempfile::tempdir().unwrap();
        let trusted = dir.path().join("trusted");
        let project = trusted.join("project");
        let other = dir.path().join("other");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let trust = Trust::new(std::slice::from_ref(&trusted));
        assert!(matches!(trust.check(&project, "a"), TrustedBy::Config(_)));
        assert_eq!(trust.check(&other, "a"), TrustedBy::No);
        // A sibling whose name merely starts with the trusted one is not under it.
        let sibling = dir.path().join("trusted-not");
        std::fs::create_dir_all(&sibling).unwrap();
        assert_eq!(trust.check(&sibling, "a"), TrustedBy::No);
        assert!(trust.grant(&other, "a"));
        assert!(!trust.grant(&other, "a"));
        assert_eq!(trust.check(&other, "a"), TrustedBy::Approval("a".into()));
        assert_eq!(trust.check(&other, "b"), TrustedBy::No);
        assert_eq!(trust.granted_runs(&other), vec!["a".to_string()]);
    }
}
