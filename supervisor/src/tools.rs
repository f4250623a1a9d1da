//! The tools: every family's declarations assembled ([`all`]), the call context and services
//! handlers see, [`run`] (a call's handler, then the result store), and the handlers of
//! `bash`, `process` and the lane probes of the test suite. A tool is one value
//! ([`spec::ToolSpec`]) declared next to its handler, one file per family (`tools/*.rs`);
//! each handler takes a small context that carries only the services it uses. Nothing here
//! imports `session`, `daemon` or `registry`: the session reaches the handlers through
//! [`run`], and handlers reach the client only through [`Caller`].
//!
//! `Services` is what the daemon lends handlers (processes, language servers, vibe workers,
//! question ports, staged edits, the file tools' state and result store, the search cache, kernels,
//! debuggers, the data hub, download jobs, the inference pool, the launcher, the configuration).
//! Each family's context is built from it and names only what the family uses (`FileTools`,
//! `StructuralTools`, `LspTools`, `EvalTools`, `AskUser`; `debug`, `vibe_*` and `process` take
//! their one service), so a handler sees only what it uses (`tools/family_tests.rs` calls each
//! family with nothing but its context and a fake `Caller`). The one back-edge, eval's `tool()`
//! bridge into `session::execute`, sits behind `Caller` and `toolvisor_kernel::Bridge`
//! (`supervisor/tests/layers_dependency_direction.rs`).

pub(crate) mod data;
mod debug;
pub(crate) mod downloads;
pub(crate) mod eval;
pub(crate) mod files;
pub(crate) mod human;
pub(crate) mod inference;
pub(crate) mod lsp;
pub mod reference;
pub mod spec;
pub(crate) mod structural;

#[cfg(test)]
mod family_tests;

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value as Json;
use tokio::sync::mpsc;
use toolvisor_files::secrets::Secrets;
use toolvisor_jobs::bash::{self, BashRequest};
use toolvisor_jobs::tracked::{PTY_DEFAULT_SIZE, Processes, StartOptions};
use toolvisor_kernel::Bridge;
use toolvisor_kit::launch::Launcher;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{BashResult, ProbeResult, ProcessList, ProcessResult};
use toolvisor_protocol::tools::{BashArgs, ProcessArgs, ProcessOp, RestartMode};
use toolvisor_protocol::wire::{Event, Tier};

use crate::config::{Config, Limits};
use spec::Approval;
pub use spec::ToolSpec;

/// A boxed future, as trait objects return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The client side of a call as a handler sees it: where the call's events go, and the
/// `tool()` bridge its eval cells get. The session implements it (events into the
/// connection's outbox, the bridge through the gates); unit tests pass a fake.
pub trait Caller: Send + Sync {
    /// Stream `event` of call `call` to the client.
    fn event(&self, call: u64, event: Event) -> BoxFuture<'_, ()>;
    /// The `tool()` bridge for the eval cells of the call `ctx` describes.
    fn bridge(&self, ctx: &CallCtx) -> Arc<dyn Bridge>;
}

/// What a running call knows about where it came from.
pub struct CallCtx {
    pub id: u64,
    pub conversation: String,
    pub workdir: PathBuf,
    /// The run the client named in its Hello (empty when it named none).
    pub run_id: String,
    /// The highest tier the calling session may use (what the data hub's pins key on).
    pub surface: toolvisor_protocol::wire::Tier,
    pub caller: Arc<dyn Caller>,
}

impl CallCtx {
    /// Stream an event of this call to the client.
    pub async fn event(&self, event: Event) {
        self.caller.event(self.id, event).await
    }

    /// The run whose diagnostics ledger the call folds into (the conversation when the
    /// client named no run).
    pub fn run(&self) -> String {
        if self.run_id.is_empty() {
            format!("conversation:{}", self.conversation)
        } else {
            self.run_id.clone()
        }
    }

    /// The workdir's real path: servers report canonical paths, and answers show paths
    /// relative to it.
    pub fn real_workdir(&self) -> PathBuf {
        std::fs::canonicalize(&self.workdir).unwrap_or_else(|_| self.workdir.clone())
    }
}

/// The services tool handlers use, owned by the daemon. [`run`] lends each family only
/// its part (see the family contexts in `tools/*.rs`).
pub struct Services {
    pub config: Arc<Config>,
    pub launcher: Launcher,
    /// Tracked processes of `process`.
    pub processes: Processes,
    /// Language servers of `lsp`, `lsp_rename`, `synced_write` and diagnostics on write.
    pub lsp: Arc<toolvisor_lsp::LanguageServers>,
    /// Background workers of `vibe_*`.
    pub vibes: toolvisor_jobs::vibe::Vibes,
    /// Question ports and pending `ask_user` questions.
    pub questions: crate::questions::QuestionPorts,
    /// Edits staged by `ast_edit`, persisted under `<state_dir>/structural/edits`.
    pub edits: Arc<toolvisor_structural::store::EditStore>,
    /// The file tools' limits and the result store (`<state_dir>/results`).
    pub files: Arc<toolvisor_files::Files>,
    /// `eval`'s kernels, one per (conversation, language).
    pub kernels: toolvisor_kernel::Kernels,
    /// `debug`'s sessions, one per conversation, and its breakpoints.
    pub debug: toolvisor_dap::Debuggers,
    /// `ast_grep`'s per-file outcomes between searches (`[structural] cache_bytes`).
    pub search_cache: Arc<toolvisor_structural::cache::SearchCache>,
    /// The daemon-wide parse budget and the minified-file rule of `ast_grep` and `ast_edit`
    /// (`[structural]`).
    pub structural_limits: toolvisor_structural::budget::Limits,
    /// The data hub of `search_data`, `read_data`, `list_data`, `write_data`, `delete_data`.
    pub data: Arc<toolvisor_data::DataHub>,
    /// Download jobs and the model store; `None` when the store could not be opened (the
    /// model tools are then detached with the reason).
    pub downloads: Option<Arc<toolvisor_downloads::Downloads>>,
    /// The inference pool and its token usage; `None` when it could not be opened (its tools
    /// are then detached with the reason).
    pub inference: Option<Arc<toolvisor_inference::Inference>>,
}

impl Services {
    /// Known secret values, masked in everything a tool returns or streams.
    pub fn secrets(&self) -> &Secrets {
        self.files.store.secrets()
    }
}

#[cfg(test)]
pub(crate) use spec::parse_args as parse;

fn need<'a>(
    tool: &str,
    op: &str,
    field: &str,
    value: &'a Option<String>,
) -> Result<&'a str, ToolError> {
    value.as_deref().ok_or_else(|| {
        ToolError::new(
            ErrorKind::InvalidArgs,
            format!("{tool} {op}: missing required argument `{field}`"),
            format!("`{op}` needs `{field}`"),
        )
    })
}

/// Run the handler of `spec` (the call passed its gates); the result leaves through the
/// result store: secrets masked, large ones projected. An error leaves masked too (a path it
/// quotes may hold a secret: a link's target, say).
pub async fn run(
    services: &Services,
    ctx: &CallCtx,
    spec: &ToolSpec,
    call: spec::Parsed,
) -> Result<Json, ToolError> {
    let result = match spec.run(services, ctx, call).await {
        Ok(result) => result,
        Err(e) => return Err(files::mask_error(&services.files, e)),
    };
    files::finish(
        &services.files,
        &ctx.conversation,
        spec.name,
        spec.passage,
        result,
    )
    .await
}

/// Whether the resources some families need are attached to this daemon, decided when it
/// starts and given to those families' declarations (so no tool is patched by its resource
/// name afterwards). The default is what a daemon with no configuration has.
#[derive(Clone, Debug)]
pub struct Attachments {
    /// The vibe roster (a `[vibe.tiers.*]` command resolves).
    pub vibe: spec::Attachment,
    /// The data hub (`[data.collections]` names one).
    pub data: spec::Attachment,
    /// The model store and download jobs (opened at start).
    pub downloads: spec::Attachment,
    /// The inference pool (opened at start).
    pub inference: spec::Attachment,
}

impl Default for Attachments {
    fn default() -> Self {
        Attachments {
            vibe: human::vibe_off(),
            data: data::no_collections(),
            downloads: spec::Attachment::Attached,
            inference: spec::Attachment::Attached,
        }
    }
}

/// Every tool, with a configuration-less daemon's attachments (see [`all_with`]).
pub fn all(probe_tools: bool) -> Vec<ToolSpec> {
    all_with(probe_tools, &Attachments::default())
}

/// Every tool: each family's declarations. `probe_tools` adds the two lane-probing test
/// tools. To add a tool: its argument and result types (protocol), its handler and its
/// declaration in its family's `declare()` (the end of `tools/<family>.rs`), and its TOOLS.md
/// entry (see `tools::spec`'s module doc).
pub fn all_with(probe_tools: bool, attached: &Attachments) -> Vec<ToolSpec> {
    let mut tools = [
        jobs(),
        lsp::declare(),
        structural::declare(),
        debug::declare(),
        eval::declare(),
        human::declare(&attached.vibe),
        downloads::declare(&attached.downloads),
        inference::declare(&attached.inference),
        files::declare(),
        data::declare(&attached.data),
    ]
    .concat();
    if probe_tools {
        tools.extend(probes());
    }
    tools
}

/// The answer of a registered tool whose worker this build lacks.
pub(crate) fn no_worker(tool: &str) -> ToolError {
    ToolError::new(
        ErrorKind::NotAvailable,
        format!("tool `{tool}` has no worker in this build"),
        "use another tool; `toolvisor tools --all` lists what runs here",
    )
}

/// `bash`'s context: the launcher its command starts through, the limits, the secrets its
/// streamed output is masked with.
pub(crate) struct BashTool<'a> {
    pub launcher: &'a Launcher,
    pub limits: &'a Limits,
    pub secrets: &'a Secrets,
}

async fn run_bash(
    cx: &BashTool<'_>,
    ctx: &CallCtx,
    args: BashArgs,
) -> Result<BashResult, ToolError> {
    let limits = cx.limits;
    let timeout_s = args.timeout_s.unwrap_or(limits.bash_timeout_s);
    if timeout_s == 0 || timeout_s > limits.bash_timeout_max_s {
        return Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!(
                "bash: timeout_s = {timeout_s} is outside 1..={}",
                limits.bash_timeout_max_s
            ),
            "pick a timeout within the limit, or run long jobs with `process start`",
        ));
    }
    let (tx, mut rx) = mpsc::channel(64);
    let req = BashRequest {
        command: args.command,
        cwd: ctx.workdir.clone(),
        timeout: Duration::from_secs(timeout_s),
        max_output: limits.bash_output_bytes,
    };
    let running = bash::run(cx.launcher, req, Some(tx));
    tokio::pin!(running);
    let result = loop {
        tokio::select! {
            result = &mut running => break result,
            Some((stream, text)) = rx.recv() => {
                let text = files::mask_stream(cx.secrets, text);
                ctx.event(Event::Output { stream, text }).await
            }
        }
    };
    while let Ok((stream, text)) = rx.try_recv() {
        let text = files::mask_stream(cx.secrets, text);
        ctx.event(Event::Output { stream, text }).await;
    }
    let mut output = result.map_err(|e| {
        ToolError::new(
            ErrorKind::Io,
            format!("bash could not start: {e}"),
            "check that the workdir exists and a shell is installed",
        )
    })?;
    if output.timed_out {
        output.note = Some(format!(
            "killed after the {timeout_s} s timeout; output up to then is shown"
        ));
    }
    Ok(output)
}

async fn run_process(
    p: &Processes,
    ctx: &CallCtx,
    args: ProcessArgs,
) -> Result<ProcessResult, ToolError> {
    let conv = ctx.conversation.as_str();
    Ok(match args.op {
        ProcessOp::Start => {
            let command = need("process", "start", "command", &args.command)?.to_string();
            ProcessResult::Info(
                p.start(
                    conv,
                    ctx.workdir.clone(),
                    command,
                    StartOptions {
                        label: args.label,
                        restart: args.restart.unwrap_or(RestartMode::No),
                        ttl_s: args.ttl_s,
                        pty: args.pty.unwrap_or(false).then(|| {
                            let (cols, rows) = PTY_DEFAULT_SIZE;
                            (args.cols.unwrap_or(cols), args.rows.unwrap_or(rows))
                        }),
                    },
                )
                .await?,
            )
        }
        ProcessOp::List => ProcessResult::List(ProcessList {
            processes: p.list(conv),
        }),
        ProcessOp::Read => {
            let id = need("process", "read", "id", &args.id)?;
            ProcessResult::Output(p.read(conv, id, args.offset, args.limit)?)
        }
        ProcessOp::Write => {
            let id = need("process", "write", "id", &args.id)?;
            let data = args.data.clone().unwrap_or_default();
            ProcessResult::Info(p.write(conv, id, data, args.eof.unwrap_or(false)).await?)
        }
        ProcessOp::Kill => {
            let id = need("process", "kill", "id", &args.id)?;
            ProcessResult::Info(p.kill(conv, id).await?)
        }
        ProcessOp::Resize => {
            let id = need("process", "resize", "id", &args.id)?;
            let missing = |field: &str| {
                ToolError::new(
                    ErrorKind::InvalidArgs,
                    format!("process resize: missing required argument `{field}`"),
                    "`resize` needs `cols` and `rows`",
                )
            };
            let cols = args.cols.ok_or_else(|| missing("cols"))?;
            let rows = args.rows.ok_or_else(|| missing("rows"))?;
            ProcessResult::Info(p.resize(conv, id, cols, rows).await?)
        }
    })
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Test tool: sleeps `sleep_ms`, reports start and end times (for lane ordering tests).
async fn probe(
    ctx: &CallCtx,
    args: toolvisor_protocol::tools::ProbeArgs,
) -> Result<ProbeResult, ToolError> {
    let (tag, sleep_ms) = (args.tag, args.sleep_ms.unwrap_or(0));
    let start_us = now_us();
    if sleep_ms > 0 {
        tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
    }
    if let Some(name) = &args.hold_until {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!("hold_until {name:?} is not one file name"),
                "name a file in the workdir, without a slash",
            ));
        }
        let file = ctx.workdir.join(name);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !file.exists() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if args.panic == Some(true) {
        panic!("_probe asked to panic (tag {tag})");
    }
    Ok(ProbeResult {
        tag,
        conversation: ctx.conversation.clone(),
        start_us,
        end_us: now_us(),
    })
}

/// The approval prompt's line of `bash`.
fn bash_summary(_: &Services, _: &CallCtx, a: &BashArgs) -> String {
    format!("bash: {}", a.command)
}

/// The approval prompt's line of `process`: the op and its command or id.
fn process_summary(_: &Services, _: &CallCtx, a: &ProcessArgs) -> String {
    let op = serde_json::to_value(a.op)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let what = a.command.as_deref().or(a.id.as_deref()).unwrap_or("");
    format!("process {op}: {what}")
}

/// The tools whose handlers are in this file (`bash`, `process`).
fn jobs() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "bash",
            Tier::Exec,
            "processes",
            "Run a shell command in the workdir: stdout, stderr, exit code.",
            |s, ctx, a| {
                Box::pin(async move {
                    let bash = BashTool {
                        launcher: &s.launcher,
                        limits: &s.config.limits,
                        secrets: s.secrets(),
                    };
                    run_bash(&bash, ctx, a).await
                })
            },
        )
        .long_running()
        .open_world()
        .approval(Approval::Always)
        .summary(bash_summary),
        ToolSpec::new(
            "process",
            Tier::Exec,
            "processes",
            "Background processes: start, list, read, write stdin, kill, resize.",
            |s, ctx, a| Box::pin(run_process(&s.processes, ctx, a)),
        )
        .open_world()
        .approval(Approval::ops(&[
            ProcessOp::Start,
            ProcessOp::Write,
            ProcessOp::Kill,
            ProcessOp::Resize,
        ]))
        .summary(process_summary),
    ]
}

/// The two lane-probing test tools (`[testing] probe_tools`).
fn probes() -> Vec<ToolSpec> {
    let declare = |name| {
        ToolSpec::new(
            name,
            Tier::Read,
            "testing",
            "Test tool: sleeps, then reports when it started and ended.",
            |_, ctx, a| Box::pin(probe(ctx, a)),
        )
    };
    vec![
        declare("_probe_serial").serial(),
        declare("_probe_parallel"),
    ]
}
