//! The data hub: the user's organised documents, converted from immutable originals into an
//! embedded SQLite store (FTS5 search, revisions, a trash), watched for changes, and reached by
//! tools only through the collections a run may see.

#![forbid(unsafe_code)]

pub mod convert;
mod dbfile;
pub mod embedder;
pub mod embedding;
pub mod hub;
pub mod original;
pub mod store;

pub use embedder::{EmbedFailure, Embedder};
pub use hub::{DataConfig, DataHub, HubError};
