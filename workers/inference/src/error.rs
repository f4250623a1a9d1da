//! What the pool refuses or fails with, and its `ToolError` form (kind, message, hint).

use toolvisor_protocol::error::{ErrorKind, ToolError};

#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    #[error("no complete model {model:?} in the model store{}", list(have))]
    NotInStore { model: String, have: Vec<String> },
    #[error("{model:?} names several models of the store: {}", names.join(", "))]
    Ambiguous {
        model: String,
        /// The name that picks each one alone.
        names: Vec<String>,
    },
    #[error("{model:?} has no model file in the store, only {}", files.join(", "))]
    NoModelFile { model: String, files: Vec<String> },
    #[error("no server command for {format} models (model {model:?})")]
    NoCommand { model: String, format: String },
    #[error(
        "{model} is too_large for this machine: it needs about {need} bytes (its {weights} bytes of weights, the KV cache of the context and the runtime), the machine has {total} bytes in all and {available} available, and its accelerators do not make up the rest"
    )]
    TooLarge {
        model: String,
        weights: u64,
        need: u64,
        total: u64,
        available: u64,
    },
    #[error("alias {alias:?} already serves {model}")]
    AliasTaken { alias: String, model: String },
    #[error("alias {alias:?} is not usable: {why}")]
    BadAlias { alias: String, why: &'static str },
    #[error("{max} models are loaded already (inference.max_loaded), and {why}")]
    TooMany {
        max: usize,
        /// Why none of the loaded models could be unloaded to make room.
        why: String,
    },
    #[error("no model is loaded as {alias:?}")]
    NotLoaded { alias: String },
    #[error("{alias:?} ({model}) is not loaded: {why}")]
    Gone {
        alias: String,
        model: String,
        why: String,
    },
    #[error("the server of {alias:?} failed: {error}")]
    Failed { alias: String, error: String },
    #[error("the server of {alias:?} could not start: {error}")]
    Start { alias: String, error: String },
    #[error("the server of {alias:?} was not ready within {secs} s")]
    Timeout { alias: String, secs: u64 },
    #[error("the inference supervisor did not answer: {0}")]
    Supervisor(String),
    #[error("no way is known to start {program:?} for embeddings (model {model:?})")]
    NoEmbeddingArgs { model: String, program: String },
    #[error("the embeddings of {alias:?} failed: {error}")]
    Embeddings { alias: String, error: String },
    /// The model's server answered, refusing what it was sent (a text longer than its
    /// context, most often).
    #[error("the embedding model {alias:?} refused the text: {error}")]
    EmbeddingsRefused { alias: String, error: String },
}

fn list(have: &[String]) -> String {
    if have.is_empty() {
        " (the store has none)".into()
    } else {
        format!(" (the store has: {})", have.join(", "))
    }
}

impl From<InferenceError> for ToolError {
    fn from(e: InferenceError) -> ToolError {
        let message = e.to_string();
        let (kind, hint) = match &e {
            InferenceError::NotInStore { .. } => (
                ErrorKind::NotFound,
                "list_models shows the store; download_model fetches a model".to_string(),
            ),
            InferenceError::Ambiguous { names, .. } => (
                ErrorKind::InvalidArgs,
                format!(
                    "name one of them as listed, e.g. `{}` (`owner/name[@revision][:variant]`; list_models gives each model's `name`)",
                    names.first().map_or("owner/name@revision:variant", String::as_str)
                ),
            ),
            InferenceError::NoModelFile { .. } => (
                ErrorKind::NotAvailable,
                "a projector or another non-model GGUF is never loaded as the model: download_model the model's variant".to_string(),
            ),
            InferenceError::NoCommand { format, .. } => (
                ErrorKind::NotAvailable,
                format!(
                    "set `[inference.commands] {format} = [\"program\", \"--port\", \"{{port}}\", ...]` in the daemon's config"
                ),
            ),
            InferenceError::TooLarge { .. } => (
                ErrorKind::NotAvailable,
                "choose a smaller quantisation (search_huggingface_models shows the fit label of each), or free memory".to_string(),
            ),
            InferenceError::AliasTaken { .. } => (
                ErrorKind::Conflict,
                "give another alias, or unload_model the one in use first".to_string(),
            ),
            InferenceError::BadAlias { .. } => (
                ErrorKind::InvalidArgs,
                "use 1-64 letters, digits and - _ . : / @".to_string(),
            ),
            InferenceError::TooMany { .. } => (
                ErrorKind::Busy,
                "unload_model one (get_inference_status lists them)".to_string(),
            ),
            InferenceError::NotLoaded { .. } => (
                ErrorKind::NotFound,
                "get_inference_status lists the loaded models; load_model loads one".to_string(),
            ),
            InferenceError::Gone { alias, model, .. } => (
                ErrorKind::NotFound,
                format!("load_model {{\"model\": \"{model}\", \"alias\": \"{alias}\"}} loads it again; with [inference] on_demand = true a request does"),
            ),
            InferenceError::Failed { .. } => (
                ErrorKind::ResourceFailed,
                "the error holds the server's last stderr lines; unload_model it, fix the cause, and load_model again".to_string(),
            ),
            InferenceError::Start { .. } => (
                ErrorKind::ResourceFailed,
                "check `[inference.commands]` and that the server program is installed".to_string(),
            ),
            InferenceError::Timeout { .. } => (
                ErrorKind::Timeout,
                "get_inference_status shows whether it is still loading; raise inference.ready_timeout_s for large models".to_string(),
            ),
            InferenceError::NoEmbeddingArgs { .. } => (
                ErrorKind::NotAvailable,
                "set `[inference] embedding_args` to the server's flags that turn its embeddings endpoint on".to_string(),
            ),
            InferenceError::Embeddings { .. } => (
                ErrorKind::ResourceFailed,
                "get_inference_status shows the embedding model's server and its last output lines; check that [data] embedding_model is an embedding model".to_string(),
            ),
            InferenceError::EmbeddingsRefused { .. } => (
                ErrorKind::InvalidArgs,
                "the text is too long for the embedding model's context, or not text it takes: shorten it (get_inference_status shows the model's server and its last output lines)".to_string(),
            ),
            InferenceError::Supervisor(_) => (
                ErrorKind::ResourceFailed,
                "the daemon's inference supervisor is gone; restart the daemon".to_string(),
            ),
        };
        ToolError::new(kind, message, hint)
    }
}
