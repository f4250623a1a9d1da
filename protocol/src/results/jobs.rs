//! The results of the jobs tools (`bash`, `process`) and of the lane probes
//! (`_probe_serial`, `_probe_parallel`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The result of `bash`: the command's output and how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct BashResult {
    /// Standard output (head and tail kept within `limits.bash_output_bytes`).
    pub stdout: String,
    /// Standard error (head and tail kept within `limits.bash_output_bytes`).
    pub stderr: String,
    /// Exit code; null when the command was killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the command; null when it exited.
    pub signal: Option<i32>,
    /// Wall time in milliseconds.
    pub wall_ms: u64,
    /// Killed after `timeout_s`.
    pub timed_out: bool,
    /// `stdout` or `stderr` was cut; the `*_bytes` fields give the full sizes.
    pub truncated: bool,
    /// Bytes the command wrote to stdout.
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr.
    pub stderr_bytes: u64,
    /// Said when the command timed out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The result of `process`: the process's info (`start`, `write`, `kill`, `resize`), the
/// conversation's processes (`list`), or an output slice (`read`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ProcessResult {
    Info(TrackedProcess),
    List(ProcessList),
    Output(ProcessSlice),
}

/// `process list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessList {
    /// The conversation's processes, in the order they were started.
    pub processes: Vec<TrackedProcess>,
}

/// One tracked process, as `start`, `list`, `write`, `kill` and `resize` report it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TrackedProcess {
    /// Process id (`p1`, `p2`, ...).
    pub id: String,
    /// Short name shown in lists.
    pub label: String,
    /// The shell command line.
    pub command: String,
    /// The program's pid while it runs.
    pub pid: Option<u32>,
    /// Where it is in its life.
    pub state: ProcessState,
    /// Exit code of the last run; null while running or when ended by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the last run.
    pub signal: Option<i32>,
    /// Restarts so far.
    pub restarts: u32,
    /// Why the last run failed or ended.
    pub last_error: Option<String>,
    /// Milliseconds since it started.
    pub uptime_ms: u64,
    /// Milliseconds before the idle or hard TTL stops it (while running).
    pub ttl_left_ms: Option<u64>,
    /// Bytes of output produced so far (the next read offset at the end).
    pub output_bytes: u64,
}

/// `process read`: a slice of the combined output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessSlice {
    /// Process id.
    pub id: String,
    /// Output from `offset` to `next_offset` (stdout and stderr interleaved as they came).
    pub text: String,
    /// Byte offset of `text` in the output.
    pub offset: u64,
    /// The offset that reads on.
    pub next_offset: u64,
    /// Bytes before `offset` that were dropped from the buffer and can no longer be read.
    pub dropped: u64,
    /// The process ended and all its output was read.
    pub eof: bool,
    /// Where it is in its life.
    pub state: ProcessState,
    /// Exit code of the last run; null while running or when ended by a signal.
    pub exit_code: Option<i32>,
    /// The signal that ended the last run.
    pub signal: Option<i32>,
    /// A `pty` process's screen as a terminal shows it now; null without `pty`.
    pub screen: Option<ProcessScreen>,
}

/// The screen of a `pty` process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessScreen {
    /// Terminal width.
    pub cols: u16,
    /// Terminal height.
    pub rows: u16,
    /// The visible text, one line per row, trailing blanks trimmed.
    pub text: String,
    /// Where the cursor is: `[row, col]`, from 0.
    pub cursor: [u16; 2],
}

/// The state of a tracked process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProcessState {
    Starting,
    Running,
    Backoff,
    Stopping,
    Exited,
    Killed,
    Expired,
    Failed,
}

impl ProcessState {
    /// The state as the result spells it (`running`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessState::Starting => "starting",
            ProcessState::Running => "running",
            ProcessState::Backoff => "backoff",
            ProcessState::Stopping => "stopping",
            ProcessState::Exited => "exited",
            ProcessState::Killed => "killed",
            ProcessState::Expired => "expired",
            ProcessState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for ProcessState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of `_probe_serial` and `_probe_parallel`: when the call started and ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeResult {
    /// The `tag` of the call.
    pub tag: String,
    /// The calling conversation.
    pub conversation: String,
    /// When the call started, in microseconds since the Unix epoch.
    pub start_us: u64,
    /// When the call ended, in microseconds since the Unix epoch.
    pub end_us: u64,
}
