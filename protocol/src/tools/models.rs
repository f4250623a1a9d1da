//! Arguments and results of The model tools: downloads (`download_model`, `list_downloads`, `cancel_download`, `list_models`, `search_huggingface_models`) and the inference pool (`load_model`, `unload_model`, `get_inference_status`, `get_token_usage_stats`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `download_model {repo, revision?, variant?, glob?}`: one job for the variant's whole file
/// set, or the files the globs pick (as `grep`'s `glob`: comma-separated, `!` excludes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadModelArgs {
    /// owner/name.
    pub repo: String,
    pub revision: Option<String>,
    /// Q4_K_M, safetensors or a file name.
    pub variant: Option<String>,
    /// File globs instead of a variant; ! excludes.
    pub glob: Option<String>,
}

impl DownloadModelArgs {
    /// `glob` split into the globs that include and those (`!`) that exclude.
    pub fn globs(&self) -> (Vec<String>, Vec<String>) {
        let (mut include, mut exclude) = (Vec::new(), Vec::new());
        for g in self.glob.iter().flat_map(|s| s.split(',')) {
            let g = g.trim();
            match g.strip_prefix('!') {
                Some(rest) => exclude.push(rest.trim().to_string()),
                None if !g.is_empty() => include.push(g.to_string()),
                None => {}
            }
        }
        (include, exclude)
    }
}

/// `list_downloads {job_id?}`: jobs in flight and recent, or one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDownloadsArgs {
    pub job_id: Option<String>,
}

/// `cancel_download {job_id}`: stop a job, keeping its partial files for a resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelDownloadArgs {
    pub job_id: String,
}

/// `delete_model {model}`: remove a stored model's files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteModelArgs {
    /// As list_models names it.
    pub model: String,
}

/// `list_models {}`: the models in the local store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListModelsArgs {}

/// `search_huggingface_models {query, limit?}`: downloadable candidates with fit labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchModelsArgs {
    pub query: String,
    /// Default 10.
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u64>,
}

/// `load_model {model, alias?, context?}`: start a model's inference server; answers at once
/// with state `loading`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadModelArgs {
    /// owner/name as list_models names it.
    pub model: String,
    pub alias: Option<String>,
    /// Tokens (default 2048).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub context: Option<u32>,
    /// Never unloaded for room.
    pub pin: Option<bool>,
}

/// `unload_model {alias}`: stop a model's server and free its port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnloadModelArgs {
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
    pub model: Option<String>,
    #[schemars(range(min = 1, max = 3660))]
    pub days: Option<u32>,
}
