//! The local inference pool: one supervised OpenAI-compatible server per loaded model, the
//! routing endpoint in front of them, and the token usage book.
#![forbid(unsafe_code)]

pub mod config;
pub mod embed;
pub mod embedding_server;
pub mod endpoint;
pub mod error;
pub mod pool;
pub mod resolve;
pub mod usage;

pub use config::InferenceConfig;
pub use error::InferenceError;
pub use pool::{Inference, InferenceArgs};
