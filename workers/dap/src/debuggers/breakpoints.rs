//! `debug breakpoints`: source breakpoints with a condition, a hit condition or a log message
//! (logpoints), function breakpoints by name and exception filters; applying them to a live
//! session after checking the adapter's capabilities, and listing what the adapter verified
//! and where it moved each one.

use toolvisor_protocol::tools::DebugBreakpoint;

use super::*;

/// A capability the adapter must advertise for `what`, else `not_available` naming both.
pub(super) fn require_capability(
    session: &Session,
    op: &str,
    capability: &str,
    what: &str,
) -> Result<(), ToolError> {
    if lock(&session.capabilities)[capability]
        .as_bool()
        .unwrap_or(false)
    {
        return Ok(());
    }
    Err(err(
        ErrorKind::NotAvailable,
        format!(
            "debug {op}: the {} adapter does not support {what} (it does not advertise `{capability}`)",
            session.adapter
        ),
        "this adapter lacks it; `adapters` lists the others (debugpy and lldb-dap support conditions, hit conditions, logpoints, function breakpoints and set_variable)",
    ))
}

/// The exception filters an adapter advertises.
fn advertised_filters(caps: &Value) -> Vec<DebugExceptionFilter> {
    caps["exceptionBreakpointFilters"]
        .as_array()
        .map(|filters| {
            filters
                .iter()
                .map(|f| DebugExceptionFilter {
                    filter: f["filter"].as_str().map(str::to_string),
                    label: f["label"].as_str().map(str::to_string),
                    default: f["default"].as_bool().unwrap_or(false),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The source breakpoints a call asks for: `lines` and `points` merged (a line in both
/// takes the point's options), sorted by line.
fn requested_points(args: &DebugArgs) -> Result<Vec<DebugBreakpoint>, ToolError> {
    let mut by_line: BTreeMap<u64, DebugBreakpoint> = BTreeMap::new();
    for line in args.lines.iter().flatten() {
        by_line.insert(
            *line,
            DebugBreakpoint {
                line: *line,
                condition: None,
                hit_condition: None,
                log_message: None,
            },
        );
    }
    for point in args.points.iter().flatten() {
        let blank = |v: &Option<String>| v.as_ref().filter(|s| !s.trim().is_empty()).cloned();
        by_line.insert(
            point.line,
            DebugBreakpoint {
                line: point.line,
                condition: blank(&point.condition),
                hit_condition: blank(&point.hit_condition),
                log_message: blank(&point.log_message),
            },
        );
    }
    if by_line.contains_key(&0) {
        return Err(err(
            ErrorKind::InvalidArgs,
            "debug breakpoints: line 0 is not a line (lines are 1-based)",
            "give 1-based line numbers",
        ));
    }
    Ok(by_line.into_values().collect())
}

/// Refuses points whose options the adapter does not support.
fn check_points(session: &Session, op: &str, points: &[DebugBreakpoint]) -> Result<(), ToolError> {
    if points.iter().any(|p| p.condition.is_some()) {
        require_capability(
            session,
            op,
            "supportsConditionalBreakpoints",
            "conditional breakpoints (`condition`)",
        )?;
    }
    if points.iter().any(|p| p.hit_condition.is_some()) {
        require_capability(
            session,
            op,
            "supportsHitConditionalBreakpoints",
            "hit conditions (`hit_condition`)",
        )?;
    }
    if points.iter().any(|p| p.log_message.is_some()) {
        require_capability(
            session,
            op,
            "supportsLogPoints",
            "logpoints (`log_message`)",
        )?;
    }
    Ok(())
}

/// Refuses exception filters the adapter does not advertise, naming those it does.
fn check_exceptions(session: &Session, op: &str, filters: &[String]) -> Result<(), ToolError> {
    let available = advertised_filters(&lock(&session.capabilities));
    if filters.is_empty() {
        return Ok(());
    }
    if available.is_empty() {
        return Err(err(
            ErrorKind::NotAvailable,
            format!(
                "debug {op}: the {} adapter advertises no exception filters (`exceptionBreakpointFilters`)",
                session.adapter
            ),
            "exception breakpoints are not available with this adapter; give `exceptions: []`",
        ));
    }
    let names: Vec<&str> = available
        .iter()
        .filter_map(|f| f.filter.as_deref())
        .collect();
    if let Some(bad) = filters.iter().find(|f| !names.contains(&f.as_str())) {
        return Err(err(
            ErrorKind::InvalidArgs,
            format!(
                "debug {op}: the {} adapter has no exception filter {bad:?}",
                session.adapter
            ),
            format!("its filters: {}", names.join(", ")),
        ));
    }
    Ok(())
}

/// A source breakpoint as set, before the adapter said anything of it.
fn point(p: &DebugBreakpoint) -> DebugSourceBreakpoint {
    DebugSourceBreakpoint {
        line: p.line,
        condition: p.condition.clone(),
        hit_condition: p.hit_condition.clone(),
        log_message: p.log_message.clone(),
        verified: None,
        actual_line: None,
        message: None,
        id: None,
    }
}

/// The line the adapter put a breakpoint asked for on line `asked` on, when it moved it.
fn moved(answered: &Value, asked: u64) -> Option<u64> {
    answered["line"].as_u64().filter(|line| *line != asked)
}

/// A source breakpoint with the adapter's verdict on it (its `setBreakpoints` answer).
fn source_verdict(p: &DebugBreakpoint, answered: &Value) -> DebugSourceBreakpoint {
    DebugSourceBreakpoint {
        verified: Some(answered["verified"].as_bool().unwrap_or(false)),
        actual_line: moved(answered, p.line),
        message: answered["message"].as_str().map(str::to_string),
        id: answered["id"].as_i64(),
        ..point(p)
    }
}

/// A function breakpoint with the adapter's verdict on it: where it put it, too.
fn function_verdict(name: &str, answered: &Value) -> DebugFunctionBreakpoint {
    DebugFunctionBreakpoint {
        name: name.to_string(),
        verified: Some(answered["verified"].as_bool().unwrap_or(false)),
        line: answered["line"].as_u64(),
        file: answered["source"]["path"].as_str().map(str::to_string),
        message: answered["message"].as_str().map(str::to_string),
        id: answered["id"].as_i64(),
    }
}

/// `run_to`'s temporary breakpoint on `line` with the adapter's verdict on it.
fn temporary_verdict(line: u64, answered: &Value) -> DebugTemporaryBreakpoint {
    DebugTemporaryBreakpoint {
        line: Some(line),
        verified: answered["verified"].as_bool().unwrap_or(false),
        actual_line: moved(answered, line),
        message: answered["message"].as_str().map(str::to_string),
        id: answered["id"].as_i64(),
        note: None,
    }
}

/// What the adapter's `breakpoint` events said of the breakpoint `id` since its verdict was
/// given (each fact it did not mention is `None`).
struct Change {
    verified: Option<bool>,
    line: Option<u64>,
    message: Option<String>,
}

fn change_of(id: Option<i64>, session: Option<&Arc<Session>>) -> Option<Change> {
    let changed = lock(&session?.breakpoint_changes).get(&id?).cloned()?;
    Some(Change {
        verified: changed["verified"].as_bool(),
        line: changed["line"].as_u64(),
        message: changed["message"].as_str().map(str::to_string),
    })
}

/// A source breakpoint's verdict updated by the adapter's `breakpoint` events since: a line
/// the event moves it to is its `actual_line` (none when it is the asked line).
fn refreshed(v: &DebugSourceBreakpoint, session: Option<&Arc<Session>>) -> DebugSourceBreakpoint {
    let mut out = v.clone();
    if let Some(c) = change_of(v.id, session) {
        out.verified = c.verified.or(out.verified);
        if let Some(line) = c.line {
            out.actual_line = (out.line != line).then_some(line);
        }
        out.message = c.message.or(out.message);
    }
    out
}

/// A function breakpoint's verdict updated by the adapter's `breakpoint` events since (the
/// line the event names is the function's).
fn refreshed_function(
    v: &DebugFunctionBreakpoint,
    session: Option<&Arc<Session>>,
) -> DebugFunctionBreakpoint {
    let mut out = v.clone();
    if let Some(c) = change_of(v.id, session) {
        out.verified = c.verified.or(out.verified);
        out.line = c.line.or(out.line);
        out.message = c.message.or(out.message);
    }
    out
}

impl Debuggers {
    pub(super) async fn breakpoints(
        &self,
        call: &DebugCall,
        slot: &Slot,
        args: &DebugArgs,
    ) -> Result<DebugResult, ToolError> {
        if args.file.is_none() && (args.lines.is_some() || args.points.is_some()) {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug breakpoints: `lines` and `points` need the `file` they are in",
                "give `file`; without `file`, `functions` or `exceptions`, `breakpoints` lists what is set",
            ));
        }
        if args.file.is_none() && args.functions.is_none() && args.exceptions.is_none() {
            return Ok(DebugResult::BreakpointList(self.breakpoint_listing(slot)));
        }
        let live = lock(&slot.current)
            .clone()
            .filter(|s| s.is_live() && s.state().phase != Phase::Starting);
        let mut out = DebugBreakpointsResult {
            file: None,
            lines: None,
            breakpoints: None,
            function_names: None,
            functions: None,
            exceptions: None,
            applied: live.is_some(),
            note: live
                .is_none()
                .then(|| "kept for the next launch (no session is running)".into()),
        };
        // Everything is checked before anything is kept or sent.
        let source = match &args.file {
            Some(file) => {
                let points = requested_points(args)?;
                let path = absolute(&call.workdir, file);
                if !path.is_file() {
                    return Err(err(
                        ErrorKind::NotFound,
                        format!("debug breakpoints: no such file {}", path.display()),
                        "paths are relative to the workdir",
                    ));
                }
                if let Some(session) = &live {
                    check_points(session, "breakpoints", &points)?;
                }
                Some((std::fs::canonicalize(&path).unwrap_or(path), points))
            }
            None => None,
        };
        let functions = match &args.functions {
            Some(names) => {
                let names: Vec<String> = names.iter().map(|n| n.trim().to_string()).collect();
                if names.iter().any(String::is_empty) {
                    return Err(err(
                        ErrorKind::InvalidArgs,
                        "debug breakpoints: an empty function name",
                        "name functions as the adapter knows them (`f`, `mod.f`, `ns::f`)",
                    ));
                }
                if let Some(session) = &live
                    && !names.is_empty()
                {
                    require_capability(
                        session,
                        "breakpoints",
                        "supportsFunctionBreakpoints",
                        "function breakpoints (`functions`)",
                    )?;
                }
                Some(names)
            }
            None => None,
        };
        if let (Some(filters), Some(session)) = (&args.exceptions, &live) {
            check_exceptions(session, "breakpoints", filters)?;
        }

        if let Some((path, points)) = source {
            let key = path.display().to_string();
            {
                let mut bps = lock(&slot.breakpoints);
                if points.is_empty() {
                    bps.remove(&path);
                } else {
                    bps.insert(path.clone(), points.clone());
                }
            }
            lock(&slot.verdicts).remove(&key);
            out.file = Some(key);
            out.lines = Some(points.iter().map(|p| p.line).collect());
            if let Some(session) = &live {
                out.breakpoints = Some(self.set_breakpoints(session, slot, &path, &points).await?);
            }
        }
        if let Some(names) = functions {
            *lock(&slot.functions) = names.clone();
            lock(&slot.function_verdicts).take();
            out.function_names = Some(names);
            if let Some(session) = &live {
                out.functions = Some(self.set_function_breakpoints(session, slot).await?);
            }
        }
        if let Some(filters) = &args.exceptions {
            *lock(&slot.exceptions) = Some(filters.clone());
            out.exceptions = Some(filters.clone());
            if let Some(session) = &live {
                self.set_exceptions(session, slot, "breakpoints").await?;
            }
        }
        Ok(DebugResult::Breakpoints(out))
    }

    /// `setBreakpoints` for one file; the adapter's verdict per line (kept for the listing).
    pub(super) async fn set_breakpoints(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        path: &Path,
        points: &[DebugBreakpoint],
    ) -> Result<Vec<DebugSourceBreakpoint>, ToolError> {
        let asked: Vec<Value> = points
            .iter()
            .map(|p| {
                let mut b = json!({"line": p.line});
                if let Some(c) = &p.condition {
                    b["condition"] = json!(c);
                }
                if let Some(h) = &p.hit_condition {
                    b["hitCondition"] = json!(h);
                }
                if let Some(m) = &p.log_message {
                    b["logMessage"] = json!(m);
                }
                b
            })
            .collect();
        let mut asked = asked;
        let temporary = super::run_to::with_temporary(
            &mut asked,
            lock(&slot.run_to).as_ref(),
            &session.id,
            path,
        );
        let body = self
            .request(
                session,
                "breakpoints",
                "setBreakpoints",
                Some(json!({
                    "source": {"path": path.display().to_string()},
                    "breakpoints": asked,
                })),
            )
            .await?;
        let answered = body["breakpoints"].as_array().cloned().unwrap_or_default();
        if let Some(i) = temporary
            && let Some(temp) = lock(&slot.run_to).as_mut()
        {
            let b = answered.get(i).unwrap_or(&Value::Null);
            temp.verdict = Some(temporary_verdict(temp.line, b));
        }
        let verdicts: Vec<DebugSourceBreakpoint> = points
            .iter()
            .enumerate()
            .map(|(i, p)| source_verdict(p, answered.get(i).unwrap_or(&Value::Null)))
            .collect();
        lock(&slot.verdicts).insert(path.display().to_string(), verdicts.clone());
        Ok(verdicts)
    }

    /// `setFunctionBreakpoints` with the conversation's names; the verdict per name.
    pub(super) async fn set_function_breakpoints(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
    ) -> Result<Vec<DebugFunctionBreakpoint>, ToolError> {
        let names = lock(&slot.functions).clone();
        let body = self
            .request(
                session,
                "breakpoints",
                "setFunctionBreakpoints",
                Some(json!({
                    "breakpoints": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
                })),
            )
            .await?;
        let answered = body["breakpoints"].as_array().cloned().unwrap_or_default();
        let verdicts: Vec<DebugFunctionBreakpoint> = names
            .iter()
            .enumerate()
            .map(|(i, name)| function_verdict(name, answered.get(i).unwrap_or(&Value::Null)))
            .collect();
        *lock(&slot.function_verdicts) = Some(verdicts.clone());
        Ok(verdicts)
    }

    /// `setExceptionBreakpoints`: the conversation's filters, or the adapter's defaults with
    /// its `uncaught` filter per `[debug] pause_on_uncaught`.
    pub(super) async fn set_exceptions(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        op: &str,
    ) -> Result<(), ToolError> {
        let caps = lock(&session.capabilities).clone();
        let filters: Vec<Value> = match lock(&slot.exceptions).clone() {
            Some(chosen) => chosen.into_iter().map(Value::String).collect(),
            None => super::exceptions::default_filters(&caps, self.config.pause_on_uncaught),
        };
        if caps["exceptionBreakpointFilters"].as_array().is_none() && filters.is_empty() {
            return Ok(());
        }
        self.request(
            session,
            op,
            "setExceptionBreakpoints",
            Some(json!({ "filters": filters })),
        )
        .await?;
        Ok(())
    }

    /// The handshake's configuration: every file's breakpoints, the function breakpoints and
    /// the exception filters, each checked against the adapter's capabilities first. Returns
    /// the verdicts per file and for the functions.
    pub(super) async fn configure(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        request: &str,
    ) -> Result<
        (
            BTreeMap<String, Vec<DebugSourceBreakpoint>>,
            Option<Vec<DebugFunctionBreakpoint>>,
        ),
        ToolError,
    > {
        let breakpoints = lock(&slot.breakpoints).clone();
        let functions = lock(&slot.functions).clone();
        let exceptions = lock(&slot.exceptions).clone();
        for points in breakpoints.values() {
            check_points(session, request, points)?;
        }
        if !functions.is_empty() {
            require_capability(
                session,
                request,
                "supportsFunctionBreakpoints",
                "function breakpoints (`functions`)",
            )?;
        }
        if let Some(filters) = &exceptions {
            check_exceptions(session, request, filters)?;
        }
        let mut verdicts = BTreeMap::new();
        for (file, points) in &breakpoints {
            let v = self.set_breakpoints(session, slot, file, points).await?;
            verdicts.insert(file.display().to_string(), v);
        }
        let function_verdicts = if functions.is_empty() {
            None
        } else {
            Some(self.set_function_breakpoints(session, slot).await?)
        };
        self.set_exceptions(session, slot, request).await?;
        Ok((verdicts, function_verdicts))
    }

    /// What is set, and what the adapter of the current (or last) session said of it.
    fn breakpoint_listing(&self, slot: &Slot) -> DebugBreakpointListResult {
        let current = lock(&slot.current).clone();
        let live = current.as_ref().filter(|s| s.is_live());
        let verdicts = lock(&slot.verdicts).clone();
        let files = lock(&slot.breakpoints)
            .iter()
            .map(|(path, points)| {
                let key = path.display().to_string();
                let list = match verdicts.get(&key) {
                    Some(given) => given.iter().map(|v| refreshed(v, live)).collect(),
                    None => points.iter().map(point).collect(),
                };
                (key, list)
            })
            .collect();
        let functions = match lock(&slot.function_verdicts).clone() {
            Some(given) => given.iter().map(|v| refreshed_function(v, live)).collect(),
            None => lock(&slot.functions)
                .iter()
                .map(|n| DebugFunctionBreakpoint {
                    name: n.clone(),
                    verified: None,
                    line: None,
                    file: None,
                    message: None,
                    id: None,
                })
                .collect(),
        };
        let available = current
            .as_ref()
            .map(|s| advertised_filters(&lock(&s.capabilities)));
        DebugBreakpointListResult {
            files,
            functions,
            exceptions: DebugExceptionFilters {
                set: lock(&slot.exceptions).clone(),
                available,
                note: "`set` null: the adapter's defaults (those with `default: true`); `available` is known once a session has started".into(),
            },
            applied: live.is_some(),
            session: current.as_ref().map(|s| s.id.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> DebugArgs {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn lines_and_points_merge_and_a_point_takes_its_line() {
        let points = requested_points(&args(json!({
            "op": "breakpoints", "file": "p.py", "lines": [9, 4],
            "points": [{"line": 4, "condition": "i > 1"}, {"line": 7, "log_message": " "}],
        })))
        .unwrap();
        let lines: Vec<u64> = points.iter().map(|p| p.line).collect();
        assert_eq!(lines, vec![4, 7, 9]);
        assert_eq!(points[0].condition.as_deref(), Some("i > 1"));
        // A blank option is no option (a logpoint that prints nothing is a breakpoint).
        assert_eq!(points[1].log_message, None);
        let zero = requested_points(&args(json!({"op": "breakpoints", "points": [{"line": 0}]})))
            .unwrap_err();
        assert_eq!(zero.kind, ErrorKind::InvalidArgs);
    }

    #[test]
    fn a_moved_breakpoint_says_where_and_a_function_says_its_line() {
        let asked = DebugBreakpoint {
            line: 8,
            condition: None,
            hit_condition: None,
            log_message: None,
        };
        let v = source_verdict(&asked, &json!({"id": 3, "verified": true, "line": 9}));
        assert_eq!(
            serde_json::to_value(v).unwrap(),
            json!({"line": 8, "verified": true, "actual_line": 9, "id": 3})
        );
        let v = source_verdict(&asked, &json!({"verified": false, "line": 8}));
        assert_eq!(
            serde_json::to_value(v).unwrap(),
            json!({"line": 8, "verified": false})
        );
        let set = point(&DebugBreakpoint {
            condition: Some("i > 1".into()),
            ..asked
        });
        assert_eq!(
            serde_json::to_value(set).unwrap(),
            json!({"line": 8, "condition": "i > 1"}),
            "nothing of a verdict before the adapter gave one"
        );
        let v = function_verdict(
            "f",
            &json!({"verified": true, "line": 4, "source": {"path": "/p/a.c"}}),
        );
        assert_eq!(
            serde_json::to_value(v).unwrap(),
            json!({"name": "f", "verified": true, "line": 4, "file": "/p/a.c"})
        );
        let v = temporary_verdict(9, &json!({"verified": true, "line": 10, "id": 5}));
        assert_eq!(
            serde_json::to_value(v).unwrap(),
            json!({"line": 9, "verified": true, "actual_line": 10, "id": 5})
        );
    }
}
