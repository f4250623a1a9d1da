//! The load's calls on files and processes: `bash` echoes, tracked processes read to their
//! end, stored results paged back, and multi-file `apply_patch` checked against the disk.

use super::*;

impl Load {
    pub(super) fn bash_echo(&mut self) {
        let token = self.token();
        let Some(Ok(v)) = self.call("bash", "bash", json!({"command": format!("echo {token}")}))
        else {
            return;
        };
        let clean = v["exit_code"] == 0 && v["signal"].is_null();
        if !clean {
            self.hit("bash");
        } else if v["stdout"].as_str() != Some(&format!("{token}\n")) {
            self.lost(
                "bash",
                format!(
                    "echo {token}: exit 0 but stdout is {}, expected {:?} (answer: {v})",
                    v["stdout"],
                    format!("{token}\n")
                ),
            );
        }
    }

    /// One of the tracked-process calls: start a sleeper or a `seq`, read, kill, list.
    pub(super) fn process_op(&mut self) {
        const K: &str = "process";
        match self.rng.below(48) {
            0..10 if self.sleepers.len() < MAX_SLEEPERS => {
                let a = self.call(
                    K,
                    "process",
                    json!({"op": "start", "command": "sleep 30", "label": "sleeper"}),
                );
                if let Some(Ok(v)) = a
                    && let Some(id) = self.started_id(&v)
                {
                    self.sleepers.push(id);
                }
            }
            0..20 => {
                let a = self.call(
                    K,
                    "process",
                    json!({"op": "start", "command": SEQ_COMMAND, "label": "seq"}),
                );
                if let Some(Ok(v)) = a
                    && let Some(id) = self.started_id(&v)
                {
                    self.seqs.push((id, Instant::now()));
                }
            }
            20..35 if !self.seqs.is_empty() => {
                let id = self
                    .rng
                    .pick(&self.seqs)
                    .map(|(id, _)| id.clone())
                    .unwrap_or_default();
                self.read_seq(&id);
            }
            20..35 if !self.sleepers.is_empty() => {
                let id = self.rng.pick(&self.sleepers).cloned().unwrap_or_default();
                let a = self.call(K, "process", json!({"op": "read", "id": id, "offset": 0}));
                match a {
                    Some(Ok(v)) if ended(v["state"].as_str().unwrap_or("")) => {
                        // A sleeper only ends early when a fault hit it: the read says how.
                        self.sleepers.retain(|s| *s != id);
                        if v["signal"].is_null() && v["exit_code"].is_null() {
                            self.stats.kind(K).unclear += 1;
                            self.stats.problems.push(format!(
                                "UNCLEAR: client {} the sleeper {id} ended without an exit code or signal: {v}",
                                self.ctx.index
                            ));
                        } else {
                            self.hit(K);
                        }
                    }
                    Some(Err(_)) => self.sleepers.retain(|s| *s != id),
                    _ => {}
                }
            }
            35..45 if !self.sleepers.is_empty() => {
                let id = self.rng.pick(&self.sleepers).cloned().unwrap_or_default();
                self.call(K, "process", json!({"op": "kill", "id": id}));
                self.sleepers.retain(|s| *s != id);
            }
            _ => {
                self.call(K, "process", json!({"op": "list"}));
            }
        }
    }

    /// The id of a process `start` answer, checked never to have been handed out before.
    pub(super) fn started_id(&mut self, v: &Json) -> Option<String> {
        let id = v["id"].as_str()?.to_string();
        self.fresh_id("process start", "fresh process id", &id);
        Some(id)
    }

    /// An id the daemon handed out (process, staged edit) must be new across incarnations.
    pub(super) fn fresh_id(&mut self, what: &str, item: &'static str, id: &str) {
        if let Some(before) = self.ctx.life.note_id(id, self.epoch) {
            self.stats.reused_ids += 1;
            self.stats.problems.push(format!(
                "REUSED ID: client {}: {what} in daemon incarnation {} answered id {id}, already handed out by incarnation {before}",
                self.ctx.index, self.epoch
            ));
        } else if self.epoch > 0 {
            self.survived(item, true);
        }
    }

    pub(super) fn read_seq(&mut self, id: &str) {
        const K: &str = "process";
        let a = self.call(K, "process", json!({"op": "read", "id": id, "offset": 0}));
        let v = match a {
            Some(Ok(v)) => v,
            Some(Err(_)) => {
                self.seqs.retain(|(s, _)| s != id);
                return;
            }
            None => return,
        };
        let state = v["state"].as_str().unwrap_or("");
        if !(ended(state) && v["eof"] == true) {
            let age = self
                .seqs
                .iter()
                .find(|(s, _)| s == id)
                .map(|(_, t)| t.elapsed())
                .filter(|age| *age > SEQ_DEADLINE);
            if let Some(age) = age {
                // Fifty echo lines take milliseconds: this end was never reported.
                self.seqs.retain(|(s, _)| s != id);
                self.stats.kind(K).hung += 1;
                let mut last = v.clone();
                if let Some(text) = last.get_mut("text") {
                    let complete = text.as_str() == Some(&seq_expected());
                    *text = format!("<line1..line50 complete: {complete}>").into();
                }
                self.stats.problems.push(format!(
                    "HUNG: client {} process read {id}: the seq process never reported its end: still {state} {age:.1?} after its start; last read: {last}",
                    self.ctx.index
                ));
            }
            return;
        }
        self.seqs.retain(|(s, _)| s != id);
        let clean = v["exit_code"] == 0 && v["signal"].is_null();
        if !clean {
            self.hit(K);
            return;
        }
        let text = v["text"].as_str().unwrap_or("");
        if text != seq_expected() || v["dropped"] != 0 {
            self.lost(
                K,
                format!("the seq process {id} exited 0 but its output is not line1..line50: {v}"),
            );
        }
    }

    /// Read a stored result whole, page by page; `None` when an answer did not come.
    pub(super) fn read_stored(&mut self, r: &str) -> Option<Result<String, ToolError>> {
        let mut text = String::new();
        let mut offset = 0u64;
        for _ in 0..64 {
            let v = match self.call(
                "result_read",
                "tool_result_read",
                json!({"ref": r, "offset": offset, "limit": 48000}),
            )? {
                Ok(v) => v,
                Err(e) => return Some(Err(e)),
            };
            text.push_str(v["text"].as_str().unwrap_or(""));
            if v["eof"] == true {
                return Some(Ok(text));
            }
            let next = v["next_offset"].as_u64().unwrap_or(offset);
            if next <= offset {
                break;
            }
            offset = next;
        }
        Some(Ok(text))
    }

    /// A large `bash` output: projected with a ref, read back whole, compared.
    pub(super) fn big_result(&mut self) {
        let Some(Ok(v)) = self.call(
            "bash",
            "bash",
            json!({"command": format!("seq 1 {BIG_LINES}")}),
        ) else {
            return;
        };
        if !(v["exit_code"] == 0 && v["signal"].is_null()) {
            self.hit("bash");
            return;
        }
        let Some(r) = v["projected"]["stdout"]["ref"].as_str().map(str::to_string) else {
            self.lost(
                "result_read",
                format!(
                    "seq 1 {BIG_LINES}: a {} character stdout came back without a stored ref: {}",
                    big_expected().len(),
                    v.to_string().chars().take(300).collect::<String>()
                ),
            );
            return;
        };
        let expected = big_expected();
        match self.read_stored(&r) {
            Some(Ok(text)) if text == expected => {
                self.kept_refs.push((r, expected));
                if self.kept_refs.len() > KEPT_REFS {
                    self.kept_refs.remove(0);
                }
            }
            Some(Ok(text)) => self.lost(
                "result_read",
                format!(
                    "stored result {r} paged back is not the output: {} chars, expected {}",
                    text.len(),
                    expected.len()
                ),
            ),
            // A clear error is counted; the ref is not kept.
            Some(Err(_)) | None => {}
        }
    }

    pub(super) fn patch_dir(&self) -> String {
        format!("patch/c{}", self.ctx.index)
    }

    /// The generation each patch file holds (`None` for a file that is not a generation).
    pub(super) fn patch_gens(&self) -> Vec<Option<u64>> {
        (0..fixture::PATCH_FILES)
            .map(|f| {
                let p = self
                    .ctx
                    .workdir
                    .join(self.patch_dir())
                    .join(format!("f{f}.txt"));
                let text = std::fs::read_to_string(p).ok()?;
                let g = text
                    .lines()
                    .nth(1)?
                    .strip_prefix("generation ")?
                    .parse()
                    .ok()?;
                (fixture::patch_text(f, g) == text).then_some(g)
            })
            .collect()
    }

    /// Every file of the patch directory must hold one generation: a multi-file patch is
    /// applied whole or not at all. `settled`: no call can still be writing there.
    pub(super) fn check_patch_dir(&mut self, when: &str, settled: bool) {
        let deadline = Instant::now() + Duration::from_secs(if settled { 0 } else { 10 });
        loop {
            let gens = self.patch_gens();
            let first = gens.first().copied().flatten();
            if first.is_some() && gens.iter().all(|g| *g == first) {
                self.patch_gen = first;
                if settled {
                    self.survived("multi-file patch whole", true);
                }
                return;
            }
            if Instant::now() >= deadline {
                if settled {
                    self.survived("multi-file patch whole", false);
                }
                self.lost(
                    "apply_patch",
                    format!(
                        "{when}: the {} files of {} hold different generations {gens:?}: a multi-file patch was half-applied",
                        fixture::PATCH_FILES,
                        self.patch_dir()
                    ),
                );
                // Start again from a known state.
                for f in 0..fixture::PATCH_FILES {
                    let _ = std::fs::write(
                        self.ctx
                            .workdir
                            .join(self.patch_dir())
                            .join(format!("f{f}.txt")),
                        fixture::patch_text(f, 0),
                    );
                }
                self.patch_gen = Some(0);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One patch over every file of the client's patch directory, generation g to g + 1.
    pub(super) fn apply_patch(&mut self) {
        if self.patch_gen.is_none() {
            self.check_patch_dir("after a patch call that got no answer", false);
        }
        let g = self.patch_gen.unwrap_or(0);
        let dir = self.patch_dir();
        let mut patch = String::new();
        for f in 0..fixture::PATCH_FILES {
            patch.push_str(&format!(
                "--- {dir}/f{f}.txt\n+++ {dir}/f{f}.txt\n@@ -1,3 +1,3 @@\n file {f}\n-generation {g}\n+generation {}\n end\n",
                g + 1
            ));
        }
        let answer = self.call("apply_patch", "apply_patch", json!({"patch": patch}));
        let want = match answer {
            Some(Ok(_)) => Some(g + 1),
            Some(Err(_)) => Some(g),
            None => {
                self.patch_gen = None;
                return;
            }
        };
        let gens = self.patch_gens();
        if gens.iter().all(|x| *x == want) {
            self.patch_gen = want;
        } else {
            let ok = matches!(answer, Some(Ok(_)));
            self.lost(
                "apply_patch",
                format!(
                    "apply_patch of {dir} generation {g} -> {} answered {}, but the files hold {gens:?}",
                    g + 1,
                    if ok { "ok" } else { "an error" }
                ),
            );
            self.check_patch_dir("after a wrong patch answer", false);
        }
    }
}
