//! The model tools' handlers (`download_model`, `list_downloads`, `cancel_download`,
//! `delete_model`, `list_models`, `search_huggingface_models`) and their declaration; the work is in
//! `toolvisor-downloads`. `download_model` answers once its job is registered (start, then
//! poll with `list_downloads`).

use std::sync::Arc;

use toolvisor_downloads::Downloads;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::results::{
    CancelDownloadResult, DeleteModelResult, DownloadModelResult, ListModelsResult, LoadState,
    SearchModelsResult,
};
use toolvisor_protocol::tools::{
    CancelDownloadArgs, DeleteModelArgs, DownloadModelArgs, ListDownloadsArgs, ListModelsArgs,
    SearchModelsArgs,
};

use super::{CallCtx, Services};

/// The download manager, or `not_available` when the model store could not be opened (the
/// model tools are then detached, so a call reaching here is a race with that).
fn manager<'a>(s: &'a Services, tool: &str) -> Result<&'a Arc<Downloads>, ToolError> {
    s.downloads.as_ref().ok_or_else(|| super::no_worker(tool))
}

async fn download_model(
    s: &Services,
    ctx: &CallCtx,
    a: DownloadModelArgs,
) -> Result<DownloadModelResult, ToolError> {
    let downloads = manager(s, "download_model")?;
    tracing::info!(conversation = ctx.conversation, call = ctx.id, repo = a.repo, revision = ?a.revision, variant = ?a.variant, glob = ?a.glob, "download_model");
    let (include, exclude) = a.globs();
    Ok(downloads
        .start(
            &a.repo,
            a.revision.as_deref(),
            a.variant.as_deref(),
            &include,
            &exclude,
        )
        .await?)
}

async fn cancel_download(
    s: &Services,
    ctx: &CallCtx,
    a: CancelDownloadArgs,
) -> Result<CancelDownloadResult, ToolError> {
    let downloads = manager(s, "cancel_download")?;
    tracing::info!(
        conversation = ctx.conversation,
        call = ctx.id,
        job = a.job_id,
        "cancel_download"
    );
    Ok(downloads.cancel(&a.job_id).await?)
}

/// `delete_model`: refused while the inference pool serves the model (unload it first) or a
/// download job of it runs; else its files go.
async fn delete_model(
    s: &Services,
    ctx: &CallCtx,
    a: DeleteModelArgs,
) -> Result<DeleteModelResult, ToolError> {
    let downloads = manager(s, "delete_model")?.clone();
    let (dir, manifest) = downloads.find_stored(&a.model)?;
    if let Some(pool) = &s.inference
        && let Some((alias, state)) = pool.load_state(&dir, &manifest.variant).await
        && !matches!(state, LoadState::Unloaded | LoadState::Failed)
    {
        return Err(ToolError::new(
            ErrorKind::Busy,
            format!("{} is {state} as {alias:?} in the inference pool", a.model),
            format!("unload_model {{\"alias\": \"{alias}\"}} first, then delete it"),
        ));
    }
    tracing::info!(
        conversation = ctx.conversation,
        call = ctx.id,
        model = a.model,
        "delete_model"
    );
    let answer = tokio::task::spawn_blocking(move || downloads.delete_stored(&dir, &manifest))
        .await
        .map_err(|e| {
            ToolError::new(
                ErrorKind::Internal,
                format!("delete_model: {e}"),
                "try again",
            )
        })??;
    Ok(answer)
}

/// The store's models, with their load state from the inference pool when it runs.
async fn list_models(s: &Services) -> Result<ListModelsResult, ToolError> {
    let models = manager(s, "list_models")?.models().await;
    Ok(match &s.inference {
        Some(pool) => super::inference::annotate_models(pool, models).await,
        None => models,
    })
}

async fn search(s: &Services, a: SearchModelsArgs) -> Result<SearchModelsResult, ToolError> {
    let limit = a.limit.unwrap_or(10).clamp(1, 50) as usize;
    Ok(manager(s, "search_huggingface_models")?
        .search(&a.query, limit)
        .await?)
}

/// The model tools' declarations. Attached when the daemon opened the model store; policy
/// can deny `download_model` and `search_huggingface_models` one by one (air-gapped
/// deployments), which hides them and leaves the rest working.
pub(crate) fn declare(attached: &super::spec::Attachment) -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec, follow};
    use serde_json::json;

    let tools = vec![
        ToolSpec::new(
            "download_model",
            Tier::Write,
            "downloads",
            "Download a model variant from the hub to the store in the background; poll list_downloads.",
            |s, ctx, a| Box::pin(download_model(s, ctx, a)),
        )
        .additive().idempotent(true).open_world()
        .approval(Approval::Always)
        .follows(follow(
            "job_id",
            ("list_downloads", json!({"job_id": "{id}"})),
            ("cancel_download", json!({"job_id": "{id}"})),
            Some("jobs"),
            &["done", "failed", "cancelled"],
            "done",
        )),
        ToolSpec::new(
            "list_downloads",
            Tier::Read,
            "downloads",
            "Download jobs: progress, rate, ETA, state, error.",
            |s, _, a: ListDownloadsArgs| Box::pin(async move { Ok(manager(s, "list_downloads")?.list(a.job_id.as_deref())?) }),
        ),
        ToolSpec::new(
            "cancel_download",
            Tier::Write,
            "downloads",
            "Stop a download job; download_model resumes it.",
            |s, ctx, a| Box::pin(cancel_download(s, ctx, a)),
        )
        .idempotent(true)
        .approval(Approval::Always),
        ToolSpec::new(
            "list_models",
            Tier::Read,
            "downloads",
            "Models in the local store: size, completeness, fit here.",
            |s, _, _: ListModelsArgs| Box::pin(list_models(s)),
        ),
        ToolSpec::new(
            "delete_model",
            Tier::Write,
            "downloads",
            "Remove a stored model from the store.",
            |s, ctx, a| Box::pin(delete_model(s, ctx, a)),
        )
        .approval(Approval::Always),
        ToolSpec::new(
            "search_huggingface_models",
            Tier::Read,
            "downloads",
            "Search the model hub: variants, sizes, fit here.",
            |s, _, a| Box::pin(search(s, a)),
        )
        .open_world(),
    ];
    tools
        .into_iter()
        .map(|t| t.attachment(attached.clone()))
        .collect()
}
