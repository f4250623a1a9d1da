//! What a job knows of the files it verified: each file's verification written into its
//! variant's manifest as it is renamed into place (`record_verified`), and, when a job
//! resumes, the files in place without such a record hashed again instead of fetched again
//! (`verify_in_place`).

use std::sync::atomic::Ordering;

use super::{Downloads, FileState, Job, lock};
use crate::choose::Chosen;
use crate::store::{Manifest, Verified};

impl Downloads {
    /// Files of `job` not yet done that are in place whole with no verification recorded (a
    /// daemon killed between a file's rename and its record): hashed again, and done when
    /// their bytes are the listed ones, instead of fetched again.
    pub(super) async fn verify_in_place(&self, job: &Job) {
        let commit = lock(&job.record).commit.clone();
        for f in job
            .files
            .iter()
            .filter(|f| *lock(&f.state) != FileState::Done)
        {
            // `Store::verify` answers at once for a file absent, of another size or listed
            // without a hash; only a whole file in place is read.
            let (store, dir, file, commit) = (
                self.store.clone(),
                job.dir.clone(),
                f.file.clone(),
                commit.clone(),
            );
            let verified = crate::transfer::blocking(move || {
                store.verify(&dir, &file, None, commit.as_deref())
            })
            .await
            .ok()
            .flatten();
            if verified.is_some() {
                tracing::info!(job = %lock(&job.record).id, file = f.file.name, "a file in place was verified again after a restart; not fetched again");
                self.record_verified(job, &f.file);
                f.done.store(f.file.size, Ordering::Relaxed);
                f.set_state(FileState::Done);
            }
        }
    }

    /// Note in the manifest that `file` was verified and put in place, so a restart that
    /// resumes the job knows it complete.
    pub(super) fn record_verified(&self, job: &Job, file: &Chosen) {
        let rec = lock(&job.record).clone();
        let Some(v) = Verified::now(&job.dir, file, file.sha256.clone(), rec.commit.as_deref())
        else {
            return;
        };
        let _held = lock(&self.manifests);
        let mut m = self
            .store
            .read_manifest(&job.dir, &rec.variant)
            .unwrap_or_else(|| Manifest {
                repo: rec.repo.clone(),
                revision: rec.revision.clone(),
                variant: rec.variant.clone(),
                files: rec.files.clone(),
                complete: false,
                verified: Vec::new(),
                commit: rec.commit.clone(),
                refs: Vec::new(),
            });
        m.verified.retain(|x| x.name != v.name);
        m.verified.push(v);
        if let Err(e) = self.store.write_manifest(&job.dir, &m) {
            tracing::warn!(job = rec.id, error = %e, "cannot record a verified file in its manifest: a restart fetches it again");
        }
    }
}
