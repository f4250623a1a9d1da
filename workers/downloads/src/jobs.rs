//! Download jobs: `Downloads` (the manager behind the tools: start, list, cancel, the store's
//! models, search) and `JobActor` (one per job, under the `downloads` kind supervisor; it owns
//! the task that moves the job's files and aborts it when it goes). A job's record is on disk
//! under `<state_dir>/downloads/jobs/` from the moment it is registered, so a daemon killed
//! mid-download resumes every unfinished job at its next start; verified files are never
//! fetched again and `.part` files resume where they stopped.
//!
//! One job per whole file set: `download_model` chooses every file of the variant (all shards,
//! config and tokenizer files) from the listing (`crate::choose`), registers them as one job,
//! writes its record (`<state_dir>/downloads/jobs/<id>.json`, synced, through
//! `kit::private::write_private_file`) and only then answers; no job lists a subset of a split
//! model. A `JobActor`'s policy is temporary: a failed job is not restarted, retries are per file
//! inside it. Names from the endpoint are checked (`choose::safe_file_name`) before any path is
//! made from them, and the store is a private directory of ours.
//!
//! Split by concern: starting a job is `jobs/start.rs`, running it (its actor started, its
//! files moved) `jobs/run.rs`, the files it verified `jobs/verified.rs`, the store's models and
//! the hub's search `jobs/catalog.rs`; the jobs, their records, listing and cancelling stay here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use toolvisor_kit::ids::IdCounter;
use toolvisor_kit::private::{Durability, write_private_file};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::results::{
    CancelDownloadResult, DownloadFile, DownloadJob, DownloadState, ListDownloadsResult,
};
use toolvisor_protocol::tree::NodeState;

use crate::choose::{self, Chosen};
use crate::error::DownloadError;
use crate::hub::Hub;
use crate::progress::{FileProgress, FileState};
use crate::rate::{RateWindow, human, id_order};
use crate::store::Store;

mod catalog;
mod run;
mod start;
mod verified;

/// What the manager is configured with (`[models]`).
#[derive(Clone, Debug)]
pub struct DownloadsConfig {
    /// Base URL of the Hugging Face-compatible endpoint.
    pub endpoint: String,
    /// Bearer token (a secret: masked, never logged).
    pub token: Option<String>,
    /// The model store's root.
    pub store: PathBuf,
    /// File transfers at once, daemon-wide.
    pub parallel_transfers: usize,
    /// How long connecting to the endpoint may take before `network_unavailable`.
    pub connect_timeout: Duration,
    /// Tries per file after the first, with backoff, on transient errors.
    pub retries: u32,
    /// A body that sends nothing this long is a transient error (retried by `Range`).
    pub stall_timeout: Duration,
    /// A body slower than this over `stall_timeout` is cut like a stall (0: never).
    pub min_rate_bytes_per_s: u64,
    /// Large files over several connections at once.
    pub ranged: crate::ranged::RangedConfig,
    /// Where the memory facts for the fit label come from.
    pub meminfo: PathBuf,
    /// The accelerators for the fit label.
    pub accelerators: Arc<crate::accel::Probe>,
    /// Finished jobs stay listed this long.
    pub keep_finished: Duration,
    /// Testing only (`[testing] store_free_bytes`): the free bytes under the store, instead
    /// of what `statvfs` says.
    pub free_bytes: Option<u64>,
}

/// A job's state, as `list_downloads` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Downloading,
    Verifying,
    Done,
    Failed,
    Cancelled,
}

impl JobState {
    fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Downloading => "downloading",
            JobState::Verifying => "verifying",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// The state as results show it.
    fn shown(self) -> DownloadState {
        match self {
            JobState::Queued => DownloadState::Queued,
            JobState::Downloading => DownloadState::Downloading,
            JobState::Verifying => DownloadState::Verifying,
            JobState::Done => DownloadState::Done,
            JobState::Failed => DownloadState::Failed,
            JobState::Cancelled => DownloadState::Cancelled,
        }
    }

    fn unfinished(self) -> bool {
        matches!(
            self,
            JobState::Queued | JobState::Downloading | JobState::Verifying
        )
    }
}

/// The persisted record of a job.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct JobRecord {
    id: String,
    repo: String,
    revision: String,
    variant: String,
    files: Vec<Chosen>,
    state: JobState,
    error: Option<String>,
    created_unix_s: u64,
    finished_unix_s: Option<u64>,
    /// The commit the listing was at, when the endpoint said.
    #[serde(default)]
    commit: Option<String>,
    /// Whether its files go to the commit's snapshot (`Store::snapshot_dir`); a record of an
    /// older build has none and keeps its revision's directory (`Store::legacy_dir`).
    #[serde(default)]
    snapshot: bool,
}

/// One job: its record and its live progress.
struct Job {
    record: Mutex<JobRecord>,
    files: Vec<Arc<FileProgress>>,
    fetched: Arc<AtomicU64>,
    /// Samples of `fetched` for the rate over the last seconds of this run.
    rate: Mutex<RateWindow>,
    dir: PathBuf,
    status: Arc<NodeStatus>,
    /// Transfer tasks of this job not yet ended (aborted ones count until they are gone), so
    /// `cancel` answers only when nothing writes the job's files any more.
    transfers: Arc<AtomicUsize>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Job {
    /// Bytes still to be written by this job (its files not yet in place).
    fn remaining(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| *lock(&f.state) != FileState::Done)
            .map(|f| f.file.size.saturating_sub(f.done.load(Ordering::Relaxed)))
            .sum()
    }

    fn totals(&self) -> (u64, u64) {
        let total = self.files.iter().map(|f| f.file.size).sum();
        let done = self
            .files
            .iter()
            .map(|f| f.done.load(Ordering::Relaxed))
            .sum();
        (done, total)
    }

    /// Bytes per second over the last seconds of this run (none until that means something),
    /// and the seconds left at that rate.
    fn rate_eta(&self) -> (Option<u64>, Option<u64>) {
        let (done, total) = self.totals();
        let fetched = self.fetched.load(Ordering::Relaxed);
        let Some(rate) = lock(&self.rate).rate(Instant::now(), fetched) else {
            return (None, None);
        };
        let eta = (rate >= 1.0).then(|| ((total - done.min(total)) as f64 / rate).ceil() as u64);
        (Some(rate as u64), eta)
    }

    fn state(&self) -> JobState {
        lock(&self.record).state
    }

    /// The state to show: a running job whose unfinished files all wait for a transfer slot
    /// is `queued`; one whose files are all being verified (or done) is `verifying`.
    fn shown_state(&self, recorded: JobState) -> JobState {
        if recorded != JobState::Downloading {
            return recorded;
        }
        let states: Vec<FileState> = self.files.iter().map(|f| *lock(&f.state)).collect();
        let open: Vec<&FileState> = states.iter().filter(|s| **s != FileState::Done).collect();
        if !open.is_empty() && open.iter().all(|s| **s == FileState::Queued) {
            JobState::Queued
        } else if !open.is_empty() && open.iter().all(|s| **s == FileState::Verifying) {
            JobState::Verifying
        } else {
            recorded
        }
    }

    fn view(&self) -> DownloadJob {
        let mut rec = lock(&self.record).clone();
        rec.state = self.shown_state(rec.state);
        let (done, total) = self.totals();
        let (rate, eta) = if rec.state.unfinished() {
            self.rate_eta()
        } else {
            (None, None)
        };
        let files = self
            .files
            .iter()
            .map(|f| {
                let state = match rec.state {
                    JobState::Cancelled | JobState::Failed
                        if *lock(&f.state) != FileState::Done =>
                    {
                        if lock(&f.error).is_some() {
                            DownloadState::Failed
                        } else {
                            rec.state.shown()
                        }
                    }
                    _ => lock(&f.state).shown(),
                };
                DownloadFile {
                    name: f.file.name.clone(),
                    size: f.file.size,
                    bytes_done: f.done.load(Ordering::Relaxed),
                    sha256: f.file.sha256.clone(),
                    state,
                    error: lock(&f.error).clone(),
                }
            })
            .collect();
        DownloadJob {
            job_id: rec.id,
            repo: rec.repo,
            revision: rec.revision,
            variant: rec.variant,
            state: rec.state.shown(),
            error: rec.error,
            bytes_done: done,
            bytes_total: total,
            percent: if total == 0 {
                100.0
            } else {
                (done as f64 * 1000.0 / total as f64).floor() / 10.0
            },
            rate_bytes_per_s: rate,
            eta_s: eta,
            path: self.dir.display().to_string(),
            files,
        }
    }

    /// The tree node's one-line detail.
    fn detail(&self) -> String {
        let rec = lock(&self.record);
        let (done, total) = self.totals();
        let pct = (done * 100).checked_div(total).unwrap_or(100);
        let mut s = format!(
            "{}@{} [{}] {} {pct}% of {}",
            rec.repo,
            rec.revision,
            rec.variant,
            rec.state.as_str(),
            human(total)
        );
        let moving = rec.state == JobState::Downloading;
        drop(rec);
        // A rate and a time left only while bytes arrive: not on a failed or finished job.
        if moving && let (Some(rate), Some(eta)) = self.rate_eta() {
            s.push_str(&format!(", {}/s, {eta} s left", human(rate)));
        }
        s
    }
}

/// The manager behind the download tools.
pub struct Downloads {
    hub: Hub,
    store: Store,
    config: DownloadsConfig,
    supervisor: ActorRef<SupervisorMsg>,
    notifier: TreeNotifier,
    ids: IdCounter,
    jobs_dir: PathBuf,
    jobs: Mutex<BTreeMap<String, Arc<Job>>>,
    permits: Arc<Semaphore>,
    /// Held while a manifest is read, changed and written back.
    manifests: Mutex<()>,
    /// Held from the free-space check to the new job's registration, so two calls at once
    /// cannot both count on the same free bytes.
    admit: Mutex<()>,
}

impl std::fmt::Debug for Downloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downloads")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

impl Downloads {
    /// Open the store and the job records under `state_dir`, and resume every unfinished job.
    pub async fn open(
        config: DownloadsConfig,
        state_dir: &Path,
        supervisor: ActorRef<SupervisorMsg>,
        notifier: TreeNotifier,
        ids: IdCounter,
    ) -> Result<Arc<Downloads>, DownloadError> {
        let hub = Hub::new(
            &config.endpoint,
            config.token.clone(),
            config.connect_timeout,
            config.stall_timeout,
        )?
        .with_min_rate(config.min_rate_bytes_per_s);
        let store = Store::open(&config.store)?;
        let jobs_dir = state_dir.join("downloads").join("jobs");
        toolvisor_kit::private::ensure_private_dir(&jobs_dir, "the download jobs directory")
            .map_err(|e| DownloadError::io("cannot use", &jobs_dir, e))?;
        toolvisor_kit::private::remove_stale_temps(&jobs_dir);
        let me = Arc::new(Downloads {
            hub,
            store,
            permits: Arc::new(Semaphore::new(config.parallel_transfers.max(1))),
            config,
            supervisor,
            notifier,
            ids,
            jobs_dir,
            jobs: Mutex::new(BTreeMap::new()),
            manifests: Mutex::new(()),
            admit: Mutex::new(()),
        });
        let mut resume = Vec::new();
        let mut records: Vec<JobRecord> = std::fs::read_dir(&me.jobs_dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                    .filter_map(|e| std::fs::read(e.path()).ok())
                    .filter_map(|b| serde_json::from_slice::<JobRecord>(&b).ok())
                    .collect()
            })
            .unwrap_or_default();
        records.sort_by_key(|r| r.created_unix_s);
        for rec in records {
            // Records from outside are checked like arguments: nothing may leave the store.
            if choose::check_repo(&rec.repo).is_err()
                || choose::check_revision(&rec.revision).is_err()
                || rec.files.iter().any(|f| !choose::safe_file_name(&f.name))
            {
                tracing::warn!(job = rec.id, "ignoring a malformed download job record");
                continue;
            }
            if !rec.state.unfinished()
                && rec
                    .finished_unix_s
                    .is_some_and(|t| now_s().saturating_sub(t) > me.config.keep_finished.as_secs())
            {
                let _ = std::fs::remove_file(me.jobs_dir.join(format!("{}.json", rec.id)));
                continue;
            }
            let unfinished = rec.state.unfinished();
            let job = me.make_job(rec);
            if unfinished {
                resume.push(job);
            }
        }
        for job in resume {
            let id = lock(&job.record).id.clone();
            tracing::info!(job = id, "resuming a download job after a restart");
            me.spawn(job).await;
        }
        Ok(me)
    }

    fn make_job(&self, rec: JobRecord) -> Arc<Job> {
        let dir = match rec.snapshot {
            true => self
                .store
                .snapshot_dir(&rec.repo, &rec.revision, rec.commit.as_deref()),
            false => self.store.legacy_dir(&rec.repo, &rec.revision),
        };
        let fetched = Arc::new(AtomicU64::new(0));
        // A job that ended done verified every file: that is what it shows, whatever the
        // store holds now (a file deleted since, or a later job's `.part` of the same name,
        // made a restarted daemon show a finished job at 30 % with its files queued).
        let finished = rec.state == JobState::Done;
        let manifest = if finished {
            None
        } else {
            self.store.read_manifest(&dir, &rec.variant)
        };
        let files = rec
            .files
            .iter()
            .map(|f| {
                let (have, complete) = if finished {
                    (f.size, true)
                } else {
                    let record = manifest.as_ref().and_then(|m| m.verified(&f.name));
                    self.store.present(&dir, f, record)
                };
                Arc::new(FileProgress {
                    file: f.clone(),
                    done: AtomicU64::new(have),
                    state: Mutex::new(if complete {
                        FileState::Done
                    } else {
                        FileState::Queued
                    }),
                    error: Mutex::new(None),
                    fetched: fetched.clone(),
                })
            })
            .collect();
        let status = NodeStatus::new("download", &rec.id, String::new(), self.notifier.clone());
        let id = rec.id.clone();
        let job = Arc::new(Job {
            record: Mutex::new(rec),
            files,
            fetched,
            rate: Mutex::new(RateWindow::default()),
            dir,
            status,
            transfers: Arc::new(AtomicUsize::new(0)),
        });
        job.status.update(|i| i.detail = job.detail());
        lock(&self.jobs).insert(id, job.clone());
        job
    }

    fn persist(&self, job: &Job) {
        let rec = lock(&job.record).clone();
        let path = self.jobs_dir.join(format!("{}.json", rec.id));
        let bytes = serde_json::to_vec_pretty(&rec).unwrap_or_default();
        if let Err(e) =
            write_private_file(&path, &bytes, "a download job record", Durability::Synced)
        {
            tracing::error!(job = rec.id, error = %e, "cannot persist a download job: a restart will not resume it");
        }
    }

    fn set_state(&self, job: &Job, state: JobState, error: Option<String>) {
        {
            let mut rec = lock(&job.record);
            // A cancel is final for this job: a late end of its task does not undo it.
            if rec.state == JobState::Cancelled && state != JobState::Cancelled {
                return;
            }
            rec.state = state;
            rec.error = error;
            if !state.unfinished() {
                rec.finished_unix_s = Some(now_s());
            }
        }
        // The tree says it before the record is written to disk: a caller that saw the new
        // state (`list_downloads`) and looks at the tree at once finds it there too.
        job.status.update(|i| i.detail = job.detail());
        self.persist(job);
    }

    /// Forget jobs that ended more than `keep_finished` ago (their records too), so a
    /// long-lived daemon's job list stays bounded.
    fn prune(&self) {
        let keep = self.config.keep_finished.as_secs();
        let now = now_s();
        lock(&self.jobs).retain(|id, job| {
            let rec = lock(&job.record);
            let old = !rec.state.unfinished()
                && rec
                    .finished_unix_s
                    .is_some_and(|t| now.saturating_sub(t) > keep);
            if old {
                let _ = std::fs::remove_file(self.jobs_dir.join(format!("{id}.json")));
            }
            !old
        });
    }

    /// `list_downloads`: every job in flight or recent, or one.
    pub fn list(&self, job_id: Option<&str>) -> Result<ListDownloadsResult, DownloadError> {
        self.prune();
        let jobs = lock(&self.jobs);
        match job_id {
            Some(id) => {
                let job = jobs
                    .get(id)
                    .ok_or_else(|| DownloadError::NoJob(id.into()))?;
                Ok(ListDownloadsResult {
                    jobs: vec![job.view()],
                })
            }
            None => {
                let mut ids: Vec<&String> = jobs.keys().collect();
                ids.sort_by_key(|id| id_order(id));
                let jobs = ids.into_iter().map(|id| jobs[id].view()).collect();
                Ok(ListDownloadsResult { jobs })
            }
        }
    }

    /// `cancel_download`: stop the job; its `.part` files stay for a later resume.
    pub async fn cancel(&self, job_id: &str) -> Result<CancelDownloadResult, DownloadError> {
        let job = lock(&self.jobs)
            .get(job_id)
            .cloned()
            .ok_or_else(|| DownloadError::NoJob(job_id.into()))?;
        let before = job.state();
        if !before.unfinished() {
            return Ok(CancelDownloadResult {
                job_id: job_id.into(),
                state: before.shown(),
                cancelled: false,
                message: Some(format!("the job had already ended ({})", before.as_str())),
                bytes_done: None,
                bytes_total: None,
                hint: None,
            });
        }
        self.set_state(&job, JobState::Cancelled, None);
        let _ = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id: job_id.into(),
                    reason: "cancelled by cancel_download".into(),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await;
        // The stop aborted the job's task and its transfers; they end at their next await.
        // Answer once they have, so nothing writes the job's files after `cancelled`.
        let deadline = Instant::now() + Duration::from_secs(5);
        while job.transfers.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (done, total) = job.totals();
        Ok(CancelDownloadResult {
            job_id: job_id.into(),
            state: DownloadState::Cancelled,
            cancelled: true,
            message: None,
            bytes_done: Some(done),
            bytes_total: Some(total),
            hint: Some("partial files are kept; download_model with the same repo, revision and variant resumes them".into()),
        })
    }
}

/// What a job actor is started with.
pub struct JobStart {
    job: Arc<Job>,
    downloads: Arc<Downloads>,
}

/// One download job as an actor: it owns the task moving the job's files.
pub struct JobActor;

pub enum JobMsg {
    /// The job's task ended.
    Finished(Result<(), String>),
}

/// Aborts the job's task when the actor goes, however it goes (stop, kill, panic).
pub struct JobActorState {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for JobActorState {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Actor for JobActor {
    type Msg = JobMsg;
    type State = JobActorState;
    type Arguments = JobStart;

    async fn pre_start(
        &self,
        myself: ActorRef<JobMsg>,
        args: JobStart,
    ) -> Result<JobActorState, ActorProcessingErr> {
        args.job.status.set_state(NodeState::Busy);
        let task = tokio::spawn(async move {
            let r = args.downloads.clone().run(args.job.clone()).await;
            let _ = myself.cast(JobMsg::Finished(r));
        });
        Ok(JobActorState { task })
    }

    async fn handle(
        &self,
        myself: ActorRef<JobMsg>,
        msg: JobMsg,
        _state: &mut JobActorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            JobMsg::Finished(Ok(())) => {
                myself.stop(Some("done".into()));
                Ok(())
            }
            JobMsg::Finished(Err(e)) => Err(e.into()),
        }
    }
}
