//! The load's two store-backed kinds: download jobs from the runner's loopback model hub
//! (`downloads`) and the data hub's documents (`data`). Neither has a process of its own to
//! kill: what meets them is the daemon's SIGKILL (a job must resume under its id and end with
//! every file byte-identical to the hub's; a note written must still read back, its handle
//! never handed out again) and the hub's own faults (a connection cut mid-file, a corrupted
//! transfer), which a job must ride out by resuming or refetching.

use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use super::Load;
use crate::fixture::{DOC_TITLE, DOC_WORDS};

/// Shards per model, and bytes per shard (the hub throttles each transfer to
/// [`HUB_RATE`], so a job takes about two seconds and a daemon kill finds some in flight).
const SHARDS: usize = 3;
const SHARD_BYTES: usize = 192 * 1024;
/// Body bytes per second per hub connection.
pub const HUB_RATE: u64 = 128 * 1024;
/// A job that has not ended this long after it started (or resumed) is stuck.
const JOB_DEADLINE: Duration = Duration::from_secs(120);
/// A note just written must be searchable within this long (the watcher, the conversion).
const SEARCHABLE_WITHIN: Duration = Duration::from_secs(20);
/// Notes a client keeps to read back after a daemon restart.
const KEPT_NOTES: usize = 3;

/// A download job this client started and has not seen end.
pub struct Job {
    id: String,
    repo: String,
    /// The shard names and their bytes' sha256, as the hub serves them.
    files: Vec<(String, String)>,
    /// Since when it should be running (its start, the last restart or resume).
    since: Instant,
    /// A hub fault was aimed at one of its files.
    faulted: bool,
    /// It was in flight when the daemon was killed.
    crossed_restart: bool,
}

/// A note this client wrote: its handle, title and the token its text holds.
pub struct Note {
    handle: String,
    title: String,
    token: String,
    written: Instant,
    /// Found by a search since it was written.
    found: bool,
}

impl Load {
    /// One step of the download kind: start a job, or poll (and now and then cancel and
    /// resume) the one in flight.
    pub(super) fn downloads(&mut self) {
        const K: &str = "downloads";
        let Some(job) = self.job.take() else {
            self.start_job();
            return;
        };
        let v = match self.call(K, "list_downloads", json!({"job_id": job.id})) {
            Some(Ok(v)) => v,
            Some(Err(e)) => {
                self.lost(
                    K,
                    format!(
                        "download job {} of {} is gone: list_downloads answered {e}",
                        job.id, job.repo
                    ),
                );
                if job.crossed_restart {
                    self.survived("download job resumed", false);
                }
                self.ctx.hub.remove_repo(&job.repo);
                return;
            }
            None => {
                self.job = Some(job);
                return;
            }
        };
        let j = &v["jobs"][0];
        match j["state"].as_str().unwrap_or("") {
            "done" => self.job_done(job, j),
            "failed" => {
                let error = j["error"].as_str().unwrap_or("").trim().to_string();
                if error.is_empty() {
                    self.stats.kind(K).unclear += 1;
                    self.stats.problems.push(format!(
                        "UNCLEAR: client {} download job {} failed without saying why: {j}",
                        self.ctx.index, job.id
                    ));
                } else if job.faulted {
                    self.hit(K);
                } else {
                    let e = self.stats.clear_errors.entry("job_failed".into());
                    *e.or_default() += 1;
                    self.stats
                        .error_samples
                        .entry("downloads job_failed".into())
                        .or_insert_with(|| format!("download job {}: {error}", job.id));
                }
                if job.crossed_restart {
                    self.survived("download job resumed", !error.is_empty());
                }
                self.ctx.hub.remove_repo(&job.repo);
            }
            "cancelled" => self.resume_job(job),
            _ if job.since.elapsed() > JOB_DEADLINE => {
                self.stats.kind(K).hung += 1;
                self.stats.problems.push(format!(
                    "HUNG: client {} download job {} of {} still {} {:.1?} after it started or resumed: {j}",
                    self.ctx.index,
                    job.id,
                    job.repo,
                    j["state"],
                    job.since.elapsed()
                ));
                self.ctx.hub.remove_repo(&job.repo);
            }
            _ if self.rng.below(10) == 0 => {
                match self.call(K, "cancel_download", json!({"job_id": job.id})) {
                    Some(Ok(c)) if c["state"] == "cancelled" => self.resume_job(job),
                    // Ended before the cancel reached it, or the answer did not come: poll on.
                    _ => self.job = Some(job),
                }
            }
            _ => self.job = Some(job),
        }
    }

    /// A fresh repo on the hub (its shards' bytes unique to it), maybe a fault aimed at one
    /// shard, and one `download_model` for the whole set.
    fn start_job(&mut self) {
        const K: &str = "downloads";
        self.models += 1;
        let repo = format!("chaos/c{}-m{}", self.ctx.index, self.models);
        let names: Vec<String> = (1..=SHARDS)
            .map(|k| format!("chaos-Q4_K_M-{k:05}-of-{SHARDS:05}.gguf"))
            .collect();
        let seed = (self.ctx.index as u64) << 32 | self.models;
        let files: Vec<(&str, Vec<u8>, bool)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let bytes = toolvisor_testhub::pseudo_random(seed * 8 + i as u64, SHARD_BYTES);
                (n.as_str(), bytes, true)
            })
            .collect();
        let hashes: Vec<(String, String)> = files
            .iter()
            .map(|(n, b, _)| (n.to_string(), toolvisor_testhub::sha256_hex(b)))
            .collect();
        self.ctx.hub.add_repo(&repo, files, false);
        let shard = &names[self.rng.below(SHARDS as u64) as usize];
        let faulted = match self.rng.below(10) {
            0 | 1 => {
                self.ctx
                    .hub
                    .cut_at(&repo, shard, self.rng.range(1, SHARD_BYTES as u64));
                self.stats.hub_faults.0 += 1;
                true
            }
            2 => {
                self.ctx.hub.corrupt_next(&repo, shard, 1);
                self.stats.hub_faults.1 += 1;
                true
            }
            _ => false,
        };
        let answer = self.call(K, "download_model", json!({"repo": repo}));
        let v = match answer {
            Some(Ok(v)) => v,
            _ => {
                self.ctx.hub.remove_repo(&repo);
                return;
            }
        };
        let listed: Vec<&str> = v["files"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["name"].as_str())
            .collect();
        if listed.len() != SHARDS || names.iter().any(|n| !listed.contains(&n.as_str())) {
            self.lost(
                K,
                format!(
                    "download_model of {repo} registered {listed:?}, not the whole set {names:?}"
                ),
            );
        }
        let Some(id) = v["job_id"].as_str().map(str::to_string) else {
            self.lost(
                K,
                format!("download_model of {repo} answered no job id: {v}"),
            );
            self.ctx.hub.remove_repo(&repo);
            return;
        };
        self.fresh_id(
            "download_model",
            "fresh download job id",
            &format!("job:{id}"),
        );
        self.job = Some(Job {
            id,
            repo,
            files: hashes,
            since: Instant::now(),
            faulted,
            crossed_restart: false,
        });
    }

    /// The job was cancelled: `download_model` of the same repo starts a new job that picks
    /// up the `.part` files.
    fn resume_job(&mut self, mut job: Job) {
        const K: &str = "downloads";
        match self.call(K, "download_model", json!({"repo": job.repo})) {
            // The files were all in before the cancel took: the set is complete as it is.
            Some(Ok(v)) if v["already_complete"] == true => self.job_done(job, &v),
            Some(Ok(v)) => match v["job_id"].as_str() {
                Some(id) => {
                    if v["already_complete"] != true {
                        self.fresh_id(
                            "download_model",
                            "fresh download job id",
                            &format!("job:{id}"),
                        );
                    }
                    job.id = id.to_string();
                    job.since = Instant::now();
                    self.job = Some(job);
                }
                None => {
                    self.lost(
                        K,
                        format!(
                            "download_model of {} (resume) answered no job id: {v}",
                            job.repo
                        ),
                    );
                    self.ctx.hub.remove_repo(&job.repo);
                }
            },
            Some(Err(_)) => self.ctx.hub.remove_repo(&job.repo),
            None => self.job = Some(job),
        }
    }

    /// A job that says `done` (or a set `download_model` says is already complete) must have
    /// every file in place, byte for byte the hub's. The files are removed once checked: a
    /// long run would otherwise fill the disk with them.
    fn job_done(&mut self, job: Job, j: &Json) {
        const K: &str = "downloads";
        let dir = std::path::PathBuf::from(j["path"].as_str().unwrap_or(""));
        let mut wrong = Vec::new();
        for (name, sha) in &job.files {
            match std::fs::read(dir.join(name)) {
                Ok(bytes) if toolvisor_testhub::sha256_hex(&bytes) == *sha => {}
                Ok(bytes) => wrong.push(format!("{name}: {} bytes, not the hub's", bytes.len())),
                Err(e) => wrong.push(format!("{name}: {e}")),
            }
        }
        if wrong.is_empty() {
            if job.crossed_restart {
                self.survived("download job resumed", true);
            }
        } else {
            if job.crossed_restart {
                self.survived("download job resumed", false);
            }
            self.lost(
                K,
                format!(
                    "download job {} of {} is done but {} in {}: {}",
                    job.id,
                    job.repo,
                    if wrong.len() == 1 {
                        "a file is wrong"
                    } else {
                        "files are wrong"
                    },
                    dir.display(),
                    wrong.join("; ")
                ),
            );
        }
        self.ctx.hub.remove_repo(&job.repo);
        for (name, _) in &job.files {
            let _ = std::fs::remove_file(dir.join(name));
        }
    }

    /// After a daemon restart: the job in flight must resume under its id by itself.
    pub(super) fn job_crossed_restart(&mut self) {
        if let Some(job) = self.job.as_mut() {
            job.crossed_restart = true;
            job.since = Instant::now();
        }
    }

    /// One step of the data kind: write a note, find it, read it, now and then delete one,
    /// or search the fixture's document.
    pub(super) fn data(&mut self) {
        const K: &str = "data";
        if let Some(i) = self.notes.iter().position(|n| !n.found) {
            self.find_note(i);
            return;
        }
        match self.rng.below(10) {
            0..4 => self.write_note(),
            4..6 if !self.notes.is_empty() => {
                let i = self.rng.below(self.notes.len() as u64) as usize;
                self.read_note(i, "");
            }
            6 if self.notes.len() > 1 => {
                let note = self.notes.remove(0);
                if let Some(Ok(_)) = self.call(K, "delete_data", json!({"handle": note.handle})) {
                    // Trashed: a read of it must now be not_found.
                    if let Some(Ok(v)) = self.call(K, "read_data", json!({"handle": note.handle})) {
                        self.lost(
                            K,
                            format!("note {} was deleted but still reads: {v}", note.handle),
                        );
                    }
                }
            }
            _ => {
                let Some(Ok(v)) = self.call(K, "search_data", json!({"query": DOC_WORDS})) else {
                    return;
                };
                let titles: Vec<&str> = v["hits"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|h| h["title"].as_str())
                    .collect();
                if !titles.contains(&DOC_TITLE) {
                    self.lost(
                        K,
                        format!("search_data {DOC_WORDS:?} did not find the fixture's document {DOC_TITLE:?}: {v}"),
                    );
                }
            }
        }
    }

    fn write_note(&mut self) {
        const K: &str = "data";
        let token = format!("nt{}x{}", self.ctx.index, self.rng.next_u64() & 0xffff_ffff);
        let title = format!("Note {token}");
        let args = json!({"note": {"title": title, "text": format!("The word {token} is here."), "collection": "notes"}});
        let Some(Ok(v)) = self.call(K, "write_data", args) else {
            return;
        };
        let Some(handle) = v["card"]["handle"].as_str().map(str::to_string) else {
            self.lost(K, format!("write_data of a note answered no handle: {v}"));
            return;
        };
        self.fresh_id(
            "write_data",
            "fresh document handle",
            &format!("doc:{handle}"),
        );
        self.notes.push(Note {
            handle,
            title,
            token,
            written: Instant::now(),
            found: false,
        });
        if self.notes.len() > KEPT_NOTES {
            self.notes.remove(0);
        }
    }

    /// A note not yet found by a search: searchable within [`SEARCHABLE_WITHIN`].
    fn find_note(&mut self, i: usize) {
        const K: &str = "data";
        let (token, handle, age) = {
            let n = &self.notes[i];
            (n.token.clone(), n.handle.clone(), n.written.elapsed())
        };
        let Some(Ok(v)) = self.call(K, "search_data", json!({"query": token})) else {
            return;
        };
        let hit = v["hits"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["handle"] == handle.as_str());
        if hit {
            self.notes[i].found = true;
        } else if age > SEARCHABLE_WITHIN {
            self.lost(
                K,
                format!(
                    "note {handle} written {age:.1?} ago is not found by searching {token}: {v}"
                ),
            );
            self.notes.remove(i);
        }
    }

    /// A note must read back with its title (`when` names a restart in the message).
    fn read_note(&mut self, i: usize, when: &str) -> bool {
        const K: &str = "data";
        let (handle, title) = (self.notes[i].handle.clone(), self.notes[i].title.clone());
        let mut answer = self.call(K, "read_data", json!({"handle": handle}));
        // Right after a restart the hub answers not_ready until its first pass is done.
        for _ in 0..60 {
            match &answer {
                Some(Err(e)) if e.kind.to_string() == "not_ready" => {
                    std::thread::sleep(Duration::from_millis(500));
                    answer = self.call(K, "read_data", json!({"handle": handle}));
                }
                _ => break,
            }
        }
        match answer {
            Some(Ok(v)) if v["card"]["title"] == title.as_str() => true,
            Some(Ok(v)) => {
                self.lost(
                    K,
                    format!("note {handle}{when} reads as {v}, not titled {title:?}"),
                );
                false
            }
            Some(Err(e)) => {
                self.lost(K, format!("note {handle}{when} does not read: {e}"));
                self.notes.remove(i);
                false
            }
            None => true,
        }
    }

    /// After a daemon restart: every note kept must still read back.
    pub(super) fn notes_after_restart(&mut self) {
        let mut i = 0;
        while i < self.notes.len() {
            let before = self.notes.len();
            let ok = self.read_note(i, " (after the daemon restart)");
            self.survived("data note", ok);
            if self.notes.len() == before {
                i += 1;
            }
        }
    }
}
