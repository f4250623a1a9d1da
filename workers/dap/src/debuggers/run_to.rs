//! `debug run_to {file, line}`: a temporary breakpoint sent with the file's own breakpoints,
//! a `continue`, and the temporary one taken out again at the next stop (whichever stop
//! comes first) or forgotten when the session ends. The conversation's breakpoints are never
//! changed: the temporary line exists only in what is sent to the adapter.

use super::*;

/// A temporary breakpoint armed by `run_to`.
#[derive(Clone, Debug)]
pub(super) struct RunTo {
    /// The session it was sent to (a later session never sees it).
    pub(super) session: String,
    pub(super) path: PathBuf,
    pub(super) line: u64,
    /// The session's stop count when it was armed: a later stop disarms it.
    pub(super) before: u64,
    /// The adapter's verdict on it, once sent.
    pub(super) verdict: Option<DebugTemporaryBreakpoint>,
}

/// The breakpoints sent for `path`: the conversation's `asked`, with the temporary line of
/// `run_to` (a plain breakpoint: it replaces an option-carrying one on the same line until
/// the stop) when it is armed for this file. Returns where the temporary one is, by index.
pub(super) fn with_temporary(
    asked: &mut Vec<Value>,
    run_to: Option<&RunTo>,
    session: &str,
    path: &Path,
) -> Option<usize> {
    let temp = run_to.filter(|t| t.session == session && t.path == path)?;
    match asked
        .iter()
        .position(|b| b["line"].as_u64() == Some(temp.line))
    {
        Some(i) => {
            asked[i] = json!({"line": temp.line});
            Some(i)
        }
        None => {
            asked.push(json!({"line": temp.line}));
            Some(asked.len() - 1)
        }
    }
}

impl Debuggers {
    pub(super) async fn run_to(
        &self,
        call: &DebugCall,
        slot: &Slot,
        session: &Arc<Session>,
        args: &DebugArgs,
    ) -> Result<DebugRunToResult, ToolError> {
        let file = need("run_to", "file", &args.file)?;
        let line = need("run_to", "line", &args.line)?;
        if line == 0 {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug run_to: line 0 is not a line (lines are 1-based)",
                "give the 1-based `line` to run to",
            ));
        }
        self.require_stopped(session, "run_to")?;
        let path = absolute(&call.workdir, &file);
        if !path.is_file() {
            return Err(err(
                ErrorKind::NotFound,
                format!("debug run_to: no such file {}", path.display()),
                "paths are relative to the workdir",
            ));
        }
        let path = std::fs::canonicalize(&path).unwrap_or(path);
        let thread = self.thread(session, "run_to", args.thread_id).await?;
        let points = lock(&slot.breakpoints)
            .get(&path)
            .cloned()
            .unwrap_or_default();
        let before = session.state().stops;
        // A plain breakpoint of the user's own on that line does the job by itself.
        let own = points.iter().any(|p| {
            p.line == line
                && p.condition.is_none()
                && p.hit_condition.is_none()
                && p.log_message.is_none()
        });
        if !own {
            *lock(&slot.run_to) = Some(RunTo {
                session: session.id.clone(),
                path: path.clone(),
                line,
                before,
                verdict: None,
            });
            if let Err(e) = self.set_breakpoints(session, slot, &path, &points).await {
                lock(&slot.run_to).take();
                return Err(e);
            }
        }
        let verdict = lock(&slot.run_to)
            .as_ref()
            .and_then(|t| t.verdict.clone())
            .unwrap_or_else(|| DebugTemporaryBreakpoint {
                line: None,
                verified: true,
                actual_line: None,
                message: None,
                id: None,
                note: Some("a breakpoint of yours is on that line".into()),
            });
        if let Err(e) = self
            .request(
                session,
                "run_to",
                "continue",
                Some(json!({"threadId": thread})),
            )
            .await
        {
            self.disarm_run_to(slot).await;
            return Err(e);
        }
        session.update(|s| {
            if s.stops == before && s.phase == Phase::Stopped {
                s.phase = Phase::Running;
            }
        });
        let stop = self.settle(session, "run_to", before).await?;
        let removed = self.disarm_run_to(slot).await;
        let actual = verdict.actual_line.unwrap_or(line);
        let at = stop.stopped.as_ref().and_then(|s| s.frame.as_ref());
        let reached = at.is_some_and(|at| {
            at.line.and_then(|l| u64::try_from(l).ok()) == Some(actual)
                && at
                    .file
                    .as_deref()
                    .is_some_and(|f| std::fs::canonicalize(f).is_ok_and(|f| f == path))
        });
        let note = (!removed && !own && session.is_live()).then(|| {
            "the temporary breakpoint stays until the program stops (`pause`, a breakpoint) or the session ends".into()
        });
        Ok(DebugRunToResult {
            stop,
            run_to: DebugRunTo {
                file: path.display().to_string(),
                line,
                reached,
                temporary_breakpoint: verdict,
                removed: removed || own,
                note,
            },
        })
    }

    /// Takes out `run_to`'s temporary breakpoint once the program stopped after it was armed
    /// (the file's own breakpoints are sent again); forgets it once its session is over.
    /// Whether it is gone.
    pub(super) async fn disarm_run_to(&self, slot: &Slot) -> bool {
        let Some(temp) = lock(&slot.run_to).clone() else {
            return true;
        };
        let current = lock(&slot.current).clone();
        let session = current.filter(|s| s.id == temp.session && s.is_live());
        let Some(session) = session else {
            lock(&slot.run_to).take();
            return true;
        };
        let stopped_since = {
            let s = session.state();
            s.phase == Phase::Stopped && s.stops > temp.before
        };
        if !stopped_since {
            return false;
        }
        lock(&slot.run_to).take();
        let points = lock(&slot.breakpoints)
            .get(&temp.path)
            .cloned()
            .unwrap_or_default();
        match self
            .set_breakpoints(&session, slot, &temp.path, &points)
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(session = session.id, error = %e.message, "run_to's temporary breakpoint could not be taken out");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(line: u64) -> RunTo {
        RunTo {
            session: "c#1".into(),
            path: PathBuf::from("/p/a.py"),
            line,
            before: 0,
            verdict: None,
        }
    }

    #[test]
    fn the_temporary_line_is_added_or_replaces_the_same_line_and_only_for_its_file() {
        let mut asked = vec![json!({"line": 3}), json!({"line": 7, "condition": "i > 2"})];
        let t = temp(9);
        assert_eq!(
            with_temporary(&mut asked, Some(&t), "c#1", Path::new("/p/a.py")),
            Some(2)
        );
        assert_eq!(asked[2], json!({"line": 9}));
        let mut asked = vec![json!({"line": 7, "condition": "i > 2"})];
        let t = temp(7);
        assert_eq!(
            with_temporary(&mut asked, Some(&t), "c#1", Path::new("/p/a.py")),
            Some(0)
        );
        assert_eq!(asked, vec![json!({"line": 7})]);
        let mut asked = vec![json!({"line": 3})];
        assert_eq!(
            with_temporary(&mut asked, Some(&t), "c#1", Path::new("/p/b.py")),
            None
        );
        assert_eq!(
            with_temporary(&mut asked, Some(&t), "c#2", Path::new("/p/a.py")),
            None
        );
        assert_eq!(asked, vec![json!({"line": 3})]);
    }
}
