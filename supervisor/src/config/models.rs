//! `[models]`: the model hub, the store, and how files are fetched (one connection or byte
//! ranges at once), parsed and checked with the rest of the configuration.

use std::path::PathBuf;

use serde::Deserialize;

/// The default model hub.
pub const DEFAULT_MODELS_ENDPOINT: &str = "https://huggingface.co";

/// `[models]`: download jobs and the model store. See docs/OPERATIONS.md.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsConfig {
    /// Base URL of a Hugging Face-compatible endpoint; default `$HF_ENDPOINT`, else
    /// `https://huggingface.co`.
    pub endpoint: Option<String>,
    /// Bearer token for gated and private repos; default `$HF_TOKEN`. A secret: masked in
    /// every result and never logged.
    pub token: Option<String>,
    /// The model store; default `<state_dir>/models`.
    pub store: Option<PathBuf>,
    /// File transfers at once, over all jobs.
    pub parallel_transfers: usize,
    /// How long connecting to the endpoint may take before `network_unavailable`.
    pub connect_timeout_s: u64,
    /// Tries per file after the first on transient errors (5xx, cut connections, bad hash);
    /// for a file fetched in ranges, tries per range.
    pub retries: u32,
    /// Finished, failed and cancelled jobs stay listed this long.
    pub keep_finished_s: u64,
    /// Connections (byte ranges at once) for one large file; 1 fetches every file over one
    /// connection. At most 16.
    pub connections_per_file: usize,
    /// Files smaller than this go over one connection.
    pub ranged_min_bytes: u64,
    /// A body that sends nothing for this long is cut and asked for again from where it
    /// stopped (a range alone).
    pub stall_timeout_s: u64,
    /// A body slower than this many bytes per second over `stall_timeout_s` is cut like a
    /// stall and asked for again by Range; 0 disables.
    pub min_rate_bytes_per_s: u64,
}

impl std::fmt::Debug for ModelsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelsConfig")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("store", &self.store)
            .field("parallel_transfers", &self.parallel_transfers)
            .field("connect_timeout_s", &self.connect_timeout_s)
            .field("retries", &self.retries)
            .field("keep_finished_s", &self.keep_finished_s)
            .field("connections_per_file", &self.connections_per_file)
            .field("ranged_min_bytes", &self.ranged_min_bytes)
            .field("stall_timeout_s", &self.stall_timeout_s)
            .field("min_rate_bytes_per_s", &self.min_rate_bytes_per_s)
            .finish()
    }
}

impl Default for ModelsConfig {
    fn default() -> Self {
        ModelsConfig {
            endpoint: None,
            token: None,
            store: None,
            parallel_transfers: 4,
            connect_timeout_s: 10,
            retries: 5,
            keep_finished_s: 24 * 3600,
            connections_per_file: 4,
            ranged_min_bytes: 64 << 20,
            stall_timeout_s: 30,
            min_rate_bytes_per_s: 1024,
        }
    }
}

impl ModelsConfig {
    /// The endpoint: the config's, else `$HF_ENDPOINT`, else the public hub.
    pub fn endpoint(&self) -> String {
        self.endpoint
            .clone()
            .filter(|e| !e.is_empty())
            .or_else(|| std::env::var("HF_ENDPOINT").ok().filter(|e| !e.is_empty()))
            .unwrap_or_else(|| DEFAULT_MODELS_ENDPOINT.to_string())
    }

    /// The token: the config's, else `$HF_TOKEN`.
    pub fn token(&self) -> Option<String> {
        self.token
            .clone()
            .filter(|t| !t.is_empty())
            .or_else(|| std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()))
    }

    pub(super) fn check(&self) -> Result<(), String> {
        if self.parallel_transfers == 0 || self.parallel_transfers > 64 {
            return Err(format!(
                "models.parallel_transfers = {}: it must be 1..=64",
                self.parallel_transfers
            ));
        }
        if self.connect_timeout_s == 0 {
            return Err("models.connect_timeout_s = 0: it must be a positive integer".into());
        }
        if self.connections_per_file == 0 || self.connections_per_file > 16 {
            return Err(format!(
                "models.connections_per_file = {}: it must be 1..=16 (1: one connection per file)",
                self.connections_per_file
            ));
        }
        if self.stall_timeout_s == 0 {
            return Err("models.stall_timeout_s = 0: it must be a positive integer".into());
        }
        if self.retries > 100 {
            return Err(format!("models.retries = {}: at most 100", self.retries));
        }
        if let Some(e) = &self.endpoint
            && !(e.starts_with("http://") || e.starts_with("https://"))
        {
            return Err(format!(
                "models.endpoint = {e:?}: give an http:// or https:// URL"
            ));
        }
        Ok(())
    }
}
