//! What gives the data hub's texts their vectors: the [`Embedder`] the daemon lends it (its
//! inference pool) and how a batch fails, the prefixes a model family was trained with, and the
//! embedding worker's last failure as a hybrid search shows it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use toolvisor_protocol::error::ToolError;

/// Why a batch of texts got no vectors.
#[derive(Clone, Debug)]
pub enum EmbedFailure {
    /// The model's server answered and refused the texts (one longer than its context, most
    /// often): the same texts fail again, others may not.
    Refused(ToolError),
    /// The model could not be asked (not in the store, its server failed or did not answer).
    Failed(ToolError),
}

impl From<EmbedFailure> for ToolError {
    fn from(f: EmbedFailure) -> ToolError {
        match f {
            EmbedFailure::Refused(e) | EmbedFailure::Failed(e) => e,
        }
    }
}

/// The vectors of a batch of texts, or why not.
pub type Embedded<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, EmbedFailure>> + Send + 'a>>;

/// What gives texts their vectors (the daemon's inference pool): one unit vector per text, in
/// order; an error names the model and what to do.
pub trait Embedder: Send + Sync + 'static {
    fn embed<'a>(&'a self, texts: &'a [String]) -> Embedded<'a>;
}

/// The instruction some embedding families were trained with before a search query.
const SEARCH_INSTRUCTION: &str = "Represent this sentence for searching relevant passages: ";

/// The prefixes (query, document) a model family was trained with, by the model's name
/// (`owner/name` as the store names it, any case): nomic-embed `search_query: ` and
/// `search_document: `; e5 `query: ` and `passage: `; bge v1.5 (English and Chinese),
/// mxbai-embed-large and snowflake-arctic-embed an instruction before queries only; none for
/// any other (all-MiniLM, gte, bge-m3 take plain text). `[data] query_prefix` and
/// `document_prefix` override them.
pub fn known_prefixes(model: &str) -> (&'static str, &'static str) {
    let name = model.to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or(&name);
    if name.contains("nomic-embed") {
        ("search_query: ", "search_document: ")
    } else if name.starts_with("e5-") || name.contains("-e5-") || name.contains("_e5-") {
        ("query: ", "passage: ")
    } else if (name.starts_with("bge-") && name.contains("v1.5") && !name.contains("m3"))
        || name.contains("mxbai-embed-large")
        || name.contains("snowflake-arctic-embed")
    {
        (SEARCH_INSTRUCTION, "")
    } else {
        ("", "")
    }
}

/// The worker's last failure, shown by a hybrid search that cannot be answered.
#[derive(Default)]
pub struct LastError(Mutex<Option<ToolError>>);

impl LastError {
    pub fn get(&self) -> Option<ToolError> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set(&self, e: Option<ToolError>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = e;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_families_get_their_prefixes_and_others_none() {
        assert_eq!(
            known_prefixes("nomic-ai/nomic-embed-text-v1.5-GGUF"),
            ("search_query: ", "search_document: ")
        );
        assert_eq!(
            known_prefixes("intfloat/multilingual-e5-small"),
            ("query: ", "passage: ")
        );
        assert_eq!(
            known_prefixes("intfloat/e5-base-v2"),
            ("query: ", "passage: ")
        );
        assert_eq!(
            known_prefixes("BAAI/bge-small-en-v1.5"),
            (SEARCH_INSTRUCTION, "")
        );
        assert_eq!(
            known_prefixes("mixedbread-ai/mxbai-embed-large-v1"),
            (SEARCH_INSTRUCTION, "")
        );
        for plain in [
            "BAAI/bge-m3",
            "sentence-transformers/all-MiniLM-L6-v2",
            "thenlper/gte-small",
            "tester/embed",
            "someone/shoe5-model",
        ] {
            assert_eq!(known_prefixes(plain), ("", ""), "{plain}");
        }
    }

    #[test]
    fn configured_prefixes_win_and_a_document_prefix_keys_the_vectors() {
        let mut c = crate::hub::DataConfig {
            embedding_model: Some("nomic-ai/nomic-embed-text-v1.5".into()),
            ..Default::default()
        };
        assert_eq!(
            c.vector_key().unwrap(),
            "nomic-ai/nomic-embed-text-v1.5 (document prefix \"search_document: \")"
        );
        c.query_prefix = Some(String::new());
        c.document_prefix = Some(String::new());
        assert_eq!(c.prefixes(), (String::new(), String::new()));
        assert_eq!(c.vector_key().unwrap(), "nomic-ai/nomic-embed-text-v1.5");
        c.embedding_model = None;
        assert!(c.vector_key().is_none());
    }
}
