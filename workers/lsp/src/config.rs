//! The server registry as data: which language servers exist, which files they cover, which
//! root markers start them, which binaries run them, and which checker `diagnostics "*"` runs.
//! Embedded defaults; the daemon's TOML config may replace or add languages (`[lsp]`).
//!
//! The config file is, with `protocol`, the one serde user: these types are read-only input.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// One language and the server that covers it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LanguageSpec {
    /// File extensions (without the dot) this language covers.
    pub extensions: Vec<String>,
    /// Files or directories that mark a project root; the nearest directory (walking up from
    /// the file) holding any of them is the server's root.
    pub markers: Vec<String>,
    /// Candidate commands, program first, tried in order: the first whose program resolves
    /// (project-local first) runs.
    pub servers: Vec<Vec<String>>,
    /// The project's checker for `diagnostics` with `file: "*"`, run in the root.
    #[serde(default)]
    pub checker: Option<Vec<String>>,
    /// How to read the checker's output: `pyright-json`, `cargo-json`, `tsc`, `gcc` (file:line:col: severity: message).
    #[serde(default)]
    pub checker_format: Option<String>,
    /// `initializationOptions` sent to the server, as JSON text.
    #[serde(default)]
    pub init_options: Option<String>,
    /// The server's restricted mode for an untrusted root, as JSON text: sent as
    /// `initializationOptions` instead of `init_options` and given as the answer to every
    /// `workspace/configuration` item, so the server cannot read its way back to full mode.
    /// A language with a restricted mode runs a separate server per root for trusted and
    /// untrusted runs.
    #[serde(default)]
    pub untrusted_init_options: Option<String>,
    /// What the restricted mode withholds, in words, for `lsp status`.
    #[serde(default)]
    pub untrusted_note: Option<String>,
    /// Environment set on the server in an untrusted root (on top of the allowlisted one).
    /// `{rustup_default_toolchain}` in a value is the default toolchain of rustup's settings
    /// (`stable` when none is found).
    #[serde(default)]
    pub untrusted_env: BTreeMap<String, String>,
    /// Whether the server executes project code and has no restricted mode: then it does
    /// not start in an untrusted root.
    #[serde(default)]
    pub server_runs_project_code: bool,
    /// Whether the checker executes project code (build scripts, plugins): then
    /// `diagnostics "*"` refuses to run it in an untrusted root.
    #[serde(default)]
    pub checker_runs_project_code: bool,
    /// The server's memory limit in MiB (its whole process tree, resident), in place of
    /// `[lsp] memory_limit_mb`; 0: none (`crate::memory`).
    #[serde(default)]
    pub memory_limit_mb: Option<u64>,
}

/// The `[lsp]` section of the daemon config.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LspConfig {
    /// Languages by name; an entry here replaces the embedded one of the same name.
    pub languages: BTreeMap<String, LanguageSpec>,
    /// Directories searched for server binaries after the project-local ones and before
    /// `$PATH` (e.g. a shared tool directory).
    pub search_path: Vec<String>,
    /// A server unused this long is shut down (0: never).
    pub idle_ttl_s: u64,
    /// Longest wait for `initialize`.
    pub init_timeout_s: u64,
    /// Longest wait for any one request.
    pub request_timeout_s: u64,
    /// Longest a call waits for a starting or indexing server before `not_ready`.
    pub ready_wait_s: u64,
    /// Quiet time after the last progress event (or first open of a file) before the server
    /// counts as settled.
    pub settle_ms: u64,
    /// Longest wait for pushed diagnostics of the current version.
    pub diagnostics_wait_s: u64,
    /// A write's dependents opened and asked for their diagnostics at once, at most (1: one
    /// at a time). The server checks one while the next is opened and asked for: on click
    /// (pyright, 20 dependents) a write took 5.2 s one at a time, 1.9 s eight at a time
    /// (docs/BENCHMARKS.md).
    pub dependents_at_once: usize,
    /// Longest run of a project checker (`diagnostics "*"`).
    pub checker_timeout_s: u64,
    /// The diagnostics ledger forgets a run with no diagnostics call for this long.
    pub ledger_run_idle_s: u64,
    /// The diagnostics ledger keeps at most this many runs (least recently used leave).
    pub ledger_max_runs: usize,
    /// Every server's memory limit in MiB unless its language sets `memory_limit_mb`; 0:
    /// none. Past it the server is killed, reported as such, and restarted (`crate::memory`).
    pub memory_limit_mb: u64,
}

impl Default for LspConfig {
    fn default() -> Self {
        LspConfig {
            languages: BTreeMap::new(),
            search_path: Vec::new(),
            idle_ttl_s: 15 * 60,
            init_timeout_s: 60,
            request_timeout_s: 30,
            ready_wait_s: 60,
            settle_ms: 300,
            diagnostics_wait_s: 30,
            dependents_at_once: 8,
            checker_timeout_s: 600,
            ledger_run_idle_s: crate::ledger::DEFAULT_RUN_IDLE.as_secs(),
            ledger_max_runs: crate::ledger::DEFAULT_MAX_RUNS,
            memory_limit_mb: crate::memory::DEFAULT_LIMIT_MB,
        }
    }
}

impl LspConfig {
    pub fn idle_ttl(&self) -> Option<Duration> {
        (self.idle_ttl_s > 0).then(|| Duration::from_secs(self.idle_ttl_s))
    }

    /// The memory limit of `language`'s servers in bytes, if any.
    pub fn memory_limit(&self, spec: &LanguageSpec) -> Option<u64> {
        let mb = spec.memory_limit_mb.unwrap_or(self.memory_limit_mb);
        (mb > 0).then(|| mb.saturating_mul(1024 * 1024))
    }

    /// Embedded languages overlaid with the configured ones.
    pub fn languages(&self) -> BTreeMap<String, LanguageSpec> {
        let mut all = default_languages();
        for (name, spec) in &self.languages {
            all.insert(name.clone(), spec.clone());
        }
        all
    }
}

/// Replaced in an `untrusted_env` value by rustup's default toolchain.
pub const RUSTUP_DEFAULT_TOOLCHAIN: &str = "{rustup_default_toolchain}";

/// rustup's default toolchain: `default_toolchain` in `$RUSTUP_HOME/settings.toml` (else
/// `$HOME/.rustup/settings.toml`), from the children's environment `env`.
pub fn rustup_default_toolchain(env: &[(String, String)]) -> Option<String> {
    let var = |k: &str| {
        env.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_empty())
    };
    let home = var("RUSTUP_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| var("HOME").map(|h| std::path::Path::new(&h).join(".rustup")))?;
    let text = std::fs::read_to_string(home.join("settings.toml")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "default_toolchain")
            .then(|| v.trim().trim_matches('"').to_string())
            .filter(|v| !v.is_empty())
    })
}

/// rust-analyzer's restricted mode: nothing of the project is compiled or run. Build scripts
/// (`build.rs`) and proc macros are project code; check on save runs `cargo check`, which runs
/// build scripts. An empty `RUSTC_WRAPPER`/`RUSTC_WORKSPACE_WRAPPER` overrides a wrapper the
/// project's `.cargo/config.toml` names for the `cargo metadata` it still runs.
pub const RUST_ANALYZER_RESTRICTED: &str = r#"{
  "cargo": {
    "buildScripts": {"enable": false},
    "extraEnv": {"RUSTC_WRAPPER": "", "RUSTC_WORKSPACE_WRAPPER": ""},
    "cfgs": ["debug_assertions"]
  },
  "procMacro": {"enable": false, "attributes": {"enable": false}},
  "checkOnSave": false,
  "workspace": {"symbol": {"search": {"kind": "all_symbols"}}}
}"#;

/// rust-analyzer as `cargo check` builds: its own default cfgs add `miri`, so it analysed the
/// `#[cfg(miri)]` twin of an item (and `definition` went there) instead of the code cargo
/// compiles; its workspace symbols search every kind of symbol, not only types.
pub const RUST_ANALYZER: &str = r#"{
  "cargo": {"cfgs": ["debug_assertions"]},
  "workspace": {"symbol": {"search": {"kind": "all_symbols"}}}
}"#;

fn v(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The embedded registry.
pub fn default_languages() -> BTreeMap<String, LanguageSpec> {
    [
        ("python", python_language()),
        ("typescript", typescript_language()),
        ("rust", rust_language()),
        ("c", c_language()),
        ("go", go_language()),
        ("dart", dart_language()),
    ]
    .into_iter()
    .map(|(name, spec)| (name.to_string(), spec))
    .collect()
}

/// A language of [`default_languages`] with nothing but its files, root markers and
/// servers: no checker, no options, neither its server nor a checker running project code.
fn plain(extensions: &[&str], markers: &[&str], servers: &[&[&str]]) -> LanguageSpec {
    LanguageSpec {
        extensions: v(extensions),
        markers: v(markers),
        servers: servers.iter().map(|s| v(s)).collect(),
        checker: None,
        checker_format: None,
        init_options: None,
        untrusted_init_options: None,
        untrusted_note: None,
        untrusted_env: BTreeMap::new(),
        server_runs_project_code: false,
        checker_runs_project_code: false,
        memory_limit_mb: None,
    }
}

/// The `python` entry of [`default_languages`].
fn python_language() -> LanguageSpec {
    LanguageSpec {
        checker: Some(v(&["pyright", "--outputjson"])),
        checker_format: Some("pyright-json".into()),
        ..plain(
            &["py", "pyi"],
            &[
                "pyproject.toml",
                "setup.py",
                "setup.cfg",
                "requirements.txt",
                "pyrightconfig.json",
            ],
            &[&["pyright-langserver", "--stdio"], &["pylsp"]],
        )
    }
}

/// The `typescript` entry of [`default_languages`].
fn typescript_language() -> LanguageSpec {
    LanguageSpec {
        checker: Some(v(&["tsc", "--noEmit", "--pretty", "false"])),
        checker_format: Some("tsc".into()),
        // `tsserver.path` is added at start: the TypeScript bundled with the server.
        untrusted_init_options: Some("{}".into()),
        untrusted_note: Some(
            "typescript-language-server on its own bundled TypeScript, not the project's node_modules/typescript (its tsserver and tsconfig plugins are project code)".into(),
        ),
        ..plain(
            &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"],
            &["tsconfig.json", "jsconfig.json", "package.json"],
            &[&["typescript-language-server", "--stdio"]],
        )
    }
}

/// The `rust` entry of [`default_languages`].
fn rust_language() -> LanguageSpec {
    LanguageSpec {
        // The whole project: every package of the workspace, and its tests, examples and
        // benches, as `cargo test` would build them.
        checker: Some(v(&[
            "cargo",
            "check",
            "--workspace",
            "--all-targets",
            "--message-format=json",
        ])),
        checker_format: Some("cargo-json".into()),
        init_options: Some(RUST_ANALYZER.into()),
        untrusted_init_options: Some(RUST_ANALYZER_RESTRICTED.into()),
        untrusted_note: Some(
            "rust-analyzer without build scripts, proc macros and check on save, on rustup's default toolchain (not the project's rust-toolchain.toml)".into(),
        ),
        // A rust-toolchain.toml may name any toolchain directory (`path = ...`), whose
        // `rust-analyzer`, `cargo` and `rustc` the rustup proxies would then run.
        untrusted_env: [(
            "RUSTUP_TOOLCHAIN".to_string(),
            RUSTUP_DEFAULT_TOOLCHAIN.to_string(),
        )]
        .into(),
        checker_runs_project_code: true,
        ..plain(&["rs"], &["Cargo.toml"], &[&["rust-analyzer"]])
    }
}

/// The `c` entry of [`default_languages`].
fn c_language() -> LanguageSpec {
    plain(
        &["c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx"],
        &[
            "compile_commands.json",
            "compile_flags.txt",
            "CMakeLists.txt",
            ".clangd",
        ],
        &[&["clangd"]],
    )
}

/// The `go` entry of [`default_languages`].
fn go_language() -> LanguageSpec {
    LanguageSpec {
        checker: Some(v(&["go", "vet", "./..."])),
        checker_format: Some("gcc".into()),
        // Packages that depend on a change are diagnosed at once, not after a second's
        // debounce, and the diagnosing is reported as progress (`Flavor::dependents_delay`).
        init_options: Some(r#"{"diagnosticsDelay": "0s", "verboseWorkDoneProgress": true}"#.into()),
        ..plain(&["go"], &["go.mod"], &[&["gopls"]])
    }
}

/// The `dart` entry of [`default_languages`].
fn dart_language() -> LanguageSpec {
    LanguageSpec {
        checker: Some(v(&["dart", "analyze"])),
        // Analyzer plugins named in analysis_options.yaml run inside the server.
        server_runs_project_code: true,
        checker_runs_project_code: true,
        ..plain(
            &["dart"],
            &["pubspec.yaml"],
            &[&["dart", "language-server", "--protocol=lsp"]],
        )
    }
}

/// The LSP `languageId` of a file, by extension.
pub fn language_id(language: &str, extension: &str) -> String {
    match (language, extension) {
        ("typescript", "tsx") => "typescriptreact".into(),
        ("typescript", "js" | "mjs" | "cjs") => "javascript".into(),
        ("typescript", "jsx") => "javascriptreact".into(),
        ("c", "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx") => "cpp".into(),
        (lang, _) => lang.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_languages_memory_limit_replaces_the_global_one_and_zero_is_none() {
        let mut config = LspConfig::default();
        let python = default_languages()["python"].clone();
        assert_eq!(config.memory_limit(&python), Some(4096 << 20));
        config.memory_limit_mb = 0;
        assert_eq!(config.memory_limit(&python), None);
        let own = LanguageSpec {
            memory_limit_mb: Some(64),
            ..python.clone()
        };
        assert_eq!(config.memory_limit(&own), Some(64 << 20));
        config.memory_limit_mb = 2048;
        let none = LanguageSpec {
            memory_limit_mb: Some(0),
            ..python
        };
        assert_eq!(config.memory_limit(&none), None);
    }

    #[test]
    fn rustup_default_toolchain_comes_from_rustup_settings() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".rustup")).unwrap();
        std::fs::write(
            home.join(".rustup/settings.toml"),
            "version = \"12\"\ndefault_toolchain = \"1.90-x86_64-unknown-linux-gnu\"\n",
        )
        .unwrap();
        let env = vec![("HOME".to_string(), home.display().to_string())];
        assert_eq!(
            rustup_default_toolchain(&env).as_deref(),
            Some("1.90-x86_64-unknown-linux-gnu")
        );
        let elsewhere = vec![(
            "RUSTUP_HOME".to_string(),
            dir.path().join("none").display().to_string(),
        )];
        assert_eq!(rustup_default_toolchain(&elsewhere), None);
    }
}
