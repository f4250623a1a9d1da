//! The results of the model tools: downloads (`download_model`, `list_downloads`,
//! `cancel_download`, `list_models`, `search_huggingface_models`) and the inference pool
//! (`load_model`, `unload_model`, `get_inference_status`, `get_token_usage_stats`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---- Downloads ----

/// A download job's state, or one of its files'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DownloadState {
    Queued,
    Downloading,
    Verifying,
    Done,
    Failed,
    Cancelled,
}

/// One file of a download job, with its progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DownloadFile {
    /// The file's name in the repo.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Bytes of it on disk so far.
    pub bytes_done: u64,
    /// Its expected sha256 (hex), when the hub gives one.
    pub sha256: Option<String>,
    /// queued, downloading, verifying, done, failed or cancelled.
    pub state: DownloadState,
    /// Why it failed, or the last error of a retried attempt.
    pub error: Option<String>,
}

/// One download job: a variant's whole file set, and its progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DownloadJob {
    /// The job's id (`dl3`).
    pub job_id: String,
    /// The repo, `owner/name`.
    pub repo: String,
    /// The revision downloaded.
    pub revision: String,
    /// The variant chosen (`Q4_K_M`, `safetensors`).
    pub variant: String,
    /// queued, downloading, verifying, done, failed or cancelled.
    pub state: DownloadState,
    /// Why the job failed.
    pub error: Option<String>,
    /// Bytes on disk, all files.
    pub bytes_done: u64,
    /// Bytes of all files.
    pub bytes_total: u64,
    /// Percent done, to a tenth.
    pub percent: f64,
    /// Bytes per second over the last seconds, while unfinished and known.
    pub rate_bytes_per_s: Option<u64>,
    /// Seconds left at that rate.
    pub eta_s: Option<u64>,
    /// The model's directory in the store.
    pub path: String,
    /// Each file of the set.
    pub files: Vec<DownloadFile>,
}

/// `download_model`'s answer when a job was started, or one was already running.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DownloadModelJob {
    #[serde(flatten)]
    pub job: DownloadJob,
    /// The same file set was already in flight: this is that job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub already_running: Option<bool>,
    /// How to follow a job just started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// One file of a chosen file set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChosenFile {
    /// The file's name in the repo.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its expected sha256 (hex), when the hub gives one.
    pub sha256: Option<String>,
}

/// `download_model`'s answer when the file set is already complete in the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DownloadAlreadyComplete {
    /// Always done.
    pub state: DownloadState,
    /// Always true: nothing was started.
    pub already_complete: bool,
    /// The repo, `owner/name`.
    pub repo: String,
    /// The revision.
    pub revision: String,
    /// The commit the revision is at (its snapshot in the store), when the hub names it.
    pub commit: Option<String>,
    /// The variant chosen.
    pub variant: String,
    /// The model's directory in the store (the commit's snapshot).
    pub path: String,
    /// Bytes of all files.
    pub bytes_total: u64,
    /// Each file of the set.
    pub files: Vec<ChosenFile>,
}

/// The result of `download_model`: the job (started, or already running), or the model
/// already complete in the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum DownloadModelResult {
    /// A job started, or the one already in flight.
    Job(DownloadModelJob),
    /// Already complete: no job.
    AlreadyComplete(DownloadAlreadyComplete),
}

/// The result of `list_downloads`: jobs in flight and recent, or the one asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListDownloadsResult {
    /// The jobs, oldest first.
    pub jobs: Vec<DownloadJob>,
}

/// The result of `cancel_download`: the job stopped, or why it was not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CancelDownloadResult {
    /// The job's id.
    pub job_id: String,
    /// cancelled, or the state the job had already ended in.
    pub state: DownloadState,
    /// The job was stopped by this call.
    pub cancelled: bool,
    /// Not cancelled: the job had already ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Cancelled: bytes on disk (kept for a resume).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_done: Option<u64>,
    /// Cancelled: bytes of all files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_total: Option<u64>,
    /// Cancelled: how to resume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// The machine's memory, from `/proc/meminfo`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MemoryFacts {
    /// Total memory in bytes.
    pub total_bytes: u64,
    /// Memory available now in bytes.
    pub available_bytes: u64,
}

/// An accelerator's vendor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AcceleratorKind {
    Nvidia,
    Amd,
}

/// An accelerator found on this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accelerator {
    /// nvidia or amd.
    pub kind: AcceleratorKind,
    /// Its name.
    pub name: String,
    /// Its memory in bytes, when known.
    pub memory_total_bytes: Option<u64>,
    /// Its free memory in bytes, when known.
    pub memory_free_bytes: Option<u64>,
    /// get_inference_status: its memory in use now (total less free), by any process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<u64>,
}

/// Whether a model fits this machine's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Fit {
    /// In what is available now (memory or an accelerator).
    Fits,
    /// Only in the machine's total memory, or an accelerator's total.
    Tight,
    TooLarge,
    /// The memory (or the model's size) is not known.
    Unknown,
}

impl Fit {
    /// As results spell it (`too_large`).
    pub fn as_str(self) -> &'static str {
        match self {
            Fit::Fits => "fits",
            Fit::Tight => "tight",
            Fit::TooLarge => "too_large",
            Fit::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Fit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a model fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlacementLabel {
    /// In the accelerators' free memory, all layers offloaded: one accelerator, or split
    /// over several (`split_over`).
    FitsGpu,
    /// In available system memory.
    FitsCpu,
    /// Some layers on the accelerators (`gpu_layers`), the rest in system memory.
    FitsPartial,
    /// Only in the machine's total memory with the accelerators' totals.
    Tight,
    TooLarge,
    Unknown,
}

impl PlacementLabel {
    /// The fit it is: `fits` wherever it fits.
    pub fn fit(self) -> Fit {
        match self {
            PlacementLabel::FitsGpu | PlacementLabel::FitsCpu | PlacementLabel::FitsPartial => {
                Fit::Fits
            }
            PlacementLabel::Tight => Fit::Tight,
            PlacementLabel::TooLarge => Fit::TooLarge,
            PlacementLabel::Unknown => Fit::Unknown,
        }
    }
}

/// Where a model fits, and the numbers it was decided on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Placement {
    /// fits_gpu, fits_cpu, fits_partial, tight, too_large or unknown.
    pub label: PlacementLabel,
    /// Bytes needed: the weights, the KV cache of the context and the runtime when the
    /// model's header was read (load_model), else the weights plus a fifth.
    pub need_bytes: u64,
    /// fits_gpu on one accelerator: its name.
    pub accelerator: Option<String>,
    /// The accelerators the layers are split over (fits_gpu over several, fits_partial).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_over: Option<Vec<String>>,
    /// fits_partial with the model's layers known: how many are offloaded (`-ngl`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_layers: Option<u64>,
    /// The KV cache of the context asked for, when the model's header was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_bytes: Option<u64>,
}

/// A stored model's load state in the inference pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoadState {
    NotLoaded,
    Loading,
    Ready,
    Restarting,
    Failed,
    Unloaded,
}

impl LoadState {
    /// As results spell it (`not_loaded`).
    pub fn as_str(self) -> &'static str {
        match self {
            LoadState::NotLoaded => "not_loaded",
            LoadState::Loading => "loading",
            LoadState::Ready => "ready",
            LoadState::Restarting => "restarting",
            LoadState::Failed => "failed",
            LoadState::Unloaded => "unloaded",
        }
    }
}

impl std::fmt::Display for LoadState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One file of a stored model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoredFile {
    /// The file's name.
    pub name: String,
    /// Its full size in bytes.
    pub size: u64,
    /// Bytes of it present.
    pub bytes_present: u64,
    /// Present whole (and verified).
    pub complete: bool,
}

/// One model of the local store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StoredModel {
    /// The shortest name that picks it (`owner/name[@revision][:variant]`), for load_model.
    pub name: String,
    /// The repo, `owner/name`.
    pub repo: String,
    /// The revision it was downloaded as.
    pub revision: String,
    /// The commit its snapshot is, when the hub named one.
    pub commit: Option<String>,
    /// Whether a revision's ref names its snapshot now; false for a snapshot its revision
    /// has moved on from (named by its commit, kept until delete_model removes it).
    pub current: bool,
    /// The variant.
    pub variant: String,
    /// Its directory in the store (its commit's snapshot).
    pub path: String,
    /// Bytes of all its files.
    pub size_bytes: u64,
    /// Every file present whole.
    pub complete: bool,
    /// fits, tight, too_large or unknown.
    pub fit: Fit,
    /// Where it fits.
    pub placement: Placement,
    /// not_loaded, or its state in the inference pool.
    pub load_state: LoadState,
    /// The alias it is loaded under, when the pool knows it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Its files.
    pub files: Vec<StoredFile>,
}

/// The result of `list_models`: the local store's models, with this machine's memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListModelsResult {
    /// The store's root directory.
    pub store: String,
    /// The machine's memory, when known.
    pub memory: Option<MemoryFacts>,
    /// The accelerators found.
    pub accelerators: Vec<Accelerator>,
    /// The models.
    pub models: Vec<StoredModel>,
    /// Files in the store that no model lists (path from the store's root), which the
    /// operator may remove to free space.
    pub orphans: Vec<OrphanFile>,
    /// Their bytes together.
    pub orphan_bytes: u64,
}

/// The result of `delete_model`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteModelResult {
    /// `owner/name@revision:variant`.
    pub model: String,
    /// Its directory in the store.
    pub path: String,
    /// Files removed (its files, their partial downloads and range maps).
    pub files_removed: u64,
    pub bytes_freed: u64,
    /// Its files another variant in the same directory lists too, left in place.
    pub kept: Vec<String>,
}

/// A file in the model store no model lists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OrphanFile {
    pub path: String,
    pub bytes: u64,
}

/// Whether a repo is gated, as the hub spells it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Gated {
    /// false: anyone may download it.
    Open(bool),
    /// auto, manual, or another word of the hub's.
    Gated(String),
}

/// One downloadable variant of a hub model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HubVariant {
    /// The variant's name (`Q4_K_M`, `safetensors`), for download_model.
    pub variant: String,
    /// Bytes of its files, when the hub lists every size.
    pub bytes: Option<u64>,
    /// Its multimodal projector file, if it has one.
    pub projector: Option<String>,
    /// fits, tight, too_large or unknown.
    pub fit: Fit,
    /// Where it fits, when its size is known.
    pub placement: Option<Placement>,
    /// Already complete in the local store.
    pub downloaded: bool,
}

/// One hub model found by `search_huggingface_models`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HubModel {
    /// The repo, `owner/name`.
    pub repo: String,
    /// Downloads the hub counts, when it says.
    pub downloads: Option<u64>,
    /// false, or how access is granted (auto, manual).
    pub gated: Gated,
    /// The best fit among its variants.
    pub fit: Fit,
    /// The best placement among its variants.
    pub placement: PlacementLabel,
    /// Its variants.
    pub variants: Vec<HubVariant>,
}

/// The result of `search_huggingface_models`: candidates with each variant's size and fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchModelsResult {
    /// The query as given.
    pub query: String,
    /// The accelerators the fit was decided on.
    pub accelerators: Vec<Accelerator>,
    /// The candidates, in the hub's order.
    pub models: Vec<HubModel>,
}

// ---- Inference ----

/// Where a loaded model stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelState {
    /// Its server was spawned and does not answer yet.
    Loading,
    Ready,
    /// Its server ended and is being restarted.
    Restarting,
    /// Its server ended past the restart policy.
    Failed,
    /// Unloaded (by the idle TTL, or a stop).
    Unloaded,
}

/// One model of the inference pool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadedModel {
    /// The name requests use in `"model"`.
    pub alias: String,
    /// The model as load_model named it.
    pub model: String,
    /// The repo, `owner/name`.
    pub repo: String,
    /// The revision.
    pub revision: String,
    /// The variant.
    pub variant: String,
    /// The model file the server loads.
    pub path: String,
    /// The model's format (`gguf`).
    pub format: String,
    /// The context length.
    pub context: u32,
    /// Bytes of its weights.
    pub size_bytes: u64,
    /// loading, ready, restarting, failed or unloaded.
    pub state: ModelState,
    /// Restarts of its server so far.
    pub restarts: u32,
    /// Seconds since its last request.
    pub idle_s: u64,
    /// Requests in flight now.
    pub requests_in_flight: u64,
    /// Never unloaded to make room for another model.
    pub pinned: bool,
    /// Requests waiting for one of its slots.
    pub queue_depth: u64,
    /// Its free slots.
    pub slots_free: u64,
    /// Where the fit placed it when it was loaded (the accelerators and layers it was
    /// given).
    pub placement: Placement,
    /// The variant's multimodal projector, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projector: Option<String>,
    /// With a projector: whether the server command was given it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projector_passed: Option<bool>,
    /// The server's loopback port, while one runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The server's own URL, while one runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The server's pid, while it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The server's resident memory in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Spawn to ready, of the latest incarnation that became ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_ms: Option<u64>,
    /// Loading: milliseconds since the spawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loading_ms: Option<u64>,
    /// Loading: the limit it must be ready within.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_timeout_s: Option<u64>,
    /// Restarting or failed: how the server ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Unloaded: why, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Restarting or failed: the server's last output lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<Vec<String>>,
}

/// The model unloaded to make room.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Evicted {
    /// Its alias.
    pub alias: String,
    /// The model as it was loaded.
    pub model: String,
    /// Seconds it had been idle.
    pub idle_s: u64,
    /// Why it was chosen.
    pub why: String,
}

/// The result of `load_model`: the model's status entry, started (state `loading`) or
/// already loaded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadModelResult {
    #[serde(flatten)]
    pub model: LoadedModel,
    /// Started: fits, tight or unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<Fit>,
    /// Started at max_loaded: the model unloaded to make room.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evicted: Option<Evicted>,
    /// Started: how to follow it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Already loaded: nothing started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The result of `unload_model`: the model stopped and its port freed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct UnloadModelResult {
    /// The alias unloaded.
    pub alias: String,
    /// The model it served.
    pub model: String,
    /// Always true.
    pub unloaded: bool,
    /// Its state before the unload.
    pub was: ModelState,
    /// The port its server had, if one ran.
    pub port_freed: Option<u16>,
}

/// Where the inference endpoint listens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InferenceEndpoint {
    /// Its Unix socket.
    pub socket: String,
    /// Its loopback URL, when `[inference] listen` is set.
    pub listen: Option<String>,
    /// The loopback port asks for the API key.
    pub listen_needs_key: bool,
}

/// The result of `get_inference_status`: the pool's models and its endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InferenceStatusResult {
    /// Every model the pool knows.
    pub models: Vec<LoadedModel>,
    /// The machine's memory now, when `/proc/meminfo` says it.
    pub memory: Option<MemoryFacts>,
    /// The accelerators found now, with their memory in use.
    pub accelerators: Vec<Accelerator>,
    /// Aliases unloaded or evicted (the last 256): why each went and what a request for it
    /// does now.
    pub gone: Vec<GoneAlias>,
    /// Where the endpoint listens; null until it is open.
    pub endpoint: Option<InferenceEndpoint>,
    /// An idle model is unloaded after this many seconds (0: never).
    pub idle_ttl_s: u64,
    /// A request naming an unloaded model loads it.
    pub on_demand: bool,
    /// Models loaded at once at most.
    pub max_loaded: u64,
}

/// An alias the pool no longer serves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GoneAlias {
    pub alias: String,
    /// The model it served.
    pub model: String,
    /// "unloaded by unload_model", "evicted to make room for …", "unloaded after N s without
    /// a request".
    pub why: String,
    /// Seconds since it went.
    pub gone_s: u64,
    /// A request naming it loads it again (`[inference] on_demand`); else it is refused
    /// with `why`.
    pub reloads_on_request: bool,
}

/// Requests and tokens through the inference endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenCounts {
    /// Requests.
    pub requests: u64,
    /// Requests whose response said no usage.
    pub requests_without_usage: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Prompt and completion tokens.
    pub total_tokens: u64,
    /// Prompt tokens served from the server's prompt cache (counted in prompt_tokens too).
    pub cached_prompt_tokens: u64,
}

/// One UTC day's usage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DayUsage {
    /// The day, `YYYY-MM-DD` (UTC).
    pub date: String,
    #[serde(flatten)]
    pub counts: TokenCounts,
}

/// One model's usage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelUsage {
    /// The model as load_model named it.
    pub model: String,
    #[serde(flatten)]
    pub counts: TokenCounts,
}

/// One model's usage on one UTC day.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DayModelUsage {
    /// The day, `YYYY-MM-DD` (UTC).
    pub date: String,
    /// The model as load_model named it.
    pub model: String,
    #[serde(flatten)]
    pub counts: TokenCounts,
}

/// The result of `get_token_usage_stats`: totals, per day, per model, per day and model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TokenUsageResult {
    /// All requests counted.
    pub totals: TokenCounts,
    /// Per UTC day with requests, oldest first.
    pub per_day: Vec<DayUsage>,
    /// Per model.
    pub per_model: Vec<ModelUsage>,
    /// Per day and model.
    pub per_day_model: Vec<DayModelUsage>,
    /// The usage book's file.
    pub file: String,
}
