//! One file's live progress inside a download job: its state, its bytes on disk and fetched in
//! this run, and its last error. The job shows it; a transfer reports to it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use toolvisor_protocol::results::DownloadState;

use crate::choose::Chosen;

/// One file's state inside a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileState {
    Queued,
    Downloading,
    Verifying,
    Done,
    Failed,
}

impl FileState {
    /// The state as results show it.
    pub(crate) fn shown(self) -> DownloadState {
        match self {
            FileState::Queued => DownloadState::Queued,
            FileState::Downloading => DownloadState::Downloading,
            FileState::Verifying => DownloadState::Verifying,
            FileState::Done => DownloadState::Done,
            FileState::Failed => DownloadState::Failed,
        }
    }
}

/// Live progress of one file.
pub struct FileProgress {
    pub(crate) file: Chosen,
    pub(crate) done: AtomicU64,
    pub(crate) state: Mutex<FileState>,
    pub(crate) error: Mutex<Option<String>>,
    /// Bytes fetched over the network in this run (the job's rate counts these).
    pub(crate) fetched: Arc<AtomicU64>,
}

impl FileProgress {
    pub(crate) fn set_state(&self, s: FileState) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }

    pub(crate) fn add(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.fetched.fetch_add(n, Ordering::Relaxed);
    }
}
