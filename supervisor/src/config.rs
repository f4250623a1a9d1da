//! The daemon's configuration: embedded defaults, overridden by an optional TOML file.
//! No file is needed to run; every key is optional.

use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod mcp;
pub mod metrics;
mod models;

pub use models::{DEFAULT_MODELS_ENDPOINT, ModelsConfig};

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
    /// How long an `ask_user` call waits for the person's answer before it fails with
    /// `timeout`.
    pub ask_user_timeout_s: u64,
    pub vibe: VibeConfig,
    pub policy: PolicyConfig,
    pub limits: Limits,
    pub restart: RestartConfig,
    pub env: EnvConfig,
    /// `[lsp]`: language servers (registry overrides, search path, waits).
    pub lsp: toolvisor_lsp::LspConfig,
    /// `[trust]`: workspace trust — roots whose project code language servers and checkers
    /// may run for every run.
    pub trust: TrustConfig,
    /// `[files]`: the file and search tools (`read`, `ls`, `find`, `grep`, `write`, `edit`,
    /// `apply_patch`).
    pub files: FilesConfig,
    /// `[input_limits.images.resize]`: the model's image limits `read` fits images to.
    pub input_limits: InputLimitsConfig,
    /// `[result_store]`: large results stored for `tool_result_read`.
    pub result_store: ResultStoreConfig,
    /// `[secrets]`: values masked in everything a tool returns.
    pub secrets: SecretsConfig,
    /// `[kernels]`: `eval`'s Python and JavaScript kernels.
    pub kernels: KernelsConfig,
    /// `[debug]`: `debug`'s adapters, session TTL and waits.
    pub debug: toolvisor_dap::DebugConfig,
    /// `[metrics]`: the opt-in Prometheus endpoint.
    pub metrics: MetricsConfig,
    /// `[structural]`: what `ast_grep` remembers between searches.
    pub structural: StructuralConfig,
    /// `[data]`: the data hub's collections and pins.
    pub data: toolvisor_data::DataConfig,
    /// `[models]`: the model hub endpoint, its token and the model store (download jobs).
    pub models: ModelsConfig,
    /// `[inference]`: the local inference pool (server command per format, idle TTL) and its
    /// OpenAI-compatible endpoint.
    pub inference: toolvisor_inference::InferenceConfig,
    /// `[mcp]`: what `toolvisor mcp --config` takes from this file (approvals).
    pub mcp: mcp::McpConfig,
    pub testing: TestingConfig,
    /// Where this configuration came from, for `status`.
    #[serde(skip)]
    pub source: String,
}

/// `[structural]`: `ast_grep`'s memory of per-file outcomes (a file lacking the pattern's
/// literal, or its matches), keyed by pattern and file version; 0 turns it off. And what
/// `ast_grep` and `ast_edit` may parse at once (`toolvisor_structural::budget`).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StructuralConfig {
    pub cache_bytes: usize,
    /// Bytes of source parsed at once by every structural call together; a file takes its
    /// size (a tree costs many times that). Past it a call waits `parse_wait_ms`, then `busy`.
    pub parse_budget_bytes: u64,
    /// Longest wait for room in the parse budget.
    pub parse_wait_ms: u64,
    /// A file over this size whose longest line is over `max_line_bytes` is minified: skipped
    /// (listed in `skipped`), refused when named as the path.
    pub max_minified_bytes: u64,
    pub max_line_bytes: u64,
}

impl Default for StructuralConfig {
    fn default() -> Self {
        use toolvisor_structural::budget as b;
        StructuralConfig {
            cache_bytes: 32 * 1024 * 1024,
            parse_budget_bytes: b::DEFAULT_BUDGET_BYTES,
            parse_wait_ms: b::DEFAULT_WAIT.as_millis() as u64,
            max_minified_bytes: b::DEFAULT_MINIFIED_BYTES,
            max_line_bytes: b::DEFAULT_LINE_BYTES,
        }
    }
}

impl StructuralConfig {
    /// The limits every structural call shares (one budget for the daemon).
    pub fn limits(&self) -> toolvisor_structural::budget::Limits {
        toolvisor_structural::budget::Limits {
            budget: Some(std::sync::Arc::new(
                toolvisor_structural::budget::ParseBudget::new(
                    self.parse_budget_bytes,
                    std::time::Duration::from_millis(self.parse_wait_ms),
                ),
            )),
            minified_bytes: self.max_minified_bytes,
            line_bytes: self.max_line_bytes,
        }
    }
}

/// `[metrics]`: a Prometheus text endpoint, off unless `listen` is set: `"127.0.0.1:9464"`
/// (loopback only) or `"unix:/path/metrics.sock"` (a private directory, like the daemon's
/// socket). Scrapes answer `GET /metrics`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    pub listen: Option<String>,
}

/// `[trust]`: workspace trust. A root is trusted when it (or a directory above it) is listed
/// here, or when the user approved `lsp trust` for a run; in an untrusted root language
/// servers run restricted and checkers that execute project code do not run from a read call.
/// Default: no root is trusted.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrustConfig {
    /// Trusted directories; each covers the directories below it.
    pub roots: Vec<PathBuf>,
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
    /// Connections served at once, counting those still before their Hello. Past it a new
    /// connection gets a `busy` refusal naming this key, then is closed.
    pub max_sessions: usize,
    /// How long a new connection may take to send its Hello.
    pub hello_timeout_s: u64,
    /// Once the first byte of a frame has arrived, the whole frame must arrive within this
    /// many seconds, or the connection gets an `error` frame and is closed.
    pub frame_deadline_s: u64,
    /// Bytes held by frames started and not yet finished, over every connection. A connection
    /// whose partial frame would take the total past it gets an `error` frame naming this key
    /// and is closed, and its bytes are given back; an idle connection holds none.
    pub max_partial_frame_bytes: usize,
    /// Calls running at once on one connection; a call past it is answered `busy` at once.
    pub max_calls_in_flight: usize,
    /// Encoded bytes queued for one client that it has not read yet. Past it the daemon
    /// stops reading that client's frames, and its calls wait to queue more, until it reads.
    pub max_queued_output_bytes: usize,
    /// On SIGTERM or `toolvisor drain`: how long calls in flight may run on before the
    /// resources are stopped under them.
    pub drain_timeout_s: u64,
    /// Once no call has run for this many seconds after some did, the daemon gives the memory
    /// its calls freed back to the system (`malloc_trim`): a big search's buffers otherwise
    /// stay resident in glibc's per-thread arenas. 0 disables.
    pub trim_after_idle_s: u64,
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
            max_sessions: 256,
            hello_timeout_s: 10,
            frame_deadline_s: 30,
            max_partial_frame_bytes: 256 * 1024 * 1024,
            max_calls_in_flight: 16,
            max_queued_output_bytes: 16 * 1024 * 1024,
            drain_timeout_s: 30,
            trim_after_idle_s: 3,
        }
    }
}

impl Limits {
    /// The per-connection limits must be positive: 0 would refuse every client, or stall it.
    fn check(&self) -> Result<(), String> {
        for (key, value) in [
            ("limits.max_sessions", self.max_sessions as u64),
            ("limits.hello_timeout_s", self.hello_timeout_s),
            ("limits.frame_deadline_s", self.frame_deadline_s),
            (
                "limits.max_partial_frame_bytes",
                self.max_partial_frame_bytes as u64,
            ),
            (
                "limits.max_calls_in_flight",
                self.max_calls_in_flight as u64,
            ),
            (
                "limits.max_queued_output_bytes",
                self.max_queued_output_bytes as u64,
            ),
        ] {
            if value == 0 {
                return Err(format!("{key} = 0: it must be a positive integer"));
            }
        }
        Ok(())
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
    /// Variables set on every child the daemon starts (servers, checkers, kernels, debug
    /// adapters and their debuggees, commands, processes), over the inherited ones. The
    /// default keeps Python from writing `__pycache__/` into the user's tree; `set = {}`
    /// turns that off.
    pub set: std::collections::BTreeMap<String, String>,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            allow: DEFAULT_ENV_ALLOWLIST
                .iter()
                .map(|s| s.to_string())
                .collect(),
            set: toolvisor_kit::launch::DEFAULT_ENV_SET
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

/// `[vibe]`: background workers. Vibe mode (the `vibe_*` tools) is on while at least one
/// tier has a command whose program resolves.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VibeConfig {
    /// Attempts running at once across the daemon; more wait in a queue.
    pub max_running: usize,
    /// Workers waiting for a slot; a spawn beyond is refused with `busy`.
    pub max_queued: usize,
    /// A finished worker nobody asked about for this long is collected.
    pub keep_s: u64,
    /// One attempt may run this long, then it is killed and the worker fails; 0 disables.
    pub attempt_timeout_s: u64,
    /// Bytes of a worker's stdout kept as its result (head and tail).
    pub result_bytes: usize,
    pub tiers: VibeTiers,
}

impl Default for VibeConfig {
    fn default() -> Self {
        VibeConfig {
            max_running: 4,
            max_queued: 32,
            keep_s: 30 * 60,
            attempt_timeout_s: 60 * 60,
            result_bytes: 256 * 1024,
            tiers: VibeTiers::default(),
        }
    }
}

/// `[vibe.tiers.fast]` and `[vibe.tiers.good]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VibeTiers {
    pub fast: Option<VibeTierConfig>,
    pub good: Option<VibeTierConfig>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VibeTierConfig {
    /// Program and arguments; `{brief}` in an argument is replaced by the brief, which is
    /// also written to the worker's stdin.
    pub command: Vec<String>,
    /// The surface a worker of this tier gets when it connects back to the daemon with its
    /// credential (`TOOLVISOR_RUN_TOKEN`), whatever its Hello claims. Default `read`.
    #[serde(default = "read_tier")]
    pub surface: toolvisor_protocol::wire::Tier,
    /// Whether such a worker's calls that need approval may ask (it must also answer
    /// approval requests itself). Default false: they are denied.
    #[serde(default)]
    pub approvals: bool,
}

fn read_tier() -> toolvisor_protocol::wire::Tier {
    toolvisor_protocol::wire::Tier::Read
}

/// `[files]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilesConfig {
    /// Let the file tools read and write anywhere the daemon's user may, not only inside
    /// the run's workdir.
    pub allow_outside_workdir: bool,
    /// Directories readable and searchable (never written) besides the workdir, e.g.
    /// `["~/.cargo/registry/src"]`.
    pub read_roots: Vec<PathBuf>,
    /// Lines `read` returns without a `limit`.
    pub read_max_lines: u64,
    /// Characters of file content one `read` returns at most (it stops at a line boundary).
    pub read_max_chars: usize,
    /// Lines longer than this are cut by `read`.
    pub read_max_line_chars: usize,
    /// Matching lines longer than this are cut by `grep`.
    pub grep_max_line_chars: usize,
    /// A `find` or `grep` running longer stops and returns what it found.
    pub search_timeout_s: u64,
    /// Entries one `ls` returns at most.
    pub ls_max_entries: usize,
}

impl Default for FilesConfig {
    /// The file tools' own defaults (`toolvisor_files::FilesConfig`), one place for each.
    fn default() -> Self {
        let files = toolvisor_files::FilesConfig::default();
        FilesConfig {
            allow_outside_workdir: files.allow_outside_workdir,
            read_roots: files.read_roots,
            read_max_lines: files.read.default_lines,
            read_max_chars: files.read.max_chars,
            read_max_line_chars: files.read.max_line_chars,
            grep_max_line_chars: files.search.max_line_chars,
            search_timeout_s: files.search.timeout.as_secs(),
            ls_max_entries: files.ls_max_entries,
        }
    }
}

/// `[input_limits]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InputLimitsConfig {
    pub images: ImagesConfig,
}

/// `[input_limits.images]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImagesConfig {
    pub resize: ImageResizeConfig,
}

/// `[input_limits.images.resize]` (the names of the product's model catalogue).
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImageResizeConfig {
    #[serde(rename = "maxWidth")]
    pub max_width: u64,
    #[serde(rename = "maxHeight")]
    pub max_height: u64,
    /// Bytes after base64.
    #[serde(rename = "maxBytes")]
    pub max_bytes: u64,
    #[serde(rename = "jpegQuality")]
    pub jpeg_quality: u64,
}

impl Default for ImageResizeConfig {
    fn default() -> Self {
        ImageResizeConfig {
            max_width: 2000,
            max_height: 2000,
            max_bytes: 4_718_592,
            jpeg_quality: 80,
        }
    }
}

/// `[result_store]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResultStoreConfig {
    /// A result whose JSON is longer than this many characters is stored and projected.
    pub inline_chars: usize,
    /// Characters of stored text a projection shows (at most half of `inline_chars`).
    pub projection_chars: usize,
    /// One result above this many bytes is not stored (its refs answer `not_available`).
    pub max_result_bytes: u64,
    pub max_bytes_per_conversation: u64,
    pub max_total_bytes: u64,
    /// Stored results are deleted after this long.
    pub keep_s: u64,
}

impl Default for ResultStoreConfig {
    fn default() -> Self {
        ResultStoreConfig {
            inline_chars: 48_000,
            projection_chars: 12_000,
            max_result_bytes: 64 * 1024 * 1024,
            max_bytes_per_conversation: 256 * 1024 * 1024,
            max_total_bytes: 1024 * 1024 * 1024,
            keep_s: 7 * 24 * 3600,
        }
    }
}

/// `[secrets]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretsConfig {
    /// Environment variables (of the daemon) whose values are masked.
    pub env: Vec<String>,
    /// Name globs whose variables' values are masked.
    pub patterns: Vec<String>,
    /// Values shorter than this are not masked (they would mask ordinary words).
    pub min_length: usize,
    /// Mask tokens of the well-known formats (`ghp_…`, `AKIA…`, private key blocks, …)
    /// wherever they appear, not only values of the daemon's environment.
    pub formats: bool,
}

impl Default for SecretsConfig {
    fn default() -> Self {
        SecretsConfig {
            env: Vec::new(),
            patterns: toolvisor_files::secrets::DEFAULT_PATTERNS
                .iter()
                .map(|p| p.to_string())
                .collect(),
            min_length: 8,
            formats: true,
        }
    }
}

impl Config {
    /// The keys of `[files]`, `[input_limits]`, `[result_store]` and `[secrets]` that must
    /// be positive or bounded; the error names the key.
    fn check_files(&self) -> Result<(), String> {
        let r = &self.input_limits.images.resize;
        let f = &self.files;
        let st = &self.result_store;
        let positive: [(&str, u64); 15] = [
            ("input_limits.images.resize.maxWidth", r.max_width),
            ("input_limits.images.resize.maxHeight", r.max_height),
            ("input_limits.images.resize.maxBytes", r.max_bytes),
            ("input_limits.images.resize.jpegQuality", r.jpeg_quality),
            ("files.read_max_lines", f.read_max_lines),
            ("files.read_max_chars", f.read_max_chars as u64),
            ("files.read_max_line_chars", f.read_max_line_chars as u64),
            ("files.grep_max_line_chars", f.grep_max_line_chars as u64),
            ("files.search_timeout_s", f.search_timeout_s),
            ("files.ls_max_entries", f.ls_max_entries as u64),
            ("result_store.inline_chars", st.inline_chars as u64),
            ("result_store.projection_chars", st.projection_chars as u64),
            ("result_store.max_result_bytes", st.max_result_bytes),
            (
                "result_store.max_bytes_per_conversation",
                st.max_bytes_per_conversation,
            ),
            ("result_store.keep_s", st.keep_s),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(format!("{key} = 0: it must be a positive integer"));
            }
        }
        for (key, value) in [
            ("input_limits.images.resize.maxWidth", r.max_width),
            ("input_limits.images.resize.maxHeight", r.max_height),
        ] {
            if value > 100_000 {
                return Err(format!("{key} = {value}: at most 100000 pixels"));
            }
        }
        if r.jpeg_quality > 100 {
            return Err(format!(
                "input_limits.images.resize.jpegQuality = {}: JPEG quality is 1..=100",
                r.jpeg_quality
            ));
        }
        if st.inline_chars < 1000 {
            return Err(format!(
                "result_store.inline_chars = {}: at least 1000 characters",
                st.inline_chars
            ));
        }
        if st.projection_chars * 2 > st.inline_chars {
            return Err(format!(
                "result_store.projection_chars = {} is more than half of result_store.inline_chars = {}: a projection must leave room for the rest of the result",
                st.projection_chars, st.inline_chars
            ));
        }
        if self.secrets.min_length == 0 {
            return Err("secrets.min_length = 0: it must be a positive integer".into());
        }
        toolvisor_files::secrets::Secrets::from_vars([], &[], &self.secrets.patterns, 1)
            .map_err(|e| format!("secrets.patterns: {e}"))?;
        Ok(())
    }
}

/// `[kernels]`: `eval`'s kernels. See docs/OPERATIONS.md.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KernelsConfig {
    /// Python interpreter (absolute path, or a name looked up on the children's PATH);
    /// default: the run's `.venv/bin/python`, else `python3` on the PATH.
    pub python: Option<String>,
    /// Node binary (path or name); default `node` on the PATH.
    pub node: Option<String>,
    /// The `typescript` package directory used to strip the types of TypeScript cells when
    /// Node has no type stripping of its own (before 22.13); default: the run's own
    /// `node_modules/typescript`, then the global npm root's.
    pub typescript: Option<String>,
    /// A kernel without a call for this long is stopped (its state is lost); 0 disables.
    pub idle_ttl_s: u64,
    /// A cell's default inactivity budget: how long it may run without output.
    pub inactivity_s: u64,
    /// The largest `timeout_s` a call may ask for.
    pub inactivity_max_s: u64,
    /// After the interrupt, how long a cell gets to stop before its kernel is killed.
    pub interrupt_grace_s: u64,
    /// Resident memory one kernel may use, in MiB; over it the kernel is killed. 0: no cap.
    pub memory_mb: u64,
    /// Bytes of a cell's text output kept (first and last halves).
    pub output_bytes: usize,
    /// Decoded bytes of images (figures) one cell may return.
    pub image_bytes: usize,
    /// Bytes of one rich rendering (e.g. a table's HTML).
    pub html_bytes: usize,
    /// Rows of a table (pandas) shown before it is cut.
    pub table_rows: u32,
    /// How long an interpreter gets to start its driver.
    pub start_timeout_s: u64,
    /// How long a `tool()` call forwarded to the client (`bridge_tools`) waits for its
    /// `bridge_result`.
    pub bridge_timeout_s: u64,
}

impl Default for KernelsConfig {
    fn default() -> Self {
        KernelsConfig {
            python: None,
            node: None,
            typescript: None,
            idle_ttl_s: 30 * 60,
            inactivity_s: 5 * 60,
            inactivity_max_s: 60 * 60,
            interrupt_grace_s: 5,
            memory_mb: 4096,
            output_bytes: 1024 * 1024,
            image_bytes: 8 * 1024 * 1024,
            html_bytes: 256 * 1024,
            table_rows: 50,
            start_timeout_s: 30,
            bridge_timeout_s: 60 * 60,
        }
    }
}

impl KernelsConfig {
    fn check(&self) -> Result<(), String> {
        for (key, value) in [
            ("kernels.inactivity_s", self.inactivity_s),
            ("kernels.inactivity_max_s", self.inactivity_max_s),
            ("kernels.interrupt_grace_s", self.interrupt_grace_s),
            ("kernels.output_bytes", self.output_bytes as u64),
            ("kernels.html_bytes", self.html_bytes as u64),
            ("kernels.table_rows", u64::from(self.table_rows)),
            ("kernels.start_timeout_s", self.start_timeout_s),
            ("kernels.bridge_timeout_s", self.bridge_timeout_s),
        ] {
            if value == 0 {
                return Err(format!("{key} = 0: it must be a positive integer"));
            }
        }
        if self.inactivity_s > self.inactivity_max_s {
            return Err(format!(
                "kernels.inactivity_s = {} is above kernels.inactivity_max_s = {}",
                self.inactivity_s, self.inactivity_max_s
            ));
        }
        Ok(())
    }

    /// The kernels' limits as the kernel worker takes them.
    pub fn limits(&self) -> toolvisor_kernel::KernelLimits {
        toolvisor_kernel::KernelLimits {
            python: self.python.clone().filter(|p| !p.is_empty()),
            node: self.node.clone().filter(|n| !n.is_empty()),
            typescript: self.typescript.clone().filter(|t| !t.is_empty()),
            idle_ttl: (self.idle_ttl_s > 0).then(|| Duration::from_secs(self.idle_ttl_s)),
            interrupt_grace: Duration::from_secs(self.interrupt_grace_s),
            memory_bytes: (self.memory_mb > 0).then_some(self.memory_mb << 20),
            output: toolvisor_kernel::OutputLimits {
                text_bytes: self.output_bytes,
                image_bytes: self.image_bytes,
                html_bytes: self.html_bytes,
            },
            table_rows: self.table_rows,
            start_timeout: Duration::from_secs(self.start_timeout_s),
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
    /// After this many atomic file writes, the next one hangs between its temp file and its
    /// rename (logged as a warning), so a test can SIGKILL the daemon mid-write
    /// (`tests/tests/files_crash_windows.rs`). Never set it outside tests.
    pub pause_after_writes: Option<u64>,
    /// How long an idle lane lives before it is pruned (default 60 s).
    pub lane_idle_ms: Option<u64>,
    /// How long an idle conversation stays in the `status` roster (default 1 h).
    pub conversation_idle_ms: Option<u64>,
    /// Read the fit label's memory facts from this file instead of `/proc/meminfo`.
    pub meminfo: Option<PathBuf>,
    /// The model store's free bytes, instead of what `statvfs` says (`download_model`'s
    /// free-space check).
    pub store_free_bytes: Option<u64>,
    /// Look for accelerators in `<dir>/drm` and `<dir>/nvidia` instead of `/sys/class/drm`
    /// and `/proc/driver/nvidia/gpus` (`nvidia-smi` is still looked up on the `PATH`).
    pub accelerator_roots: Option<PathBuf>,
    /// Read the kernel's ptrace rule for `debug attach {pid}` from this file instead of
    /// `/proc/sys/kernel/yama/ptrace_scope`.
    pub ptrace_scope: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: None,
            state_dir: None,
            max_frame: toolvisor_protocol::DEFAULT_MAX_FRAME,
            approval_timeout_s: 300,
            ask_user_timeout_s: 600,
            vibe: VibeConfig::default(),
            policy: PolicyConfig::default(),
            limits: Limits::default(),
            restart: RestartConfig::default(),
            env: EnvConfig::default(),
            lsp: toolvisor_lsp::LspConfig::default(),
            trust: TrustConfig::default(),
            files: FilesConfig::default(),
            input_limits: InputLimitsConfig::default(),
            result_store: ResultStoreConfig::default(),
            secrets: SecretsConfig::default(),
            kernels: KernelsConfig::default(),
            debug: toolvisor_dap::DebugConfig::default(),
            metrics: MetricsConfig::default(),
            data: toolvisor_data::DataConfig::default(),
            structural: StructuralConfig::default(),
            models: ModelsConfig::default(),
            inference: Default::default(),
            mcp: mcp::McpConfig::default(),
            testing: TestingConfig::default(),
            source: "embedded defaults".into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is not one only its owner (us or root) could have written.
    #[error(
        "refusing the config file {path}: {problem}; it decides what the agent may do, so it must be a regular file of yours (or root's) that group and others cannot write (`chmod go-w {path}`)"
    )]
    Unsafe { path: String, problem: String },
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

/// The config file's text: opened once (`O_CLOEXEC`; `O_NONBLOCK`, so a FIFO cannot stall
/// the start), checked by `fstat` on that descriptor — a regular file owned by us or root
/// that others cannot write, nor a group other than our own (a umask of 002 with a group of
/// one's own is common and safe) — and read from the same descriptor, so what is read is what
/// was checked. A symbolic link is followed (dotfile managers link config files in place):
/// the file it reaches is the one checked, so a link cannot lend it another user's file.
fn read_config(path: &Path) -> Result<String, ConfigError> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let read_error = |source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    let problem = if !meta.is_file() {
        Some("it is not a regular file".to_string())
    } else if meta.uid() != uid() && meta.uid() != 0 {
        Some(format!(
            "it belongs to uid {}, not to us or root",
            meta.uid()
        ))
    } else if meta.mode() & 0o002 != 0
        || (meta.mode() & 0o020 != 0 && meta.gid() != nix::unistd::getegid().as_raw())
    {
        Some(format!(
            "group or others may write it (mode {:04o}, group {})",
            meta.mode() & 0o7777,
            meta.gid()
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(ConfigError::Unsafe {
            path: path.display().to_string(),
            problem,
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(read_error)?;
    Ok(text)
}

impl Config {
    /// Embedded defaults, overridden by `path` when given.
    pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = read_config(path)?;
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
        for (tier, t) in [
            ("fast", &config.vibe.tiers.fast),
            ("good", &config.vibe.tiers.good),
        ] {
            if t.as_ref()
                .is_some_and(|t| t.command.first().is_none_or(String::is_empty))
            {
                return Err(ConfigError::Parse {
                    path: path.display().to_string(),
                    message: format!(
                        "vibe.tiers.{tier}.command is empty: give the program and its arguments, e.g. [\"my-agent\", \"{{brief}}\"]"
                    ),
                });
            }
        }
        if let Some(relative) = config.trust.roots.iter().find(|r| !r.is_absolute()) {
            return Err(ConfigError::Parse {
                path: path.display().to_string(),
                message: format!(
                    "trust.roots: {:?} is not an absolute path; a trusted root must not depend on the daemon's working directory",
                    relative.display().to_string()
                ),
            });
        }
        config
            .limits
            .check()
            .map_err(|message| ConfigError::Parse {
                path: path.display().to_string(),
                message,
            })?;
        config.check_files().map_err(|message| ConfigError::Parse {
            path: path.display().to_string(),
            message,
        })?;
        config
            .kernels
            .check()
            .map_err(|message| ConfigError::Parse {
                path: path.display().to_string(),
                message,
            })?;
        config.debug.check().map_err(|message| ConfigError::Parse {
            path: path.display().to_string(),
            message,
        })?;
        config.data.check().map_err(|message| ConfigError::Parse {
            path: path.display().to_string(),
            message,
        })?;
        if let Some(listen) = &config.metrics.listen {
            metrics::Endpoint::parse(listen).map_err(|message| ConfigError::Parse {
                path: path.display().to_string(),
                message,
            })?;
        }
        config
            .models
            .check()
            .map_err(|message| ConfigError::Parse {
                path: path.display().to_string(),
                message,
            })?;
        config
            .inference
            .check()
            .map_err(|message| ConfigError::Parse {
                path: path.display().to_string(),
                message,
            })?;
        config.source = path.display().to_string();
        Ok(config)
    }

    /// The data hub's directory (database and notes) for the state directory `state_dir`.
    pub fn data_dir(&self, state_dir: &Path) -> PathBuf {
        self.data
            .dir
            .clone()
            .unwrap_or_else(|| state_dir.join("data"))
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

#[cfg(test)]
mod tests;
