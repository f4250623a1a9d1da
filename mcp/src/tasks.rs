//! The MCP Tasks extension (`io.modelcontextprotocol/tasks`, offered to clients that declare
//! it on 2026-07-28) for toolvisor's start-then-poll tools: a call of a tool whose
//! `ToolInfo::follow` says it starts a job (`download_model`, `load_model`, `vibe_spawn`)
//! answers a task at once, which follows the job through the poll tool the daemon named
//! (`list_downloads`, `get_inference_status`, `vibe_wait`) until it ends; a call of a
//! `long_running` tool (`eval`, `bash`) still running after [`INLINE_WAIT`] becomes a task too.
//! `tasks/get` reads a task's state and, once it ended, its result; `tasks/cancel` stops the
//! job with the stop tool the daemon named (`cancel_download`, `unload_model`, `vibe_kill`), or
//! cancels the call. This crate keeps no list of those tools: the daemon's specs say it.
//!
//! Bounded: at most [`MAX_TASKS`] are kept; a finished one is forgotten [`KEEP`] after it
//! ended, or sooner when room is needed; with every slot working, a new call runs without a
//! task (as for a client without the extension).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rmcp::ErrorData;
use rmcp::model::{DetailedTask, GetTaskResult, Task, TaskPayload};
use serde_json::{Map, Value as Json};
use tokio_util::sync::CancellationToken;

/// Tasks kept at once.
pub const MAX_TASKS: usize = 1024;
/// How long a finished task stays readable.
pub const KEEP: Duration = Duration::from_secs(3600);
/// How long an `eval` or `bash` call may run before it is answered as a task.
pub const INLINE_WAIT: Duration = Duration::from_secs(2);
/// How often a task looks at its job.
pub const POLL: Duration = Duration::from_millis(500);

enum State {
    Working,
    /// The final `CallToolResult` (an error result counts: the call completed).
    Completed(Map<String, Json>),
    Cancelled,
}

struct Entry {
    created_at: String,
    updated_at: String,
    message: Option<String>,
    state: State,
    cancel: CancellationToken,
    ended: Option<Instant>,
}

/// Every task of this `toolvisor mcp`.
#[derive(Default)]
pub struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
    next: AtomicU64,
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new working task and the token its `tasks/cancel` fires; `None` when every slot is
    /// taken by a working task.
    pub fn create(&self, message: &str) -> Option<(String, CancellationToken)> {
        let mut entries = self.lock();
        let now = Instant::now();
        entries.retain(|_, e| e.ended.is_none_or(|t| now.duration_since(t) < KEEP));
        if entries.len() >= MAX_TASKS {
            let oldest = entries
                .iter()
                .filter_map(|(id, e)| e.ended.map(|t| (t, id.clone())))
                .min()
                .map(|(_, id)| id)?;
            entries.remove(&oldest);
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("task-{}-{n}", std::process::id());
        let cancel = CancellationToken::new();
        let stamp = iso8601(SystemTime::now());
        entries.insert(
            id.clone(),
            Entry {
                created_at: stamp.clone(),
                updated_at: stamp,
                message: Some(message.to_string()),
                state: State::Working,
                cancel: cancel.clone(),
                ended: None,
            },
        );
        Some((id, cancel))
    }

    fn set(&self, id: &str, message: Option<String>, state: Option<State>) {
        let mut entries = self.lock();
        let Some(e) = entries.get_mut(id) else {
            return;
        };
        if !matches!(e.state, State::Working) {
            return;
        }
        e.updated_at = iso8601(SystemTime::now());
        if let Some(m) = message {
            e.message = Some(m);
        }
        if let Some(s) = state {
            e.state = s;
            e.ended = Some(Instant::now());
        }
    }

    /// Progress of a working task, in words.
    pub fn progress(&self, id: &str, message: String) {
        self.set(id, Some(message), None);
    }

    /// The task ended with `result` (a `CallToolResult` as JSON).
    pub fn complete(&self, id: &str, result: Json, message: &str) {
        let result = match result {
            Json::Object(m) => m,
            other => Map::from_iter([("content".to_string(), other)]),
        };
        self.set(
            id,
            Some(message.to_string()),
            Some(State::Completed(result)),
        );
    }

    /// The task was cancelled (its job stopped).
    pub fn cancelled(&self, id: &str, message: &str) {
        self.set(id, Some(message.to_string()), Some(State::Cancelled));
    }

    /// `tasks/get`.
    pub fn get(&self, id: &str) -> Result<GetTaskResult, ErrorData> {
        let entries = self.lock();
        let e = entries.get(id).ok_or_else(|| unknown(id))?;
        let payload = match &e.state {
            State::Working => TaskPayload::Working,
            State::Completed(result) => TaskPayload::Completed {
                result: result.clone(),
            },
            State::Cancelled => TaskPayload::Cancelled,
        };
        let mut task = Task::new(
            id,
            payload.status(),
            e.created_at.clone(),
            e.updated_at.clone(),
        )
        .with_ttl_ms(KEEP.as_millis() as u64)
        .with_poll_interval_ms(POLL.as_millis() as u64);
        if let Some(m) = &e.message {
            task = task.with_status_message(m.clone());
        }
        Ok(GetTaskResult::new(DetailedTask::new(task, payload)))
    }

    /// `tasks/cancel`: stop the task's job; its status turns `cancelled` once it has stopped.
    pub fn cancel(&self, id: &str) -> Result<(), ErrorData> {
        let entries = self.lock();
        let e = entries.get(id).ok_or_else(|| unknown(id))?;
        e.cancel.cancel();
        Ok(())
    }

    /// The seed state of a new task, for `CreateTaskResult`.
    pub fn seed(&self, id: &str) -> Option<Task> {
        let entries = self.lock();
        let e = entries.get(id)?;
        let mut task = Task::new(
            id,
            rmcp::model::TaskStatus::Working,
            e.created_at.clone(),
            e.updated_at.clone(),
        )
        .with_ttl_ms(KEEP.as_millis() as u64)
        .with_poll_interval_ms(POLL.as_millis() as u64);
        if let Some(m) = &e.message {
            task = task.with_status_message(m.clone());
        }
        Some(task)
    }
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(
        format!(
            "no task {id:?}: it never existed, or ended more than an hour ago (or toolvisor mcp restarted)"
        ),
        Some(
            serde_json::json!({"kind": "not_found", "hint": "use the taskId a tools/call answered; a finished task is kept for an hour"}),
        ),
    )
}

/// `2026-12-02T15:56:55Z` (UTC, seconds).
pub fn iso8601(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil-from-days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            iso8601(UNIX_EPOCH + Duration::from_secs(1_796_227_015)),
            "2026-12-02T15:56:55Z"
        );
        assert_eq!(
            iso8601(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
    }

    #[test]
    fn a_task_works_then_completes_and_cancel_fires_its_token() {
        let tasks = Tasks::default();
        let (id, token) = tasks.create("starting").unwrap();
        let got = serde_json::to_value(tasks.get(&id).unwrap()).unwrap();
        assert_eq!(got["status"], "working", "{got}");
        assert_eq!(got["statusMessage"], "starting");
        tasks.cancel(&id).unwrap();
        assert!(token.is_cancelled());
        tasks.complete(
            &id,
            serde_json::json!({"content": [], "isError": false}),
            "done",
        );
        let got = serde_json::to_value(tasks.get(&id).unwrap()).unwrap();
        assert_eq!(got["status"], "completed", "{got}");
        assert_eq!(got["result"]["isError"], false, "{got}");
        // Ended: a late cancel or completion changes nothing.
        tasks.cancelled(&id, "late");
        assert_eq!(
            serde_json::to_value(tasks.get(&id).unwrap()).unwrap()["status"],
            "completed"
        );
        assert!(tasks.get("task-nope").is_err());
    }
}
