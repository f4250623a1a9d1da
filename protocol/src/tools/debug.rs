//! Arguments and results of `debug`: a DAP session per conversation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    /// Runs a stopped program to `file`:`line` through a temporary breakpoint (added to the
    /// file's breakpoints, removed at the next stop or when the session ends) and answers
    /// the stop like `continue`.
    RunTo,
    /// A data breakpoint (watchpoint): the program stops after `expression` (a variable in
    /// scope, or in the `reference` container) is written; adapters with
    /// `supportsDataBreakpoints` only (lldb-dap).
    Watch,
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
    /// breakpoints/run_to: source file, relative to the workdir.
    pub file: Option<String>,
    /// run_to: the 1-based line to run to in `file`.
    #[schemars(range(min = 1))]
    pub line: Option<u64>,
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
    /// launch/attach: adapter name (default: chosen from the program; attach by port:
    /// debugpy; attach by pid: debugpy for a Python process, else lldb).
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
    /// attach: id of a running process instead of a port: a Python program through debugpy
    /// (which injects itself with gdb), any other through lldb-dap. It must run as this
    /// user with its working directory in the workdir, and ptrace must be allowed.
    #[schemars(range(min = 1, max = 4_194_304))]
    pub pid: Option<u64>,
    /// continue/pause/step_*/stack: thread (default: the one that stopped).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub thread_id: Option<i64>,
    /// scopes/evaluate/watch: frame id from stack (default: the top frame).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub frame_id: Option<i64>,
    /// variables/set_variable: reference from scopes, variables or evaluate; watch: the
    /// container holding the variable `expression` names (default: the frame's scopes).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub reference: Option<i64>,
    /// evaluate: expression, in the frame; watch: the variable (or, lldb, an address
    /// expression such as `&p->n`) to watch.
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
