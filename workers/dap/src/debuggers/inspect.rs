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
    ) -> Result<Value, ToolError> {
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
    ) -> Result<Value, ToolError> {
        if session.state().phase == Phase::Stopped {
            let mut out = self.describe(session, "pause", None).await;
            out["note"] = json!("already stopped");
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
    ) -> Result<Value, ToolError> {
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
    ) -> Value {
        let mut out = Map::new();
        out.insert("state".into(), json!(session.state_word()));
        let (phase, stop, exit_code, end) = {
            let s = session.state();
            (s.phase, s.stop.clone(), s.exit_code, s.end.clone())
        };
        if let Some(end) = &end {
            out.insert("exit_code".into(), json!(exit_code));
            out.insert("text".into(), json!(end.message));
            out.insert("output_bytes".into(), json!(session.output_end()));
        } else if phase == Phase::Stopped
            && let Some(stop) = stop
        {
            let mut stopped = Map::new();
            stopped.insert("reason".into(), json!(stop.reason));
            stopped.insert("thread_id".into(), json!(stop.thread_id));
            if let Some(d) = &stop.description {
                stopped.insert("description".into(), json!(d));
            }
            let mut reason = stop.reason.clone();
            if stop.reason == "exception" {
                let exception = self.exception(session, op, &stop).await;
                reason = super::exceptions::exception_reason(&exception);
                stopped.insert("exception".into(), exception);
            } else if let Some(t) = &stop.text {
                cut_value(&mut stopped, "detail", t);
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
            let text = match (&top, &unknown) {
                (Some(f), _) => format!(
                    "stopped at {}:{} in {} ({})",
                    f["file"].as_str().unwrap_or("<no source>"),
                    f["line"],
                    f["name"].as_str().unwrap_or("?"),
                    reason
                ),
                (None, Some(why)) => {
                    stopped.insert("frame_error".into(), json!(why));
                    format!(
                        "stopped ({reason}); where is not known: the adapter's stack answer failed ({why}); `debug stack` asks again"
                    )
                }
                (None, None) => format!("stopped ({reason})"),
            };
            if let Some(f) = top {
                stopped.insert("frame".into(), f);
            }
            out.insert("stopped".into(), Value::Object(stopped));
            out.insert("text".into(), json!(text));
        } else {
            out.insert("text".into(), json!("running"));
        }
        if let Some(n) = note {
            out.insert("note".into(), json!(n));
        }
        Value::Object(out)
    }

    /// The top frame of `thread` at the current stop (asked once per stop).
    pub(super) async fn top_frame(
        &self,
        session: &Arc<Session>,
        op: &str,
        thread: i64,
    ) -> Result<Option<Value>, ToolError> {
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
            .map(frame_json);
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

    pub(super) async fn threads(&self, session: &Arc<Session>) -> Result<Value, ToolError> {
        let body = self.request(session, "threads", "threads", None).await?;
        let threads: Vec<Value> = body["threads"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|t| json!({"id": t["id"], "name": t["name"]}))
            .collect();
        let stopped = session.state().stop.as_ref().and_then(|s| s.thread_id);
        Ok(json!({"threads": threads, "stopped_thread": stopped, "state": session.state_word()}))
    }

    pub(super) async fn stack(
        &self,
        session: &Arc<Session>,
        thread: Option<i64>,
    ) -> Result<Value, ToolError> {
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
        let frames: Vec<Value> = all.iter().take(MAX_FRAMES).map(frame_json).collect();
        let truncated = total as usize > frames.len();
        Ok(json!({
            "thread_id": thread,
            "frames": frames,
            "total_frames": total,
            "truncated": truncated,
        }))
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
            .and_then(|f| f["id"].as_i64()))
    }

    pub(super) async fn scopes(
        &self,
        session: &Arc<Session>,
        frame: Option<i64>,
    ) -> Result<Value, ToolError> {
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
        let scopes: Vec<Value> = body["scopes"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|s| {
                json!({
                    "name": s["name"],
                    "reference": s["variablesReference"],
                    "expensive": s["expensive"].as_bool().unwrap_or(false),
                })
            })
            .collect();
        Ok(json!({"frame_id": frame, "scopes": scopes}))
    }

    pub(super) async fn variables(
        &self,
        session: &Arc<Session>,
        reference: i64,
    ) -> Result<Value, ToolError> {
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
        let variables: Vec<Value> = all
            .iter()
            .take(MAX_CHILDREN)
            .map(|v| {
                let mut out = Map::new();
                out.insert("name".into(), v["name"].clone());
                cut_value(&mut out, "value", v["value"].as_str().unwrap_or(""));
                if let Some(t) = v["type"].as_str().filter(|t| !t.is_empty()) {
                    out.insert("type".into(), json!(t));
                }
                out.insert(
                    "reference".into(),
                    json!(v["variablesReference"].as_i64().unwrap_or(0)),
                );
                Value::Object(out)
            })
            .collect();
        let truncated = all.len() > variables.len();
        let mut out = json!({
            "reference": reference,
            "variables": variables,
            "total": all.len(),
            "truncated": truncated,
        });
        if truncated {
            out["note"] = json!(format!(
                "only the first {MAX_CHILDREN} of {} children are shown",
                all.len()
            ));
        }
        Ok(out)
    }

    pub(super) async fn evaluate(
        &self,
        session: &Arc<Session>,
        expression: &str,
        frame: Option<i64>,
    ) -> Result<Value, ToolError> {
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
        let mut out = Map::new();
        out.insert("expression".into(), json!(expression));
        cut_value(&mut out, "result", body["result"].as_str().unwrap_or(""));
        if let Some(t) = body["type"].as_str().filter(|t| !t.is_empty()) {
            out.insert("type".into(), json!(t));
        }
        out.insert(
            "reference".into(),
            json!(body["variablesReference"].as_i64().unwrap_or(0)),
        );
        out.insert("frame_id".into(), json!(frame));
        Ok(Value::Object(out))
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
    ) -> Result<Value, ToolError> {
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
        let mut out = Map::new();
        out.insert("name".into(), json!(name));
        // lldb-dap (19) names the new value `result`, not the spec's `value`.
        let new = body["value"]
            .as_str()
            .filter(|v| !v.is_empty())
            .or_else(|| body["result"].as_str())
            .unwrap_or("");
        cut_value(&mut out, "value", new);
        if let Some(t) = body["type"].as_str().filter(|t| !t.is_empty()) {
            out.insert("type".into(), json!(t));
        }
        out.insert(
            "reference".into(),
            json!(body["variablesReference"].as_i64().unwrap_or(0)),
        );
        Ok(Value::Object(out))
    }
}
