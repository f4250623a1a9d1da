//! The embedding worker of hybrid search: with `[data] embedding_model` set, it cuts every
//! changed document of the collections that may be embedded (never a sensitive one) into
//! chunks and gets their vectors through the daemon's inference pool ([`Embedder`]), a batch
//! at a time, until none is left; then it waits for the next change. A failing model (not in
//! the store, a server that fails) is retried with a growing pause, and its error is what a
//! hybrid search that cannot be answered says.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use toolvisor_protocol::error::ToolError;

use crate::embedder::{EmbedFailure, Embedder};
use crate::hub::{DataHub, HubError};

/// Chunks embedded per request to the model.
pub const BATCH: usize = 16;
/// Documents cut into chunks per step.
const CUT_BATCH: usize = 64;
/// How often the worker looks for changes when nothing told it.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// The pause after a failure, doubled up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(2);
const RETRY_MAX: Duration = Duration::from_secs(60);

impl DataHub {
    /// Start the embedding worker (once, after the inference pool is up); nothing without
    /// `[data] embedding_model`. It ends with the hub.
    pub fn start_embeddings(self: &Arc<Self>, embedder: Arc<dyn Embedder>) {
        let Some(model) = self.config().vector_key() else {
            return;
        };
        if !self.config().enabled() {
            return;
        }
        if self.embedder.set(embedder.clone()).is_err() {
            return;
        }
        let hub = Arc::downgrade(self);
        let task = tokio::spawn(async move {
            let mut pause = RETRY_FIRST;
            // The chunks of collections no longer embedded are dropped once, when the store
            // first serves (the config does not change while the daemon runs).
            let mut forgotten = false;
            loop {
                let Some(hub) = hub.upgrade() else { return };
                let step = hub.embed_step(&*embedder, &model, &mut forgotten).await;
                let wake = hub.shared_changes();
                let errors = hub.embed_error.clone();
                drop(hub);
                match step {
                    // More to do: at once.
                    Ok(true) => {
                        errors.set(None);
                        pause = RETRY_FIRST;
                    }
                    Ok(false) => {
                        errors.set(None);
                        pause = RETRY_FIRST;
                        let _ = tokio::time::timeout(IDLE_POLL, wake.notified()).await;
                    }
                    Err(Step::NotYet) => tokio::time::sleep(Duration::from_millis(200)).await,
                    Err(Step::Failed(e)) => {
                        tracing::warn!(model, error = %e, retry_s = pause.as_secs(), "data hub: embedding failed");
                        errors.set(Some(e));
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(RETRY_MAX);
                    }
                }
            }
        });
        *self.embed_task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
    }

    /// One step: cut changed documents, else embed one batch of chunks. Whether there may be
    /// more to do at once.
    async fn embed_step(
        &self,
        embedder: &dyn Embedder,
        model: &str,
        forgotten: &mut bool,
    ) -> Result<bool, Step> {
        let embeddable = self.config().embeddable();
        let reach = embeddable.clone();
        let forget = !*forgotten;
        let cut = self
            .with_store(move |s| {
                if forget {
                    s.forget_chunks_outside(&reach)?;
                }
                s.rechunk_changed(&reach, CUT_BATCH)
            })
            .await
            .map_err(Step::from)?;
        *forgotten = true;
        if cut > 0 {
            return Ok(true);
        }
        let (reach, m) = (embeddable.clone(), model.to_string());
        let batch = self
            .with_store(move |s| s.chunks_to_embed(&reach, &m, BATCH))
            .await
            .map_err(Step::from)?;
        if batch.is_empty() {
            return Ok(false);
        }
        let (_, prefix) = self.config().prefixes();
        let texts: Vec<String> = batch.iter().map(|(_, t)| format!("{prefix}{t}")).collect();
        let ids: Vec<i64> = batch.into_iter().map(|(id, _)| id).collect();
        let (pairs, skipped) = match embedder.embed(&texts).await {
            Ok(vectors) => (ids.into_iter().zip(vectors).collect(), Vec::new()),
            Err(EmbedFailure::Failed(e)) => return Err(Step::Failed(e)),
            Err(EmbedFailure::Refused(_)) => one_by_one(embedder, &ids, &texts).await?,
        };
        if let Some((_, why)) = skipped.first() {
            tracing::warn!(model, chunks = skipped.len(), error = %why, "data hub: the embedding model refused chunks; they are found by keyword only");
            self.skip_reason.set(Some(why.clone()));
        }
        let skipped: Vec<i64> = skipped.into_iter().map(|(id, _)| id).collect();
        let m = model.to_string();
        let n = pairs.len();
        self.with_store(move |s| {
            s.put_vectors(&m, &pairs)?;
            s.put_skipped(&m, &skipped)
        })
        .await
        .map_err(Step::from)?;
        self.embedded.fetch_add(n as u64, Ordering::Relaxed);
        Ok(true)
    }
}

/// A batch the model refused, asked for one text at a time: the vectors it gives, and the
/// chunks it refuses alone (with why). When it refuses every one, it is asked for a plain
/// word: a model that refuses that too is failing, not refusing texts, and nothing is
/// skipped.
async fn one_by_one(
    embedder: &dyn Embedder,
    ids: &[i64],
    texts: &[String],
) -> Result<(Vec<(i64, Vec<f32>)>, Vec<(i64, ToolError)>), Step> {
    let (mut pairs, mut refused) = (Vec::new(), Vec::new());
    for (id, text) in ids.iter().zip(texts) {
        match embedder.embed(std::slice::from_ref(text)).await {
            Ok(mut v) => match v.pop() {
                Some(v) => pairs.push((*id, v)),
                None => return Err(Step::Failed(no_vector())),
            },
            Err(EmbedFailure::Refused(e)) => refused.push((*id, e)),
            Err(EmbedFailure::Failed(e)) => return Err(Step::Failed(e)),
        }
    }
    if pairs.is_empty() {
        embedder
            .embed(&["ok".to_string()])
            .await
            .map_err(|e| Step::Failed(e.into()))?;
    }
    Ok((pairs, refused))
}

fn no_vector() -> ToolError {
    ToolError::new(
        toolvisor_protocol::error::ErrorKind::ResourceFailed,
        "the embedding model gave a text no vector",
        "get_inference_status shows the embedding model's server; check that [data] embedding_model is an embedding model",
    )
}

enum Step {
    /// The store is not serving yet (its first conversion).
    NotYet,
    Failed(ToolError),
}

impl From<HubError> for Step {
    fn from(e: HubError) -> Step {
        match e {
            HubError::NotReady(_) => Step::NotYet,
            HubError::Failed(m) => Step::Failed(store_failed(m)),
            HubError::Data(e) => Step::Failed(store_failed(e.to_string())),
        }
    }
}

fn store_failed(m: String) -> ToolError {
    ToolError::new(
        toolvisor_protocol::error::ErrorKind::ResourceFailed,
        format!("the data hub's store: {m}"),
        "`toolvisor status` shows the data hub's state",
    )
}
