//! Model download jobs: the store, the file set of a variant, resumable verified transfers.
#![forbid(unsafe_code)]

pub mod accel;
pub mod choose;
pub mod error;
pub mod fit;
pub mod gguf;
pub mod gguf_header;
pub mod hub;
mod jobs;
pub mod listing;
mod partial;
mod progress;
pub mod ranged;
pub mod rate;
pub mod store;
mod transfer;

pub use error::DownloadError;
pub use jobs::{Downloads, DownloadsConfig, JobActor};
pub use rate::{human, id_order};

/// Lower-case hex of `bytes` (how a sha256 is written in listings and records).
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
