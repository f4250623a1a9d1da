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

use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process;
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier, duration_ms};
use toolvisor_kit::supervise::{ChildSpec, Factory, StartCtx, SupervisorMsg};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::{DebugArgs, DebugOp};

use crate::DapError;
use crate::adapters::{self, Flavor, Search};
use crate::config::{AdapterSpec, DebugConfig};
use crate::session::{Connect, EndKind, Phase, Session, SessionActor, SessionArgs, Target, lock};

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
    /// File → lines, as last set (canonical absolute paths).
    breakpoints: Mutex<BTreeMap<PathBuf, Vec<u64>>>,
    current: Mutex<Option<Arc<Session>>>,
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

/// A value cut to [`MAX_VALUE_CHARS`], saying so.
fn cut_value(out: &mut Map<String, Value>, key: &str, value: &str) {
    let chars = value.chars().count();
    if chars > MAX_VALUE_CHARS {
        let cut: String = value.chars().take(MAX_VALUE_CHARS).collect();
        out.insert(key.into(), json!(cut));
        out.insert(format!("{key}_truncated"), json!(true));
        out.insert(format!("{key}_chars"), json!(chars));
    } else {
        out.insert(key.into(), json!(value));
    }
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
                    && lock(&slot.breakpoints).is_empty()
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
                    current: Mutex::new(None),
                })
            })
            .clone()
    }

    fn path_var(&self) -> String {
        self.launcher
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
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
    pub async fn run(&self, call: &DebugCall, args: DebugArgs) -> Result<Value, ToolError> {
        let slot = self.slot(&call.conversation);
        match args.op {
            DebugOp::Adapters => Ok(self.adapters_report(&call.workdir).await),
            DebugOp::Status => Ok(self.status(&slot)),
            DebugOp::Breakpoints => self.breakpoints(call, &slot, &args).await,
            DebugOp::Launch => self.launch(call, &slot, &args).await,
            DebugOp::Attach => self.attach(call, &slot, &args).await,
            DebugOp::Output => self.output(&slot, &args),
            DebugOp::Terminate => self.terminate(&slot).await,
            op => {
                let session = self.live(&slot, op).await?;
                match op {
                    DebugOp::Continue | DebugOp::StepOver | DebugOp::StepIn | DebugOp::StepOut => {
                        self.resume(&session, op, args.thread_id).await
                    }
                    DebugOp::Pause => self.pause(&session, args.thread_id).await,
                    DebugOp::Threads => self.threads(&session).await,
                    DebugOp::Stack => self.stack(&session, args.thread_id).await,
                    DebugOp::Scopes => self.scopes(&session, args.frame_id).await,
                    DebugOp::Variables => {
                        let reference = need("variables", "reference", &args.reference)?;
                        self.variables(&session, reference).await
                    }
                    DebugOp::Evaluate => {
                        let expression = need("evaluate", "expression", &args.expression)?;
                        self.evaluate(&session, &expression, args.frame_id).await
                    }
                    _ => unreachable!("handled above"),
                }
            }
        }
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
                    "variables" => {
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

    async fn adapters_report(&self, workdir: &Path) -> Value {
        let mut list = Vec::new();
        for (name, spec) in &self.adapters {
            let root = adapters::find_root(workdir, &spec.markers);
            let project = root.clone().unwrap_or_else(|| workdir.to_path_buf());
            let search = self.search(&project, workdir);
            let mut entry = Map::new();
            entry.insert("name".into(), json!(name));
            entry.insert("markers".into(), json!(spec.markers));
            entry.insert("extensions".into(), json!(spec.extensions));
            entry.insert(
                "root".into(),
                json!(root.as_ref().map(|r| r.display().to_string())),
            );
            if root.is_none() {
                entry.insert(
                    "root_note".into(),
                    json!(format!(
                        "no root marker ({}) in {} or any parent; launching a program directly still works",
                        spec.markers.join(", "),
                        workdir.display()
                    )),
                );
            }
            match adapters::resolve(name, spec, &search) {
                Ok(resolved) => {
                    entry.insert("command".into(), json!(resolved.command_line()));
                    let mut available = true;
                    let mut reason = None;
                    if let Some(python) = &resolved.python {
                        entry.insert("python".into(), json!(python.display().to_string()));
                        match self.debugpy_version(python, workdir).await {
                            Ok(version) => {
                                entry.insert("version".into(), json!(version));
                            }
                            Err(why) => {
                                available = false;
                                reason = Some(why);
                            }
                        }
                    }
                    entry.insert("available".into(), json!(available));
                    entry.insert("reason".into(), json!(reason));
                }
                Err(why) => {
                    entry.insert(
                        "command".into(),
                        json!(spec.commands.first().map(|c| c.join(" "))),
                    );
                    entry.insert("available".into(), json!(false));
                    entry.insert("reason".into(), json!(why));
                }
            }
            list.push(Value::Object(entry));
        }
        json!({"adapters": list, "workdir": workdir.display().to_string()})
    }

    /// `python -c 'import debugpy'`: its version, or why not. Successes are cached.
    async fn debugpy_version(&self, python: &Path, workdir: &Path) -> Result<String, String> {
        if let Some(v) = lock(&self.debugpy_ok).get(python) {
            return Ok(v.clone());
        }
        let mut spec = self.launcher.spec(
            &python.display().to_string(),
            &[
                "-c".into(),
                "import debugpy, sys; print(debugpy.__version__)".into(),
            ],
            workdir,
            false,
            "debug/probe",
        );
        spec.shim = None;
        spec.ledger = None;
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

    fn status(&self, slot: &Slot) -> Value {
        let breakpoints: BTreeMap<String, Vec<u64>> = lock(&slot.breakpoints)
            .iter()
            .map(|(f, l)| (f.display().to_string(), l.clone()))
            .collect();
        let current = lock(&slot.current).clone();
        json!({
            "session": current.as_ref().map(summary),
            "breakpoints": breakpoints,
        })
    }

    fn output(&self, slot: &Slot, args: &DebugArgs) -> Result<Value, ToolError> {
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
        let slice = session.output_read(offset, limit);
        *lock(&session.cursor) = slice.next_offset;
        let end = session.output_end();
        Ok(json!({
            "session": session.id,
            "text": slice.text,
            "offset": slice.offset,
            "next_offset": slice.next_offset,
            "dropped": slice.dropped,
            "total_bytes": end,
            "eof": !session.is_live() && slice.next_offset >= end,
            "state": session.state_word(),
        }))
    }

    // ---- breakpoints ----------------------------------------------------------------------

    async fn breakpoints(
        &self,
        call: &DebugCall,
        slot: &Slot,
        args: &DebugArgs,
    ) -> Result<Value, ToolError> {
        let file = need("breakpoints", "file", &args.file)?;
        let lines = args.lines.clone().unwrap_or_default();
        if let Some(bad) = lines.iter().find(|l| **l == 0) {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!("debug breakpoints: line {bad} is not a line (lines are 1-based)"),
                "give 1-based line numbers",
            ));
        }
        let path = absolute(&call.workdir, &file);
        if !path.is_file() {
            return Err(err(
                ErrorKind::NotFound,
                format!("debug breakpoints: no such file {}", path.display()),
                "paths are relative to the workdir",
            ));
        }
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        let mut lines = lines;
        lines.sort_unstable();
        lines.dedup();
        {
            let mut bps = lock(&slot.breakpoints);
            if lines.is_empty() {
                bps.remove(&path);
            } else {
                bps.insert(path.clone(), lines.clone());
            }
        }
        let mut out = json!({"file": path.display().to_string(), "lines": lines});
        let current = lock(&slot.current).clone().filter(|s| s.is_live());
        match current {
            Some(session) if session.state().phase != Phase::Starting => {
                let verified = self.set_breakpoints(&session, &path, &lines).await?;
                out["applied"] = json!(true);
                out["breakpoints"] = verified;
            }
            _ => {
                out["applied"] = json!(false);
                out["note"] = json!(if lines.is_empty() {
                    "cleared; no session is running"
                } else {
                    "kept for the next launch (no session is running)"
                });
            }
        }
        Ok(out)
    }

    /// `setBreakpoints` for one file; the adapter's verdict per line.
    async fn set_breakpoints(
        &self,
        session: &Arc<Session>,
        path: &Path,
        lines: &[u64],
    ) -> Result<Value, ToolError> {
        let body = self
            .request(
                session,
                "breakpoints",
                "setBreakpoints",
                Some(json!({
                    "source": {"path": path.display().to_string()},
                    "breakpoints": lines.iter().map(|l| json!({"line": l})).collect::<Vec<_>>(),
                })),
            )
            .await?;
        let answered = body["breakpoints"].as_array().cloned().unwrap_or_default();
        let verdicts: Vec<Value> = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let b = answered.get(i).cloned().unwrap_or(Value::Null);
                let mut v = Map::new();
                v.insert("line".into(), json!(line));
                v.insert(
                    "verified".into(),
                    json!(b["verified"].as_bool().unwrap_or(false)),
                );
                if let Some(actual) = b["line"].as_u64().filter(|a| a != line) {
                    v.insert("actual_line".into(), json!(actual));
                }
                if let Some(m) = b["message"].as_str() {
                    v.insert("message".into(), json!(m));
                }
                Value::Object(v)
            })
            .collect();
        Ok(json!(verdicts))
    }

    // ---- launch and attach ----------------------------------------------------------------

    fn refuse_second(&self, slot: &Slot, op: &str) -> Result<(), ToolError> {
        if let Some(running) = lock(&slot.current).clone().filter(|s| s.is_live()) {
            let what = match &running.target {
                Target::Launch { program, .. } => program.display().to_string(),
                Target::Attach { port } => format!("127.0.0.1:{port}"),
            };
            return Err(err(
                ErrorKind::Busy,
                format!(
                    "debug {op}: this conversation already has a debug session: {} ({} {what}, {}); a second one is refused, not swapped in",
                    running.id,
                    running.adapter,
                    running.state_word()
                ),
                "`terminate` ends the running session first; `status` shows it",
            ));
        }
        Ok(())
    }

    async fn launch(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        args: &DebugArgs,
    ) -> Result<Value, ToolError> {
        self.refuse_second(slot, "launch")?;
        let program = need("launch", "program", &args.program)?;
        let path = absolute(&call.workdir, &program);
        if !path.is_file() {
            return Err(err(
                ErrorKind::NotFound,
                format!("debug launch: no such program {}", path.display()),
                "paths are relative to the workdir; build the program first (e.g. `gcc -g`)",
            ));
        }
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        let (name, spec) = match &args.adapter {
            Some(name) => match self.adapters.get_key_value(name) {
                Some(found) => found,
                None => {
                    return Err(err(
                        ErrorKind::InvalidArgs,
                        format!("debug launch: no adapter named {name:?}"),
                        format!("adapters here: {}", self.adapters.keys().cloned().collect::<Vec<_>>().join(", ")),
                    ));
                }
            },
            None => adapters::pick(&self.adapters, &path).ok_or_else(|| {
                err(
                    ErrorKind::InvalidArgs,
                    format!("debug launch: cannot tell which adapter debugs {}", path.display()),
                    "name one with `adapter` (`adapters` lists them); .py goes to debugpy, native executables to lldb",
                )
            })?,
        };
        let root = adapters::find_root(&path, &spec.markers);
        let project = root.unwrap_or_else(|| call.workdir.clone());
        let search = self.search(&project, &call.workdir);
        let resolved = adapters::resolve(name, spec, &search).map_err(|why| {
            err(
                ErrorKind::NotAvailable,
                format!("debug launch: the {name} adapter cannot run here: {why}"),
                "install it (scripts/install-test-deps installs debugpy and lldb-dap), or point `[debug] search_path` at it; `adapters` shows what works",
            )
        })?;
        let flavor = resolved.flavor;
        let launch_args = args.args.clone().unwrap_or_default();
        let breakpoints = lock(&slot.breakpoints).clone();
        let stop_on_entry = breakpoints.is_empty();
        let mut request = Map::new();
        request.insert("program".into(), json!(path.display().to_string()));
        request.insert("args".into(), json!(launch_args));
        request.insert("cwd".into(), json!(call.workdir.display().to_string()));
        if stop_on_entry {
            request.insert("stopOnEntry".into(), json!(true));
        }
        match flavor {
            Flavor::Debugpy => {
                request.insert("console".into(), json!("internalConsole"));
                if let Some(python) = &resolved.python {
                    request.insert("python".into(), json!([python.display().to_string()]));
                }
            }
            Flavor::Delve => {
                request.insert("mode".into(), json!("debug"));
            }
            Flavor::Lldb | Flavor::Dart | Flavor::Generic => {}
        }
        let target = Target::Launch {
            program: path.clone(),
            args: launch_args,
        };
        let command = resolved.command_line();
        let connect = Connect::Spawn {
            resolved: Box::new(resolved),
            cwd: call.workdir.clone(),
            launcher: self.launcher.clone(),
        };
        let session = self
            .start_session(call, slot, name, flavor, target, command, connect)
            .await?;
        self.handshake(&session, slot, "launch", Value::Object(request), true)
            .await
    }

    async fn attach(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        args: &DebugArgs,
    ) -> Result<Value, ToolError> {
        self.refuse_second(slot, "attach")?;
        let port = need("attach", "port", &args.port)?;
        let port = u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
            err(
                ErrorKind::InvalidArgs,
                format!("debug attach: port {port} is not a TCP port"),
                "ports are 1..=65535",
            )
        })?;
        let name = args.adapter.clone().unwrap_or_else(|| "debugpy".into());
        if Flavor::of(&name) != Flavor::Debugpy {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!(
                    "debug attach: attaching by port is supported for debugpy only, not {name:?}"
                ),
                "start the program as `python -m debugpy --listen PORT --wait-for-client prog.py` and attach to PORT",
            ));
        }
        let session = self
            .start_session(
                call,
                slot,
                &name,
                Flavor::Debugpy,
                Target::Attach { port },
                format!("127.0.0.1:{port}"),
                Connect::Tcp { port },
            )
            .await?;
        // `redirectOutput`: the program's output comes as events too. (debugpy refuses an
        // attach with no arguments at all.)
        let request = json!({"redirectOutput": true});
        let expect_stop = !lock(&slot.breakpoints).is_empty();
        self.handshake(&session, slot, "attach", request, expect_stop)
            .await
    }

    /// Creates the session, starts its actor under the supervisor and makes it current.
    #[allow(clippy::too_many_arguments)]
    async fn start_session(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        name: &str,
        flavor: Flavor,
        target: Target,
        command: String,
        connect: Connect,
    ) -> Result<Arc<Session>, ToolError> {
        let n = self.ids.next().map_err(|e| {
            ToolError::new(
                ErrorKind::Io,
                format!("cannot reserve an id for the new debug session: {e}"),
                "check that the daemon's state dir is writable (disk full?); nothing was started",
            )
        })?;
        let id = format!("{}#{n}", call.conversation);
        let status = NodeStatus::owned(
            "debug_session",
            &id,
            &call.conversation,
            format!("{}: {name}", call.conversation),
            self.notifier.clone(),
        );
        let session = Session::new(
            id.clone(),
            &call.conversation,
            name,
            flavor,
            target,
            command,
            status.clone(),
            self.config.session_ttl(),
            self.config.output_bytes,
            self.supervisor.clone(),
        );
        let args = Arc::new(Mutex::new(Some(SessionArgs {
            session: session.clone(),
            connect,
        })));
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = lock(&args).take();
            Box::pin(async move {
                let args = args.ok_or_else(|| "a debug session is started once".to_string())?;
                let name = format!("debug/{}", args.session.id);
                Actor::spawn_linked(Some(name), SessionActor, args, ctx.supervisor)
                    .await
                    .map(|(actor, _)| actor.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        let spec = ChildSpec {
            id: id.clone(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status,
        };
        let started = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Start { spec, reply },
                Some(self.config.start_timeout() + Duration::from_secs(10)),
            )
            .await;
        match started {
            Ok(CallResult::Success(Ok(()))) => {}
            Ok(CallResult::Success(Err(message))) => {
                // ractor wraps a failed start as "Actor panicked during startup '...'".
                let message = message
                    .strip_prefix("Actor panicked during startup '")
                    .and_then(|m| m.strip_suffix('\''))
                    .unwrap_or(&message)
                    .to_string();
                let hint = match &session.target {
                    Target::Attach { port } => format!(
                        "start the program as `python -m debugpy --listen 127.0.0.1:{port} --wait-for-client prog.py` first (the server takes one client)"
                    ),
                    Target::Launch { .. } => {
                        "`adapters` shows which adapters work here".to_string()
                    }
                };
                session.mark_end(EndKind::Failed, message.clone());
                *lock(&slot.current) = Some(session);
                return Err(err(
                    ErrorKind::Io,
                    format!("debug: could not start the debug session: {message}"),
                    hint,
                ));
            }
            _ => {
                return Err(err(
                    ErrorKind::ResourceFailed,
                    "debug: the debug_adapters supervisor did not answer a start request in time",
                    "the daemon is overloaded or stuck; `toolvisor tree` shows its state",
                ));
            }
        }
        *lock(&slot.current) = Some(session.clone());
        Ok(session)
    }

    /// `initialize`, then `launch`/`attach`, breakpoints and `configurationDone` once the
    /// adapter says `initialized`, then the answer to `launch`/`attach` (debugpy answers only
    /// after `configurationDone`, lldb-dap at once), then — when a stop is expected — the
    /// first stop. A failure ends the session and says why.
    async fn handshake(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        request: &str,
        arguments: Value,
        expect_stop: bool,
    ) -> Result<Value, ToolError> {
        match self
            .handshake_inner(session, slot, request, arguments, expect_stop)
            .await
        {
            Ok(value) => Ok(value),
            Err(mut e) => {
                if session.is_live() {
                    session
                        .shutdown(EndKind::Failed, format!("{request} failed: {}", e.message))
                        .await;
                }
                let words = session.last_words();
                if e.kind != ErrorKind::Expired && !words.is_empty() && !e.message.contains(&words)
                {
                    e.message.push_str(&format!(". The adapter said: {words}"));
                }
                Err(e)
            }
        }
    }

    async fn handshake_inner(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        request: &str,
        arguments: Value,
        expect_stop: bool,
    ) -> Result<Value, ToolError> {
        let client = session.client().cloned().ok_or_else(|| {
            err(
                ErrorKind::Internal,
                "the session has no adapter connection",
                "report this as a bug",
            )
        })?;
        let start = self.config.start_timeout();
        let started = Instant::now();
        let mut init = Map::new();
        init.insert("clientID".into(), json!("toolvisor"));
        init.insert("clientName".into(), json!("toolvisor"));
        init.insert("adapterID".into(), json!(session.adapter));
        init.insert("locale".into(), json!("en-US"));
        init.insert("linesStartAt1".into(), json!(true));
        init.insert("columnsStartAt1".into(), json!(true));
        init.insert("pathFormat".into(), json!("path"));
        init.insert("supportsVariableType".into(), json!(true));
        let caps = client
            .request("initialize", Some(Value::Object(init)), start)
            .await;
        let caps = match caps {
            Ok(c) => c,
            Err(e) => return Err(self.dap_error(session, request, e).await),
        };
        client.set_supports_cancel(caps["supportsCancelRequest"].as_bool().unwrap_or(false));
        *lock(&session.capabilities) = caps.clone();
        let pending = match client.send(request, Some(arguments)) {
            Ok(p) => p,
            Err(e) => return Err(self.dap_error(session, request, e).await),
        };
        let answer = pending.wait(start);
        tokio::pin!(answer);
        let mut answered: Option<Result<Value, DapError>> = None;
        tokio::select! {
            a = &mut answer => answered = Some(a),
            _ = session.wait_until(start, |s| s.initialized || s.closed.is_some()) => {}
        }
        if let Some(Err(e)) = answered {
            return Err(self.dap_error(session, request, e).await);
        }
        let left = start.saturating_sub(started.elapsed());
        if !session
            .wait_until(left, |s| s.initialized || s.closed.is_some())
            .await
        {
            return Err(err(
                ErrorKind::Timeout,
                format!(
                    "debug {request}: the adapter did not say `initialized` within {} s",
                    start.as_secs()
                ),
                "the adapter may be hung or the program may not start; `[debug] start_timeout_s` sets the wait",
            ));
        }
        if session.state().closed.is_some() {
            return Err(self
                .dap_error(session, request, DapError::Closed(String::new()))
                .await);
        }
        // Configuration: breakpoints, exception filters (the adapter's defaults), done.
        let breakpoints = lock(&slot.breakpoints).clone();
        let mut verdicts = Map::new();
        for (file, lines) in &breakpoints {
            let v = self.set_breakpoints(session, file, lines).await?;
            verdicts.insert(file.display().to_string(), v);
        }
        if let Some(filters) = caps["exceptionBreakpointFilters"].as_array() {
            let defaults: Vec<Value> = filters
                .iter()
                .filter(|f| f["default"].as_bool().unwrap_or(false))
                .filter_map(|f| f.get("filter").cloned())
                .collect();
            self.request(
                session,
                request,
                "setExceptionBreakpoints",
                Some(json!({"filters": defaults})),
            )
            .await?;
        }
        if caps["supportsConfigurationDoneRequest"]
            .as_bool()
            .unwrap_or(false)
        {
            self.request(session, request, "configurationDone", None)
                .await?;
        }
        if answered.is_none() {
            let left = start
                .saturating_sub(started.elapsed())
                .max(Duration::from_secs(1));
            let a = tokio::time::timeout(left, &mut answer).await;
            match a {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(self.dap_error(session, request, e).await),
                Err(_) => {
                    return Err(err(
                        ErrorKind::Timeout,
                        format!(
                            "debug {request}: the adapter did not answer `{request}` within {} s",
                            start.as_secs()
                        ),
                        "`[debug] start_timeout_s` sets the wait",
                    ));
                }
            }
        }
        session.update(|s| {
            if s.phase == Phase::Starting {
                s.phase = if s.stops > 0 {
                    Phase::Stopped
                } else {
                    Phase::Running
                };
            }
        });
        session.arm_ttl();
        tracing::info!(session = session.id, request, "debug session configured");
        let mut out = if expect_stop {
            self.settle(session, request, 0).await?
        } else {
            self.describe(session, request, None).await
        };
        if !verdicts.is_empty() {
            out["breakpoints"] = Value::Object(verdicts);
        }
        out["session"] = summary(session);
        Ok(out)
    }

    // ---- running and stopping -------------------------------------------------------------

    /// The thread to act on: the one given, else the one that stopped, else the first.
    async fn thread(
        &self,
        session: &Arc<Session>,
        op: &str,
        given: Option<i64>,
    ) -> Result<i64, ToolError> {
        if let Some(t) = given {
            return Ok(t);
        }
        if let Some(t) = session.state().stop.as_ref().and_then(|s| s.thread_id) {
            return Ok(t);
        }
        let body = self.request(session, op, "threads", None).await?;
        body["threads"]
            .as_array()
            .and_then(|t| t.first())
            .and_then(|t| t["id"].as_i64())
            .ok_or_else(|| {
                err(
                    ErrorKind::NotFound,
                    format!("debug {op}: the program has no threads"),
                    "`status` shows the session's state",
                )
            })
    }

    fn require_stopped(&self, session: &Arc<Session>, op: &str) -> Result<(), ToolError> {
        if session.state().phase != Phase::Stopped {
            return Err(err(
                ErrorKind::Busy,
                format!("debug {op}: the program is running; {op} needs it stopped"),
                "`pause` stops it (or wait for a breakpoint with `continue`); `output` shows what it printed",
            ));
        }
        Ok(())
    }

    async fn resume(
        &self,
        session: &Arc<Session>,
        op: DebugOp,
        thread: Option<i64>,
    ) -> Result<Value, ToolError> {
        let name = op_name(op);
        self.require_stopped(session, name)?;
        let thread = self.thread(session, name, thread).await?;
        let command = match op {
            DebugOp::Continue => "continue",
            DebugOp::StepOver => "next",
            DebugOp::StepIn => "stepIn",
            DebugOp::StepOut => "stepOut",
            _ => unreachable!("resume ops only"),
        };
        let before = session.state().stops;
        self.request(session, name, command, Some(json!({"threadId": thread})))
            .await?;
        session.update(|s| {
            if s.stops == before && s.phase == Phase::Stopped {
                s.phase = Phase::Running;
            }
        });
        self.settle(session, name, before).await
    }

    async fn pause(&self, session: &Arc<Session>, thread: Option<i64>) -> Result<Value, ToolError> {
        if session.state().phase == Phase::Stopped {
            let mut out = self.describe(session, "pause", None).await;
            out["note"] = json!("already stopped");
            return Ok(out);
        }
        let thread = self.thread(session, "pause", thread).await?;
        let before = session.state().stops;
        self.request(session, "pause", "pause", Some(json!({"threadId": thread})))
            .await?;
        self.settle(session, "pause", before).await
    }

    /// Waits (up to `stop_wait_s`) for a stop after `before` stops, or the program's end, and
    /// says where things are.
    async fn settle(
        &self,
        session: &Arc<Session>,
        op: &str,
        before: u64,
    ) -> Result<Value, ToolError> {
        let stopped = session
            .wait_until(self.config.stop_wait(), |s| {
                s.stops > before || s.terminated || s.closed.is_some() || s.end.is_some()
            })
            .await;
        let (closed, terminated) = {
            let s = session.state();
            (s.closed.is_some() && !s.terminated, s.terminated)
        };
        if closed {
            return Err(self
                .dap_error(session, op, DapError::Closed(String::new()))
                .await);
        }
        if terminated {
            // Some adapters send `exited` after `terminated`.
            session
                .wait_until(Duration::from_millis(500), |s| s.exit_code.is_some())
                .await;
        }
        if let Some(end) = session.ended()
            && end.kind == EndKind::Expired
        {
            return Err(end_error(session, &end, DebugOp::Status).with_op(op));
        }
        let note = (!stopped).then(|| {
            format!(
                "the program did not stop within {} s and is still running; `pause` stops it, `output` shows what it printed",
                self.config.stop_wait_s
            )
        });
        Ok(self.describe(session, op, note).await)
    }

    /// The session's state now: where it stopped (the top frame), or that it runs, or how it
    /// ended.
    async fn describe(&self, session: &Arc<Session>, op: &str, note: Option<String>) -> Value {
        let mut out = Map::new();
        out.insert("state".into(), json!(session.state_word()));
        let (phase, stop, exit_code, end) = {
            let s = session.state();
            (s.phase, s.stop.clone(), s.exit_code, s.end.clone())
        };
        if let Some(end) = &end {
            out.insert("exit_code".into(), json!(exit_code));
            out.insert("text".into(), json!(end.message));
            out.insert("output_bytes".into(), json!(session.output_end()));
        } else if phase == Phase::Stopped
            && let Some(stop) = stop
        {
            let mut stopped = Map::new();
            stopped.insert("reason".into(), json!(stop.reason));
            stopped.insert("thread_id".into(), json!(stop.thread_id));
            if let Some(d) = &stop.description {
                stopped.insert("description".into(), json!(d));
            }
            if let Some(t) = &stop.text {
                cut_value(&mut stopped, "exception", t);
            }
            let top = match stop.thread_id {
                Some(t) => self.top_frame(session, op, t).await.ok().flatten(),
                None => None,
            };
            let text = match &top {
                Some(f) => format!(
                    "stopped at {}:{} in {} ({})",
                    f["file"].as_str().unwrap_or("<no source>"),
                    f["line"],
                    f["name"].as_str().unwrap_or("?"),
                    stop.reason
                ),
                None => format!("stopped ({})", stop.reason),
            };
            if let Some(f) = top {
                stopped.insert("frame".into(), f);
            }
            out.insert("stopped".into(), Value::Object(stopped));
            out.insert("text".into(), json!(text));
        } else {
            out.insert("text".into(), json!("running"));
        }
        if let Some(n) = note {
            out.insert("note".into(), json!(n));
        }
        Value::Object(out)
    }

    /// The top frame of `thread` at the current stop (asked once per stop).
    async fn top_frame(
        &self,
        session: &Arc<Session>,
        op: &str,
        thread: i64,
    ) -> Result<Option<Value>, ToolError> {
        let stops = session.state().stops;
        if let Some((n, f)) = session.state().top.clone()
            && n == stops
        {
            return Ok(Some(f));
        }
        let body = self
            .request(
                session,
                op,
                "stackTrace",
                Some(json!({"threadId": thread, "startFrame": 0, "levels": 1})),
            )
            .await?;
        let frame = body["stackFrames"]
            .as_array()
            .and_then(|f| f.first())
            .map(frame_json);
        if let Some(f) = &frame {
            let f = f.clone();
            session.update(|s| {
                if s.stops == stops {
                    s.top = Some((stops, f));
                }
            });
        }
        Ok(frame)
    }

    // ---- inspection -----------------------------------------------------------------------

    async fn threads(&self, session: &Arc<Session>) -> Result<Value, ToolError> {
        let body = self.request(session, "threads", "threads", None).await?;
        let threads: Vec<Value> = body["threads"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|t| json!({"id": t["id"], "name": t["name"]}))
            .collect();
        let stopped = session.state().stop.as_ref().and_then(|s| s.thread_id);
        Ok(json!({"threads": threads, "stopped_thread": stopped, "state": session.state_word()}))
    }

    async fn stack(&self, session: &Arc<Session>, thread: Option<i64>) -> Result<Value, ToolError> {
        self.require_stopped(session, "stack")?;
        let thread = self.thread(session, "stack", thread).await?;
        let body = self
            .request(
                session,
                "stack",
                "stackTrace",
                Some(json!({"threadId": thread, "startFrame": 0, "levels": MAX_FRAMES + 1})),
            )
            .await?;
        let all = body["stackFrames"].as_array().cloned().unwrap_or_default();
        let total = body["totalFrames"]
            .as_u64()
            .unwrap_or(all.len() as u64)
            .max(all.len() as u64);
        let frames: Vec<Value> = all.iter().take(MAX_FRAMES).map(frame_json).collect();
        let truncated = total as usize > frames.len();
        Ok(json!({
            "thread_id": thread,
            "frames": frames,
            "total_frames": total,
            "truncated": truncated,
        }))
    }

    /// The frame to use: the one given, else the top frame of the stopped thread.
    async fn frame(
        &self,
        session: &Arc<Session>,
        op: &str,
        given: Option<i64>,
    ) -> Result<Option<i64>, ToolError> {
        if given.is_some() {
            return Ok(given);
        }
        let thread = session.state().stop.as_ref().and_then(|s| s.thread_id);
        if session.state().phase != Phase::Stopped {
            return Ok(None);
        }
        let Some(thread) = thread else {
            return Ok(None);
        };
        Ok(self
            .top_frame(session, op, thread)
            .await?
            .and_then(|f| f["id"].as_i64()))
    }

    async fn scopes(&self, session: &Arc<Session>, frame: Option<i64>) -> Result<Value, ToolError> {
        self.require_stopped(session, "scopes")?;
        let Some(frame) = self.frame(session, "scopes", frame).await? else {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug scopes: no frame to look at",
                "pass `frame_id` from `stack`",
            ));
        };
        let body = self
            .request(session, "scopes", "scopes", Some(json!({"frameId": frame})))
            .await?;
        let scopes: Vec<Value> = body["scopes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|s| {
                json!({
                    "name": s["name"],
                    "reference": s["variablesReference"],
                    "expensive": s["expensive"].as_bool().unwrap_or(false),
                })
            })
            .collect();
        Ok(json!({"frame_id": frame, "scopes": scopes}))
    }

    async fn variables(&self, session: &Arc<Session>, reference: i64) -> Result<Value, ToolError> {
        self.require_stopped(session, "variables")?;
        if reference <= 0 {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!("debug variables: reference {reference} has no children"),
                "use a non-zero `reference` from scopes, variables or evaluate",
            ));
        }
        let body = self
            .request(
                session,
                "variables",
                "variables",
                Some(json!({"variablesReference": reference})),
            )
            .await?;
        let all = body["variables"].as_array().cloned().unwrap_or_default();
        let variables: Vec<Value> = all
            .iter()
            .take(MAX_CHILDREN)
            .map(|v| {
                let mut out = Map::new();
                out.insert("name".into(), v["name"].clone());
                cut_value(&mut out, "value", v["value"].as_str().unwrap_or(""));
                if let Some(t) = v["type"].as_str().filter(|t| !t.is_empty()) {
                    out.insert("type".into(), json!(t));
                }
                out.insert(
                    "reference".into(),
                    json!(v["variablesReference"].as_i64().unwrap_or(0)),
                );
                Value::Object(out)
            })
            .collect();
        let truncated = all.len() > variables.len();
        let mut out = json!({
            "reference": reference,
            "variables": variables,
            "total": all.len(),
            "truncated": truncated,
        });
        if truncated {
            out["note"] = json!(format!(
                "only the first {MAX_CHILDREN} of {} children are shown",
                all.len()
            ));
        }
        Ok(out)
    }

    async fn evaluate(
        &self,
        session: &Arc<Session>,
        expression: &str,
        frame: Option<i64>,
    ) -> Result<Value, ToolError> {
        let frame = self.frame(session, "evaluate", frame).await?;
        // lldb-dap's "repl" context runs lldb commands; "watch" evaluates an expression.
        let context = match session.flavor {
            Flavor::Lldb => "watch",
            _ => "repl",
        };
        let mut request = json!({"expression": expression, "context": context});
        if let Some(f) = frame {
            request["frameId"] = json!(f);
        }
        let body = self
            .request(session, "evaluate", "evaluate", Some(request))
            .await?;
        let mut out = Map::new();
        out.insert("expression".into(), json!(expression));
        cut_value(&mut out, "result", body["result"].as_str().unwrap_or(""));
        if let Some(t) = body["type"].as_str().filter(|t| !t.is_empty()) {
            out.insert("type".into(), json!(t));
        }
        out.insert(
            "reference".into(),
            json!(body["variablesReference"].as_i64().unwrap_or(0)),
        );
        out.insert("frame_id".into(), json!(frame));
        Ok(Value::Object(out))
    }

    // ---- the end --------------------------------------------------------------------------

    async fn terminate(&self, slot: &Slot) -> Result<Value, ToolError> {
        let current = lock(&slot.current).clone();
        let Some(session) = current else {
            return Ok(
                json!({"terminated": false, "note": "no debug session in this conversation"}),
            );
        };
        if let Some(end) = session.ended() {
            // Ended on its own (or is winding down): make sure nothing is left, say how.
            session.shutdown(end.kind, end.message.clone()).await;
            return Ok(json!({
                "terminated": false,
                "note": format!("the session had already ended: {}", end.message),
                "session": summary(&session),
            }));
        }
        let message = match &session.target {
            Target::Launch { .. } => "terminated by `terminate` (adapter and program killed)",
            Target::Attach { .. } => {
                "ended by `terminate` (detached; the attached program keeps running)"
            }
        };
        session.shutdown(EndKind::Terminated, message.into()).await;
        Ok(json!({"terminated": true, "session": summary(&session)}))
    }
}

/// A frame as the tool shows it.
fn frame_json(f: &Value) -> Value {
    let source = &f["source"];
    let file = source["path"]
        .as_str()
        .filter(|p| !p.is_empty())
        .or_else(|| source["name"].as_str());
    let mut out = json!({
        "id": f["id"],
        "name": f["name"],
        "file": file,
        "line": f["line"],
        "column": f["column"],
    });
    if file.is_none() {
        out["note"] = json!("no source (a frame in code without debug information)");
    }
    out
}

/// A session's facts for `status` and results.
fn summary(session: &Arc<Session>) -> Value {
    let s = session.state();
    let mut out = json!({
        "id": session.id,
        "adapter": session.adapter,
        "command": session.command,
        "state": match (&s.end, s.phase) {
            (Some(e), _) => e.kind.as_str(),
            (None, Phase::Starting) => "starting",
            (None, Phase::Running) => "running",
            (None, Phase::Stopped) => "stopped",
        },
        "adapter_pid": session.adapter_pid(),
        "debuggee_pid": s.debuggee_pid,
        "exit_code": s.exit_code,
        "uptime_ms": duration_ms(session.started.elapsed()),
        "output_bytes": session.output_end(),
    });
    match &session.target {
        Target::Launch { program, args } => {
            out["program"] = json!(program.display().to_string());
            out["args"] = json!(args);
        }
        Target::Attach { port } => out["port"] = json!(port),
    }
    if let Some(end) = &s.end {
        out["ended"] = json!({"kind": end.kind.as_str(), "message": end.message});
    } else {
        if let Some(deadline) = session.deadline() {
            out["ttl_left_ms"] = json!(duration_ms(
                deadline.saturating_duration_since(Instant::now())
            ));
        }
        if let Some((n, f)) = &s.top
            && *n == s.stops
            && s.phase == Phase::Stopped
        {
            out["at"] = f.clone();
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
