//! The `debug` tool's state: per conversation, its breakpoints (kept across sessions, so
//! they can be set before `launch`) and its current or last session; and every op, from the
//! launch handshake to `terminate`.
//!
//! Calls of one conversation arrive strictly ordered (the daemon runs `debug` in the
//! conversation's lane), so ops never interleave within a session; TTL expiry, the program's
//! end and an adapter crash arrive concurrently and are folded into the session's state,
//! which every op checks first.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorRef};
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process;
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier, duration_ms};
use toolvisor_kit::supervise::{self, ChildSpec, Factory, StartCtx, StartFailed, SupervisorMsg};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    DebugAdapter, DebugAdaptersResult, DebugBreakpointListResult, DebugBreakpointsResult, DebugEnd,
    DebugEvaluateResult, DebugException, DebugExceptionFilter, DebugExceptionFilters, DebugFrame,
    DebugFunctionBreakpoint, DebugLaunchResult, DebugOutputResult, DebugResult, DebugRunTo,
    DebugRunToResult, DebugScope, DebugScopesResult, DebugSession, DebugSetVariableResult,
    DebugSourceBreakpoint, DebugStackResult, DebugStatusResult, DebugStop, DebugStopResult,
    DebugTemporaryBreakpoint, DebugTerminateResult, DebugThread, DebugThreadsResult, DebugVariable,
    DebugVariablesResult, DebugWatch, DebugWatchResult,
};
use toolvisor_protocol::tools::{DebugArgs, DebugBreakpoint, DebugOp};

use crate::DapError;
use crate::adapters::{self, Flavor, Search};
use crate::config::{AdapterSpec, DebugConfig};
use crate::session::actor::{SessionActor, SessionArgs};
use crate::session::{Connect, EndKind, Phase, Session, Target, lock};

mod attach;
mod breakpoints;
mod exceptions;
mod inspect;
mod launch;
mod run_to;
mod watch;

/// Frames `stack` returns at most.
pub const MAX_FRAMES: usize = 30;
/// Children `variables` returns at most.
pub const MAX_CHILDREN: usize = 50;
/// Characters of one value returned at most.
pub const MAX_VALUE_CHARS: usize = 400;
/// A conversation without breakpoints whose last session ended this long ago is forgotten
/// (its `status` and `output` with it), so the table does not grow with every conversation.
const SLOT_KEEP: Duration = Duration::from_secs(2 * 60 * 60);
const OUTPUT_READ_DEFAULT: u64 = 64 * 1024;
const OUTPUT_READ_MAX: u64 = 1024 * 1024;

/// Who calls: the conversation and the run's workdir.
#[derive(Clone, Debug)]
pub struct DebugCall {
    pub conversation: String,
    pub workdir: PathBuf,
}

/// One conversation's debugging.
struct Slot {
    /// File → its source breakpoints, as last set (canonical absolute paths).
    breakpoints: Mutex<BTreeMap<PathBuf, Vec<DebugBreakpoint>>>,
    /// Function breakpoints by name, as last set.
    functions: Mutex<Vec<String>>,
    /// Exception filters as last set; `None`: the adapter's defaults.
    exceptions: Mutex<Option<Vec<String>>>,
    /// The adapter's last verdicts: file path → one per breakpoint.
    verdicts: Mutex<BTreeMap<String, Vec<DebugSourceBreakpoint>>>,
    /// The adapter's last verdicts on the function breakpoints, one per name.
    function_verdicts: Mutex<Option<Vec<DebugFunctionBreakpoint>>>,
    /// The last `launch` (caller and arguments), which `restart` repeats.
    last_launch: Mutex<Option<(DebugCall, DebugArgs)>>,
    current: Mutex<Option<Arc<Session>>>,
    /// `run_to`'s temporary breakpoint while it is armed.
    run_to: Mutex<Option<run_to::RunTo>>,
}

impl Slot {
    /// Nothing set that a launch would stop at (so it stops at the entry instead, and the
    /// slot may be forgotten once idle).
    fn nothing_set(&self) -> bool {
        lock(&self.breakpoints).is_empty()
            && lock(&self.functions).is_empty()
            && lock(&self.exceptions).as_ref().is_none_or(Vec::is_empty)
    }
}

pub struct Debuggers {
    supervisor: ActorRef<SupervisorMsg>,
    launcher: Launcher,
    config: DebugConfig,
    adapters: BTreeMap<String, AdapterSpec>,
    notifier: TreeNotifier,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Persisted: a debug session id never repeats after a daemon restart.
    ids: IdCounter,
    /// Interpreters known to import debugpy → its version.
    debugpy_ok: Mutex<HashMap<PathBuf, String>>,
    /// Whether gdb can call into a process on this host (debugpy's attach by pid needs
    /// it), probed once.
    gdb_calls: tokio::sync::OnceCell<Result<(), String>>,
}

fn err(kind: ErrorKind, message: impl Into<String>, hint: impl Into<String>) -> ToolError {
    ToolError::new(kind, message, hint)
}

fn need<T: Clone>(op: &str, field: &str, v: &Option<T>) -> Result<T, ToolError> {
    v.clone().ok_or_else(|| {
        err(
            ErrorKind::InvalidArgs,
            format!("debug {op}: missing required argument `{field}`"),
            format!("`{op}` needs `{field}`"),
        )
    })
}

/// A text as a result shows it: whole, or cut, saying so (`truncated` and the whole
/// text's `chars` are there only when it was cut: a result's `KEY_truncated`, `KEY_chars`).
pub(crate) struct Cut {
    pub(crate) text: String,
    pub(crate) truncated: Option<bool>,
    pub(crate) chars: Option<u64>,
}

impl Cut {
    /// `text`, or the part `keep` makes of it when it is longer than `max` characters.
    fn of(text: &str, max: usize, keep: impl FnOnce(&str, usize) -> String) -> Cut {
        let chars = text.chars().count();
        if chars > max {
            Cut {
                text: keep(text, chars),
                truncated: Some(true),
                chars: Some(chars as u64),
            }
        } else {
            Cut {
                text: text.to_string(),
                truncated: None,
                chars: None,
            }
        }
    }
}

/// A value cut to [`MAX_VALUE_CHARS`], saying so.
fn cut_value(value: &str) -> Cut {
    Cut::of(value, MAX_VALUE_CHARS, |text, _| {
        text.chars().take(MAX_VALUE_CHARS).collect()
    })
}

fn op_name(op: DebugOp) -> &'static str {
    match op {
        DebugOp::Adapters => "adapters",
        DebugOp::Status => "status",
        DebugOp::Breakpoints => "breakpoints",
        DebugOp::Launch => "launch",
        DebugOp::Attach => "attach",
        DebugOp::Continue => "continue",
        DebugOp::Pause => "pause",
        DebugOp::StepOver => "step_over",
        DebugOp::StepIn => "step_in",
        DebugOp::StepOut => "step_out",
        DebugOp::Threads => "threads",
        DebugOp::Stack => "stack",
        DebugOp::Scopes => "scopes",
        DebugOp::Variables => "variables",
        DebugOp::Evaluate => "evaluate",
        DebugOp::Output => "output",
        DebugOp::Terminate => "terminate",
        DebugOp::Restart => "restart",
        DebugOp::SetVariable => "set_variable",
        DebugOp::RunTo => "run_to",
        DebugOp::Watch => "watch",
    }
}

impl Debuggers {
    pub fn new(
        supervisor: ActorRef<SupervisorMsg>,
        launcher: Launcher,
        config: DebugConfig,
        notifier: TreeNotifier,
        ids: IdCounter,
    ) -> Self {
        Debuggers {
            supervisor,
            launcher,
            adapters: config.adapters(),
            config,
            notifier,
            slots: Mutex::new(HashMap::new()),
            ids,
            debugpy_ok: Mutex::new(HashMap::new()),
            gdb_calls: tokio::sync::OnceCell::new(),
        }
    }

    pub fn config(&self) -> &DebugConfig {
        &self.config
    }

    fn slot(&self, conversation: &str) -> Arc<Slot> {
        let mut slots = lock(&self.slots);
        if !slots.contains_key(conversation) {
            slots.retain(|_, slot| {
                // Held by a call in flight (e.g. a launch about to register its session).
                let in_use = Arc::strong_count(slot) > 1;
                let idle = !in_use
                    && slot.nothing_set()
                    && lock(&slot.current)
                        .as_ref()
                        .is_none_or(|s| s.ended().is_some_and(|e| e.at.elapsed() > SLOT_KEEP));
                !idle
            });
        }
        slots
            .entry(conversation.to_string())
            .or_insert_with(|| {
                Arc::new(Slot {
                    breakpoints: Mutex::new(BTreeMap::new()),
                    functions: Mutex::new(Vec::new()),
                    exceptions: Mutex::new(None),
                    verdicts: Mutex::new(BTreeMap::new()),
                    function_verdicts: Mutex::new(None),
                    last_launch: Mutex::new(None),
                    current: Mutex::new(None),
                    run_to: Mutex::new(None),
                })
            })
            .clone()
    }

    fn path_var(&self) -> String {
        self.launcher.path().to_string()
    }

    fn search(&self, project: &Path, workdir: &Path) -> Search {
        Search {
            project: project.to_path_buf(),
            workdir: workdir.to_path_buf(),
            extra: self.config.search_path.clone(),
            path_var: self.path_var(),
            python: self.config.python.clone(),
        }
    }

    /// Runs one call; the value is the tool's result.
    pub async fn run(&self, call: &DebugCall, args: DebugArgs) -> Result<DebugResult, ToolError> {
        let slot = self.slot(&call.conversation);
        // A stop since `run_to` armed its temporary breakpoint takes it out before anything
        // else reaches the session (the program is stopped: it cannot hit it meanwhile).
        if !matches!(
            args.op,
            DebugOp::Adapters | DebugOp::Status | DebugOp::Output
        ) {
            self.disarm_run_to(&slot).await;
        }
        Ok(match args.op {
            DebugOp::Adapters => DebugResult::Adapters(self.adapters_report(&call.workdir).await),
            DebugOp::Status => DebugResult::Status(self.status(&slot)),
            DebugOp::Breakpoints => self.breakpoints(call, &slot, &args).await?,
            DebugOp::Launch => DebugResult::Launch(self.launch(call, &slot, &args).await?),
            DebugOp::Attach => DebugResult::Launch(self.attach(call, &slot, &args).await?),
            DebugOp::Output => DebugResult::Output(self.output(&slot, &args)?),
            DebugOp::Terminate => DebugResult::Terminate(self.terminate(&slot).await),
            DebugOp::Restart => DebugResult::Launch(self.restart(&slot).await?),
            op => {
                let session = self.live(&slot, op).await?;
                // Counted on the session's node while it runs (the tree's CALLS column).
                let _call = session.status.enqueue();
                match op {
                    DebugOp::Continue | DebugOp::StepOver | DebugOp::StepIn | DebugOp::StepOut => {
                        DebugResult::Stop(self.resume(&session, op, args.thread_id).await?)
                    }
                    DebugOp::Pause => {
                        DebugResult::Stop(self.pause(&session, args.thread_id).await?)
                    }
                    DebugOp::Threads => DebugResult::Threads(self.threads(&session).await?),
                    DebugOp::Stack => {
                        DebugResult::Stack(self.stack(&session, args.thread_id).await?)
                    }
                    DebugOp::Scopes => {
                        DebugResult::Scopes(self.scopes(&session, args.frame_id).await?)
                    }
                    DebugOp::Variables => {
                        let reference = need("variables", "reference", &args.reference)?;
                        DebugResult::Variables(self.variables(&session, reference).await?)
                    }
                    DebugOp::Evaluate => {
                        let expression = need("evaluate", "expression", &args.expression)?;
                        DebugResult::Evaluate(
                            self.evaluate(&session, &expression, args.frame_id).await?,
                        )
                    }
                    DebugOp::SetVariable => {
                        let reference = need("set_variable", "reference", &args.reference)?;
                        let name = need("set_variable", "name", &args.name)?;
                        let value = need("set_variable", "value", &args.value)?;
                        DebugResult::SetVariable(
                            self.set_variable(&session, reference, &name, &value)
                                .await?,
                        )
                    }
                    DebugOp::RunTo => {
                        DebugResult::RunTo(self.run_to(call, &slot, &session, &args).await?)
                    }
                    DebugOp::Watch => DebugResult::Watch(self.watch(&session, &args).await?),
                    _ => unreachable!("handled above"),
                }
            }
        })
    }

    /// The conversation's running session, or an error saying why there is none.
    async fn live(&self, slot: &Slot, op: DebugOp) -> Result<Arc<Session>, ToolError> {
        let current = lock(&slot.current).clone();
        let Some(session) = current else {
            return Err(err(
                ErrorKind::NotFound,
                format!(
                    "debug {}: no debug session in this conversation",
                    op_name(op)
                ),
                "`launch {program}` or `attach {port}` starts one; `adapters` shows which adapters work here",
            ));
        };
        match session.ended() {
            None => Ok(session),
            Some(end) => Err(end_error(&session, &end, op)),
        }
    }

    /// An error from the adapter during `op`, in the caller's terms.
    async fn dap_error(&self, session: &Arc<Session>, op: &str, e: DapError) -> ToolError {
        match e {
            DapError::Closed(_) => {
                // The adapter went away: let the actor record why (its exit status).
                session
                    .wait_until(Duration::from_secs(3), |s| s.end.is_some())
                    .await;
                match session.ended() {
                    Some(end) => end_error(session, &end, DebugOp::Status).with_op(op),
                    None => err(
                        ErrorKind::ResourceFailed,
                        format!(
                            "debug {op}: the debug adapter {} closed its stream; the session is over",
                            session.adapter
                        ),
                        "launch again to start a new session",
                    ),
                }
            }
            DapError::Timeout { command, after_ms } => err(
                ErrorKind::Timeout,
                format!("debug {op}: the adapter did not answer `{command}` within {after_ms} ms"),
                "the adapter may be hung; `terminate` ends the session, `[debug] request_timeout_s` sets the wait",
            ),
            DapError::Failed { command, message } => err(
                ErrorKind::InvalidArgs,
                format!("debug {op}: the adapter refused `{command}`: {message}"),
                match op {
                    "scopes" | "evaluate" => {
                        "frame ids come from `stack` and are valid only until the program runs again"
                    }
                    "variables" | "set_variable" => {
                        "references come from `scopes`, `variables` or `evaluate` and are valid only until the program runs again"
                    }
                    _ => "`status` shows the session's state",
                },
            ),
            DapError::Encode { command, message } => err(
                ErrorKind::Internal,
                format!("debug {op}: cannot encode `{command}`: {message}"),
                "report this as a bug",
            ),
            DapError::Backlog { command, queued } => err(
                ErrorKind::ResourceFailed,
                format!(
                    "debug {op}: the debug adapter {} is not reading its input; `{command}` was not sent ({queued} messages already wait)",
                    session.adapter
                ),
                "the adapter looks hung; `terminate` ends the session",
            ),
        }
    }

    async fn request(
        &self,
        session: &Arc<Session>,
        op: &str,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, ToolError> {
        let Some(client) = session.client() else {
            return Err(err(
                ErrorKind::Internal,
                "the session has no adapter connection",
                "report this as a bug",
            ));
        };
        match client
            .request(command, arguments, self.config.request_timeout())
            .await
        {
            Ok(body) => Ok(body),
            Err(e) => Err(self.dap_error(session, op, e).await),
        }
    }

    // ---- adapters, status, output -------------------------------------------------------

    async fn adapters_report(&self, workdir: &Path) -> DebugAdaptersResult {
        let mut list = Vec::new();
        for (name, spec) in &self.adapters {
            let root = adapters::find_root(workdir, &spec.markers);
            let project = root.clone().unwrap_or_else(|| workdir.to_path_buf());
            let search = self.search(&project, workdir);
            let mut entry = DebugAdapter {
                name: name.clone(),
                markers: spec.markers.clone(),
                extensions: spec.extensions.clone(),
                root: root.as_ref().map(|r| r.display().to_string()),
                root_note: root.is_none().then(|| {
                    format!(
                        "no root marker ({}) in {} or any parent; launching a program directly still works",
                        spec.markers.join(", "),
                        workdir.display()
                    )
                }),
                command: None,
                python: None,
                version: None,
                available: false,
                reason: None,
            };
            match adapters::resolve(name, spec, &search) {
                Ok(resolved) => {
                    entry.command = Some(resolved.command_line());
                    entry.available = true;
                    if let Some(python) = &resolved.python {
                        entry.python = Some(python.display().to_string());
                        match self.debugpy_version(python, workdir).await {
                            Ok(version) => entry.version = Some(version),
                            Err(why) => {
                                entry.available = false;
                                entry.reason = Some(why);
                            }
                        }
                    }
                }
                Err(why) => {
                    entry.command = spec.commands.first().map(|c| c.join(" "));
                    entry.reason = Some(why);
                }
            }
            list.push(entry);
        }
        DebugAdaptersResult {
            adapters: list,
            workdir: workdir.display().to_string(),
        }
    }

    /// `python -c 'import debugpy'`: its version, or why not. Successes are cached.
    async fn debugpy_version(&self, python: &Path, workdir: &Path) -> Result<String, String> {
        if let Some(v) = lock(&self.debugpy_ok).get(python) {
            return Ok(v.clone());
        }
        let spec = self.launcher.spec(
            &python.display().to_string(),
            &[
                "-c".into(),
                "import debugpy, sys; print(debugpy.__version__)".into(),
            ],
            workdir,
            false,
            "debug/probe",
        );
        let mut spawned = process::spawn(spec)
            .await
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        let mut out = Vec::new();
        let mut errs = Vec::new();
        // One budget for reading and exiting: a probe that closes its pipes and then hangs
        // must not hold the conversation's debug lane (the guard kills it when dropped).
        let finished = tokio::time::timeout(Duration::from_secs(10), async {
            let _ = tokio::join!(
                spawned.stdout.read_to_end(&mut out),
                spawned.stderr.read_to_end(&mut errs)
            );
            spawned
                .exit
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|s| *s)
        })
        .await;
        drop(spawned.guard);
        let Ok(status) = finished else {
            return Err(format!(
                "{} -c 'import debugpy' did not finish within 10 s (killed)",
                python.display()
            ));
        };
        let version = String::from_utf8_lossy(&out).trim().to_string();
        if status.is_some_and(|s| s.success()) && !version.is_empty() {
            lock(&self.debugpy_ok).insert(python.to_path_buf(), version.clone());
            Ok(version)
        } else {
            let stderr = String::from_utf8_lossy(&errs);
            let last = stderr.lines().last().unwrap_or("").trim();
            Err(format!(
                "debugpy is not installed for {} ({last}): run `{} -m pip install debugpy`",
                python.display(),
                python.display()
            ))
        }
    }

    fn status(&self, slot: &Slot) -> DebugStatusResult {
        let breakpoints: BTreeMap<String, Vec<u64>> = lock(&slot.breakpoints)
            .iter()
            .map(|(f, points)| {
                (
                    f.display().to_string(),
                    points.iter().map(|p| p.line).collect(),
                )
            })
            .collect();
        let current = lock(&slot.current).clone();
        DebugStatusResult {
            session: current.as_ref().map(summary),
            breakpoints,
            function_breakpoints: lock(&slot.functions).clone(),
            exception_filters: lock(&slot.exceptions).clone(),
        }
    }

    fn output(&self, slot: &Slot, args: &DebugArgs) -> Result<DebugOutputResult, ToolError> {
        let Some(session) = lock(&slot.current).clone() else {
            return Err(err(
                ErrorKind::NotFound,
                "debug output: no debug session in this conversation",
                "`launch {program}` starts one; its output stays readable after it ends",
            ));
        };
        let limit = args
            .limit
            .unwrap_or(OUTPUT_READ_DEFAULT)
            .clamp(1, OUTPUT_READ_MAX) as usize;
        let offset = args.offset.unwrap_or_else(|| *lock(&session.cursor));
        // Settled is read before the output: once it holds the output is final, so the slice
        // taken after holds all of it (the other way round, an empty slice could meet a
        // settled session and be answered `eof` with the program's last output unread).
        let settled = session.output_settled();
        let slice = session.output_read(offset, limit);
        *lock(&session.cursor) = slice.next_offset;
        let end = session.output_end();
        Ok(DebugOutputResult {
            session: session.id.clone(),
            text: slice.text,
            offset: slice.offset,
            next_offset: slice.next_offset,
            dropped: slice.dropped,
            total_bytes: end,
            eof: settled && slice.next_offset >= end,
            state: session.state_now(),
            console: session.console_lines(),
        })
    }

    // ---- the end --------------------------------------------------------------------------

    /// End `conversation`'s debug session (its session ended) and forget its breakpoints;
    /// whether a session was running.
    pub async fn end(&self, conversation: &str) -> bool {
        let Some(slot) = lock(&self.slots).remove(conversation) else {
            return false;
        };
        let live = lock(&slot.current)
            .as_ref()
            .is_some_and(|s| s.ended().is_none());
        self.terminate(&slot).await;
        live
    }

    async fn terminate(&self, slot: &Slot) -> DebugTerminateResult {
        let current = lock(&slot.current).clone();
        let Some(session) = current else {
            return DebugTerminateResult {
                terminated: false,
                note: Some("no debug session in this conversation".into()),
                session: None,
            };
        };
        if let Some(end) = session.ended() {
            // Ended on its own (or is winding down): make sure nothing is left, say how.
            session.shutdown(end.kind, end.message.clone()).await;
            return DebugTerminateResult {
                terminated: false,
                note: Some(format!("the session had already ended: {}", end.message)),
                session: Some(summary(&session)),
            };
        }
        let message = match &session.target {
            Target::Launch { .. } => "terminated by `terminate` (adapter and program killed)",
            Target::Attach { .. } | Target::AttachPid { .. } => {
                "ended by `terminate` (detached; the attached program keeps running)"
            }
        };
        session.shutdown(EndKind::Terminated, message.into()).await;
        DebugTerminateResult {
            terminated: true,
            note: None,
            session: Some(summary(&session)),
        }
    }
}

/// A frame as the tool shows it.
fn frame_of(f: &Value) -> DebugFrame {
    let source = &f["source"];
    let file = source["path"]
        .as_str()
        .filter(|p| !p.is_empty())
        .or_else(|| source["name"].as_str());
    DebugFrame {
        id: f["id"].as_i64(),
        name: f["name"].as_str().map(str::to_string),
        file: file.map(str::to_string),
        line: f["line"].as_i64(),
        column: f["column"].as_i64(),
        note: file
            .is_none()
            .then(|| "no source (a frame in code without debug information)".into()),
    }
}

/// A frame's line as a text shows it (`null` when the adapter gave none).
fn line_text(f: &DebugFrame) -> String {
    f.line.map_or_else(|| "null".into(), |l| l.to_string())
}

/// A session's facts for `status` and results.
fn summary(session: &Arc<Session>) -> DebugSession {
    let s = session.state();
    let mut out = DebugSession {
        id: session.id.clone(),
        adapter: session.adapter.clone(),
        command: session.command.clone(),
        state: s.debug_state(),
        adapter_pid: session.adapter_pid(),
        debuggee_pid: s.debuggee_pid,
        exit_code: s.exit_code,
        uptime_ms: duration_ms(session.started.elapsed()),
        output_bytes: session.output_end(),
        program: None,
        module: None,
        cwd: None,
        args: None,
        port: None,
        pid: None,
        ttl_left_ms: None,
        at: None,
        exception: None,
        ended: None,
    };
    match &session.target {
        Target::Launch {
            program,
            args,
            module,
        } => {
            match module {
                Some(m) => {
                    out.module = Some(m.clone());
                    out.cwd = Some(program.display().to_string());
                }
                None => out.program = Some(program.display().to_string()),
            }
            out.args = Some(args.clone());
        }
        Target::Attach { port } => out.port = Some(*port),
        Target::AttachPid { pid } => out.pid = Some(*pid),
    }
    if let Some(end) = &s.end {
        out.ended = Some(DebugEnd {
            kind: end.kind.into(),
            message: end.message.clone(),
        });
    } else {
        out.ttl_left_ms = session
            .deadline()
            .map(|deadline| duration_ms(deadline.saturating_duration_since(Instant::now())));
        if let Some((n, f)) = &s.top
            && *n == s.stops
            && s.phase == Phase::Stopped
        {
            out.at = Some(f.clone());
        }
        if let Some((n, e)) = &s.exception
            && *n == s.stops
            && s.phase == Phase::Stopped
        {
            out.exception = Some(e.clone());
        }
    }
    out
}

/// Why an ended session answers no more ops.
fn end_error(session: &Session, end: &crate::session::End, op: DebugOp) -> ToolError {
    let op = op_name(op);
    match end.kind {
        EndKind::Expired => err(
            ErrorKind::Expired,
            format!("debug {op}: {}", end.message),
            "launch a new session; `[debug] session_ttl_s` sets the hard TTL",
        ),
        EndKind::Crashed => err(
            ErrorKind::ResourceFailed,
            format!("debug {op}: {}", end.message),
            "launch again to start a new session; `output` still shows what the program printed",
        ),
        EndKind::Exited => err(
            ErrorKind::NotFound,
            format!(
                "debug {op}: the program has ended ({}); session {} is over",
                end.message, session.id
            ),
            "`output` shows what it printed; `launch` starts it again",
        ),
        EndKind::Terminated => err(
            ErrorKind::NotFound,
            format!(
                "debug {op}: no running debug session: {} was {}",
                session.id, end.message
            ),
            "`launch {program}` or `attach {port}` starts a new one",
        ),
        EndKind::Failed => err(
            ErrorKind::NotFound,
            format!(
                "debug {op}: no running debug session: the last one did not start ({})",
                end.message
            ),
            "fix the cause and launch again; `adapters` shows which adapters work here",
        ),
    }
}

trait WithOp {
    fn with_op(self, op: &str) -> Self;
}

impl WithOp for ToolError {
    /// Names the op that met the end instead of `status`.
    fn with_op(mut self, op: &str) -> Self {
        if let Some(rest) = self.message.strip_prefix("debug status: ") {
            self.message = format!("debug {op}: {rest}");
        }
        self
    }
}

fn absolute(workdir: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        workdir.join(p)
    }
}
