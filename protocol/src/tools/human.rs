//! Arguments and results of `ask_user` and the `vibe_*` workers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ask_user {question, context?, options?, allow_free_text?, multi_select?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskUserArgs {
    pub question: String,
    pub context: Option<String>,
    #[serde(
        default,
        deserialize_with = "null_as_default",
        serialize_with = "as_some"
    )]
    pub options: Vec<crate::wire::QuestionOption>,
    pub allow_free_text: Option<bool>,
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

/// What `ask_user` returns when the person answered or skipped (its result's schema too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AskUserOutput {
    /// The question's id, as the question port saw it.
    pub question_id: u64,
    /// Labels chosen among the options, in the order of the options (empty when skipped).
    pub selected: Vec<String>,
    /// The free-text answer, if one was given.
    pub text: Option<String>,
    /// The person skipped the question.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
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
/// report it (the result of the first four, and its schema).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VibeInfo {
    /// The worker's id (`w1`).
    pub worker_id: String,
    /// The short name given at spawn.
    pub label: String,
    /// The worker tier.
    pub tier: VibeTier,
    /// queued, running, done, failed or killed.
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
    /// The last attempt's exit code.
    pub exit_code: Option<i32>,
    /// The signal that ended the last attempt.
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
