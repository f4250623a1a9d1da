//! Arguments and results of The model tools: downloads (`download_model`, `list_downloads`, `cancel_download`, `list_models`, `search_huggingface_models`) and the inference pool (`load_model`, `unload_model`, `get_inference_status`, `get_token_usage_stats`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `download_model {repo, revision?, variant?}`: one job for the variant's whole file set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadModelArgs {
    /// Repository id on the model hub, `owner/name`.
    pub repo: String,
    /// Branch, tag or commit (default `main`).
    pub revision: Option<String>,
    /// Which files: a quantisation (`Q4_K_M`), `safetensors`, or one file's name (a shard
    /// selects all its shards). Needed when the repo offers several.
    pub variant: Option<String>,
}

/// `list_downloads {job_id?}`: jobs in flight and recent, or one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDownloadsArgs {
    /// Only this job (`dl3`).
    pub job_id: Option<String>,
}

/// `cancel_download {job_id}`: stop a job, keeping its partial files for a resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelDownloadArgs {
    /// The job (`dl3`), as download_model or list_downloads gave it.
    pub job_id: String,
}

/// `list_models {}`: the models in the local store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListModelsArgs {}

/// `search_huggingface_models {query, limit?}`: downloadable candidates with fit labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchModelsArgs {
    /// Words to search repo ids for.
    pub query: String,
    /// Most candidates (default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u64>,
}

/// `load_model {model, alias?, context?}`: start a model's inference server; answers at once
/// with state `loading`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadModelArgs {
    /// A complete model of the local store, by the `name` list_models gives it: its repo
    /// (`owner/name`), with `@REVISION` and/or `:VARIANT` when the store holds several
    /// (`owner/name@v2:Q4_K_M`).
    pub model: String,
    /// The name requests use in their `"model"` field (default: the repo's name part).
    pub alias: Option<String>,
    /// Context length in tokens (default `[inference] context`, 2048).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub context: Option<u32>,
    /// Never unloaded to make room for another model at `[inference] max_loaded`
    /// (unload_model and the idle TTL still unload it).
    pub pin: Option<bool>,
}

/// `unload_model {alias}`: stop a model's server and free its port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnloadModelArgs {
    /// The alias load_model answered (get_inference_status lists them).
    pub alias: String,
}

/// `get_inference_status {}`: the loaded models and the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceStatusArgs {}

/// `get_token_usage_stats {model?, days?}`: requests and tokens counted by the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenUsageArgs {
    /// Only this model (as load_model named it).
    pub model: Option<String>,
    /// Only the last N days (UTC), today included.
    #[schemars(range(min = 1, max = 3660))]
    pub days: Option<u32>,
}
