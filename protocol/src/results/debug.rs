//! The results of the debug tools: `debug`, one shape per op.

use std::collections::BTreeMap;

use schemars::JsonSchema;

/// The result of `debug`: the shape depends on the op.
#[derive(JsonSchema)]
#[serde(untagged)]
pub enum DebugResult {
    /// `launch`, `attach`, `restart`: where the program stopped (or that it runs), the breakpoint verdicts and the session.
    Launch(DebugLaunchResult),
    /// `run_to`: the stop, and what became of the temporary breakpoint.
    RunTo(DebugRunToResult),
    /// `continue`, `step_over`, `step_in`, `step_out`, `pause`: where the program stopped, or that it runs or ended.
    Stop(DebugStopResult),
    /// `breakpoints` with `file`, `functions` or `exceptions`: what was set, and the adapter's verdicts when applied.
    Breakpoints(DebugBreakpointsResult),
    /// `breakpoints` alone: the listing of everything set.
    BreakpointList(DebugBreakpointListResult),
    /// `adapters`: which adapters work here and why not.
    Adapters(DebugAdaptersResult),
    /// `status`: the session and what is set.
    Status(DebugStatusResult),
    /// `threads`.
    Threads(DebugThreadsResult),
    /// `stack`.
    Stack(DebugStackResult),
    /// `scopes`.
    Scopes(DebugScopesResult),
    /// `variables`.
    Variables(DebugVariablesResult),
    /// `evaluate`.
    Evaluate(DebugEvaluateResult),
    /// `set_variable`.
    SetVariable(DebugSetVariableResult),
    /// `watch`.
    Watch(DebugWatchResult),
    /// `output`.
    Output(DebugOutputResult),
    /// `terminate`.
    Terminate(DebugTerminateResult),
}

/// Where things are after an op that runs or stops the program.
#[derive(JsonSchema)]
pub struct DebugStopResult {
    /// The session's state now.
    pub state: DebugState,
    /// One line: `stopped at FILE:LINE in FUNC (REASON)`, `running`, or how the session ended.
    pub text: String,
    /// Where and why it stopped; absent when it runs or ended.
    pub stopped: Option<DebugStop>,
    /// Once the session ended: the program's exit code (null when unknown).
    pub exit_code: Option<i64>,
    /// Once the session ended: bytes of output the program wrote.
    pub output_bytes: Option<u64>,
    /// What to know: it did not stop within `stop_wait_s`, or it was already stopped.
    pub note: Option<String>,
}

/// The answer of `launch`, `attach` and `restart`.
#[derive(JsonSchema)]
pub struct DebugLaunchResult {
    #[serde(flatten)]
    pub stop: DebugStopResult,
    /// File → the adapter's verdict on each of its breakpoints; absent when none are set.
    pub breakpoints: Option<BTreeMap<String, Vec<DebugSourceBreakpoint>>>,
    /// The adapter's verdict on each function breakpoint; absent when none are set.
    pub functions: Option<Vec<DebugFunctionBreakpoint>>,
    /// The new session.
    pub session: DebugSession,
    /// `restart`: the id of the session it replaced (null when there was none).
    pub restarted_from: Option<String>,
}

/// The answer of `run_to`.
#[derive(JsonSchema)]
pub struct DebugRunToResult {
    #[serde(flatten)]
    pub stop: DebugStopResult,
    /// The temporary breakpoint: where, whether it was reached and taken out again.
    pub run_to: DebugRunTo,
}

/// What `run_to` did.
#[derive(JsonSchema)]
pub struct DebugRunTo {
    /// The file run to (absolute).
    pub file: String,
    /// The 1-based line run to.
    pub line: u64,
    /// Whether the program stopped there (false: another breakpoint came first, or it did not stop).
    pub reached: bool,
    /// The adapter's verdict on the temporary breakpoint.
    pub temporary_breakpoint: DebugTemporaryBreakpoint,
    /// Whether the temporary breakpoint is gone again.
    pub removed: bool,
    /// Why it stays (until the program stops or the session ends).
    pub note: Option<String>,
}

/// The adapter's verdict on `run_to`'s temporary breakpoint.
#[derive(JsonSchema)]
pub struct DebugTemporaryBreakpoint {
    /// The line asked for; absent when a breakpoint of yours is on that line.
    pub line: Option<u64>,
    /// Whether the adapter verified it.
    pub verified: bool,
    /// The line the adapter moved it to.
    pub actual_line: Option<u64>,
    /// The adapter's message about it.
    pub message: Option<String>,
    /// The adapter's breakpoint id.
    pub id: Option<i64>,
    /// Why none was needed (a breakpoint of yours is on that line).
    pub note: Option<String>,
}

/// A stop: why, on which thread, and where.
#[derive(JsonSchema)]
pub struct DebugStop {
    /// The adapter's reason (`breakpoint`, `step`, `entry`, `exception`, `pause`, …).
    pub reason: String,
    /// The thread that stopped (null when the adapter did not say).
    pub thread_id: Option<i64>,
    /// The adapter's description of the stop.
    pub description: Option<String>,
    /// reason `exception`: what was raised.
    pub exception: Option<DebugException>,
    /// The stop event's text (cut at 400 characters), other than for exceptions.
    pub detail: Option<String>,
    /// Whether `detail` was cut.
    pub detail_truncated: Option<bool>,
    /// Characters of the whole `detail`, when cut.
    pub detail_chars: Option<u64>,
    /// The top frame it stopped in.
    pub frame: Option<DebugFrame>,
    /// Why the top frame is not known (the adapter's stack answer failed).
    pub frame_error: Option<String>,
}

/// An exception the program stopped on.
#[derive(JsonSchema)]
pub struct DebugException {
    /// The adapter's exception id (debugpy: the class; lldb-dap: `cpp_throw`, `signal`, …).
    pub id: Option<String>,
    /// The message (cut at 400 characters).
    pub description: Option<String>,
    /// Whether `description` was cut.
    pub description_truncated: Option<bool>,
    /// Characters of the whole description, when cut.
    pub description_chars: Option<u64>,
    /// The exception's type name, where the adapter says it (cut at 400 characters).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Whether `type` was cut.
    pub type_truncated: Option<bool>,
    /// Characters of the whole type name, when cut.
    pub type_chars: Option<u64>,
    /// The adapter's traceback text, its last 4000 characters; null when it gives none.
    pub stack_trace_text: Option<String>,
    /// Whether `stack_trace_text` was cut.
    pub stack_trace_text_truncated: Option<bool>,
    /// Characters of the whole traceback, when cut.
    pub stack_trace_text_chars: Option<u64>,
    /// The adapter's break mode (`unhandled`, `always`, …).
    pub break_mode: Option<String>,
    /// Why the adapter's `exceptionInfo` failed.
    pub info_error: Option<String>,
    /// The adapter has no `exceptionInfo`: only what its stop event said.
    pub note: Option<String>,
}

/// A stack frame, as the adapter gave it.
#[derive(JsonSchema)]
pub struct DebugFrame {
    /// The frame id (for `scopes`, `evaluate`), valid until the program runs again.
    pub id: Option<i64>,
    /// The function's name.
    pub name: Option<String>,
    /// The source file (null for code without debug information).
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<i64>,
    /// 1-based column.
    pub column: Option<i64>,
    /// Why there is no `file`.
    pub note: Option<String>,
}

/// A session's state.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DebugState {
    Starting,
    Running,
    Stopped,
    Exited,
    Terminated,
    Crashed,
    Expired,
    Failed,
}

/// How a session ended.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DebugEndKind {
    Terminated,
    Exited,
    Crashed,
    Expired,
    Failed,
}

/// A debug session's facts.
#[derive(JsonSchema)]
pub struct DebugSession {
    /// `<conversation>#N`.
    pub id: String,
    /// The adapter's name (`debugpy`, `lldb`, …).
    pub adapter: String,
    /// The adapter's command line, or `127.0.0.1:PORT` when attached.
    pub command: String,
    /// Its state now.
    pub state: DebugState,
    /// The adapter's process id (null when attached or not known).
    pub adapter_pid: Option<u32>,
    /// The debugged program's process id, once the adapter said it.
    pub debuggee_pid: Option<u32>,
    /// The program's exit code, once it exited.
    pub exit_code: Option<i64>,
    /// Milliseconds since the session started.
    pub uptime_ms: u64,
    /// Bytes of output the program wrote.
    pub output_bytes: u64,
    /// A launched program (absolute).
    pub program: Option<String>,
    /// A launched Python module (`python -m`).
    pub module: Option<String>,
    /// A launched module's working directory.
    pub cwd: Option<String>,
    /// A launched program's arguments.
    pub args: Option<Vec<String>>,
    /// An attached session's port on 127.0.0.1.
    pub port: Option<u16>,
    /// An attached session's process id (`attach {pid}`).
    pub pid: Option<u32>,
    /// Milliseconds left of the hard TTL (live sessions).
    pub ttl_left_ms: Option<u64>,
    /// The frame it is stopped in.
    pub at: Option<DebugFrame>,
    /// The exception it is stopped on.
    pub exception: Option<DebugException>,
    /// Once over: how and why.
    pub ended: Option<DebugEnd>,
}

/// How a session ended.
#[derive(JsonSchema)]
pub struct DebugEnd {
    /// The kind of end.
    pub kind: DebugEndKind,
    /// What happened.
    pub message: String,
}

/// A source breakpoint with its options and the adapter's verdict.
#[derive(JsonSchema)]
pub struct DebugSourceBreakpoint {
    /// The 1-based line asked for.
    pub line: u64,
    /// Stop only when this expression is true.
    pub condition: Option<String>,
    /// Stop only when the hit count satisfies this.
    pub hit_condition: Option<String>,
    /// A logpoint's message.
    pub log_message: Option<String>,
    /// Whether the adapter verified it (absent until a session got it).
    pub verified: Option<bool>,
    /// The line the adapter moved it to.
    pub actual_line: Option<u64>,
    /// The adapter's message about it.
    pub message: Option<String>,
    /// The adapter's breakpoint id.
    pub id: Option<i64>,
}

/// A function breakpoint and the adapter's verdict.
#[derive(JsonSchema)]
pub struct DebugFunctionBreakpoint {
    /// The function's name.
    pub name: String,
    /// Whether the adapter verified it (absent until a session got it).
    pub verified: Option<bool>,
    /// The line the adapter put it on.
    pub line: Option<u64>,
    /// The file the adapter put it in.
    pub file: Option<String>,
    /// The adapter's message about it.
    pub message: Option<String>,
    /// The adapter's breakpoint id.
    pub id: Option<i64>,
}

/// The answer of `breakpoints` with `file`, `functions` or `exceptions`.
#[derive(JsonSchema)]
pub struct DebugBreakpointsResult {
    /// The file whose breakpoints were set (absolute).
    pub file: Option<String>,
    /// Its breakpoint lines now, sorted (empty: cleared).
    pub lines: Option<Vec<u64>>,
    /// The adapter's verdict per breakpoint of `file`, when applied.
    pub breakpoints: Option<Vec<DebugSourceBreakpoint>>,
    /// The function breakpoints now.
    pub function_names: Option<Vec<String>>,
    /// The adapter's verdict per function breakpoint, when applied.
    pub functions: Option<Vec<DebugFunctionBreakpoint>>,
    /// The exception filters now.
    pub exceptions: Option<Vec<String>>,
    /// Whether a live session got them (else they are kept for the next launch).
    pub applied: bool,
    /// Kept for the next launch, when no session runs.
    pub note: Option<String>,
}

/// The answer of `breakpoints` alone: everything set.
#[derive(JsonSchema)]
pub struct DebugBreakpointListResult {
    /// File → its breakpoints, with the adapter's last verdicts.
    pub files: BTreeMap<String, Vec<DebugSourceBreakpoint>>,
    /// The function breakpoints, with the adapter's last verdicts.
    pub functions: Vec<DebugFunctionBreakpoint>,
    /// The exception filters set and those the adapter offers.
    pub exceptions: DebugExceptionFilters,
    /// Whether a live session has them.
    pub applied: bool,
    /// The current or last session's id.
    pub session: Option<String>,
}

/// The exception filters of the listing.
#[derive(JsonSchema)]
pub struct DebugExceptionFilters {
    /// The filters set; null: the adapter's defaults.
    pub set: Option<Vec<String>>,
    /// The filters the current or last session's adapter offers; null before any session.
    pub available: Option<Vec<DebugExceptionFilter>>,
    /// How to read `set` and `available`.
    pub note: String,
}

/// An exception filter an adapter offers.
#[derive(JsonSchema)]
pub struct DebugExceptionFilter {
    /// The filter's id, for `exceptions`.
    pub filter: Option<String>,
    /// What it stops on.
    pub label: Option<String>,
    /// Whether the adapter sets it by default.
    pub default: bool,
}

/// The answer of `adapters`.
#[derive(JsonSchema)]
pub struct DebugAdaptersResult {
    /// Every configured adapter.
    pub adapters: Vec<DebugAdapter>,
    /// The workdir they were looked up for.
    pub workdir: String,
}

/// One adapter, and whether it can run here.
#[derive(JsonSchema)]
pub struct DebugAdapter {
    /// Its name (for `adapter`).
    pub name: String,
    /// Files that mark a project of its language.
    pub markers: Vec<String>,
    /// Program extensions `launch` picks it for.
    pub extensions: Vec<String>,
    /// The project root found from the workdir (null when no marker).
    pub root: Option<String>,
    /// Why there is no root.
    pub root_note: Option<String>,
    /// The command line it runs with (or would: its first candidate).
    pub command: Option<String>,
    /// debugpy: the Python interpreter it runs on.
    pub python: Option<String>,
    /// debugpy: its version.
    pub version: Option<String>,
    /// Whether it can run here.
    pub available: bool,
    /// Why not (null when available).
    pub reason: Option<String>,
}

/// The answer of `status`.
#[derive(JsonSchema)]
pub struct DebugStatusResult {
    /// The current or last session (null when none).
    pub session: Option<DebugSession>,
    /// File → its breakpoint lines.
    pub breakpoints: BTreeMap<String, Vec<u64>>,
    /// The function breakpoints set.
    pub function_breakpoints: Vec<String>,
    /// The exception filters set; null: the adapter's defaults.
    pub exception_filters: Option<Vec<String>>,
}

/// The answer of `threads`.
#[derive(JsonSchema)]
pub struct DebugThreadsResult {
    /// The program's threads.
    pub threads: Vec<DebugThread>,
    /// The thread of the last stop.
    pub stopped_thread: Option<i64>,
    /// The session's state.
    pub state: DebugState,
}

/// A thread, as the adapter gave it.
#[derive(JsonSchema)]
pub struct DebugThread {
    /// The thread id (for `thread_id`).
    pub id: Option<i64>,
    /// Its name.
    pub name: Option<String>,
}

/// The answer of `stack`.
#[derive(JsonSchema)]
pub struct DebugStackResult {
    /// The thread whose stack this is.
    pub thread_id: i64,
    /// Up to 30 frames, innermost first.
    pub frames: Vec<DebugFrame>,
    /// Frames on the stack in all.
    pub total_frames: u64,
    /// Whether frames were left out.
    pub truncated: bool,
}

/// The answer of `scopes`.
#[derive(JsonSchema)]
pub struct DebugScopesResult {
    /// The frame whose scopes these are.
    pub frame_id: i64,
    /// Its scopes.
    pub scopes: Vec<DebugScope>,
}

/// A scope of a frame.
#[derive(JsonSchema)]
pub struct DebugScope {
    /// Its name (`Locals`, `Globals`, …).
    pub name: Option<String>,
    /// Its variables' reference (for `variables`).
    pub reference: Option<i64>,
    /// Whether the adapter says listing it is expensive.
    pub expensive: bool,
}

/// The answer of `variables`.
#[derive(JsonSchema)]
pub struct DebugVariablesResult {
    /// The container listed.
    pub reference: i64,
    /// Up to 50 children.
    pub variables: Vec<DebugVariable>,
    /// Children in all.
    pub total: u64,
    /// Whether children were left out.
    pub truncated: bool,
    /// How many are shown, when cut.
    pub note: Option<String>,
}

/// A variable.
#[derive(JsonSchema)]
pub struct DebugVariable {
    /// Its name.
    pub name: Option<String>,
    /// Its value as the adapter shows it (cut at 400 characters).
    pub value: String,
    /// Whether `value` was cut.
    pub value_truncated: Option<bool>,
    /// Characters of the whole value, when cut.
    pub value_chars: Option<u64>,
    /// Its type, where the adapter says it.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its children's reference (for `variables`; 0: none).
    pub reference: i64,
}

/// The answer of `evaluate`.
#[derive(JsonSchema)]
pub struct DebugEvaluateResult {
    /// The expression evaluated.
    pub expression: String,
    /// Its value as the adapter shows it (cut at 400 characters).
    pub result: String,
    /// Whether `result` was cut.
    pub result_truncated: Option<bool>,
    /// Characters of the whole result, when cut.
    pub result_chars: Option<u64>,
    /// Its type, where the adapter says it.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its children's reference (for `variables`; 0: none).
    pub reference: i64,
    /// The frame it was evaluated in (null: none, the global context).
    pub frame_id: Option<i64>,
}

/// The answer of `set_variable`.
#[derive(JsonSchema)]
pub struct DebugSetVariableResult {
    /// The variable set.
    pub name: String,
    /// Its new value as the adapter shows it (cut at 400 characters).
    pub value: String,
    /// Whether `value` was cut.
    pub value_truncated: Option<bool>,
    /// Characters of the whole value, when cut.
    pub value_chars: Option<u64>,
    /// Its type, where the adapter says it.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its children's reference (for `variables`; 0: none).
    pub reference: i64,
}

/// A watch (data breakpoint) as set.
#[derive(JsonSchema)]
pub struct DebugWatch {
    /// What is watched.
    pub expression: String,
    /// The adapter's id of the data.
    pub data_id: String,
    /// The adapter's description of the data.
    pub description: String,
    /// The access that stops the program (`write`, …).
    pub access_type: String,
    /// Whether the adapter verified it.
    pub verified: bool,
    /// The adapter's message about it.
    pub message: Option<String>,
}

/// The answer of `watch`: the new watch, and every watch of the session.
#[derive(JsonSchema)]
pub struct DebugWatchResult {
    #[serde(flatten)]
    pub watch: DebugWatch,
    /// Every watch of the session, this one last.
    pub watches: Vec<DebugWatch>,
    /// Why it may not trigger, when the adapter did not verify it.
    pub note: Option<String>,
}

/// The answer of `output`.
#[derive(JsonSchema)]
pub struct DebugOutputResult {
    /// The session read.
    pub session: String,
    /// The program's stdout and stderr, interleaved.
    pub text: String,
    /// Byte offset where `text` starts.
    pub offset: u64,
    /// Offset to read on from.
    pub next_offset: u64,
    /// Bytes between the offset asked for and `offset` that were already dropped.
    pub dropped: u64,
    /// Bytes the program wrote in all.
    pub total_bytes: u64,
    /// Whether the session is over and everything was read.
    pub eof: bool,
    /// The session's state.
    pub state: DebugState,
    /// The adapter's last 20 console lines (its notes, lldb-dap's logpoint messages).
    pub console: Vec<String>,
}

/// The answer of `terminate`.
#[derive(JsonSchema)]
pub struct DebugTerminateResult {
    /// Whether this call ended a running session.
    pub terminated: bool,
    /// Why nothing was terminated.
    pub note: Option<String>,
    /// The session, as it ended (absent when there was none).
    pub session: Option<DebugSession>,
}
