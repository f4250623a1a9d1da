//! Arguments and results of `bash` and `process` (tracked processes, their terminals), and the lane probes of the test suite.

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
