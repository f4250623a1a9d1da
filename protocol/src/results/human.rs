//! The results of the human tools: `ask_user` and the `vibe_*` background workers.

use schemars::JsonSchema;

use crate::tools::VibeTier;

/// The result of `ask_user`: the person's answer, or their skip.
#[derive(JsonSchema)]
pub struct AskUserResult {
    /// The question's id, as the question port saw it.
    pub question_id: u64,
    /// Labels chosen among the options, in the order of the options (empty when skipped).
    pub selected: Vec<String>,
    /// The free-text answer, or null.
    pub text: Option<String>,
    /// The person skipped the question.
    pub skipped: bool,
    /// When skipped: what to do now; else null.
    pub guidance: Option<String>,
}

/// Where a vibe worker stands.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VibeWorkerState {
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

/// The result of `vibe_spawn`, `vibe_send`, `vibe_wait` and `vibe_kill`: one worker's info.
#[derive(JsonSchema)]
pub struct VibeWorker {
    /// The worker's id (`w1`).
    pub worker_id: String,
    /// The short name given at spawn.
    pub label: String,
    /// The worker tier.
    pub tier: VibeTier,
    /// queued, running, done, failed or killed.
    pub state: VibeWorkerState,
    /// Running: since the attempt started; queued: time in the queue; else the last attempt's run time.
    pub elapsed_ms: u64,
    /// Attempts started so far (each `vibe_send` reruns).
    pub attempts: u32,
    /// Follow-up messages appended to the brief.
    pub messages: u32,
    /// The worker program's pid while it runs.
    pub pid: Option<u32>,
    /// The last attempt's exit code.
    pub exit_code: Option<i32>,
    /// The signal that ended the last attempt.
    pub signal: Option<i32>,
    /// Why the last attempt failed.
    pub error: Option<String>,
    /// The last lines of the failed attempt's stderr.
    pub stderr_tail: Option<String>,
    /// The last finished attempt's stdout (`vibe_list`: a preview).
    pub result: Option<String>,
    /// Characters of the whole stored result.
    pub result_chars: u64,
    /// `result` is not the whole stored result, or the worker printed more than is kept.
    pub result_truncated: bool,
    /// `vibe_wait` only: the wait ended by its timeout.
    pub timed_out: bool,
    /// What to do next (queued, timed out, truncated), or null.
    pub note: Option<String>,
}

/// The result of `vibe_list`: this conversation's workers, oldest first.
#[derive(JsonSchema)]
pub struct VibeListResult {
    /// Each worker's info, its result cut to a preview.
    pub workers: Vec<VibeWorker>,
}
