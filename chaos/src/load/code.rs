//! The load's calls on code: `ast_grep`, `ast_edit` + `resolve`, language servers, the
//! Python and JavaScript kernels with a `tool()` bridge call, debugpy sessions, vibe workers.

use super::*;

impl Load {
    pub(super) fn ast_grep(&mut self) {
        let Some(&(dir, pattern, count)) = self.rng.pick(&fixture::GREP_CASES) else {
            return;
        };
        let language = match dir {
            "py" => "python",
            "ts" => "typescript",
            _ => "rust",
        };
        let a = self.call(
            "ast_grep",
            "ast_grep",
            json!({"pattern": pattern, "path": dir, "language": language}),
        );
        if let Some(Ok(v)) = a
            && v["total"].as_u64() != Some(count)
        {
            self.lost(
                "ast_grep",
                format!(
                    "ast_grep {pattern:?} in {dir} found {} matches, the fixture has {count}: {}",
                    v["total"], v["summary"]
                ),
            );
        }
    }

    /// Stage a rewrite of a fresh two-file directory, then accept or discard it and check
    /// the files; or leave one staged (parked) to resolve after a daemon restart.
    pub(super) fn ast_edit(&mut self) {
        const K: &str = "ast_edit";
        let dir = format!("edits/c{}/n{}", self.ctx.index, self.count);
        let files = vec!["a.py".to_string(), "b.py".to_string()];
        for f in &files {
            let p = self.ctx.workdir.join(&dir).join(f);
            if let Some(parent) = p.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            if std::fs::write(&p, edit_text(false)).is_err() {
                return;
            }
        }
        let a = self.call(
            K,
            "ast_edit",
            json!({"pattern": "old_fn($A)", "rewrite": "new_fn($A)", "path": dir, "language": "python"}),
        );
        let Some(Ok(v)) = a else { return };
        let Some(id) = v["edit_id"].as_str().map(str::to_string) else {
            self.lost(
                K,
                format!("ast_edit in {dir} staged nothing: {}", v["summary"]),
            );
            return;
        };
        self.fresh_id("ast_edit", "fresh edit id", &id);
        if v["replacements"] != 4 {
            self.lost(
                K,
                format!(
                    "ast_edit in {dir} staged {} replacements, the files have 4",
                    v["replacements"]
                ),
            );
        }
        if self.parked.is_none() {
            self.parked = Some((id, dir, files));
            return;
        }
        let accept = self.rng.below(10) < 7;
        let action = if accept { "accept" } else { "discard" };
        let a = self.call(K, "resolve", json!({"edit_id": id, "action": action}));
        let want_new = match a {
            Some(Ok(_)) => accept,
            Some(Err(_)) => false,
            // No answer: an accept runs to its end anyway; either state is whole.
            None => return,
        };
        for f in &files {
            let text =
                std::fs::read_to_string(self.ctx.workdir.join(&dir).join(f)).unwrap_or_default();
            if text != edit_text(want_new) {
                self.lost(
                    K,
                    format!(
                        "resolve {action} of {id} answered, but {dir}/{f} holds {text:?}, expected {:?}",
                        edit_text(want_new)
                    ),
                );
                break;
            }
        }
    }

    pub(super) fn lsp_pyright(&mut self) {
        const K: &str = "lsp_pyright";
        let (args, want) = match self.rng.below(4) {
            0 => (
                json!({"op": "definition", "file": "py/app/main.py", "line": 2, "symbol": "make"}),
                Some("app/models.py:8"),
            ),
            1 => (
                json!({"op": "hover", "file": "py/app/main.py", "line": 3, "symbol": "Greeter"}),
                None,
            ),
            2 => (
                json!({"op": "references", "file": "py/app/models.py", "line": 4, "symbol": "greet"}),
                Some("app/main.py:4"),
            ),
            _ => (
                json!({"op": "diagnostics", "file": "py/app/broken.py"}),
                Some("broken.py:2"),
            ),
        };
        self.lsp(K, args, want);
    }

    pub(super) fn lsp_clangd(&mut self) {
        const K: &str = "lsp_clangd";
        let (args, want) = if self.rng.below(2) == 0 {
            (
                json!({"op": "definition", "file": "c/main.c", "line": 6, "symbol": "twice"}),
                Some("c/main.c:3"),
            )
        } else {
            (
                json!({"op": "hover", "file": "c/main.c", "line": 7, "symbol": "twice"}),
                None,
            )
        };
        self.lsp(K, args, want);
    }

    pub(super) fn lsp(&mut self, kind: &'static str, args: Json, want: Option<&str>) {
        let Some(Ok(v)) = self.call(kind, "lsp", args.clone()) else {
            return;
        };
        self.note_pid(kind, &v["server"]["pid"]);
        let text = v["text"].as_str().unwrap_or("");
        let wrong = match want {
            Some(w) => !text.contains(w),
            None => text.trim().is_empty(),
        };
        if wrong {
            self.lost(
                kind,
                format!(
                    "lsp {args} answered without {want:?}: {}",
                    v.to_string().chars().take(400).collect::<String>()
                ),
            );
        }
    }

    /// A cell that calls `bash` through the `tool()` bridge and prints what it echoed.
    pub(super) fn eval(&mut self, kind: &'static str) {
        let token = self.token();
        let (language, code) = if kind == "eval_python" {
            (
                "python",
                format!(
                    "r = tool(\"bash\", {{\"command\": \"echo {token}\"}})\nprint(\"got\", r[\"stdout\"].strip())\nprint(\"bash ended\", r[\"exit_code\"], r[\"signal\"])\n"
                ),
            )
        } else {
            (
                "javascript",
                format!(
                    "const r = await tool(\"bash\", {{command: \"echo {token}\"}});\nconsole.log(\"got\", r.stdout.trim());\nconsole.log(\"bash ended\", r.exit_code, r.signal);\n"
                ),
            )
        };
        let Some(Ok(v)) = self.call(
            kind,
            "eval",
            json!({"code": code, "description": EVAL_DESCRIPTION, "language": language, "timeout_s": 60}),
        ) else {
            return;
        };
        self.note_pid(kind, &v["kernel"]["pid"]);
        if v["status"] != "ok" {
            // The bridged bash was hit by a fault (the cell raised its ToolError).
            self.hit(kind);
            return;
        }
        let text = v["text"].as_str().unwrap_or("");
        match bridged_echo(text, &token) {
            Bridged::Echoed => {}
            // The runner's own fault killed the bridged bash: its answer says so.
            Bridged::Faulted => self.hit(kind),
            Bridged::Lost => self.lost(
                kind,
                format!("the cell ended ok but did not print `got {token}`: {text:?}"),
            ),
        }
    }

    /// One step of a debugpy loop: breakpoints, launch, step / continue / stack / evaluate,
    /// now and then terminate.
    pub(super) fn debug(&mut self) {
        const K: &str = "debug_debugpy";
        if !self.debug_breakpoints {
            let a = self.call(
                K,
                "debug",
                json!({"op": "breakpoints", "file": "dbg/prog.py", "lines": [fixture::DEBUG_LINE]}),
            );
            self.debug_breakpoints = matches!(a, Some(Ok(_)));
            return;
        }
        if !self.debug_live {
            match self.call(
                K,
                "debug",
                json!({"op": "launch", "program": "dbg/prog.py"}),
            ) {
                Some(Ok(v)) => {
                    self.debug_live = true;
                    self.note_pid(K, &v["session"]["adapter_pid"]);
                    self.check_stop(&v, "launch");
                }
                Some(Err(e)) if e.kind.to_string() == "busy" => {
                    self.call(K, "debug", json!({"op": "terminate"}));
                }
                _ => {}
            }
            return;
        }
        let op = match self.rng.below(10) {
            0..3 => "continue",
            3..5 => "step_over",
            5..7 => "stack",
            7..9 => "evaluate",
            _ => "terminate",
        };
        let args = if op == "evaluate" {
            json!({"op": op, "expression": "total"})
        } else {
            json!({"op": op})
        };
        match self.call(K, "debug", args) {
            Some(Ok(v)) => match op {
                "continue" => self.check_stop(&v, "continue"),
                "terminate" => self.debug_live = false,
                _ => {}
            },
            Some(Err(e)) => {
                let k = e.kind.to_string();
                if matches!(k.as_str(), "not_found" | "resource_failed" | "expired") {
                    self.debug_live = false;
                }
            }
            None => {}
        }
    }

    /// A stop at a breakpoint must be at the breakpoint's line. A stop without a frame (the
    /// daemon could not read the stack: the adapter was stopped or killed meanwhile) shows a
    /// fault, not lost data.
    pub(super) fn check_stop(&mut self, v: &Json, op: &str) {
        let line = &v["stopped"]["frame"]["line"];
        if v["stopped"]["reason"] == "breakpoint" && line.is_null() {
            self.hit("debug_debugpy");
        } else if v["stopped"]["reason"] == "breakpoint"
            && line.as_u64() != Some(fixture::DEBUG_LINE)
        {
            self.lost(
                "debug_debugpy",
                format!(
                    "debug {op} stopped at a breakpoint on line {}, the only breakpoint is line {}: {}",
                    v["stopped"]["frame"]["line"],
                    fixture::DEBUG_LINE,
                    v["text"]
                ),
            );
        }
        if v["state"] == "exited" || v["state"] == "terminated" {
            self.debug_live = false;
        }
    }

    /// Spawn a worker, or wait for one and check its result.
    pub(super) fn vibe(&mut self) {
        const K: &str = "vibe";
        if self.workers.len() < 2 {
            let brief = self.token();
            if let Some(Ok(v)) =
                self.call(K, "vibe_spawn", json!({"brief": brief, "label": "chaos"}))
                && let Some(id) = v["worker_id"].as_str()
            {
                self.workers.push((id.to_string(), brief));
            }
            return;
        }
        let (id, brief) = self.workers[0].clone();
        let a = self.call(
            K,
            "vibe_wait",
            json!({"worker_id": id, "timeout_seconds": 20}),
        );
        match a {
            Some(Ok(v)) => match v["state"].as_str().unwrap_or("") {
                "done" => {
                    self.workers.remove(0);
                    let want = format!("vibe {brief}\n");
                    if v["result"].as_str() != Some(&want) {
                        self.lost(
                            K,
                            format!(
                                "worker {id} is done but its result is {}, expected {want:?}",
                                v["result"]
                            ),
                        );
                    }
                }
                "failed" | "killed" => {
                    self.workers.remove(0);
                    if v["error"].as_str().is_none_or(|e| e.trim().is_empty()) {
                        self.stats.kind(K).unclear += 1;
                        self.stats.problems.push(format!(
                            "UNCLEAR: worker {id} ended {} without saying why: {v}",
                            v["state"]
                        ));
                    } else {
                        self.hit(K);
                    }
                }
                _ => {}
            },
            Some(Err(_)) => {
                self.workers.remove(0);
            }
            None => {}
        }
    }
}
