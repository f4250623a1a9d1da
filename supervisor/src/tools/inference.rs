//! The inference pool's tools (`load_model`, `unload_model`, `get_inference_status`,
//! `get_token_usage_stats`) and their declaration; the pool, its servers and the routing
//! endpoint are in `toolvisor-inference`. `load_model` answers once the server is spawned,
//! with state `loading` (start, then poll `get_inference_status`).

use std::sync::Arc;

use toolvisor_inference::Inference;
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::results::{ListModelsResult, LoadModelResult, UnloadModelResult};
use toolvisor_protocol::tools::{
    InferenceStatusArgs, LoadModelArgs, TokenUsageArgs, UnloadModelArgs,
};

use super::{CallCtx, Services};

/// The inference pool, or `not_available` when it could not be opened (its tools are then
/// detached).
fn pool<'a>(s: &'a Services, tool: &str) -> Result<&'a Arc<Inference>, ToolError> {
    s.inference.as_ref().ok_or_else(|| super::no_worker(tool))
}

async fn load_model(
    s: &Services,
    ctx: &CallCtx,
    a: LoadModelArgs,
) -> Result<LoadModelResult, ToolError> {
    let pool = pool(s, "load_model")?;
    tracing::info!(conversation = ctx.conversation, call = ctx.id, model = a.model, alias = ?a.alias, context = ?a.context, "load_model");
    Ok(pool
        .load(&a.model, a.alias.as_deref(), a.context, a.pin == Some(true))
        .await?)
}

async fn unload_model(
    s: &Services,
    ctx: &CallCtx,
    a: UnloadModelArgs,
) -> Result<UnloadModelResult, ToolError> {
    let pool = pool(s, "unload_model")?;
    tracing::info!(
        conversation = ctx.conversation,
        call = ctx.id,
        alias = a.alias,
        "unload_model"
    );
    Ok(pool.unload(&a.alias).await?)
}

/// Fill `list_models`' `load_state` (and `alias`) from the pool.
pub async fn annotate_models(pool: &Inference, mut models: ListModelsResult) -> ListModelsResult {
    for m in &mut models.models {
        let dir = std::path::PathBuf::from(&m.path);
        if let Some((alias, state)) = pool.load_state(&dir, &m.variant).await {
            m.load_state = state;
            m.alias = Some(alias);
        }
    }
    models
}

/// The inference tools' declarations. Attached when the daemon opened the pool.
pub(crate) fn declare(attached: &super::spec::Attachment) -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    let tools = vec![
        ToolSpec::new(
            "load_model",
            Tier::Write,
            "inference",
            "Serve a stored model on the OpenAI-compatible endpoint; poll get_inference_status until ready.",
            |s, ctx, a| Box::pin(load_model(s, ctx, a)),
        )
        .additive().idempotent(true)
        .approval(Approval::Always)
        .follows(super::spec::follow(
            "alias",
            ("get_inference_status", serde_json::json!({})),
            ("unload_model", serde_json::json!({"alias": "{id}"})),
            Some("models"),
            &["ready", "failed"],
            "ready",
        )),
        ToolSpec::new(
            "unload_model",
            Tier::Write,
            "inference",
            "Stop a loaded model's server.",
            |s, ctx, a| Box::pin(unload_model(s, ctx, a)),
        )
        .idempotent(true)
        .approval(Approval::Always),
        ToolSpec::new(
            "get_inference_status",
            Tier::Read,
            "inference",
            "Loaded models (alias, state, memory, last error) and the endpoint address.",
            |s, _, _: InferenceStatusArgs| Box::pin(async move { Ok(pool(s, "get_inference_status")?.status().await) }),
        ),
        ToolSpec::new(
            "get_token_usage_stats",
            Tier::Read,
            "inference",
            "Tokens through the inference endpoint, per day and model.",
            |s, _, a: TokenUsageArgs| Box::pin(async move { Ok(pool(s, "get_token_usage_stats")?.usage.stats(a.model.as_deref(), a.days)) }),
        ),
    ];
    tools
        .into_iter()
        .map(|t| t.attachment(attached.clone()))
        .collect()
}
