//! Starting a download job (`download_model`): the listing read and the whole file set
//! chosen, the files a snapshot already holds verified (or hard linked from an older one) and
//! not fetched again, a job of the same files already in flight answered instead of a second,
//! the free space under the store checked, and the job registered with its record written
//! before the answer.

use std::path::Path;
use std::sync::Arc;

use toolvisor_protocol::results::{
    ChosenFile, DownloadAlreadyComplete, DownloadModelJob, DownloadModelResult, DownloadState,
};

use super::{Downloads, Job, JobRecord, JobState, lock, now_s};
use crate::choose::{self, FileSet};
use crate::error::DownloadError;
use crate::store::{Manifest, Verified};

impl Downloads {
    /// `download_model`: validate, read the listing, choose the whole file set (the
    /// variant's, or what `include` and `exclude` select: `choose::select`), register one job
    /// and answer at once.
    pub async fn start(
        self: &Arc<Self>,
        repo: &str,
        revision: Option<&str>,
        variant: Option<&str>,
        include: &[String],
        exclude: &[String],
    ) -> Result<DownloadModelResult, DownloadError> {
        let revision = revision.unwrap_or("main");
        choose::check_repo(repo)?;
        choose::check_revision(revision)?;
        let info = self.hub.repo_info(repo, revision).await?;
        let set = choose::select(&info.siblings, variant, include, exclude)?;
        // A gated repo's listing is public, its files are not: find out now, not in the job.
        if info.gated.is_gated() {
            self.hub.auth_check(repo).await?;
        }
        // The snapshot of the commit the listing is at: a revision that moved is a new one.
        let commit = crate::store::commit_id(info.sha.as_deref());
        let dir = self.store.snapshot_dir(repo, revision, commit.as_deref());
        let chosen: Vec<ChosenFile> = set
            .files
            .iter()
            .map(|f| ChosenFile {
                name: f.name.clone(),
                size: f.size,
                sha256: f.sha256.clone(),
            })
            .collect();
        let verified = self.verify_kept(repo, &dir, &set, &commit).await?;
        let present: Vec<(u64, bool)> = set
            .files
            .iter()
            .zip(&verified)
            .map(|(f, v)| self.store.present(&dir, f, v.as_ref()))
            .collect();
        let records: Vec<Verified> = verified.into_iter().flatten().collect();
        let manifest = |complete: bool, verified: Vec<Verified>| Manifest {
            repo: repo.into(),
            revision: revision.into(),
            variant: set.variant.clone(),
            files: set.files.clone(),
            complete,
            verified,
            commit: commit.clone(),
            refs: Vec::new(),
        };
        if present.iter().all(|(_, complete)| *complete) {
            self.store.write_manifest(&dir, &manifest(true, records))?;
            self.store.set_ref(repo, revision, &dir)?;
            return Ok(DownloadModelResult::AlreadyComplete(
                DownloadAlreadyComplete {
                    state: DownloadState::Done,
                    already_complete: true,
                    repo: repo.into(),
                    revision: revision.into(),
                    commit,
                    variant: set.variant.clone(),
                    path: dir.display().to_string(),
                    bytes_total: set.total(),
                    files: chosen,
                },
            ));
        }
        // The same file set already in flight: that job is the answer.
        if let Some(job) = self.in_flight(&dir, &set) {
            return Ok(DownloadModelResult::Job(DownloadModelJob {
                job: job.view(),
                already_running: Some(true),
                hint: None,
            }));
        }
        let needed: u64 = set
            .files
            .iter()
            .zip(&present)
            .map(|(f, (have, _))| f.size - have)
            .sum();
        // The free space counts the bytes every unfinished job has still to write as taken:
        // the check and the registration are one step (`admit`), with no await between.
        let admitted = lock(&self.admit);
        self.check_free(needed)?;
        self.store.prepare(&dir, &set.files)?;
        self.store.write_manifest(&dir, &manifest(false, records))?;
        let job = self.register(repo, revision, &set, commit)?;
        drop(admitted);
        // On disk before the answer: a restart from here on resumes it.
        self.persist(&job);
        self.spawn(job.clone()).await;
        let hint = format!(
            "started in the background; poll list_downloads {{\"job_id\": \"{}\"}}",
            lock(&job.record).id
        );
        Ok(DownloadModelResult::Job(DownloadModelJob {
            job: job.view(),
            already_running: None,
            hint: Some(hint),
        }))
    }

    /// The verified record of each file of `set` that `dir` already holds with the listed
    /// bytes, after linking in the ones an older snapshot holds.
    async fn verify_kept(
        &self,
        repo: &str,
        dir: &Path,
        set: &FileSet,
        commit: &Option<String>,
    ) -> Result<Vec<Option<Verified>>, DownloadError> {
        // Already complete in the store: nothing to start. A file counts when its bytes are
        // the listed ones (`Store::verify`: its record, else its hash read again); a file an
        // older snapshot holds with the listed hash is linked here first.
        let previous = self.store.read_manifest(dir, &set.variant);
        let (store, dir, files, commit, repo) = (
            self.store.clone(),
            dir.to_path_buf(),
            set.files.clone(),
            commit.clone(),
            repo.to_string(),
        );
        crate::transfer::blocking(move || {
            let linked = store.link_kept_files(&repo, &dir, &files);
            files
                .iter()
                .map(|f| {
                    let record = linked
                        .iter()
                        .find(|v| v.name == f.name)
                        .or_else(|| previous.as_ref().and_then(|m| m.verified(&f.name)));
                    store.verify(&dir, f, record, commit.as_deref())
                })
                .collect()
        })
        .await
    }

    /// The unfinished job of the same file set into `dir`, if there is one.
    fn in_flight(&self, dir: &Path, set: &FileSet) -> Option<Arc<Job>> {
        lock(&self.jobs)
            .values()
            .find(|j| {
                let r = lock(&j.record);
                r.state.unfinished()
                    && j.dir == dir
                    && r.variant == set.variant
                    && r.files
                        .iter()
                        .map(|f| &f.name)
                        .eq(set.files.iter().map(|f| &f.name))
            })
            .cloned()
    }

    /// Refuses `needed` more bytes when the free space, less what the unfinished jobs have
    /// still to write, is short of them.
    fn check_free(&self, needed: u64) -> Result<(), DownloadError> {
        let available = match self.config.free_bytes {
            Some(free) => free,
            None => self.store.available()?,
        };
        let (reserved, by): (u64, Vec<String>) = {
            let jobs = lock(&self.jobs);
            let running: Vec<(String, u64)> = jobs
                .values()
                .filter(|j| lock(&j.record).state.unfinished())
                .map(|j| (lock(&j.record).id.clone(), j.remaining()))
                .filter(|(_, left)| *left > 0)
                .collect();
            (
                running.iter().map(|(_, left)| left).sum(),
                running
                    .into_iter()
                    .map(|(id, left)| format!("{id} {left}"))
                    .collect(),
            )
        };
        if needed > available.saturating_sub(reserved) {
            return Err(DownloadError::DiskFull {
                path: self.store.root().display().to_string(),
                needed,
                available,
                reserved,
                by: by.join(", "),
            });
        }
        Ok(())
    }

    /// Registers a new queued job for `set` under the next job id.
    fn register(
        &self,
        repo: &str,
        revision: &str,
        set: &FileSet,
        commit: Option<String>,
    ) -> Result<Arc<Job>, DownloadError> {
        let n = self
            .ids
            .next()
            .map_err(|e| DownloadError::io("cannot take a job id from", &self.jobs_dir, e))?;
        let rec = JobRecord {
            id: format!("dl{n}"),
            repo: repo.into(),
            revision: revision.into(),
            variant: set.variant.clone(),
            files: set.files.clone(),
            state: JobState::Queued,
            error: None,
            created_unix_s: now_s(),
            finished_unix_s: None,
            commit,
            snapshot: true,
        };
        Ok(self.make_job(rec))
    }
}
