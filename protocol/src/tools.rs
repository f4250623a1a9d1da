//! Typed arguments and results of the tools whose workers exist, as the daemon parses and
//! builds them. Clients may send the same fields as plain JSON objects.

use serde::{Deserialize, Serialize};

/// `bash {command, timeout_s?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BashArgs {
    pub command: String,
    /// Wall-clock limit in seconds (default 120, at most 3600).
    pub timeout_s: Option<u64>,
}

/// What `bash` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BashOutput {
    pub stdout: String,
    pub stderr: String,
    /// `None` when the command was killed by a signal.
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub wall_ms: u64,
    pub timed_out: bool,
    /// True when stdout or stderr was cut; the `*_bytes` fields give the full sizes.
    pub truncated: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

/// Operations of the `process` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessOp {
    Start,
    List,
    Read,
    Write,
    Kill,
}

/// What to do when a tracked process ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RestartMode {
    /// Never restart (temporary).
    #[default]
    No,
    /// Restart after a non-zero exit or a signal (transient).
    OnFailure,
    /// Restart whenever it ends (permanent).
    Always,
}

/// `process {op, ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessArgs {
    pub op: ProcessOp,
    /// start: the shell command line.
    pub command: Option<String>,
    /// start: a short name shown in lists (default: the command).
    pub label: Option<String>,
    /// start: restart policy (default `no`).
    pub restart: Option<RestartMode>,
    /// start: hard time-to-live in seconds; the process is stopped after it, used or not.
    pub ttl_s: Option<u64>,
    /// read/write/kill: the process id returned by start.
    pub id: Option<String>,
    /// read: first byte offset of the combined output to return (default: where the last
    /// read of this conversation stopped).
    pub offset: Option<u64>,
    /// read: at most this many bytes (default 65536, at most 1048576).
    pub limit: Option<u64>,
    /// write: text to send to the process's stdin.
    pub data: Option<String>,
    /// write: close stdin after writing.
    pub eof: Option<bool>,
}

/// One tracked process as `start`, `list` and `kill` report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub id: String,
    pub label: String,
    pub command: String,
    /// The program's pid while it runs.
    pub pid: Option<u32>,
    /// starting | running | backoff | stopping | exited | killed | expired | failed
    pub state: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub uptime_ms: u64,
    /// Time left before the idle or hard TTL stops it (while running).
    pub ttl_left_ms: Option<u64>,
    /// Bytes of output produced so far (the next read offset at the end).
    pub output_bytes: u64,
}

/// What `process read` returns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessOutput {
    pub id: String,
    /// Output from `offset` to `next_offset` (stdout and stderr interleaved as they came).
    pub text: String,
    pub offset: u64,
    pub next_offset: u64,
    /// Bytes before `offset` that were dropped from the buffer and can no longer be read.
    pub dropped: u64,
    pub eof: bool,
    pub state: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// `ask_user {question, context?, options?, allow_free_text?, multi_select?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskUserArgs {
    pub question: String,
    /// What the person needs to know to answer.
    pub context: Option<String>,
    #[serde(default)]
    pub options: Vec<crate::wire::QuestionOption>,
    /// Accept an answer outside the options. Default: true when there are no options,
    /// false when there are.
    pub allow_free_text: Option<bool>,
    /// Accept several options.
    #[serde(default)]
    pub multi_select: bool,
}

/// What `ask_user` returns when the person answered or skipped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskUserOutput {
    pub question_id: u64,
    /// Labels chosen among the options, in the order of the options.
    pub selected: Vec<String>,
    /// The free-text answer, if one was given.
    pub text: Option<String>,
    pub skipped: bool,
    /// Set when skipped: what to do now.
    pub guidance: Option<String>,
}

/// The worker tier of a `vibe_spawn`: each maps to a configured worker command.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum VibeTier {
    /// Mechanical work with a clear spec.
    #[default]
    Fast,
    /// Design, judgement, review.
    Good,
}

impl VibeTier {
    pub fn as_str(self) -> &'static str {
        match self {
            VibeTier::Fast => "fast",
            VibeTier::Good => "good",
        }
    }
}

impl std::fmt::Display for VibeTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a vibe worker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VibeState {
    /// Waiting for a slot (the cap on concurrent workers is reached).
    Queued,
    Running,
    /// The last attempt exited with code 0.
    Done,
    /// The last attempt crashed, exited non-zero, ran past its limit or could not start.
    Failed,
    /// Stopped by `vibe_kill`.
    Killed,
}

impl VibeState {
    pub fn as_str(self) -> &'static str {
        match self {
            VibeState::Queued => "queued",
            VibeState::Running => "running",
            VibeState::Done => "done",
            VibeState::Failed => "failed",
            VibeState::Killed => "killed",
        }
    }

    /// Done, failed or killed: nothing runs or waits to run.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            VibeState::Done | VibeState::Failed | VibeState::Killed
        )
    }
}

/// `vibe_spawn {brief, label, tier?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VibeSpawnArgs {
    pub brief: String,
    pub label: String,
    pub tier: Option<VibeTier>,
}

/// `vibe_send {worker_id, message}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VibeSendArgs {
    pub worker_id: String,
    pub message: String,
}

/// `vibe_wait {worker_id, timeout_seconds?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VibeWaitArgs {
    pub worker_id: String,
    /// How long to wait (default 600 s); 0 returns at once.
    pub timeout_seconds: Option<u64>,
}

/// `vibe_kill {worker_id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VibeKillArgs {
    pub worker_id: String,
}

/// One vibe worker as `vibe_spawn`, `vibe_send`, `vibe_wait`, `vibe_kill` and `vibe_list`
/// report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VibeInfo {
    pub worker_id: String,
    pub label: String,
    pub tier: VibeTier,
    pub state: VibeState,
    /// Running: time since the attempt started; queued: time in the queue; otherwise how
    /// long the last attempt ran.
    pub elapsed_ms: u64,
    /// Attempts started so far (each `vibe_send` reruns).
    pub attempts: u32,
    /// Follow-up messages appended to the brief.
    pub messages: u32,
    /// The worker program's pid while it runs.
    pub pid: Option<u32>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// The last lines of the failed attempt's stderr.
    pub stderr_tail: Option<String>,
    /// The last finished attempt's stdout (bounded; `vibe_list` shows a preview).
    pub result: Option<String>,
    /// Characters of the whole stored result.
    pub result_chars: u64,
    /// True when `result` is not the whole stored result, or the worker printed more than
    /// the daemon keeps (head and tail are kept).
    pub result_truncated: bool,
    /// `vibe_wait` only: the wait ended by its timeout, not by the worker finishing.
    pub timed_out: bool,
    /// What to do next, when there is something to say (queued, timed out, truncated).
    pub note: Option<String>,
}

/// `lsp {op, file?, line?, symbol?, query?, occurrence?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LspArgs {
    /// diagnostics, definition, type_definition, implementation, references, hover, symbols,
    /// code_actions, status, reload.
    pub op: String,
    /// The file (relative to the workdir or absolute); `"*"` for diagnostics of the project.
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<u64>,
    /// A substring naming the symbol on that line.
    pub symbol: Option<String>,
    /// symbols: workspace query.
    pub query: Option<String>,
    /// Which occurrence of `symbol` on the line, 1-based.
    pub occurrence: Option<u64>,
}

/// `lsp_rename {file, line, symbol, new_name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LspRenameArgs {
    pub file: String,
    pub line: u64,
    pub symbol: String,
    pub new_name: String,
    pub occurrence: Option<u64>,
}

/// `synced_write {path}`: the harness wrote `path` itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncedWriteArgs {
    pub path: String,
}

/// `ast_grep {pattern, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AstGrepArgs {
    /// Code with metavariables: `$NAME` one node, `$$$NAME` a run of siblings, `$_` a
    /// wildcard that binds nothing.
    pub pattern: String,
    /// File or directory, relative to the workdir or absolute; default the workdir.
    pub path: Option<String>,
    /// Grammar id (`rust`, `python`, `dart`, …); inferred from a file path, and for a
    /// directory when its files leave no doubt.
    pub language: Option<String>,
    /// Matches listed (default 50); the total is always counted.
    pub max_results: Option<u64>,
}

/// `ast_edit {pattern, rewrite, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AstEditArgs {
    pub pattern: String,
    /// Replacement template; the pattern's metavariables are substituted.
    pub rewrite: String,
    pub path: Option<String>,
    pub language: Option<String>,
    /// Most replacements staged (default 50); more is refused, never staged in part.
    pub max_results: Option<u64>,
}

/// What `resolve` does with a staged edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveAction {
    Accept,
    Discard,
}

/// `resolve {edit_id, action}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolveArgs {
    pub edit_id: String,
    pub action: ResolveAction,
}

/// The language of an `eval` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EvalLanguage {
    #[default]
    Python,
    Javascript,
    /// TypeScript, run in the conversation's JavaScript kernel once its types are stripped.
    Typescript,
}

/// `eval {code, description, language?, reset?, timeout_s?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalArgs {
    pub code: String,
    /// 5-10 words saying what the cell does (shown in approval prompts and logs).
    pub description: String,
    pub language: Option<EvalLanguage>,
    /// Discard the interpreter and start clean first.
    pub reset: Option<bool>,
    /// Inactivity budget: seconds the cell may run without output (default 300).
    pub timeout_s: Option<u64>,
}

/// Operations of the `debug` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DebugOp {
    Adapters,
    Status,
    Breakpoints,
    Launch,
    Attach,
    Continue,
    Pause,
    StepOver,
    StepIn,
    StepOut,
    Threads,
    Stack,
    Scopes,
    Variables,
    Evaluate,
    Output,
    Terminate,
    /// Ends the current (or last) launched session and launches it again with the same
    /// arguments; breakpoints carry over.
    Restart,
    /// Sets a variable of a stopped program (`reference`, `name`, `value`).
    SetVariable,
}

/// One source breakpoint with its options (`debug breakpoints {file, points}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugBreakpoint {
    /// 1-based line.
    pub line: u64,
    /// Stop only when this expression (in the program's language) is true.
    pub condition: Option<String>,
    /// Stop only when the hit count satisfies this: a plain `N` stops at the Nth hit (both
    /// adapters); debugpy also takes `>= N`, `% N`.
    pub hit_condition: Option<String>,
    /// A logpoint: print this (`{expr}` is interpolated) instead of stopping.
    pub log_message: Option<String>,
}

/// `debug {op, ...}`; each op reads the fields it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugArgs {
    pub op: DebugOp,
    /// breakpoints: the source file (relative to the workdir or absolute).
    pub file: Option<String>,
    /// breakpoints: 1-based lines; empty clears the file's breakpoints.
    pub lines: Option<Vec<u64>>,
    /// breakpoints: lines with a condition, a hit condition or a log message (merged with
    /// `lines`; a line in both takes these options).
    pub points: Option<Vec<DebugBreakpoint>>,
    /// breakpoints: function breakpoints by name (replaces the set; empty clears it).
    pub functions: Option<Vec<String>>,
    /// breakpoints: exception filters by id, from those the adapter advertises (debugpy:
    /// `raised`, `uncaught`, `userUnhandled`); replaces the set; absent keeps the adapter's
    /// defaults.
    pub exceptions: Option<Vec<String>>,
    /// launch: the program (a `.py` script, an executable, ...).
    pub program: Option<String>,
    /// launch: the program's arguments.
    pub args: Option<Vec<String>>,
    /// launch/attach: the adapter by name (default: chosen from the program; attach: debugpy).
    pub adapter: Option<String>,
    /// launch: the program's working directory (relative to the workdir; default: the
    /// workdir).
    pub cwd: Option<String>,
    /// launch: environment variables set on top of the daemon's allowlisted environment.
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// launch (debugpy): run a module (`python -m pkg.mod`) instead of `program`.
    pub module: Option<String>,
    /// launch (debugpy): step and stop in the program's own code only (default true).
    pub just_my_code: Option<bool>,
    /// attach: the port a debug server listens on (127.0.0.1).
    pub port: Option<u64>,
    /// continue/pause/step_*/stack: the thread (default: the one that stopped).
    pub thread_id: Option<i64>,
    /// scopes/evaluate: the frame (default: the top frame of the stopped thread).
    pub frame_id: Option<i64>,
    /// variables: a `reference` from scopes, variables or evaluate.
    pub reference: Option<i64>,
    /// evaluate: the expression.
    pub expression: Option<String>,
    /// set_variable: the variable's name in the `reference` container.
    pub name: Option<String>,
    /// set_variable: the new value, an expression in the program's language.
    pub value: Option<String>,
    /// output: byte offset (default: where the last read stopped).
    pub offset: Option<u64>,
    /// output: most bytes to return (default 65536).
    pub limit: Option<u64>,
}
