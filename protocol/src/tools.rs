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
