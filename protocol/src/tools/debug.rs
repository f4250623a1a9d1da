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

/// One breakpoint line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugBreakpoint {
    #[schemars(range(min = 1))]
    pub line: u64,
    pub condition: Option<String>,
    /// `N`: stop at the Nth hit.
    pub hit_condition: Option<String>,
    /// Log this (`{expr}` interpolated), do not stop.
    pub log_message: Option<String>,
}

/// `debug {op, ...}`; each op reads the fields it names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugArgs {
    /// Operation.
    pub op: DebugOp,
    /// breakpoints, run_to: source file.
    pub file: Option<String>,
    /// run_to: 1-based line.
    #[schemars(range(min = 1))]
    pub line: Option<u64>,
    /// breakpoints: 1-based lines (empty clears).
    #[schemars(inner(range(min = 1)))]
    pub lines: Option<Vec<u64>>,
    /// breakpoints: lines with options.
    pub points: Option<Vec<DebugBreakpoint>>,
    /// breakpoints: function names.
    pub functions: Option<Vec<String>>,
    /// breakpoints: exception filters (raised, uncaught).
    pub exceptions: Option<Vec<String>>,
    /// launch: script or executable.
    pub program: Option<String>,
    pub args: Option<Vec<String>>,
    /// launch, attach (default: by program).
    pub adapter: Option<String>,
    /// launch.
    pub cwd: Option<String>,
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// launch: `python -m` module.
    pub module: Option<String>,
    /// launch: own code only (default true).
    pub just_my_code: Option<bool>,
    /// attach: a debugpy port.
    #[schemars(range(min = 1, max = 65_535))]
    pub port: Option<u64>,
    /// attach: a process in the workdir.
    #[schemars(range(min = 1, max = 4_194_304))]
    pub pid: Option<u64>,
    #[schemars(range(min = 0, max = i64::MAX))]
    pub thread_id: Option<i64>,
    #[schemars(range(min = 0, max = i64::MAX))]
    pub frame_id: Option<i64>,
    /// variables, set_variable, watch.
    #[schemars(range(min = 0, max = i64::MAX))]
    pub reference: Option<i64>,
    /// evaluate, watch.
    pub expression: Option<String>,
    pub name: Option<String>,
    pub value: Option<String>,
    /// output: byte offset.
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// output: most bytes.
    #[schemars(range(min = 1, max = 1_048_576))]
    pub limit: Option<u64>,
}
