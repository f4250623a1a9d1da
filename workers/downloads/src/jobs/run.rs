//! Running a download job: its actor started under the `downloads` supervisor ([`JobActor`],
//! temporary: a failed job is not restarted), then every file of the job moved, in parallel
//! within the daemon-wide transfer permits, each retried with backoff on transient errors
//! (several connections for a large file, `ranged.rs`), and the job's end state persisted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ractor::Actor;
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::supervise::{self, ChildSpec, Factory, StartCtx, StartFailed};

use super::{Downloads, Job, JobActor, JobStart, JobState, lock};
use crate::error::DownloadError;
use crate::hub::Hub;
use crate::progress::{FileProgress, FileState};
use crate::store::{Manifest, Verified};

/// Counts one transfer task for as long as its future lives.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(count: &Arc<AtomicUsize>) -> Counted {
        count.fetch_add(1, Ordering::SeqCst);
        Counted(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One attempt at one file; `Ok` once it is verified and in place. A large file goes over
/// several connections (`ranged.rs`) unless its `.part` is one connection's to continue.
async fn attempt_file(
    hub: &Hub,
    repo: &str,
    revision: &str,
    dir: &Path,
    progress: &Arc<FileProgress>,
    ranged: &crate::ranged::RangedConfig,
) -> Result<(), DownloadError> {
    if crate::ranged::wanted(ranged, dir, &progress.file.name, progress.file.size) {
        return crate::ranged::attempt(hub, repo, revision, dir, progress, ranged).await;
    }
    crate::transfer::one_connection(hub, repo, revision, dir, progress).await
}

impl Downloads {
    /// Start a job's actor under the `downloads` supervisor.
    pub(super) async fn spawn(self: &Arc<Self>, job: Arc<Job>) {
        let id = lock(&job.record).id.clone();
        let me = self.clone();
        let job_for_factory = job.clone();
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = JobStart {
                job: job_for_factory.clone(),
                downloads: me.clone(),
            };
            let name = format!("download/{}", ctx.status.id());
            Box::pin(async move {
                Actor::spawn_linked(Some(name), JobActor, args, ctx.supervisor)
                    .await
                    .map(|(a, _)| a.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        let spec = ChildSpec {
            id: id.clone(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status: job.status.clone(),
        };
        if let Err(failed) = supervise::start(&self.supervisor, spec, Duration::from_secs(30)).await
        {
            let why = match failed {
                StartFailed::Child(e) => e,
                StartFailed::NoAnswer(_) => {
                    "the downloads supervisor did not answer within 30 s".into()
                }
            };
            self.set_state(
                &job,
                JobState::Failed,
                Some(format!("could not start: {why}")),
            );
        }
    }

    /// Move every file of `job`; its end state is persisted here.
    pub(super) async fn run(self: Arc<Self>, job: Arc<Job>) -> Result<(), String> {
        lock(&job.rate).restart(Instant::now());
        self.set_state(&job, JobState::Downloading, None);
        let (repo, revision) = {
            let r = lock(&job.record);
            (r.repo.clone(), r.revision.clone())
        };
        let ticker = {
            let job = job.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    job.status.update(|i| i.detail = job.detail());
                }
            })
        };
        self.verify_in_place(&job).await;
        let mut set = tokio::task::JoinSet::new();
        for f in job
            .files
            .iter()
            .filter(|f| *lock(&f.state) != FileState::Done)
        {
            let (me, f, job, repo, revision) = (
                self.clone(),
                f.clone(),
                job.clone(),
                repo.clone(),
                revision.clone(),
            );
            let counted = Counted::new(&job.transfers);
            set.spawn(async move {
                let _counted = counted;
                let Ok(_permit) = me.permits.clone().acquire_owned().await else {
                    return Err("the transfer slots are closed".to_string());
                };
                let mut attempt = 0u32;
                loop {
                    match attempt_file(&me.hub, &repo, &revision, &job.dir, &f, &me.config.ranged).await {
                        Ok(()) => {
                            *lock(&f.error) = None;
                            me.record_verified(&job, &f.file);
                            f.set_state(FileState::Done);
                            break Ok(());
                        }
                        Err(e) if e.transient() && attempt < me.config.retries => {
                            attempt += 1;
                            let wait = e.retry_wait(Duration::from_millis(200u64 << attempt.min(5)).min(Duration::from_secs(5)));
                            tracing::warn!(job = %lock(&job.record).id, file = f.file.name, attempt, error = %e, "download attempt failed; retrying");
                            *lock(&f.error) = Some(e.to_string());
                            tokio::time::sleep(wait).await;
                        }
                        Err(e) => {
                            f.set_state(FileState::Failed);
                            *lock(&f.error) = Some(e.to_string());
                            break Err(e.to_string());
                        }
                    }
                }
            });
        }
        let mut first_error = None;
        while let Some(r) = set.join_next().await {
            if let Err(e) = r.unwrap_or_else(|e| Err(format!("a transfer task panicked: {e}"))) {
                first_error.get_or_insert(e);
            }
        }
        ticker.abort();
        match first_error {
            Some(e) => {
                self.set_state(&job, JobState::Failed, Some(e.clone()));
                Err(e)
            }
            None => {
                let rec = lock(&job.record).clone();
                // Every file was verified (its hash, or its size where none is listed) before
                // it was renamed into place, or was in place verified before the job began.
                let verified = rec
                    .files
                    .iter()
                    .filter_map(|f| {
                        Verified::now(&job.dir, f, f.sha256.clone(), rec.commit.as_deref())
                    })
                    .collect();
                let manifest = Manifest {
                    repo: rec.repo.clone(),
                    revision: rec.revision.clone(),
                    variant: rec.variant,
                    files: rec.files,
                    complete: true,
                    verified,
                    commit: rec.commit.clone(),
                    refs: Vec::new(),
                };
                // The manifest says complete, then the revision's ref moves to this snapshot:
                // until then the snapshot it named stays what the revision loads.
                let written = {
                    let _held = lock(&self.manifests);
                    self.store
                        .write_manifest(&job.dir, &manifest)
                        .and_then(|()| self.store.set_ref(&rec.repo, &rec.revision, &job.dir))
                };
                if let Err(e) = written {
                    self.set_state(&job, JobState::Failed, Some(e.to_string()));
                    return Err(e.to_string());
                }
                self.set_state(&job, JobState::Done, None);
                Ok(())
            }
        }
    }
}
