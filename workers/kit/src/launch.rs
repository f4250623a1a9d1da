//! How the daemon starts every child: through the shim, with an allowlisted environment,
//! recorded in the spawn ledger. Workers build a [`SpawnSpec`] from one shared [`Launcher`].
//!
//! Children start with an allowlisted environment (`[env] allow`) plus `[env] set` (by default
//! `PYTHONDONTWRITEBYTECODE=1`, so no child writes `__pycache__/` into the user's tree), never the
//! daemon's whole environment; [`env_path`] is the `PATH` a child searches.

use std::path::{Path, PathBuf};

use crate::process::{Ledger, SpawnSpec, env_path};

/// Environment variables a child inherits from the daemon unless configured otherwise.
/// Anything else (tokens, `NODE_EXTRA_CA_CERTS`, `PYTHONPATH` of the operator's shell) stays
/// out: children start clean and fast.
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    "TMPDIR",
];

/// Variables set on every child by default (`[env] set`): Python writes no `__pycache__/`
/// into the user's tree (servers, kernels, debuggees and commands run in it).
pub const DEFAULT_ENV_SET: &[(&str, &str)] = &[("PYTHONDONTWRITEBYTECODE", "1")];

/// Shared recipe for starting children.
#[derive(Clone, Debug, Default)]
pub struct Launcher {
    /// The `toolvisor` binary, run as `toolvisor __shim PROGRAM ARGS..`; `None` spawns directly.
    pub shim: Option<PathBuf>,
    /// The complete environment every child gets.
    pub env: Vec<(String, String)>,
    pub ledger: Option<Ledger>,
}

impl Launcher {
    /// A launcher whose environment is the daemon's own, filtered by `allow`.
    pub fn from_current_env(
        shim: Option<PathBuf>,
        allow: &[String],
        ledger: Option<Ledger>,
    ) -> Self {
        let env = std::env::vars()
            .filter(|(k, _)| allow.iter().any(|a| a == k))
            .collect();
        Launcher { shim, env, ledger }
    }

    /// Set `key` to `value` in every child's environment, replacing an inherited value.
    pub fn set_var(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
    }

    /// The `PATH` every child gets ("" when none).
    pub fn path(&self) -> &str {
        env_path(&self.env).unwrap_or_default()
    }

    /// Whether a child would find `program` (a bare name) on its `PATH`.
    pub fn finds(&self, program: &str) -> bool {
        std::env::split_paths(self.path()).any(|d| d.join(program).is_file())
    }

    pub fn spec(
        &self,
        program: &str,
        args: &[String],
        cwd: &Path,
        stdin: bool,
        label: &str,
    ) -> SpawnSpec {
        SpawnSpec {
            program: program.to_string(),
            args: args.to_vec(),
            cwd: cwd.to_path_buf(),
            env: self.env.clone(),
            stdin,
            shim: self.shim.clone(),
            ledger: self.ledger.clone(),
            label: label.to_string(),
            scratch: false,
        }
    }
}
