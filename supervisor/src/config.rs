//! The daemon's configuration: embedded defaults, overridden by an optional TOML file.
//! No file is needed to run; every key is optional.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toolvisor_kit::launch::DEFAULT_ENV_ALLOWLIST;
use toolvisor_kit::restart::{Restart, RestartPolicy};

/// The whole configuration, as read from TOML.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Socket path; default `$XDG_RUNTIME_DIR/toolvisor.sock`, else `/tmp/toolvisor-$UID/toolvisor.sock`.
    pub socket: Option<PathBuf>,
    /// Where the audit log and stored state live; default `$XDG_STATE_HOME/toolvisor`, else
    /// `~/.local/state/toolvisor`.
    pub state_dir: Option<PathBuf>,
    /// Cap on one frame's payload in bytes.
    pub max_frame: u32,
    /// How long a call waits for the client to answer an approval request.
    pub approval_timeout_s: u64,
    pub policy: PolicyConfig,
    pub limits: Limits,
    pub restart: RestartConfig,
    pub env: EnvConfig,
    pub testing: TestingConfig,
    /// Where this configuration came from, for `status`.
    #[serde(skip)]
    pub source: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyConfig {
    /// Tools no client may see or call.
    pub deny: Vec<String>,
    /// JSON-lines audit log of denials; default `<state_dir>/audit.jsonl`.
    pub audit_log: Option<PathBuf>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub bash_timeout_s: u64,
    pub bash_timeout_max_s: u64,
    /// Bytes of stdout and of stderr kept per bash call (head and tail).
    pub bash_output_bytes: usize,
    pub process_buffer_bytes: usize,
    /// Ended processes stay listed and readable this long.
    pub process_keep_s: u64,
    pub processes_per_conversation: usize,
    /// A running process untouched (no read, write or list by its conversation) this long
    /// is stopped; 0 disables.
    pub process_idle_ttl_s: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bash_timeout_s: 120,
            bash_timeout_max_s: 3600,
            bash_output_bytes: 256 * 1024,
            process_buffer_bytes: 8 * 1024 * 1024,
            process_keep_s: 30 * 60,
            processes_per_conversation: 64,
            process_idle_ttl_s: 2 * 60 * 60,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RestartConfig {
    pub intensity: u32,
    pub period_s: u64,
    pub backoff_ms: u64,
    pub backoff_max_ms: u64,
}

impl Default for RestartConfig {
    fn default() -> Self {
        RestartConfig {
            intensity: 5,
            period_s: 60,
            backoff_ms: 100,
            backoff_max_ms: 30_000,
        }
    }
}

impl RestartConfig {
    pub fn policy(&self) -> RestartPolicy {
        RestartPolicy {
            restart: Restart::Permanent,
            intensity: self.intensity,
            period: Duration::from_secs(self.period_s),
            backoff_base: Duration::from_millis(self.backoff_ms),
            backoff_max: Duration::from_millis(self.backoff_max_ms),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvConfig {
    /// Variables children inherit from the daemon's environment.
    pub allow: Vec<String>,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            allow: DEFAULT_ENV_ALLOWLIST
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// Switches for the test suite; off in production.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TestingConfig {
    /// Register `_probe_serial` and `_probe_parallel`, which record when they start and end
    /// (to test per-conversation lanes).
    pub probe_tools: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: None,
            state_dir: None,
            max_frame: toolvisor_protocol::DEFAULT_MAX_FRAME,
            approval_timeout_s: 300,
            policy: PolicyConfig::default(),
            limits: Limits::default(),
            restart: RestartConfig::default(),
            env: EnvConfig::default(),
            testing: TestingConfig::default(),
            source: "embedded defaults".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: String, message: String },
}

fn uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

impl Config {
    /// Embedded defaults, overridden by `path` when given.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config: Config = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if config.max_frame < 1024 {
            return Err(ConfigError::Parse {
                path: path.display().to_string(),
                message: format!(
                    "max_frame = {} is below the minimum of 1024 bytes",
                    config.max_frame
                ),
            });
        }
        config.source = path.display().to_string();
        Ok(config)
    }

    pub fn socket_path(&self) -> PathBuf {
        self.socket.clone().unwrap_or_else(default_socket_path)
    }

    pub fn state_dir(&self) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| {
            if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
                PathBuf::from(dir).join("toolvisor")
            } else if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
                PathBuf::from(home).join(".local/state/toolvisor")
            } else {
                PathBuf::from(format!("/tmp/toolvisor-{}/state", uid()))
            }
        })
    }

    pub fn audit_log(&self) -> PathBuf {
        self.policy
            .audit_log
            .clone()
            .unwrap_or_else(|| self.state_dir().join("audit.jsonl"))
    }
}

/// `$XDG_RUNTIME_DIR/toolvisor.sock`, else `/tmp/toolvisor-$UID/toolvisor.sock`.
pub fn default_socket_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("toolvisor.sock"),
        None => PathBuf::from(format!("/tmp/toolvisor-{}/toolvisor.sock", uid())),
    }
}
