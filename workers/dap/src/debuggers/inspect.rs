//! The ops on a live debug session: running and stopping (`continue`, the steps, `pause`,
//! and how a stop is awaited and described) and inspection (`threads`, `stack`, `scopes`,
//! `variables`, `evaluate`).
//!
//! Also `set_variable`, checked against the adapter's capabilities first like every option.

use super::*;

impl Debuggers {
    // ---- running and stopping -------------------------------------------------------------

    /// The thread to act on: the one given, else the one that stopped, else the first.
    pub(super) async fn thread(
        &self,
        session: &Arc<Session>,
        op: &str,
        given: Option<i64>,
    ) -> Result<i64, ToolError> {
        if let Some(t) = given {
            return Ok(t);
        }
        if let Some(t) = session.state().stop.as_ref().and_then(|s| s.thread_id) {
            return Ok(t);
        }
        let body = self.request(session, op, "threads", None).await?;
        body["threads"]
            .as_array()
            .and_then(|t| t.first())
            .and_then(|t| t["id"].as_i64())
            .ok_or_else(|| {
                err(
                    ErrorKind::NotFound,
                    format!("debug {op}: the program has no threads"),
                    "`status` shows the session's state",
                )
            })
    }

    pub(super) fn require_stopped(
        &self,
        session: &Arc<Session>,
        op: &str,
    ) -> Result<(), ToolError> {
        if session.state().phase != Phase::Stopped {
            return Err(err(
                ErrorKind::Busy,
                format!("debug {op}: the program is running; {op} needs it stopped"),
                "`pause` stops it (or wait for a breakpoint with `continue`); `output` shows what it printed",
            ));
        }
        Ok(())
    }

    pub(super) async fn resume(
        &self,
        session: &Arc<Session>,
        op: DebugOp,
        thread: Option<i64>,
    ) -> Result<DebugStopResult, ToolError> {
        let name = op_name(op);
        self.require_stopped(session, name)?;
        let thread = self.thread(session, name, thread).await?;
        let command = match op {
            DebugOp::Continue => "continue",
            DebugOp::StepOver => "next",
            DebugOp::StepIn => "stepIn",
            DebugOp::StepOut => "stepOut",
            _ => unreachable!("resume ops only"),
        };
        let before = session.state().stops;
        self.request(session, name, command, Some(json!({"threadId": thread})))
            .await?;
        session.update(|s| {
            if s.stops == before && s.phase == Phase::Stopped {
                s.phase = Phase::Running;
            }
        });
        self.settle(session, name, before).await
    }

    pub(super) async fn pause(
        &self,
        session: &Arc<Session>,
        thread: Option<i64>,
    ) -> Result<DebugStopResult, ToolError> {
        if session.state().phase == Phase::Stopped {
            let mut out = self.describe(session, "pause", None).await;
            out.note = Some("already stopped".into());
            return Ok(out);
        }
        let thread = self.thread(session, "pause", thread).await?;
        let before = session.state().stops;
        self.request(session, "pause", "pause", Some(json!({"threadId": thread})))
            .await?;
        self.settle(session, "pause", before).await
    }

    /// Waits (up to `stop_wait_s`) for a stop after `before` stops, or the program's end, and
    /// says where things are.
    pub(super) async fn settle(
        &self,
        session: &Arc<Session>,
        op: &str,
        before: u64,
    ) -> Result<DebugStopResult, ToolError> {
        let stopped = session
            .wait_until(self.config.stop_wait(), |s| {
                s.stops > before || s.terminated || s.closed.is_some() || s.end.is_some()
            })
            .await;
        let (closed, terminated) = {
            let s = session.state();
            (s.closed.is_some() && !s.terminated, s.terminated)
        };
        if closed {
            return Err(self
                .dap_error(session, op, DapError::Closed(String::new()))
                .await);
        }
        if terminated {
            // Some adapters send `exited` after `terminated`.
            session
                .wait_until(Duration::from_millis(500), |s| s.exit_code.is_some())
                .await;
        }
        if let Some(end) = session.ended()
            && end.kind == EndKind::Expired
        {
            return Err(end_error(session, &end, DebugOp::Status).with_op(op));
        }
        let note = (!stopped).then(|| {
            format!(
                "the program did not stop within {} s and is still running; `pause` stops it, `output` shows what it printed",
                self.config.stop_wait_s
            )
        });
        Ok(self.describe(session, op, note).await)
    }

    /// The session's state now: where it stopped (the top frame), or that it runs, or how it
    /// ended.
    pub(super) async fn describe(
        &self,
        session: &Arc<Session>,
        op: &str,
        note: Option<String>,
    ) -> DebugStopResult {
        let state = session.state_now();
        let (phase, stop, exit_code, end) = {
            let s = session.state();
            (s.phase, s.stop.clone(), s.exit_code, s.end.clone())
        };
        let mut out = DebugStopResult {
            state,
            text: "running".into(),
            stopped: None,
            exit_code: None,
            output_bytes: None,
            note,
        };
        if let Some(end) = &end {
            out.exit_code = Some(exit_code);
            out.text = end.message.clone();
            out.output_bytes = Some(session.output_end());
        } else if phase == Phase::Stopped
            && let Some(stop) = stop
        {
            let mut stopped = DebugStop {
                reason: stop.reason.clone(),
                thread_id: stop.thread_id,
                description: stop.description.clone(),
                exception: None,
                detail: None,
                detail_truncated: None,
                detail_chars: None,
                frame: None,
                frame_error: None,
            };
            let mut reason = stop.reason.clone();
            if stop.reason == "exception" {
                let exception = self.exception(session, op, &stop).await;
                reason = super::exceptions::exception_reason(&exception);
                stopped.exception = Some(exception);
            } else if let Some(t) = &stop.text {
                let cut = cut_value(t);
                stopped.detail = Some(cut.text);
                stopped.detail_truncated = cut.truncated;
                stopped.detail_chars = cut.chars;
            }
            // Where it stopped; when the adapter cannot say, the answer says why rather than
            // look like a stop without a place.
            let (top, unknown) = match stop.thread_id {
                Some(t) => match self.top_frame(session, op, t).await {
                    Ok(f) => (f, None),
                    Err(e) => (None, Some(e.message)),
                },
                None => (None, None),
            };
            out.text = match (&top, &unknown) {
                (Some(f), _) => format!(
                    "stopped at {}:{} in {} ({})",
                    f.file.as_deref().unwrap_or("<no source>"),
                    line_text(f),
                    f.name.as_deref().unwrap_or("?"),
                    reason
                ),
                (None, Some(why)) => format!(
                    "stopped ({reason}); where is not known: the adapter's stack answer failed ({why}); `debug stack` asks again"
                ),
                (None, None) => format!("stopped ({reason})"),
            };
            stopped.frame = top;
            stopped.frame_error = unknown;
            out.stopped = Some(stopped);
        }
        out
    }

    /// The top frame of `thread` at the current stop (asked once per stop).
    pub(super) async fn top_frame(
        &self,
        session: &Arc<Session>,
        op: &str,
        thread: i64,
    ) -> Result<Option<DebugFrame>, ToolError> {
        let stops = session.state().stops;
        if let Some((n, f)) = session.state().top.clone()
            && n == stops
        {
            return Ok(Some(f));
        }
        let body = self
            .request(
                session,
                op,
                "stackTrace",
                Some(json!({"threadId": thread, "startFrame": 0, "levels": 1})),
            )
            .await?;
        let frame = body["stackFrames"]
            .as_array()
            .and_then(|f| f.first())
            .map(frame_of);
        if let Some(f) = &frame {
            let f = f.clone();
            session.update(|s| {
                if s.stops == stops {
                    s.top = Some((stops, f));
                }
            });
        }
        Ok(frame)
    }

    // ---- inspection -----------------------------------------------------------------------

    pub(super) async fn threads(
        &self,
        session: &Arc<Session>,
    ) -> Result<DebugThreadsResult, ToolError> {
        let body = self.request(session, "threads", "threads", None).await?;
        let threads = body["threads"]
            .as_array()
            .map(|threads| {
                threads
                    .iter()
                    .map(|t| DebugThread {
                        id: t["id"].as_i64(),
                        name: t["name"].as_str().map(str::to_string),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let stopped = session.state().stop.as_ref().and_then(|s| s.thread_id);
        Ok(DebugThreadsResult {
            threads,
            stopped_thread: stopped,
            state: session.state_now(),
        })
    }

    pub(super) async fn stack(
        &self,
        session: &Arc<Session>,
        thread: Option<i64>,
    ) -> Result<DebugStackResult, ToolError> {
        self.require_stopped(session, "stack")?;
        let thread = self.thread(session, "stack", thread).await?;
        let body = self
            .request(
                session,
                "stack",
                "stackTrace",
                Some(json!({"threadId": thread, "startFrame": 0, "levels": MAX_FRAMES + 1})),
            )
            .await?;
        let all = body["stackFrames"].as_array().cloned().unwrap_or_default();
        let total = body["totalFrames"]
            .as_u64()
            .unwrap_or(all.len() as u64)
            .max(all.len() as u64);
        let frames: Vec<DebugFrame> = all.iter().take(MAX_FRAMES).map(frame_of).collect();
        let truncated = total as usize > frames.len();
        Ok(DebugStackResult {
            thread_id: thread,
            frames,
            total_frames: total,
            truncated,
        })
    }

    /// The frame to use: the one given, else the top frame of the stopped thread.
    pub(super) async fn frame(
        &self,
        session: &Arc<Session>,
        op: &str,
        given: Option<i64>,
    ) -> Result<Option<i64>, ToolError> {
        if given.is_some() {
            return Ok(given);
        }
        let thread = session.state().stop.as_ref().and_then(|s| s.thread_id);
        if session.state().phase != Phase::Stopped {
            return Ok(None);
        }
        let Some(thread) = thread else {
            return Ok(None);
        };
        Ok(self
            .top_frame(session, op, thread)
            .await?
            .and_then(|f| f.id))
    }

    pub(super) async fn scopes(
        &self,
        session: &Arc<Session>,
        frame: Option<i64>,
    ) -> Result<DebugScopesResult, ToolError> {
        self.require_stopped(session, "scopes")?;
        let Some(frame) = self.frame(session, "scopes", frame).await? else {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug scopes: no frame to look at",
                "pass `frame_id` from `stack`",
            ));
        };
        let body = self
            .request(session, "scopes", "scopes", Some(json!({"frameId": frame})))
            .await?;
        let scopes = body["scopes"]
            .as_array()
            .map(|scopes| {
                scopes
                    .iter()
                    .map(|s| DebugScope {
                        name: s["name"].as_str().map(str::to_string),
                        reference: s["variablesReference"].as_i64(),
                        expensive: s["expensive"].as_bool().unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(DebugScopesResult {
            frame_id: frame,
            scopes,
        })
    }

    pub(super) async fn variables(
        &self,
        session: &Arc<Session>,
        reference: i64,
    ) -> Result<DebugVariablesResult, ToolError> {
        self.require_stopped(session, "variables")?;
        if reference <= 0 {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!("debug variables: reference {reference} has no children"),
                "use a non-zero `reference` from scopes, variables or evaluate",
            ));
        }
        let body = self
            .request(
                session,
                "variables",
                "variables",
                Some(json!({"variablesReference": reference})),
            )
            .await?;
        let all = body["variables"].as_array().cloned().unwrap_or_default();
        let variables: Vec<DebugVariable> = all
            .iter()
            .take(MAX_CHILDREN)
            .map(|v| {
                let shown = Shown::of(v, v["value"].as_str().unwrap_or(""));
                DebugVariable {
                    name: v["name"].as_str().map(str::to_string),
                    value: shown.value.text,
                    value_truncated: shown.value.truncated,
                    value_chars: shown.value.chars,
                    kind: shown.kind,
                    reference: shown.reference,
                }
            })
            .collect();
        let truncated = all.len() > variables.len();
        Ok(DebugVariablesResult {
            reference,
            variables,
            total: all.len() as u64,
            truncated,
            note: truncated.then(|| {
                format!(
                    "only the first {MAX_CHILDREN} of {} children are shown",
                    all.len()
                )
            }),
        })
    }

    pub(super) async fn evaluate(
        &self,
        session: &Arc<Session>,
        expression: &str,
        frame: Option<i64>,
    ) -> Result<DebugEvaluateResult, ToolError> {
        let frame = self.frame(session, "evaluate", frame).await?;
        // lldb-dap's "repl" context runs lldb commands; "watch" evaluates an expression.
        let context = match session.flavor {
            Flavor::Lldb => "watch",
            _ => "repl",
        };
        let mut request = json!({"expression": expression, "context": context});
        if let Some(f) = frame {
            request["frameId"] = json!(f);
        }
        let body = self
            .request(session, "evaluate", "evaluate", Some(request))
            .await?;
        let shown = Shown::of(&body, body["result"].as_str().unwrap_or(""));
        Ok(DebugEvaluateResult {
            expression: expression.to_string(),
            result: shown.value.text,
            result_truncated: shown.value.truncated,
            result_chars: shown.value.chars,
            kind: shown.kind,
            reference: shown.reference,
            frame_id: frame,
        })
    }

    /// `setVariable`: `name` in the container `reference` (from `scopes` or `variables`)
    /// becomes `value`, an expression the adapter evaluates; the new value as the adapter
    /// shows it.
    pub(super) async fn set_variable(
        &self,
        session: &Arc<Session>,
        reference: i64,
        name: &str,
        value: &str,
    ) -> Result<DebugSetVariableResult, ToolError> {
        self.require_stopped(session, "set_variable")?;
        super::breakpoints::require_capability(
            session,
            "set_variable",
            "supportsSetVariable",
            "setting variables (`setVariable`)",
        )?;
        let body = self
            .request(
                session,
                "set_variable",
                "setVariable",
                Some(json!({"variablesReference": reference, "name": name, "value": value})),
            )
            .await?;
        // lldb-dap (19) names the new value `result`, not the spec's `value`.
        let new = body["value"]
            .as_str()
            .filter(|v| !v.is_empty())
            .or_else(|| body["result"].as_str())
            .unwrap_or("");
        let shown = Shown::of(&body, new);
        Ok(DebugSetVariableResult {
            name: name.to_string(),
            value: shown.value.text,
            value_truncated: shown.value.truncated,
            value_chars: shown.value.chars,
            kind: shown.kind,
            reference: shown.reference,
        })
    }
}

/// A value as a variable, an evaluation and a set variable show it: cut to
/// `MAX_VALUE_CHARS`, its type, and the reference that expands it (0: nothing to expand).
struct Shown {
    value: Cut,
    kind: Option<String>,
    reference: i64,
}

impl Shown {
    /// `value`, read from the adapter's `body` (a variable, or an answer) with its type and
    /// reference.
    fn of(body: &Value, value: &str) -> Shown {
        Shown {
            value: cut_value(value),
            kind: type_of(body),
            reference: body["variablesReference"].as_i64().unwrap_or(0),
        }
    }
}

/// A value's type, where the adapter says it (an empty one is none).
fn type_of(v: &Value) -> Option<String> {
    v["type"]
        .as_str()
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}
