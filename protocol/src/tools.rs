//! Typed arguments and results of the tools, as the daemon parses and builds them. Clients
//! may send the same fields as plain JSON objects. Each argument struct derives its JSON
//! schema (`schemars`): the field docs are the descriptions clients see, and the registry
//! advertises exactly what the handler parses (`#[serde(deny_unknown_fields)]` where the
//! schema refuses unknown keys).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `bash {command, timeout_s?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// Shell command line.
    pub command: String,
    /// Wall-clock limit in seconds (default 120).
    #[schemars(range(min = 1, max = 3600))]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessOp {
    Start,
    List,
    Read,
    Write,
    Kill,
    /// Change the terminal size of a `pty` process.
    Resize,
}

/// What to do when a tracked process ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessArgs {
    /// Operation.
    pub op: ProcessOp,
    /// start: the shell command line.
    pub command: Option<String>,
    /// start: a short name shown in lists (default: the command).
    pub label: Option<String>,
    /// start: restart policy (default `no`).
    pub restart: Option<RestartMode>,
    /// start: hard time-to-live in seconds; the process is stopped after it, used or not.
    #[schemars(range(min = 1, max = 2_592_000))]
    pub ttl_s: Option<u64>,
    /// read/write/kill: the process id returned by start.
    pub id: Option<String>,
    /// read: first byte offset of the combined output to return (default: where the last
    /// read of this conversation stopped).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// read: at most this many bytes (default 65536).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub limit: Option<u64>,
    /// write: text to send to the process's stdin.
    pub data: Option<String>,
    /// write: close stdin after writing (on a `pty` process: send the terminal's end-of-file,
    /// Ctrl-D).
    pub eof: Option<bool>,
    /// start: run the command on a pseudo-terminal (for REPLs and prompts that check
    /// `isatty`); `read` then also returns the `screen` as a terminal shows it.
    pub pty: Option<bool>,
    /// start/resize: terminal width of a `pty` process (default 120).
    #[schemars(range(min = 10, max = 1000))]
    pub cols: Option<u16>,
    /// start/resize: terminal height of a `pty` process (default 40).
    #[schemars(range(min = 2, max = 1000))]
    pub rows: Option<u16>,
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
    /// A `pty` process: the terminal's screen as it shows now (rows of text, trailing blanks
    /// trimmed), whatever `offset` was read.
    pub screen: Option<TerminalScreen>,
}

/// The screen of a `pty` process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalScreen {
    pub cols: u16,
    pub rows: u16,
    /// The visible text, one line per row.
    pub text: String,
    /// Where the cursor is: `[row, col]`, from 0.
    pub cursor: [u16; 2],
}

/// `ask_user {question, context?, options?, allow_free_text?, multi_select?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserArgs {
    /// The question.
    pub question: String,
    /// What the person needs to know to answer.
    pub context: Option<String>,
    /// Answers to choose from, each a label and an optional description.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        serialize_with = "as_some"
    )]
    pub options: Vec<crate::wire::QuestionOption>,
    /// Accept an answer outside the options. Default: true when there are no options,
    /// false when there are.
    pub allow_free_text: Option<bool>,
    /// Accept several options.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        serialize_with = "as_some"
    )]
    pub multi_select: bool,
}

/// A `null` field is an absent one, as the schema validator treats it: the default.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// The other half of [`null_as_default`], so a non-self-describing codec (bincode) reads back
/// what it wrote; in JSON the value is written as itself.
fn as_some<S: serde::Serializer, T: Serialize>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_some(value)
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
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    Default,
    JsonSchema,
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VibeSpawnArgs {
    /// What to do.
    pub brief: String,
    /// Short name.
    pub label: String,
    /// Worker tier (default fast).
    pub tier: Option<VibeTier>,
}

/// `vibe_send {worker_id, message}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VibeSendArgs {
    /// The worker, as `vibe_spawn` named it.
    pub worker_id: String,
    /// Appended to the brief before the rerun.
    pub message: String,
}

/// `vibe_wait {worker_id, timeout_seconds?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VibeWaitArgs {
    /// The worker, as `vibe_spawn` named it.
    pub worker_id: String,
    /// How long to wait (default 600 s); 0 returns at once.
    #[schemars(range(min = 0, max = 86_400))]
    pub timeout_seconds: Option<u64>,
}

/// `vibe_kill {worker_id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VibeKillArgs {
    /// The worker, as `vibe_spawn` named it.
    pub worker_id: String,
}

/// `vibe_list {}`: no arguments.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VibeListArgs {}

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

/// Operations of the `lsp` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspOp {
    Diagnostics,
    Definition,
    TypeDefinition,
    Implementation,
    References,
    Hover,
    Symbols,
    CodeActions,
    /// Incoming and outgoing calls of the function at line + symbol.
    CallHierarchy,
    /// The diagnostics a proposed edit would produce; nothing is written.
    CheckEdit,
    Status,
    Reload,
    /// Let servers and checkers run this project's code for the run (asks the user).
    Trust,
}

impl LspOp {
    /// The op's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            LspOp::Diagnostics => "diagnostics",
            LspOp::Definition => "definition",
            LspOp::TypeDefinition => "type_definition",
            LspOp::Implementation => "implementation",
            LspOp::References => "references",
            LspOp::Hover => "hover",
            LspOp::Symbols => "symbols",
            LspOp::CodeActions => "code_actions",
            LspOp::CallHierarchy => "call_hierarchy",
            LspOp::CheckEdit => "check_edit",
            LspOp::Status => "status",
            LspOp::Reload => "reload",
            LspOp::Trust => "trust",
        }
    }
}

impl std::fmt::Display for LspOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `lsp {op, file?, line?, symbol?, query?, occurrence?, old_text?, new_text?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspArgs {
    /// Operation.
    pub op: LspOp,
    /// File path (relative to the workdir or absolute), or `"*"` for diagnostics of the
    /// whole project.
    pub file: Option<String>,
    /// 1-based line.
    #[schemars(range(min = 1, max = i64::MAX))]
    pub line: Option<u64>,
    /// Substring naming the symbol on that line.
    pub symbol: Option<String>,
    /// symbols: workspace query.
    pub query: Option<String>,
    /// Which occurrence of symbol on the line (1-based).
    #[schemars(range(min = 1, max = 1000))]
    pub occurrence: Option<u64>,
    /// check_edit: text of the file to replace (must occur exactly once); without it
    /// `new_text` is the whole proposed file.
    pub old_text: Option<String>,
    /// check_edit: the replacement for `old_text`, or the whole proposed file.
    pub new_text: Option<String>,
}

/// `lsp_rename {file, line, symbol, new_name, occurrence?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspRenameArgs {
    /// File.
    pub file: String,
    /// 1-based line.
    #[schemars(range(min = 1, max = i64::MAX))]
    pub line: u64,
    /// Symbol on the line.
    pub symbol: String,
    /// New name.
    pub new_name: String,
    /// Which occurrence of symbol on the line (1-based).
    #[schemars(range(min = 1, max = 1000))]
    pub occurrence: Option<u64>,
}

/// Operations of the `lsp_edit` tool (write tier): edits computed by the language server or
/// addressed by its document symbols, written all or nothing like `lsp_rename`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspEditOp {
    /// Apply the action `index` of this run's last `lsp code_actions` answer.
    ApplyCodeAction,
    /// Replace the whole definition at `symbol_path` (signature and body) with `text`.
    ReplaceSymbolBody,
    /// Insert `text` as whole lines before the definition at `symbol_path`.
    InsertBeforeSymbol,
    /// Insert `text` as whole lines after the definition at `symbol_path`.
    InsertAfterSymbol,
    /// Format `file` with the server's formatter.
    Format,
}

impl LspEditOp {
    /// The op's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            LspEditOp::ApplyCodeAction => "apply_code_action",
            LspEditOp::ReplaceSymbolBody => "replace_symbol_body",
            LspEditOp::InsertBeforeSymbol => "insert_before_symbol",
            LspEditOp::InsertAfterSymbol => "insert_after_symbol",
            LspEditOp::Format => "format",
        }
    }
}

impl std::fmt::Display for LspEditOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `lsp_edit {op, file?, symbol_path?, text?, index?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspEditArgs {
    /// Operation.
    pub op: LspEditOp,
    /// File (symbol edits and format).
    pub file: Option<String>,
    /// Symbol edits: the symbol's path in the file's outline (`lsp symbols`), names joined by
    /// `/`, e.g. `Greeter/greet`; a top-level symbol is its name alone.
    pub symbol_path: Option<String>,
    /// Symbol edits: the new text. replace_symbol_body: the whole new definition, its first
    /// line starting where the old one's name line starts (indent the following lines
    /// yourself); insert_*: whole lines, indented as they should stand.
    pub text: Option<String>,
    /// apply_code_action: the action's index in this run's last `lsp code_actions` answer.
    #[schemars(range(min = 0, max = 1000))]
    pub index: Option<u64>,
}

/// `synced_write {path}`: the harness wrote `path` itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncedWriteArgs {
    /// File that was written.
    pub path: String,
}

/// `ast_grep {pattern, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AstGrepArgs {
    /// Code pattern with metavariables, e.g. `$A.unwrap()`: `$NAME` one node, `$$$NAME` a
    /// run of siblings, `$_` a wildcard that binds nothing.
    pub pattern: String,
    /// File or directory, relative to the workdir (default: the workdir).
    pub path: Option<String>,
    /// Grammar id: bash, c, cpp, csharp, css, dart, elixir, go, haskell, hcl, html, java,
    /// javascript, json, kotlin, lua, markdown, nix, php, python, ruby, rust, scala,
    /// solidity, swift, tsx, typescript, yaml, zig; inferred from a file path.
    pub language: Option<String>,
    /// Matches listed (default 50); the total is always counted.
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: Option<u64>,
}

/// `ast_edit {pattern, rewrite, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AstEditArgs {
    /// Code pattern with metavariables.
    pub pattern: String,
    /// Replacement template; $NAME and $$$NAME are replaced by what the pattern captured.
    pub rewrite: String,
    /// File or directory, relative to the workdir (default: the workdir).
    pub path: Option<String>,
    /// Grammar id (see ast_grep); inferred from a file path.
    pub language: Option<String>,
    /// Most replacements to stage (default 50); more is refused, never staged in part.
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: Option<u64>,
}

/// What `resolve` does with a staged edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolveAction {
    Accept,
    Discard,
}

/// `resolve {edit_id, action}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveArgs {
    /// Id returned by ast_edit, e.g. "edit_1".
    pub edit_id: String,
    /// accept writes the staged change; discard drops it.
    pub action: ResolveAction,
}

/// The language of an `eval` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalLanguage {
    #[default]
    Python,
    Javascript,
    /// TypeScript, run in the conversation's JavaScript kernel once its types are stripped.
    Typescript,
}

/// `eval {code, description, language?, reset?, timeout_s?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalArgs {
    /// Cell source.
    pub code: String,
    /// 5-10 words saying what the cell does (shown in approval prompts and logs).
    #[schemars(extend("minWords" = 5, "maxWords" = 10))]
    pub description: String,
    /// Kernel language (default python).
    pub language: Option<EvalLanguage>,
    /// Discard the interpreter and start clean first.
    pub reset: Option<bool>,
    /// Inactivity budget: seconds the cell may run without output (default 300).
    #[schemars(range(min = 1, max = 86_400))]
    pub timeout_s: Option<u64>,
}

/// Operations of the `debug` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugBreakpoint {
    /// 1-based line.
    #[schemars(range(min = 1))]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugArgs {
    /// Operation.
    pub op: DebugOp,
    /// breakpoints: source file, relative to the workdir.
    pub file: Option<String>,
    /// breakpoints: 1-based lines; empty clears the file.
    #[schemars(inner(range(min = 1)))]
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
    /// launch: the program (a .py script, an executable built with debug info).
    pub program: Option<String>,
    /// launch: the program's arguments.
    pub args: Option<Vec<String>>,
    /// launch/attach: adapter name (default: chosen from the program; attach: debugpy).
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
    /// attach: port of a debug server on 127.0.0.1 (python -m debugpy --listen PORT).
    #[schemars(range(min = 1, max = 65_535))]
    pub port: Option<u64>,
    /// continue/pause/step_*/stack: thread (default: the one that stopped).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub thread_id: Option<i64>,
    /// scopes/evaluate: frame id from stack (default: the top frame).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub frame_id: Option<i64>,
    /// variables: reference from scopes, variables or evaluate.
    #[schemars(range(min = 0, max = i64::MAX))]
    pub reference: Option<i64>,
    /// evaluate: expression, in the frame.
    pub expression: Option<String>,
    /// set_variable: the variable's name in the `reference` container.
    pub name: Option<String>,
    /// set_variable: the new value, an expression in the program's language.
    pub value: Option<String>,
    /// output: byte offset (default: where the last read stopped).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// output: most bytes (default 65536).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub limit: Option<u64>,
}

/// `read {path, offset?, limit?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File, relative to the workdir.
    pub path: String,
    /// First line (1-based); negative counts from the end (default 1).
    #[schemars(range(min = i64::MIN, max = i64::MAX))]
    pub offset: Option<i64>,
    /// Number of lines (default 2000; a read also stops at 40000 characters).
    #[schemars(range(min = 1, max = i64::MAX))]
    pub limit: Option<u64>,
}

/// `ls {path?}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsArgs {
    /// Directory (default: the workdir).
    pub path: Option<String>,
}

/// `find {pattern, path?, hidden?, ignored?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    /// Glob.
    pub pattern: String,
    /// Directory to search (default: the workdir).
    pub path: Option<String>,
    /// Include hidden files.
    pub hidden: Option<bool>,
    /// Include files .gitignore and .ignore exclude.
    pub ignored: Option<bool>,
    /// Most paths listed (default 1000); the total is always counted.
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_results: Option<u64>,
}

/// Case sensitivity of `grep`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrepCase {
    #[default]
    Sensitive,
    Insensitive,
    Smart,
}

/// `grep {pattern, path?, glob?, case?, context?, max_results?, hidden?, ignored?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regex.
    pub pattern: String,
    /// File or directory (default: the workdir).
    pub path: Option<String>,
    /// Only files matching these globs, comma-separated, ! excludes (e.g. "*.rs,!*_test.rs").
    pub glob: Option<String>,
    /// Case sensitivity (default sensitive).
    pub case: Option<GrepCase>,
    /// Lines of context around each match (default 0).
    #[schemars(range(min = 0, max = 100))]
    pub context: Option<u64>,
    /// Most matching lines (default 200).
    #[schemars(range(min = 1, max = 100_000))]
    pub max_results: Option<u64>,
    /// Include hidden files.
    pub hidden: Option<bool>,
    /// Include files .gitignore and .ignore exclude.
    pub ignored: Option<bool>,
    /// A match may span lines, as `rg -U`: `\n` in the pattern matches a line break; each
    /// line of a match is shown.
    pub multiline: Option<bool>,
}

/// `write {path, content}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File.
    pub path: String,
    /// Full content.
    pub content: String,
}

/// `edit {path, old_text, new_text, replace_all?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// File.
    pub path: String,
    /// Exact text to replace.
    pub old_text: String,
    /// Replacement.
    pub new_text: String,
    /// Replace every occurrence.
    pub replace_all: Option<bool>,
}

/// `apply_patch {patch}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// Unified diff or `*** Begin Patch` patch.
    pub patch: String,
}

/// `tool_result_read {ref, offset?, limit?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResultReadArgs {
    /// Reference from a projected result.
    #[serde(rename = "ref")]
    pub reference: String,
    /// First character.
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// Characters (default 12000).
    #[schemars(range(min = 1, max = 48_000))]
    pub limit: Option<u64>,
}

/// `download_model {repo, revision?, variant?}`: one job for the variant's whole file set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadModelArgs {
    /// Repository id on the model hub, `owner/name`.
    pub repo: String,
    /// Branch, tag or commit (default `main`).
    pub revision: Option<String>,
    /// Which files: a quantisation (`Q4_K_M`), `safetensors`, or one file's name (a shard
    /// selects all its shards). Needed when the repo offers several.
    pub variant: Option<String>,
}

/// `list_downloads {job_id?}`: jobs in flight and recent, or one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDownloadsArgs {
    /// Only this job (`dl3`).
    pub job_id: Option<String>,
}

/// `cancel_download {job_id}`: stop a job, keeping its partial files for a resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelDownloadArgs {
    /// The job (`dl3`), as download_model or list_downloads gave it.
    pub job_id: String,
}

/// `list_models {}`: the models in the local store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListModelsArgs {}

/// `search_huggingface_models {query, limit?}`: downloadable candidates with fit labels.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchModelsArgs {
    /// Words to search repo ids for.
    pub query: String,
    /// Most candidates (default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u64>,
}

/// `load_model {model, alias?, context?}`: start a model's inference server; answers at once
/// with state `loading`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadModelArgs {
    /// A complete model of the local store, by the `name` list_models gives it: its repo
    /// (`owner/name`), with `@REVISION` and/or `:VARIANT` when the store holds several
    /// (`owner/name@v2:Q4_K_M`).
    pub model: String,
    /// The name requests use in their `"model"` field (default: the repo's name part).
    pub alias: Option<String>,
    /// Context length in tokens (default `[inference] context`, 2048).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub context: Option<u32>,
}

/// `unload_model {alias}`: stop a model's server and free its port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UnloadModelArgs {
    /// The alias load_model answered (get_inference_status lists them).
    pub alias: String,
}

/// `get_inference_status {}`: the loaded models and the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceStatusArgs {}

/// `get_token_usage_stats {model?, days?}`: requests and tokens counted by the endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenUsageArgs {
    /// Only this model (as load_model named it).
    pub model: Option<String>,
    /// Only the last N days (UTC), today included.
    #[schemars(range(min = 1, max = 3660))]
    pub days: Option<u32>,
}

/// `_probe_serial` / `_probe_parallel {tag, sleep_ms?}`: the test suite's lane probes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeArgs {
    /// Label.
    pub tag: String,
    /// Sleep.
    #[schemars(range(min = 0, max = 60_000))]
    pub sleep_ms: Option<u64>,
}

/// `search_data {query, collection?, limit?}`: full-text search of the data hub.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchDataArgs {
    /// Words to find (all of them), or a "quoted phrase"; operators and punctuation are ignored.
    pub query: String,
    /// Only this collection.
    pub collection: Option<String>,
    /// Most hits (default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u64>,
}

/// What `read_data` returns of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataView {
    /// Title, summary, tags, source, sizes, times, annotation, section titles.
    #[default]
    Card,
    /// The card and the whole converted body.
    Body,
    /// The card and one section (`section`: its title or index).
    Section,
}

/// `read_data {handle, view?, section?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadDataArgs {
    /// A document handle, e.g. D42.
    pub handle: String,
    /// card (default), body or section.
    pub view: Option<DataView>,
    /// With view section: the section's title, or its index from 0.
    pub section: Option<String>,
}

/// `list_data {collection?, tag?, limit?, offset?}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDataArgs {
    /// Only this collection.
    pub collection: Option<String>,
    /// Only documents with this tag.
    pub tag: Option<String>,
    /// Most cards (default 50).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u64>,
    /// Cards to skip.
    #[schemars(range(min = 0, max = 1_000_000))]
    pub offset: Option<u64>,
}

/// The card fields `write_data` may change (never the body).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataCardArgs {
    /// New title.
    pub title: Option<String>,
    /// New summary.
    pub summary: Option<String>,
    /// New tags (replace the old ones).
    pub tags: Option<Vec<String>>,
    /// A free-form annotation (searchable).
    pub annotation: Option<String>,
    /// Refused: a body is always what the pipeline makes from its original.
    pub body: Option<String>,
}

/// A new note for `write_data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataNoteArgs {
    /// The note's title.
    pub title: String,
    /// The note's text (Markdown).
    pub text: String,
    /// The collection it belongs to.
    pub collection: String,
}

/// `write_data {handle?, card?, note?}`: change a document's card, or create a note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteDataArgs {
    /// The document whose card changes.
    pub handle: Option<String>,
    /// The card fields to change.
    pub card: Option<DataCardArgs>,
    /// A new note (without handle).
    pub note: Option<DataNoteArgs>,
}

/// `delete_data {handle}`: move a document to the trash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteDataArgs {
    /// A document handle, e.g. D42.
    pub handle: String,
}
