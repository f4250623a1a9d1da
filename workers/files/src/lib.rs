//! In-process file and search tools (`read`, `ls`, `find`, `grep`, `write`, `edit`,
//! `apply_patch`) and the stored-result store behind `tool_result_read`, with secret masking.
//!
//! Everything here is synchronous and blocking: the daemon calls it from
//! `tokio::task::spawn_blocking`. Search runs on the ripgrep crates (`ignore`,
//! `grep-searcher`, `grep-regex`, `globset`) in-process; no external binary is needed.
//!
//! No `mmap`: it needs `unsafe`, and a file truncated under it is a SIGBUS. Reads and searches
//! stream through bounded buffers, within the figures in `docs/BENCHMARKS.md`.

#![forbid(unsafe_code)]

mod beneath;
pub mod edit;
pub mod error;
pub mod image;
pub mod journal;
pub mod list;
pub mod patch;
pub mod paths;
pub mod protect;
pub mod read;
mod real;
pub mod search;
pub mod secrets;
pub mod store;
pub mod temps;
pub mod text;
pub mod write;

pub use error::{Error, Result};
pub use paths::Scope;

/// One file a write-tier tool changed: what diagnostics on write wrap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Changed {
    /// The real (canonical) path written.
    pub path: std::path::PathBuf,
    /// The path as the caller sees it (relative to the workdir when inside it).
    pub display: String,
    pub status: ChangeStatus,
}

/// What a write did to a file (`created`, `modified`, `deleted`), as results say it.
pub use toolvisor_protocol::results::ChangeStatus;

/// Create `dir` (and its parents) 0700, or narrow one an older version left wider, and check
/// it is ours (`kit::private`): what the file tools keep under the state directory is ours
/// alone.
pub(crate) fn private_dir(dir: &std::path::Path, what: &'static str) -> std::io::Result<()> {
    toolvisor_kit::private::ensure_own_dir(dir, what).map_err(std::io::Error::other)
}

/// A cancellation flag shared between a call's future and the blocking work it started:
/// the future sets it when dropped, long loops check it.
#[derive(Clone, Debug, Default)]
pub struct Cancel(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Cancel {
    pub fn cancel(&self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Limits and switches of the file tools.
#[derive(Clone, Debug)]
pub struct FilesConfig {
    /// Read and write anywhere the daemon's user may, not only inside the workdir.
    pub allow_outside_workdir: bool,
    /// Directories readable and searchable besides the workdir (never written).
    pub read_roots: Vec<std::path::PathBuf>,
    pub read: read::ReadLimits,
    pub images: image::ImageLimits,
    pub search: search::SearchLimits,
    pub ls_max_entries: usize,
    /// Locations no file tool reaches, wherever they lie (`protect`): a sensitive data-hub
    /// collection's originals, and the hub's directory when it holds any.
    pub protected: Vec<std::path::PathBuf>,
}

impl Default for FilesConfig {
    fn default() -> Self {
        FilesConfig {
            allow_outside_workdir: false,
            read_roots: Vec::new(),
            read: read::ReadLimits::default(),
            images: image::ImageLimits::default(),
            search: search::SearchLimits::default(),
            ls_max_entries: 2000,
            protected: Vec::new(),
        }
    }
}

/// The file tools' state in the daemon: their configuration and the result store.
pub struct Files {
    pub config: FilesConfig,
    pub store: store::ResultStore,
    /// The crash journal of `apply_patch` (`<state_dir>/journal`); `None`: not journaled.
    pub journal: Option<std::sync::Arc<journal::Journal>>,
}

impl Files {
    /// The confinement of a call made from `workdir`.
    pub fn scope(&self, workdir: &std::path::Path) -> Result<Scope> {
        Scope::new(
            workdir,
            &self.config.read_roots,
            self.config.allow_outside_workdir,
        )
        .map(|s| s.protecting(&self.config.protected))
    }

    /// Roll back the writes a killed daemon left half done (see [`journal`]).
    pub fn roll_back_interrupted(&self) -> Vec<journal::Outcome> {
        match &self.journal {
            Some(j) => j.roll_back(&|root| self.scope(root)),
            None => Vec::new(),
        }
    }
}
