//! The results of the jobs tools (`bash`, `process`) and of the lane probes
//! (`_probe_serial`, `_probe_parallel`).

use schemars::JsonSchema;

/// The result of `bash`: the command's output and how it ended.
#[derive(JsonSchema)]
pub struct BashResult {
    /// Standard output (head and tail kept within `limits.bash_output_bytes`).
    stdout: String,
    /// Standard error (head and tail kept within `limits.bash_output_bytes`).
    stderr: String,
    /// Exit code; null when the command was killed by a signal.
    exit_code: Option<i32>,
    /// The signal that ended the command; null when it exited.
    signal: Option<i32>,
    /// Wall time in milliseconds.
    wall_ms: u64,
    /// Killed after `timeout_s`.
    timed_out: bool,
    /// `stdout` or `stderr` was cut; the `*_bytes` fields give the full sizes.
    truncated: bool,
    /// Bytes the command wrote to stdout.
    stdout_bytes: u64,
    /// Bytes the command wrote to stderr.
    stderr_bytes: u64,
    /// Said when the command timed out.
    note: Option<String>,
}

/// The result of `process`: the process's info (`start`, `write`, `kill`, `resize`), the
/// conversation's processes (`list`), or an output slice (`read`).
#[derive(JsonSchema)]
#[serde(untagged)]
pub enum ProcessResult {
    Info(TrackedProcess),
    List(ProcessList),
    Output(ProcessSlice),
}

/// `process list`.
#[derive(JsonSchema)]
pub struct ProcessList {
    /// The conversation's processes, in the order they were started.
    processes: Vec<TrackedProcess>,
}

/// One tracked process, as `start`, `list`, `write`, `kill` and `resize` report it.
#[derive(JsonSchema)]
pub struct TrackedProcess {
    /// Process id (`p1`, `p2`, ...).
    id: String,
    /// Short name shown in lists.
    label: String,
    /// The shell command line.
    command: String,
    /// The program's pid while it runs.
    pid: Option<u32>,
    /// Where it is in its life.
    state: ProcessState,
    /// Exit code of the last run; null while running or when ended by a signal.
    exit_code: Option<i32>,
    /// The signal that ended the last run.
    signal: Option<i32>,
    /// Restarts so far.
    restarts: u32,
    /// Why the last run failed or ended.
    last_error: Option<String>,
    /// Milliseconds since it started.
    uptime_ms: u64,
    /// Milliseconds before the idle or hard TTL stops it (while running).
    ttl_left_ms: Option<u64>,
    /// Bytes of output produced so far (the next read offset at the end).
    output_bytes: u64,
}

/// `process read`: a slice of the combined output.
#[derive(JsonSchema)]
pub struct ProcessSlice {
    /// Process id.
    id: String,
    /// Output from `offset` to `next_offset` (stdout and stderr interleaved as they came).
    text: String,
    /// Byte offset of `text` in the output.
    offset: u64,
    /// The offset that reads on.
    next_offset: u64,
    /// Bytes before `offset` that were dropped from the buffer and can no longer be read.
    dropped: u64,
    /// The process ended and all its output was read.
    eof: bool,
    /// Where it is in its life.
    state: ProcessState,
    /// Exit code of the last run; null while running or when ended by a signal.
    exit_code: Option<i32>,
    /// The signal that ended the last run.
    signal: Option<i32>,
    /// A `pty` process's screen as a terminal shows it now; null without `pty`.
    screen: Option<ProcessScreen>,
}

/// The screen of a `pty` process.
#[derive(JsonSchema)]
pub struct ProcessScreen {
    /// Terminal width.
    cols: u16,
    /// Terminal height.
    rows: u16,
    /// The visible text, one line per row, trailing blanks trimmed.
    text: String,
    /// Where the cursor is: `[row, col]`, from 0.
    cursor: [u16; 2],
}

/// The state of a tracked process.
#[derive(JsonSchema)]
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

/// The result of `_probe_serial` and `_probe_parallel`: when the call started and ended.
#[derive(JsonSchema)]
pub struct ProbeResult {
    /// The `tag` of the call.
    tag: String,
    /// The calling conversation.
    conversation: String,
    /// When the call started, in microseconds since the Unix epoch.
    start_us: u64,
    /// When the call ended, in microseconds since the Unix epoch.
    end_us: u64,
}
