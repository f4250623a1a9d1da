//! The results of the debug tools: `debug`, one shape per op.
//!
//! A field marked `skip_serializing_if` is left out when there is nothing to say, the others
//! are written as `null`, as the answers have always spelled it. `exit_code` of a stop and
//! `restarted_from` of a launch are either (`Option<Option<T>>`): absent where they do not
//! apply (the session has not ended; a launch that is no restart), `null` where they apply
//! but are not known.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

/// The result of `debug`: the shape depends on the op.
// Built once per call and serialized at once: the size of `Launch` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum DebugResult {
    /// `launch`, `attach`, `restart`: where the program stopped (or that it runs), the breakpoint verdicts and the session.
    Launch(DebugLaunchResult),
    /// `run_to`: the stop, and what became of the temporary breakpoint.
    RunTo(DebugRunToResult),
    // Before `Stop`, whose `state` and `text` it has too: parsed as a stop, its slice would
    // be lost.
    /// `output`.
    Output(DebugOutputResult),
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
    /// `terminate`.
    Terminate(DebugTerminateResult),
}

/// Where things are after an op that runs or stops the program.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugStopResult {
    /// The session's state now.
    pub state: DebugState,
    /// One line: `stopped at FILE:LINE in FUNC (REASON)`, `running`, or how the session ended.
    pub text: String,
    /// Where and why it stopped; absent when it runs or ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<DebugStop>,
    /// Once the session ended: the program's exit code (null when unknown).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub exit_code: Option<Option<i64>>,
    /// Once the session ended: bytes of output the program wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    /// What to know: it did not stop within `stop_wait_s`, or it was already stopped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The answer of `launch`, `attach` and `restart`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugLaunchResult {
    #[serde(flatten)]
    pub stop: DebugStopResult,
    /// File → the adapter's verdict on each of its breakpoints; absent when none are set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakpoints: Option<BTreeMap<String, Vec<DebugSourceBreakpoint>>>,
    /// The adapter's verdict on each function breakpoint; absent when none are set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<DebugFunctionBreakpoint>>,
    /// The new session.
    pub session: DebugSession,
    /// `restart`: the id of the session it replaced (null when there was none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub restarted_from: Option<Option<String>>,
}

/// The answer of `run_to`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugRunToResult {
    #[serde(flatten)]
    pub stop: DebugStopResult,
    /// The temporary breakpoint: where, whether it was reached and taken out again.
    pub run_to: DebugRunTo,
}

/// What `run_to` did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The adapter's verdict on `run_to`'s temporary breakpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugTemporaryBreakpoint {
    /// The line asked for; absent when a breakpoint of yours is on that line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// Whether the adapter verified it.
    pub verified: bool,
    /// The line the adapter moved it to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_line: Option<u64>,
    /// The adapter's message about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The adapter's breakpoint id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Why none was needed (a breakpoint of yours is on that line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A stop: why, on which thread, and where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugStop {
    /// The adapter's reason (`breakpoint`, `step`, `entry`, `exception`, `pause`, …).
    pub reason: String,
    /// The thread that stopped (null when the adapter did not say).
    pub thread_id: Option<i64>,
    /// The adapter's description of the stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// reason `exception`: what was raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<DebugException>,
    /// The stop event's text (cut at 400 characters), other than for exceptions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Whether `detail` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail_truncated: Option<bool>,
    /// Characters of the whole `detail`, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail_chars: Option<u64>,
    /// The top frame it stopped in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame: Option<DebugFrame>,
    /// Why the top frame is not known (the adapter's stack answer failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_error: Option<String>,
}

/// An exception the program stopped on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugException {
    /// The adapter's exception id (debugpy: the class; lldb-dap: `cpp_throw`, `signal`, …).
    pub id: Option<String>,
    /// The message (cut at 400 characters).
    pub description: Option<String>,
    /// Whether `description` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_truncated: Option<bool>,
    /// Characters of the whole description, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description_chars: Option<u64>,
    /// The exception's type name, where the adapter says it (cut at 400 characters).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Whether `type` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub type_truncated: Option<bool>,
    /// Characters of the whole type name, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub type_chars: Option<u64>,
    /// The adapter's traceback text, its last 4000 characters; null when it gives none.
    pub stack_trace_text: Option<String>,
    /// Whether `stack_trace_text` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_trace_text_truncated: Option<bool>,
    /// Characters of the whole traceback, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_trace_text_chars: Option<u64>,
    /// The adapter's break mode (`unhandled`, `always`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub break_mode: Option<String>,
    /// Why the adapter's `exceptionInfo` failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info_error: Option<String>,
    /// The adapter has no `exceptionInfo`: only what its stop event said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A stack frame, as the adapter gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A session's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DebugEndKind {
    Terminated,
    Exited,
    Crashed,
    Expired,
    Failed,
}

/// A debug session's facts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// A launched Python module (`python -m`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// A launched module's working directory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// A launched program's arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// An attached session's port on 127.0.0.1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// An attached session's process id (`attach {pid}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Milliseconds left of the hard TTL (live sessions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_left_ms: Option<u64>,
    /// The frame it is stopped in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<DebugFrame>,
    /// The exception it is stopped on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<DebugException>,
    /// Once over: how and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<DebugEnd>,
}

/// How a session ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugEnd {
    /// The kind of end.
    pub kind: DebugEndKind,
    /// What happened.
    pub message: String,
}

/// A source breakpoint with its options and the adapter's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugSourceBreakpoint {
    /// The 1-based line asked for.
    pub line: u64,
    /// Stop only when this expression is true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Stop only when the hit count satisfies this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hit_condition: Option<String>,
    /// A logpoint's message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_message: Option<String>,
    /// Whether the adapter verified it (absent until a session got it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// The line the adapter moved it to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actual_line: Option<u64>,
    /// The adapter's message about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The adapter's breakpoint id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
}

/// A function breakpoint and the adapter's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugFunctionBreakpoint {
    /// The function's name.
    pub name: String,
    /// Whether the adapter verified it (absent until a session got it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
    /// The line the adapter put it on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The file the adapter put it in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The adapter's message about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The adapter's breakpoint id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
}

/// The answer of `breakpoints` with `file`, `functions` or `exceptions`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugBreakpointsResult {
    /// The file whose breakpoints were set (absolute).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its breakpoint lines now, sorted (empty: cleared).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<Vec<u64>>,
    /// The adapter's verdict per breakpoint of `file`, when applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakpoints: Option<Vec<DebugSourceBreakpoint>>,
    /// The function breakpoints now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_names: Option<Vec<String>>,
    /// The adapter's verdict per function breakpoint, when applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions: Option<Vec<DebugFunctionBreakpoint>>,
    /// The exception filters now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exceptions: Option<Vec<String>>,
    /// Whether a live session got them (else they are kept for the next launch).
    pub applied: bool,
    /// Kept for the next launch, when no session runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The answer of `breakpoints` alone: everything set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugExceptionFilters {
    /// The filters set; null: the adapter's defaults.
    pub set: Option<Vec<String>>,
    /// The filters the current or last session's adapter offers; null before any session.
    pub available: Option<Vec<DebugExceptionFilter>>,
    /// How to read `set` and `available`.
    pub note: String,
}

/// An exception filter an adapter offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugExceptionFilter {
    /// The filter's id, for `exceptions`.
    pub filter: Option<String>,
    /// What it stops on.
    pub label: Option<String>,
    /// Whether the adapter sets it by default.
    pub default: bool,
}

/// The answer of `adapters`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugAdaptersResult {
    /// Every configured adapter.
    pub adapters: Vec<DebugAdapter>,
    /// The workdir they were looked up for.
    pub workdir: String,
}

/// One adapter, and whether it can run here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_note: Option<String>,
    /// The command line it runs with (or would: its first candidate).
    pub command: Option<String>,
    /// debugpy: the Python interpreter it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<String>,
    /// debugpy: its version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Whether it can run here.
    pub available: bool,
    /// Why not (null when available).
    pub reason: Option<String>,
}

/// The answer of `status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugThreadsResult {
    /// The program's threads.
    pub threads: Vec<DebugThread>,
    /// The thread of the last stop.
    pub stopped_thread: Option<i64>,
    /// The session's state.
    pub state: DebugState,
}

/// A thread, as the adapter gave it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugThread {
    /// The thread id (for `thread_id`).
    pub id: Option<i64>,
    /// Its name.
    pub name: Option<String>,
}

/// The answer of `stack`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugScopesResult {
    /// The frame whose scopes these are.
    pub frame_id: i64,
    /// Its scopes.
    pub scopes: Vec<DebugScope>,
}

/// A scope of a frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugScope {
    /// Its name (`Locals`, `Globals`, …).
    pub name: Option<String>,
    /// Its variables' reference (for `variables`).
    pub reference: Option<i64>,
    /// Whether the adapter says listing it is expensive.
    pub expensive: bool,
}

/// The answer of `variables`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A variable.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugVariable {
    /// Its name.
    pub name: Option<String>,
    /// Its value as the adapter shows it (cut at 400 characters).
    pub value: String,
    /// Whether `value` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_truncated: Option<bool>,
    /// Characters of the whole value, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_chars: Option<u64>,
    /// Its type, where the adapter says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its children's reference (for `variables`; 0: none).
    pub reference: i64,
}

/// The answer of `evaluate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugEvaluateResult {
    /// The expression evaluated.
    pub expression: String,
    /// Its value as the adapter shows it (cut at 400 characters).
    pub result: String,
    /// Whether `result` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_truncated: Option<bool>,
    /// Characters of the whole result, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_chars: Option<u64>,
    /// Its type, where the adapter says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its children's reference (for `variables`; 0: none).
    pub reference: i64,
    /// The frame it was evaluated in (null: none, the global context).
    pub frame_id: Option<i64>,
}

/// The answer of `set_variable`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugSetVariableResult {
    /// The variable set.
    pub name: String,
    /// Its new value as the adapter shows it (cut at 400 characters).
    pub value: String,
    /// Whether `value` was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_truncated: Option<bool>,
    /// Characters of the whole value, when cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_chars: Option<u64>,
    /// Its type, where the adapter says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Its children's reference (for `variables`; 0: none).
    pub reference: i64,
}

/// A watch (data breakpoint) as set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The answer of `watch`: the new watch, and every watch of the session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugWatchResult {
    #[serde(flatten)]
    pub watch: DebugWatch,
    /// Every watch of the session, this one last.
    pub watches: Vec<DebugWatch>,
    /// Why it may not trigger, when the adapter did not verify it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The answer of `output`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DebugTerminateResult {
    /// Whether this call ended a running session.
    pub terminated: bool,
    /// Why nothing was terminated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The session, as it ended (absent when there was none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<DebugSession>,
}

/// A field the handler writes as `null` when it has nothing to say, and leaves out where it
/// does not apply (`Option<Option<T>>`): present, even as `null`, reads as `Some`.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}
