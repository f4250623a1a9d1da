//! Arguments of `bash` and `process` (tracked processes, their terminals), and of the lane
//! probes of the test suite; their results are in `results::jobs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `bash {command, timeout_s?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    pub command: String,
    /// Seconds (default 120).
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_s: Option<u64>,
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
    pub command: Option<String>,
    pub label: Option<String>,
    pub restart: Option<RestartMode>,
    #[schemars(range(min = 1, max = 2_592_000))]
    pub ttl_s: Option<u64>,
    pub id: Option<String>,
    /// Byte offset (default: after the last read).
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// Most bytes (default 65536).
    #[schemars(range(min = 1, max = 1_048_576))]
    pub limit: Option<u64>,
    pub data: Option<String>,
    /// Close stdin after data (pty: Ctrl-D).
    pub eof: Option<bool>,
    /// Run on a terminal; read then returns the screen.
    pub pty: Option<bool>,
    #[schemars(range(min = 10, max = 1000))]
    pub cols: Option<u16>,
    #[schemars(range(min = 2, max = 1000))]
    pub rows: Option<u16>,
}

/// `_probe_serial` / `_probe_parallel {tag, sleep_ms?, panic?}`: the test suite's lane probes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeArgs {
    /// Label.
    pub tag: String,
    /// Sleep.
    #[schemars(range(min = 0, max = 60_000))]
    pub sleep_ms: Option<u64>,
    /// After the sleep, wait until a file of this name (one component, in the call's workdir)
    /// exists, at most 60 s: a test holds the call open and releases it when it has seen what
    /// it waits for.
    pub hold_until: Option<String>,
    /// Panic in the handler after the sleep (what the daemon answers for a handler bug).
    #[serde(default)]
    pub panic: Option<bool>,
}
