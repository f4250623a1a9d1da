//! How a model's server is started for embeddings: the flags that turn its embeddings
//! endpoint on, the context it starts with, and which of a model's poolings it can answer with.

use crate::config::InferenceConfig;

/// The flags that turn `template`'s server into an embeddings server: the configured ones,
/// else those of llama-server and llama-cpp-python; `None` for another program.
///
/// llama-server embeds a text in one physical batch, whose default (512 tokens) is smaller
/// than most embedding models' context: its batch and micro-batch are set to the context the
/// server starts with (`{context}`, the model's own for an embeddings server), so any text
/// the model can take fits. Its pooling is the model's own when the GGUF declares one
/// (`pooling_declared`: bge's CLS, nomic's mean), else mean.
pub fn embedding_args(
    template: &[String],
    config: &InferenceConfig,
    pooling_declared: bool,
) -> Option<Vec<String>> {
    if let Some(args) = &config.embedding_args {
        return Some(args.clone());
    }
    let program = template.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    let flags: Vec<&str> = if program == Some("llama-server") {
        let mut f = vec!["--embeddings"];
        if !pooling_declared {
            f.extend(["--pooling", "mean"]);
        }
        f.extend(["--batch-size", "{context}", "--ubatch-size", "{context}"]);
        f
    } else if template.iter().any(|a| a == "llama_cpp.server") {
        vec!["--embedding", "true"]
    } else {
        return None;
    };
    Some(flags.iter().map(|f| f.to_string()).collect())
}

/// The context an embeddings server starts with when none is asked: the one the model was
/// trained for (its GGUF header), at most [`EMBED_CONTEXT_MAX`], else `fallback`.
pub fn embedding_context(trained: Option<u64>, fallback: u32) -> u32 {
    match trained {
        Some(n) if n > 0 => n.min(EMBED_CONTEXT_MAX as u64) as u32,
        _ => fallback,
    }
}

/// The largest context (and batch) an embeddings server is started with: texts longer than
/// this are refused by the model and skipped (the data hub's chunks are far shorter).
pub const EMBED_CONTEXT_MAX: u32 = 8192;

/// Whether a GGUF's `pooling_type` is one llama-server's embeddings endpoint can answer with
/// (mean, CLS, last); none (0) or rank (4) are not.
pub fn pooling_usable(pooling: Option<u64>) -> bool {
    matches!(pooling, Some(1..=3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_follow_the_server_program_unless_configured() {
        let c = InferenceConfig::default();
        let server = crate::config::llama_server();
        // The batch is the server's context (a text the model takes fits one batch); mean
        // pooling only when the model declares none.
        assert_eq!(
            embedding_args(&server, &c, false).unwrap(),
            [
                "--embeddings",
                "--pooling",
                "mean",
                "--batch-size",
                "{context}",
                "--ubatch-size",
                "{context}"
            ]
        );
        assert_eq!(
            embedding_args(&server, &c, true).unwrap(),
            [
                "--embeddings",
                "--batch-size",
                "{context}",
                "--ubatch-size",
                "{context}"
            ]
        );
        let python = crate::config::llama_cpp_python();
        assert_eq!(
            embedding_args(&python, &c, false).unwrap(),
            ["--embedding", "true"]
        );
        assert!(embedding_args(&["other".to_string()], &c, false).is_none());
        let set = InferenceConfig {
            embedding_args: Some(vec!["--embed".into()]),
            ..Default::default()
        };
        assert_eq!(
            embedding_args(&["other".to_string()], &set, true).unwrap(),
            ["--embed"]
        );
    }

    #[test]
    fn an_embeddings_server_gets_the_models_context_and_its_declared_pooling() {
        assert_eq!(embedding_context(Some(512), 2048), 512);
        assert_eq!(embedding_context(Some(131_072), 2048), EMBED_CONTEXT_MAX);
        assert_eq!(embedding_context(None, 2048), 2048);
        assert_eq!(embedding_context(Some(0), 2048), 2048);
        // bge's CLS (2) and nomic's mean (1) are used as declared; none (0), rank (4) and
        // an undeclared pooling get mean.
        assert!(pooling_usable(Some(2)) && pooling_usable(Some(1)));
        assert!(!pooling_usable(Some(0)) && !pooling_usable(Some(4)) && !pooling_usable(None));
    }
}
