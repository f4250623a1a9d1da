//! A debug session's event folding: [`Session::on_event`] turns each event the adapter sends
//! (`stopped`, `continued`, `exited`, `terminated`, `process`, `breakpoint`, `output`) into
//! [`RunState`](super::RunState), counting stops so a stop that overtakes its request's answer
//! is never missed; delve, which sends no `exited`, has its exit status read from its console.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::Value;

use super::{End, EndKind, Phase, Session, StopInfo, lock};
use crate::adapters::Flavor;

/// Lines of the adapter's console messages kept.
const CONSOLE_LINES: usize = 20;

impl Session {
    /// Folds one adapter event into the state.
    pub(super) fn on_event(self: &Arc<Self>, event: &str, body: &Value) {
        let str_of = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        match event {
            "initialized" => self.update(|s| s.initialized = true),
            "stopped" => {
                let mut reason = str_of("reason").unwrap_or_else(|| "unknown".into());
                if self.entry_pending.swap(false, Ordering::SeqCst)
                    && reason == "exception"
                    && str_of("description").as_deref() == Some("signal SIGSTOP")
                {
                    reason = "entry".into();
                }
                let info = StopInfo {
                    reason,
                    thread_id: body.get("threadId").and_then(Value::as_i64),
                    description: str_of("description"),
                    text: str_of("text"),
                };
                self.update(|s| {
                    s.stops += 1;
                    s.stop = Some(info);
                    s.phase = Phase::Stopped;
                });
            }
            "continued" => self.update(|s| {
                if s.phase != Phase::Starting {
                    s.phase = Phase::Running;
                }
            }),
            "exited" => {
                let code = body.get("exitCode").and_then(Value::as_i64);
                self.update(|s| s.exit_code = code);
            }
            "terminated" => {
                // The session is over from this moment (so an answer given now says so);
                // winding the adapter down happens in the background.
                if self.flavor == Flavor::Delve && self.state().exit_code.is_none() {
                    // delve sends no `exited`; it says "Process N has exited with status S"
                    // on its console just before `terminated`.
                    let code = lock(&self.console)
                        .iter()
                        .rev()
                        .find_map(|l| delve_exit_code(l));
                    self.update(|s| s.exit_code = code);
                }
                let code = self.state().exit_code;
                let message = match code {
                    Some(c) => format!("the program exited with code {c}"),
                    None => "the program ended (the adapter sent `terminated`)".into(),
                };
                self.update(|s| {
                    s.terminated = true;
                    if s.end.is_none() {
                        s.end = Some(End {
                            kind: EndKind::Exited,
                            message: message.clone(),
                            at: Instant::now(),
                        });
                    }
                });
                if !self.shutting_down.load(Ordering::SeqCst) {
                    let me = self.clone();
                    tokio::spawn(async move { me.shutdown(EndKind::Exited, message).await });
                }
            }
            "process" => {
                let pid = body
                    .get("systemProcessId")
                    .and_then(Value::as_u64)
                    .and_then(|p| u32::try_from(p).ok())
                    .filter(|p| *p > 1);
                self.update(|s| s.debuggee_pid = pid.or(s.debuggee_pid));
            }
            "breakpoint" => {
                let breakpoint = body.get("breakpoint").cloned().unwrap_or(Value::Null);
                if let Some(id) = breakpoint.get("id").and_then(Value::as_i64) {
                    let mut changes = lock(&self.breakpoint_changes);
                    if str_of("reason").as_deref() == Some("removed") {
                        changes.remove(&id);
                    } else {
                        changes.insert(id, breakpoint);
                    }
                }
            }
            "output" => {
                let text = str_of("output").unwrap_or_default();
                match body
                    .get("category")
                    .and_then(Value::as_str)
                    .unwrap_or("console")
                {
                    "stdout" | "stderr" => self.append_output(text.as_bytes()),
                    "telemetry" => {}
                    _ => {
                        let mut console = lock(&self.console);
                        console.push_back(text.chars().take(500).collect());
                        while console.len() > CONSOLE_LINES {
                            console.pop_front();
                        }
                    }
                }
            }
            other => tracing::trace!(session = self.id, event = other, "adapter event ignored"),
        }
    }
}

/// The status in delve's console line `Process 1234 has exited with status 6`.
fn delve_exit_code(line: &str) -> Option<i64> {
    let rest = line.trim().strip_prefix("Process ")?;
    let (_, status) = rest.split_once(" has exited with status ")?;
    status.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delve_says_the_exit_status_on_its_console() {
        assert_eq!(
            delve_exit_code("Process 4242 has exited with status 6\n"),
            Some(6)
        );
        assert_eq!(
            delve_exit_code("Process 7 has exited with status -1"),
            Some(-1)
        );
        assert_eq!(
            delve_exit_code("Type 'dlv help' for list of commands."),
            None
        );
    }
}
