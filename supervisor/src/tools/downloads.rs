//! The model tools' handlers (`download_model`, `list_downloads`, `cancel_download`,
//! `list_models`, `search_huggingface_models`) and their declaration; the work is in
//! `toolvisor-downloads`. `download_model` answers once its job is registered (start, then
//! poll with `list_downloads`).

use std::sync::Arc;

use serde_json::Value as Json;
use toolvisor_downloads::Downloads;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::tools::{
    CancelDownloadArgs, DownloadModelArgs, ListDownloadsArgs, ListModelsArgs, SearchModelsArgs,
};

use super::{CallCtx, parse};

/// The model tools need only the download manager.
pub async fn run(
    downloads: &Arc<Downloads>,
    ctx: &CallCtx,
    tool: &str,
    args: Json,
) -> Result<Json, ToolError> {
    match tool {
        "download_model" => {
            let a: DownloadModelArgs = parse(tool, args)?;
            tracing::info!(conversation = ctx.conversation, call = ctx.id, repo = a.repo, revision = ?a.revision, variant = ?a.variant, "download_model");
            Ok(downloads
                .start(&a.repo, a.revision.as_deref(), a.variant.as_deref())
                .await?)
        }
        "list_downloads" => {
            let a: ListDownloadsArgs = parse(tool, args)?;
            Ok(downloads.list(a.job_id.as_deref())?)
        }
        "cancel_download" => {
            let a: CancelDownloadArgs = parse(tool, args)?;
            tracing::info!(
                conversation = ctx.conversation,
                call = ctx.id,
                job = a.job_id,
                "cancel_download"
            );
            Ok(downloads.cancel(&a.job_id).await?)
        }
        "list_models" => {
            let _: ListModelsArgs = parse(tool, args)?;
            Ok(downloads.models())
        }
        "search_huggingface_models" => {
            let a: SearchModelsArgs = parse(tool, args)?;
            let limit = a.limit.unwrap_or(10).clamp(1, 50) as usize;
            Ok(downloads.search(&a.query, limit).await?)
        }
        _ => Err(super::no_worker(tool)),
    }
}

/// The model tools' declarations. Attached when the daemon opened the model store; policy
/// can deny `download_model` and `search_huggingface_models` one by one (air-gapped
/// deployments), which hides them and leaves the rest working.
pub(crate) fn declare() -> Vec<crate::registry::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use crate::registry::{Approval, ToolSpec};

    vec![
        ToolSpec::new::<DownloadModelArgs>(
            "download_model",
            Tier::Write,
            "downloads",
            "Download a model from the Hugging Face-compatible hub into the local model store: one call registers the chosen variant's whole file set (every shard of a split model; config and tokenizer with safetensors; one GGUF quantisation) as one background job and returns at once with the job id and the files; poll list_downloads. Resumes partial files; verifies sha256. Needs the network.",
        ).additive().idempotent(true).open_world()
        .approval(Approval::Always),
        ToolSpec::new::<ListDownloadsArgs>(
            "list_downloads",
            Tier::Read,
            "downloads",
            "Download jobs in flight and recent: per job and per file bytes done/total, rate, ETA, state (queued|downloading|verifying|done|failed|cancelled) and error.",
        ),
        ToolSpec::new::<CancelDownloadArgs>(
            "cancel_download",
            Tier::Write,
            "downloads",
            "Stop a download job; its partial files are kept, and download_model with the same repo and variant resumes them.",
        ).idempotent(true)
        .approval(Approval::Always),
        ToolSpec::new::<ListModelsArgs>(
            "list_models",
            Tier::Read,
            "downloads",
            "Models in the local store: size, files, whether complete, and a fit label for this machine (fits|tight|too_large) from its memory. Check here before searching.",
        ),
        ToolSpec::new::<SearchModelsArgs>(
            "search_huggingface_models",
            Tier::Read,
            "downloads",
            "Search the Hugging Face-compatible hub for downloadable models; each candidate's variants come with their size and this machine's fit label (fits|tight|too_large). Needs the network.",
        ).open_world(),
    ]
}
