//! What a server says about its own work, folded into one question: is it still busy, and
//! with what? `$/progress` tokens begun and not ended, rust-analyzer's quiescence, pyright's
//! "Found N source files" log line. Cleared with each new incarnation.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use super::flavor::Flavor;
use crate::lock;

/// A `$/progress` notification, read.
pub(crate) enum Step {
    Begin { token: String, title: String },
    Report,
    End { token: String },
}

/// The server's own account of its work in this incarnation.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Token → title (and the last report's message) of each work begun and not ended.
    tokens: Mutex<BTreeMap<String, String>>,
    /// rust-analyzer's `experimental/serverStatus`: `Some(true)` once quiescent.
    quiescent: Mutex<Option<bool>>,
    expects_status: bool,
    ready_log: Option<&'static str>,
    seen_ready_log: Mutex<bool>,
}

impl Progress {
    pub fn new(flavor: &Flavor) -> Progress {
        Progress {
            expects_status: flavor.rust_analyzer,
            ready_log: flavor.ready_log,
            ..Default::default()
        }
    }

    /// A new incarnation: nothing is known of its work yet.
    pub fn clear(&self) {
        lock(&self.tokens).clear();
        *lock(&self.quiescent) = None;
        *lock(&self.seen_ready_log) = false;
    }

    /// What the server is still doing by its own account, or `None` when it has said it
    /// is done.
    pub fn busy(&self) -> Option<String> {
        if let Some(title) = lock(&self.tokens).values().next() {
            return Some(title.clone());
        }
        if self.ready_log.is_some() && !*lock(&self.seen_ready_log) {
            return Some("scanning the workspace for source files".into());
        }
        if self.expects_status && *lock(&self.quiescent) != Some(true) {
            return Some("loading the workspace (not quiescent yet)".into());
        }
        None
    }

    /// Fold a `$/progress` notification in; `None` when it is not one toolvisor reads.
    pub fn apply(&self, server: &str, params: &Value) -> Option<Step> {
        let token = match params.get("token") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => return None,
        };
        let value = params.get("value").cloned().unwrap_or(Value::Null);
        match value.get("kind").and_then(Value::as_str) {
            Some("begin") => {
                let title = value
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("working")
                    .to_string();
                tracing::debug!(server, token, title, "server progress begins");
                lock(&self.tokens).insert(token.clone(), title.clone());
                Some(Step::Begin { token, title })
            }
            Some("report") => {
                if let Some(msg) = value.get("message").and_then(Value::as_str) {
                    let mut p = lock(&self.tokens);
                    if let Some(t) = p.get_mut(&token) {
                        let title = t.split(" — ").next().unwrap_or("").to_string();
                        *t = format!("{title} — {msg}");
                    }
                }
                Some(Step::Report)
            }
            Some("end") => {
                tracing::debug!(server, token, "server progress ends");
                lock(&self.tokens).remove(&token);
                Some(Step::End { token })
            }
            _ => None,
        }
    }

    /// A log line; true when it is the one that says the workspace scan is done.
    pub fn log_line(&self, message: &str) -> bool {
        let done = self.ready_log.is_some_and(|p| message.contains(p));
        if done {
            *lock(&self.seen_ready_log) = true;
        }
        done
    }

    /// rust-analyzer's `experimental/serverStatus`.
    pub fn status(&self, params: &Value) {
        *lock(&self.quiescent) = params.get("quiescent").and_then(Value::as_bool);
    }
}
