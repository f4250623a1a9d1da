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

/// The exception filters an adapter advertises: `{filter, label, default}` each.
fn advertised_filters(caps: &Value) -> Vec<Value> {
    caps["exceptionBreakpointFilters"]
        .as_array()
        .map(|filters| {
            filters
                .iter()
                .map(|f| {
                    json!({
                        "filter": f["filter"],
                        "label": f["label"],
                        "default": f["default"].as_bool().unwrap_or(false),
                    })
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
        .filter_map(|f| f["filter"].as_str())
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

/// One breakpoint's verdict from the adapter's answer (or a later `breakpoint` event).
fn verdict(mut v: Map<String, Value>, answered: &Value, asked_line: Option<u64>) -> Value {
    v.insert(
        "verified".into(),
        json!(answered["verified"].as_bool().unwrap_or(false)),
    );
    if let Some(line) = answered["line"].as_u64() {
        match asked_line {
            Some(asked) if asked == line => {}
            Some(_) => {
                v.insert("actual_line".into(), json!(line));
            }
            None => {
                v.insert("line".into(), json!(line));
            }
        }
    }
    if asked_line.is_none()
        && let Some(file) = answered["source"]["path"].as_str()
    {
        v.insert("file".into(), json!(file));
    }
    if let Some(m) = answered["message"].as_str() {
        v.insert("message".into(), json!(m));
    }
    if let Some(id) = answered["id"].as_i64() {
        v.insert("id".into(), json!(id));
    }
    Value::Object(v)
}

fn point_json(p: &DebugBreakpoint) -> Map<String, Value> {
    let mut v = Map::new();
    v.insert("line".into(), json!(p.line));
    for (key, value) in [
        ("condition", &p.condition),
        ("hit_condition", &p.hit_condition),
        ("log_message", &p.log_message),
    ] {
        if let Some(value) = value {
            v.insert(key.into(), json!(value));
        }
    }
    v
}

/// A verdict updated by the adapter's `breakpoint` events since it was given.
fn refreshed(v: &Value, session: Option<&Arc<Session>>) -> Value {
    let (Some(session), Some(id)) = (session, v["id"].as_i64()) else {
        return v.clone();
    };
    let Some(changed) = lock(&session.breakpoint_changes).get(&id).cloned() else {
        return v.clone();
    };
    let mut out = v.as_object().cloned().unwrap_or_default();
    if let Some(verified) = changed["verified"].as_bool() {
        out.insert("verified".into(), json!(verified));
    }
    if let Some(line) = changed["line"].as_u64() {
        if out.contains_key("name") {
            out.insert("line".into(), json!(line));
        } else if out["line"].as_u64() != Some(line) {
            out.insert("actual_line".into(), json!(line));
        } else {
            out.remove("actual_line");
        }
    }
    if let Some(m) = changed["message"].as_str() {
        out.insert("message".into(), json!(m));
    }
    Value::Object(out)
}

/// Key of the function breakpoints' verdicts in [`Slot::verdicts`].
const FUNCTIONS: &str = "functions";

impl Debuggers {
    pub(super) async fn breakpoints(
        &self,
        call: &DebugCall,
        slot: &Slot,
        args: &DebugArgs,
    ) -> Result<Value, ToolError> {
        if args.file.is_none() && (args.lines.is_some() || args.points.is_some()) {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug breakpoints: `lines` and `points` need the `file` they are in",
                "give `file`; without `file`, `functions` or `exceptions`, `breakpoints` lists what is set",
            ));
        }
        if args.file.is_none() && args.functions.is_none() && args.exceptions.is_none() {
            return Ok(self.breakpoint_listing(slot));
        }
        let live = lock(&slot.current)
            .clone()
            .filter(|s| s.is_live() && s.state().phase != Phase::Starting);
        let mut out = Map::new();
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
            out.insert("file".into(), json!(key));
            out.insert(
                "lines".into(),
                json!(points.iter().map(|p| p.line).collect::<Vec<_>>()),
            );
            if let Some(session) = &live {
                let verified = self.set_breakpoints(session, slot, &path, &points).await?;
                out.insert("breakpoints".into(), verified);
            }
        }
        if let Some(names) = functions {
            *lock(&slot.functions) = names.clone();
            lock(&slot.verdicts).remove(FUNCTIONS);
            out.insert("function_names".into(), json!(names));
            if let Some(session) = &live {
                let verified = self.set_function_breakpoints(session, slot).await?;
                out.insert("functions".into(), verified);
            }
        }
        if let Some(filters) = &args.exceptions {
            *lock(&slot.exceptions) = Some(filters.clone());
            out.insert("exceptions".into(), json!(filters));
            if let Some(session) = &live {
                self.set_exceptions(session, slot, "breakpoints").await?;
            }
        }
        out.insert("applied".into(), json!(live.is_some()));
        if live.is_none() {
            out.insert(
                "note".into(),
                json!("kept for the next launch (no session is running)"),
            );
        }
        Ok(Value::Object(out))
    }

    /// `setBreakpoints` for one file; the adapter's verdict per line (kept for the listing).
    pub(super) async fn set_breakpoints(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        path: &Path,
        points: &[DebugBreakpoint],
    ) -> Result<Value, ToolError> {
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
            let mut v = Map::new();
            v.insert("line".into(), json!(temp.line));
            let b = answered.get(i).cloned().unwrap_or(Value::Null);
            temp.verdict = Some(verdict(v, &b, Some(temp.line)));
        }
        let verdicts: Vec<Value> = points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let b = answered.get(i).cloned().unwrap_or(Value::Null);
                verdict(point_json(p), &b, Some(p.line))
            })
            .collect();
        lock(&slot.verdicts).insert(path.display().to_string(), verdicts.clone());
        Ok(json!(verdicts))
    }

    /// `setFunctionBreakpoints` with the conversation's names; the verdict per name.
    pub(super) async fn set_function_breakpoints(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
    ) -> Result<Value, ToolError> {
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
        let verdicts: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut v = Map::new();
                v.insert("name".into(), json!(name));
                verdict(v, answered.get(i).unwrap_or(&Value::Null), None)
            })
            .collect();
        lock(&slot.verdicts).insert(FUNCTIONS.into(), verdicts.clone());
        Ok(json!(verdicts))
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
    ) -> Result<(Map<String, Value>, Option<Value>), ToolError> {
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
        let mut verdicts = Map::new();
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
    fn breakpoint_listing(&self, slot: &Slot) -> Value {
        let current = lock(&slot.current).clone();
        let live = current.as_ref().filter(|s| s.is_live());
        let verdicts = lock(&slot.verdicts).clone();
        let files: Map<String, Value> = lock(&slot.breakpoints)
            .iter()
            .map(|(path, points)| {
                let key = path.display().to_string();
                let list: Vec<Value> = match verdicts.get(&key) {
                    Some(given) => given.iter().map(|v| refreshed(v, live)).collect(),
                    None => points
                        .iter()
                        .map(|p| Value::Object(point_json(p)))
                        .collect(),
                };
                (key, json!(list))
            })
            .collect();
        let functions: Vec<Value> = match verdicts.get(FUNCTIONS) {
            Some(given) => given.iter().map(|v| refreshed(v, live)).collect(),
            None => lock(&slot.functions)
                .iter()
                .map(|n| json!({"name": n}))
                .collect(),
        };
        let available = current
            .as_ref()
            .map(|s| advertised_filters(&lock(&s.capabilities)));
        json!({
            "files": files,
            "functions": functions,
            "exceptions": {
                "set": lock(&slot.exceptions).clone(),
                "available": available,
                "note": "`set` null: the adapter's defaults (those with `default: true`); `available` is known once a session has started",
            },
            "applied": live.is_some(),
            "session": current.as_ref().map(|s| s.id.clone()),
        })
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
        let asked = point_json(&DebugBreakpoint {
            line: 8,
            condition: None,
            hit_condition: None,
            log_message: None,
        });
        let v = verdict(
            asked,
            &json!({"id": 3, "verified": true, "line": 9}),
            Some(8),
        );
        assert_eq!(
            v,
            json!({"line": 8, "verified": true, "actual_line": 9, "id": 3})
        );
        let mut named = Map::new();
        named.insert("name".into(), json!("f"));
        let v = verdict(
            named,
            &json!({"verified": true, "line": 4, "source": {"path": "/p/a.c"}}),
            None,
        );
        assert_eq!(
            v,
            json!({"name": "f", "verified": true, "line": 4, "file": "/p/a.c"})
        );
    }
}
