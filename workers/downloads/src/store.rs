//! The model store on disk, keyed by commit as huggingface-cli's cache is: one directory per
//! repo, `<store>/<owner>--<name>/`, holding a snapshot per commit (`snapshots/<commit>/`, the
//! repo's files under it as the repo names them) and a ref per revision asked for
//! (`refs/<revision>`, a file holding the commit the revision was at when a download of it
//! completed; a pull request's `refs/pr/N` is `refs/refs%2Fpr%2FN`). A `.part` file stands
//! beside each file still arriving, and one manifest per downloaded variant
//! (`.toolvisor-model-<variant>.json`: its files, sizes, hashes, the commit, whether it is
//! complete, and what was verified of each file in place: its size, mtime, sha256, the commit
//! it came from).
//!
//! A revision that moves on the hub (a new commit on `main`) is a new snapshot: a file whose
//! bytes the new commit keeps (same name and sha256, verified in an older snapshot) is hard
//! linked from there instead of fetched again, the others are fetched, and the ref moves once
//! the download completes; until then the older snapshot is what the revision names, and it
//! stays afterwards, named by its commit (`owner/name@<commit>`), until `delete_model` removes
//! it. An endpoint that names no commit gets a snapshot keyed by the revision's name. A store
//! written by an older build (`<owner>--<name>/<revision>/`, no `snapshots`) is read as it is:
//! each such directory is its revision's, until a download of that revision writes a ref.
//!
//! A file in place counts as complete only against that record: its sha256 equals the
//! listing's (or, for a file listed without one, the commit it was verified at is the listing's
//! commit) and its size and mtime are still those it had when verified. A file in place with no
//! record, or one whose size or mtime changed, is hashed again (`Store::verify`); a file whose
//! bytes differ from the listing is fetched again. So a file changed on the hub, or on disk, is
//! never taken for the one listed, and the hash of a multi-GB file is not read on every call.
//! Job records live apart, under the daemon's state directory (`jobs.rs`).

use std::path::{Path, PathBuf};

use std::os::unix::fs::OpenOptionsExt;

use serde::{Deserialize, Serialize};
use sha2::Digest;
use toolvisor_kit::private::{Durability, write_private_file};

use crate::choose::Chosen;
use crate::error::DownloadError;
use crate::partial::part_path;

/// What a variant's manifest says.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub repo: String,
    /// The revision it was downloaded as (a branch, tag, commit or `refs/pr/N`).
    pub revision: String,
    pub variant: String,
    pub files: Vec<Chosen>,
    /// Every file verified and in place.
    pub complete: bool,
    /// What was verified of each file in place (files never verified have no entry).
    #[serde(default)]
    pub verified: Vec<Verified>,
    /// The commit its snapshot is, when the endpoint named one.
    #[serde(default)]
    pub commit: Option<String>,
    /// The revisions whose ref names its snapshot now (filled by [`Store::manifests`], never
    /// written): empty for a snapshot a revision has moved on from.
    #[serde(skip)]
    pub refs: Vec<String>,
}

/// What was verified of a file in place, and when: its size and mtime then, the sha256 its
/// bytes had (`None` for a file listed without a hash, whose size alone was checked) and the
/// commit the listing was at.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Verified {
    pub name: String,
    pub size: u64,
    pub mtime_s: i64,
    pub mtime_ns: i64,
    pub sha256: Option<String>,
    pub commit: Option<String>,
}

impl Manifest {
    /// The verification record of `name`.
    pub fn verified(&self, name: &str) -> Option<&Verified> {
        self.verified.iter().find(|v| v.name == name)
    }
}

/// Size and mtime of the regular file at `path` (never through a symlink).
fn stat(path: &Path) -> Option<(u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    m.is_file().then(|| (m.len(), m.mtime(), m.mtime_nsec()))
}

impl Verified {
    /// A record of `file` in `dir` as it is now, for bytes whose hash is `sha256`.
    pub fn now(
        dir: &Path,
        file: &Chosen,
        sha256: Option<String>,
        commit: Option<&str>,
    ) -> Option<Verified> {
        let (size, mtime_s, mtime_ns) = stat(&dir.join(&file.name))?;
        Some(Verified {
            name: file.name.clone(),
            size,
            mtime_s,
            mtime_ns,
            sha256,
            commit: commit.map(str::to_string),
        })
    }

    /// Whether this record still stands for `file` in `dir` as listed: same size and mtime
    /// on disk as when verified, the listed size, and the listed sha256 (for a file listed
    /// without one, `commit`, when given, is the one verified at).
    pub fn holds(&self, dir: &Path, file: &Chosen, commit: Option<&str>) -> bool {
        let same_bytes = stat(&dir.join(&file.name))
            == Some((self.size, self.mtime_s, self.mtime_ns))
            && self.size == file.size
            && self.name == file.name;
        let same_source = match &file.sha256 {
            Some(h) => self.sha256.as_deref() == Some(h.as_str()),
            None => {
                self.sha256.is_none() && commit.is_none_or(|c| self.commit.as_deref() == Some(c))
            }
        };
        same_bytes && same_source
    }
}

/// Directory entries [`Store::orphans`] reads at most.
pub const SCAN_MAX: usize = 100_000;

/// The store's root directory.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

/// A variant label as a file-name part: plain characters only.
fn label_part(variant: &str) -> String {
    variant
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

impl Store {
    /// The store at `root`, created private (0700) if missing; refused if someone else could
    /// change it.
    pub fn open(root: &Path) -> Result<Store, DownloadError> {
        toolvisor_kit::private::ensure_private_dir(root, "the model store")
            .map_err(|e| DownloadError::io("cannot use the model store", root, e))?;
        toolvisor_kit::private::remove_stale_temps(root);
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<store>/<owner>--<name>` (the repo already checked by `choose`).
    pub fn repo_dir(&self, repo: &str) -> PathBuf {
        self.root.join(repo.replace('/', "--"))
    }

    /// The snapshot of `repo` at `commit`, or, for an endpoint that named none, at
    /// `revision`: `<repo dir>/snapshots/<commit>`. A revision is already checked by `choose`
    /// and a commit by [`commit_id`]; a pull request's `refs/pr/N` is one directory,
    /// `refs%2Fpr%2FN` (`%` is in no plain revision, so no branch can share it).
    pub fn snapshot_dir(&self, repo: &str, revision: &str, commit: Option<&str>) -> PathBuf {
        self.repo_dir(repo)
            .join("snapshots")
            .join(commit.unwrap_or(revision).replace('/', "%2F"))
    }

    /// The directory an older build kept `revision` of `repo` in: `<repo dir>/<revision>`.
    pub fn legacy_dir(&self, repo: &str, revision: &str) -> PathBuf {
        self.repo_dir(repo).join(revision.replace('/', "%2F"))
    }

    fn ref_path(&self, repo: &str, revision: &str) -> PathBuf {
        self.repo_dir(repo)
            .join("refs")
            .join(revision.replace('/', "%2F"))
    }

    /// Point `revision` of `repo` at the snapshot `dir` (a download of it completed). A
    /// revision that names its snapshot itself (a commit asked for, or a revision of an
    /// endpoint that named no commit) needs no ref.
    pub fn set_ref(&self, repo: &str, revision: &str, dir: &Path) -> Result<(), DownloadError> {
        let Some(key) = dir.file_name().map(|k| k.to_string_lossy().to_string()) else {
            return Ok(());
        };
        if key == revision.replace('/', "%2F") {
            return Ok(());
        }
        let path = self.ref_path(repo, revision);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode_private()
                .create(parent)
                .map_err(|e| DownloadError::io("cannot create", parent, e))?;
        }
        write_private_file(
            &path,
            key.as_bytes(),
            "a revision's ref",
            Durability::Synced,
        )
        .map_err(|e| DownloadError::io("cannot write", &path, e))
    }

    /// Each revision of the repo in `repo_dir` with a ref, and the snapshot directory name
    /// it names.
    fn refs(repo_dir: &Path) -> Vec<(String, String)> {
        let Ok(entries) = std::fs::read_dir(repo_dir.join("refs")) else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| {
                let key = std::fs::read_to_string(e.path()).ok()?.trim().to_string();
                let revision = e.file_name().to_string_lossy().replace("%2F", "/");
                (!key.is_empty() && !key.contains('/')).then_some((revision, key))
            })
            .collect();
        out.sort();
        out
    }

    /// Remove the refs of `repo` that name the snapshot `dir` (it is gone).
    pub fn remove_refs_to(&self, repo: &str, dir: &Path) {
        let Some(key) = dir.file_name().map(|k| k.to_string_lossy().to_string()) else {
            return;
        };
        let repo_dir = self.repo_dir(repo);
        for (revision, named) in Store::refs(&repo_dir) {
            if named == key {
                let _ = std::fs::remove_file(self.ref_path(repo, &revision));
            }
        }
    }

    fn manifest_path(dir: &Path, variant: &str) -> PathBuf {
        dir.join(format!(".toolvisor-model-{}.json", label_part(variant)))
    }

    /// Create the model directory `dir` (a snapshot of the store) and the directories its
    /// files need (0700).
    pub fn prepare(&self, dir: &Path, files: &[Chosen]) -> Result<(), DownloadError> {
        // The store follows no link: a repo, snapshot or revision directory planted as a
        // symlink (to put the files elsewhere) is refused, not written through. `create`
        // below makes real directories only.
        let mut own = dir.to_path_buf();
        while own != self.root && own.starts_with(&self.root) {
            if let Ok(m) = std::fs::symlink_metadata(&own)
                && !m.is_dir()
            {
                return Err(DownloadError::io(
                    "refusing to use",
                    &own,
                    "it is not a directory of the store (a symbolic link or a file is there; the store follows no links): move it away",
                ));
            }
            own.pop();
        }
        for f in files {
            let parent = dir.join(&f.name);
            let parent = parent.parent().unwrap_or(dir);
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode_private()
                .create(parent)
                .map_err(|e| DownloadError::io("cannot create", parent, e))?;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode_private()
            .create(dir)
            .map_err(|e| DownloadError::io("cannot create", dir, e))
    }

    /// Write `m`, the manifest of a variant in the model directory `dir`.
    pub fn write_manifest(&self, dir: &Path, m: &Manifest) -> Result<(), DownloadError> {
        let path = Store::manifest_path(dir, &m.variant);
        let bytes = serde_json::to_vec_pretty(m)
            .map_err(|e| DownloadError::io("cannot encode", &path, e))?;
        write_private_file(&path, &bytes, "a model manifest", Durability::Synced)
            .map_err(|e| DownloadError::io("cannot write", &path, e))
    }

    /// Remove `m`'s manifest from `dir` (its model is gone).
    pub fn remove_manifest(&self, dir: &Path, m: &Manifest) -> Result<(), DownloadError> {
        let path = Store::manifest_path(dir, &m.variant);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(DownloadError::io("cannot remove", &path, e)),
        }
    }

    /// The manifest of `variant` in the model directory `dir`, if there is one.
    pub fn read_manifest(&self, dir: &Path, variant: &str) -> Option<Manifest> {
        let bytes = std::fs::read(Store::manifest_path(dir, variant)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Files of `files` (listed with a sha256) that another snapshot of `repo` holds
    /// verified with the same name and hash, hard linked into `dir` where `dir` has no such
    /// file yet: a commit that keeps a file's bytes costs neither a download nor disk space.
    /// Returns each linked file's record (the link shares the verified file's inode, so its
    /// size and mtime are those recorded). Blocking: call it off the async threads.
    pub fn link_kept_files(&self, repo: &str, dir: &Path, files: &[Chosen]) -> Vec<Verified> {
        let wanted: Vec<&Chosen> = files
            .iter()
            .filter(|f| f.sha256.is_some())
            .filter(|f| std::fs::symlink_metadata(dir.join(&f.name)).is_err())
            .collect();
        if wanted.is_empty() {
            return Vec::new();
        }
        let mut linked = Vec::new();
        let others: Vec<(PathBuf, Manifest)> = self
            .manifests()
            .into_iter()
            .filter(|(d, m)| m.repo == repo && d != dir)
            .collect();
        for f in wanted {
            let source = others.iter().find_map(|(d, m)| {
                let rec = m.verified(&f.name)?;
                (rec.sha256 == f.sha256 && rec.holds(d, f, None)).then(|| (d, rec.clone()))
            });
            let Some((from, rec)) = source else { continue };
            if self.prepare(dir, std::slice::from_ref(f)).is_err() {
                continue;
            }
            if std::fs::hard_link(from.join(&f.name), dir.join(&f.name)).is_ok() {
                tracing::info!(file = f.name, from = %from.display(), "a file the new commit keeps was linked from an older snapshot, not fetched again");
                linked.push(rec);
            }
        }
        linked
    }

    /// Whether `file` in `dir` is the file listed, and its record if so: the record given
    /// when it still holds (no hashing), else, for a file listed with a sha256 and in place
    /// with its listed size, a new record when its bytes hash to it. Reads the whole file in
    /// the second case: call it off the async threads.
    pub fn verify(
        &self,
        dir: &Path,
        file: &Chosen,
        record: Option<&Verified>,
        commit: Option<&str>,
    ) -> Option<Verified> {
        if let Some(r) = record
            && r.holds(dir, file, commit)
        {
            return Some(r.clone());
        }
        let expected = file.sha256.as_ref()?;
        let path = dir.join(&file.name);
        let before = stat(&path)?;
        if before.0 != file.size {
            return None;
        }
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .ok()?;
        let mut hasher = sha2::Sha256::new();
        std::io::copy(&mut f, &mut hasher).ok()?;
        let got = crate::hex(&hasher.finalize());
        // Changed while it was read: not what was hashed.
        if &got != expected || stat(&path) != Some(before) {
            return None;
        }
        Verified::now(dir, file, Some(got), commit)
    }

    /// Bytes of `file` already here: the whole file when `record` says it is in place as
    /// listed, else what its `.part` holds (for a file fetched in ranges, what its range map
    /// counts: the `.part` has the file's size).
    pub fn present(&self, dir: &Path, file: &Chosen, record: Option<&Verified>) -> (u64, bool) {
        if record.is_some_and(|r| r.holds(dir, file, None)) {
            return (file.size, true);
        }
        let part = part_path(dir, &file.name);
        if let Some(have) = crate::partial::have(&part, file.size) {
            return (have, false);
        }
        match std::fs::symlink_metadata(&part) {
            Ok(m) if m.is_file() => (m.len().min(file.size), false),
            _ => (0, false),
        }
    }

    /// Files in the store no model lists (a file of a variant since removed from its
    /// manifest, a copy put there by hand, the partial download of such a file): each as
    /// (path from the store's root, bytes). The model directories are walked without
    /// following links, at most [`SCAN_MAX`] entries; manifests, `.part` files and range maps of
    /// listed files, and temp files are not orphans.
    pub fn orphans(&self) -> Vec<(String, u64)> {
        let mut listed: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
        let mut dirs: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
        for (dir, m) in self.manifests() {
            for f in &m.files {
                let path = dir.join(&f.name);
                listed.insert(part_path(&dir, &f.name));
                listed.insert(PathBuf::from(format!("{}.part.ranges", path.display())));
                listed.insert(path);
            }
            dirs.insert(dir);
        }
        let mut out = Vec::new();
        let mut seen = 0usize;
        let mut stack: Vec<PathBuf> = dirs.into_iter().collect();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                seen += 1;
                if seen > SCAN_MAX {
                    return out;
                }
                let path = e.path();
                let name = e.file_name().to_string_lossy().to_string();
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_dir() {
                    stack.push(path);
                    continue;
                }
                let ours = (name.starts_with(".toolvisor-model-") && name.ends_with(".json"))
                    || name.starts_with(".tmp")
                    || listed.contains(&path);
                if ours || !kind.is_file() {
                    continue;
                }
                let bytes = e.metadata().map_or(0, |m| m.len());
                let shown = path
                    .strip_prefix(&self.root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                out.push((shown, bytes));
            }
        }
        out.sort();
        out
    }

    /// Every manifest in the store, each with the refs that name its snapshot now
    /// ([`Manifest::refs`]): the snapshots under `snapshots/`, and the directories of a store
    /// an older build wrote (`<owner>--<name>/<revision>/`, current for their revision until
    /// it has a ref).
    pub fn manifests(&self) -> Vec<(PathBuf, Manifest)> {
        let mut out = Vec::new();
        let Ok(repos) = std::fs::read_dir(&self.root) else {
            return out;
        };
        // Only real directories: a planted symlink is not entered.
        let real_dir = |e: &std::fs::DirEntry| e.file_type().is_ok_and(|t| t.is_dir());
        let subdirs = |dir: &Path| -> Vec<std::fs::DirEntry> {
            std::fs::read_dir(dir)
                .map(|d| d.flatten().filter(real_dir).collect())
                .unwrap_or_default()
        };
        for repo in repos.flatten().filter(real_dir) {
            let refs = Store::refs(&repo.path());
            for entry in subdirs(&repo.path()) {
                match entry.file_name().to_string_lossy().as_ref() {
                    "refs" => {}
                    "snapshots" => {
                        for snapshot in subdirs(&entry.path()) {
                            let key = snapshot.file_name().to_string_lossy().to_string();
                            for mut m in read_manifests(&snapshot.path()) {
                                m.refs = refs
                                    .iter()
                                    .filter(|(_, k)| *k == key)
                                    .map(|(r, _)| r.clone())
                                    .collect();
                                // A snapshot keyed by its revision's name (a commit asked
                                // for, an endpoint that named none) is that revision's
                                // unless a ref says otherwise.
                                if key == m.revision.replace('/', "%2F")
                                    && !refs.iter().any(|(r, _)| *r == m.revision)
                                {
                                    m.refs.push(m.revision.clone());
                                }
                                out.push((snapshot.path(), m));
                            }
                        }
                    }
                    _ => {
                        for mut m in read_manifests(&entry.path()) {
                            if !refs.iter().any(|(r, _)| *r == m.revision) {
                                m.refs = vec![m.revision.clone()];
                            }
                            out.push((entry.path(), m));
                        }
                    }
                }
            }
        }
        out.sort_by(|a, b| {
            (&a.1.repo, &a.1.revision, &a.1.variant, &a.1.commit).cmp(&(
                &b.1.repo,
                &b.1.revision,
                &b.1.variant,
                &b.1.commit,
            ))
        });
        out
    }

    /// Bytes the file system under the store still has for us.
    pub fn available(&self) -> Result<u64, DownloadError> {
        let st = nix::sys::statvfs::statvfs(&self.root)
            .map_err(|e| DownloadError::io("cannot statvfs", &self.root, e))?;
        Ok((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
    }
}

/// The manifests in the model directory `dir`.
fn read_manifests(dir: &Path) -> Vec<Manifest> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.starts_with(".toolvisor-model-")
                && name.ends_with(".json")
                && e.file_type().is_ok_and(|t| t.is_file())
        })
        .filter_map(|e| {
            let bytes = std::fs::read(e.path()).ok()?;
            serde_json::from_slice::<Manifest>(&bytes).ok()
        })
        .collect()
}

/// The commit an endpoint named, when it is one (40 or 64 lowercase hex digits, as git's
/// SHA-1 and SHA-256 ids are): it becomes a directory name, so anything else is ignored and
/// the snapshot is keyed by the revision's name.
pub fn commit_id(sha: Option<&str>) -> Option<String> {
    let sha = sha?;
    let hex = sha
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex && (sha.len() == 40 || sha.len() == 64)).then(|| sha.to_string())
}

/// A model's name as `load_model` takes it, `owner/name[@revision][:variant]`, split into
/// the repo, the revision and the variant named.
pub fn parse_name(name: &str) -> (&str, Option<&str>, Option<&str>) {
    let (rest, variant) = match name.rsplit_once(':') {
        Some((r, v)) if r.contains('/') && !v.is_empty() => (r, Some(v)),
        _ => (name, None),
    };
    match rest.split_once('@') {
        Some((repo, rev)) if !rev.is_empty() => (repo, Some(rev), variant),
        _ => (rest, None, variant),
    }
}

/// Whether `m` is what `name` names (the variant case-insensitively, as `download_model`
/// takes it; a revision as a ref names it, as the revision it was downloaded as, or as its
/// commit or a prefix of it of at least 7 digits).
pub fn names(m: &Manifest, name: &str) -> bool {
    let (repo, revision, variant) = parse_name(name);
    m.repo == repo
        && revision
            .is_none_or(|r| r == m.revision || m.refs.iter().any(|x| x == r) || is_commit_of(m, r))
        && variant.is_none_or(|v| v.eq_ignore_ascii_case(&m.variant))
}

fn is_commit_of(m: &Manifest, r: &str) -> bool {
    m.commit
        .as_deref()
        .is_some_and(|c| r.len() >= 7 && c.starts_with(r))
}

/// Whether `m` is what `name` names now: among several that [`names`] takes, a snapshot a
/// ref names (the revision's, when `name` has one, or its commit) wins over one its
/// revision has moved on from.
fn names_now(m: &Manifest, name: &str) -> bool {
    match parse_name(name).1 {
        Some(r) => m.refs.iter().any(|x| x == r) || is_commit_of(m, r),
        None => !m.refs.is_empty(),
    }
}

/// The one of `all` that `name` names, or the indices of those it is among (none, or
/// several).
fn choose(all: &[&Manifest], name: &str) -> Result<usize, Vec<usize>> {
    let found: Vec<usize> = (0..all.len()).filter(|&i| names(all[i], name)).collect();
    if let [one] = found[..] {
        return Ok(one);
    }
    let now: Vec<usize> = found
        .iter()
        .copied()
        .filter(|&i| names_now(all[i], name))
        .collect();
    match now[..] {
        [one] => Ok(one),
        [] => Err(found),
        _ => Err(now),
    }
}

/// Which of `models` (directory and manifest) `name` names: the one, or none or several,
/// each with the names of those it is among (the shortest that picks each alone, as
/// [`short_name`] gives them): the store's names for none, the candidates' for several.
pub fn pick<'a>(
    models: &[&'a (PathBuf, Manifest)],
    name: &str,
) -> Result<&'a (PathBuf, Manifest), Picked> {
    let all: Vec<&Manifest> = models.iter().map(|(_, m)| m).collect();
    let shown = |of: &mut dyn Iterator<Item = &Manifest>| {
        of.map(|m| short_name(m, &all)).collect::<Vec<_>>()
    };
    match choose(&all, name) {
        Ok(i) => Ok(models[i]),
        Err(none) if none.is_empty() => Err(Picked::None(shown(&mut all.iter().copied()))),
        Err(many) => Err(Picked::Several(shown(&mut many.iter().map(|&i| all[i])))),
    }
}

/// Why [`pick`] found no one model: the names to choose from.
#[derive(Debug, PartialEq, Eq)]
pub enum Picked {
    /// No model by that name; the names of all there are.
    None(Vec<String>),
    /// Several; their names.
    Several(Vec<String>),
}

/// The shortest name that picks `m` alone among `all`: `repo`, `repo:variant`,
/// `repo@revision`, else `repo@revision:variant`, where the revision is a ref naming its
/// snapshot, else its commit's first 12 digits (a snapshot its revision moved on from),
/// else the revision it was downloaded as; the whole commit last.
pub fn short_name(m: &Manifest, all: &[&Manifest]) -> String {
    let at = at(m);
    let full = m.commit.clone().unwrap_or_else(|| m.revision.clone());
    let candidates = [
        m.repo.clone(),
        format!("{}:{}", m.repo, m.variant),
        format!("{}@{at}", m.repo),
        format!("{}@{at}:{}", m.repo, m.variant),
        format!("{}@{full}:{}", m.repo, m.variant),
    ];
    let last = candidates[4].clone();
    candidates
        .into_iter()
        .find(|n| choose(all, n).is_ok_and(|i| all[i] == m))
        .unwrap_or(last)
}

/// The revision `m` is named at: a ref naming its snapshot, else its commit's first 12
/// digits (a snapshot its revision moved on from), else the revision it was downloaded as.
pub fn at(m: &Manifest) -> String {
    m.refs
        .first()
        .cloned()
        .or_else(|| m.commit.as_ref().map(|c| c[..c.len().min(12)].to_string()))
        .unwrap_or_else(|| m.revision.clone())
}

trait PrivateMode {
    fn mode_private(&mut self) -> &mut Self;
}

impl PrivateMode for std::fs::DirBuilder {
    fn mode_private(&mut self) -> &mut Self {
        use std::os::unix::fs::DirBuilderExt;
        self.mode(0o700)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_manifests_and_presence() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("models")).unwrap();
        let files = vec![
            Chosen {
                name: "sub/a.gguf".into(),
                size: 4,
                sha256: None,
            },
            Chosen {
                name: "b.gguf".into(),
                size: 3,
                sha256: None,
            },
        ];
        let dir = store.snapshot_dir("o/m", "main", Some(C1));
        store.prepare(&dir, &files).unwrap();
        assert_eq!(dir, tmp.path().join(format!("models/o--m/snapshots/{C1}")));
        std::fs::write(dir.join("sub/a.gguf"), b"abcd").unwrap();
        std::fs::write(part_path(&dir, "b.gguf"), b"x").unwrap();
        // In place but never verified: not complete.
        assert_eq!(store.present(&dir, &files[0], None), (0, false));
        let rec = Verified::now(&dir, &files[0], None, Some(C1));
        assert_eq!(store.present(&dir, &files[0], rec.as_ref()), (4, true));
        assert_eq!(store.present(&dir, &files[1], None), (1, false));
        let mut m = Manifest {
            repo: "o/m".into(),
            revision: "main".into(),
            variant: "Q4 K/M".into(),
            files,
            complete: false,
            verified: rec.into_iter().collect(),
            commit: Some(C1.into()),
            refs: Vec::new(),
        };
        store.write_manifest(&dir, &m).unwrap();
        assert!(dir.join(".toolvisor-model-Q4_K_M.json").exists());
        // No ref yet (the download has not completed): no revision names it now.
        assert_eq!(store.manifests(), vec![(dir.clone(), m.clone())]);
        store.set_ref("o/m", "main", &dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("models/o--m/refs/main")).unwrap(),
            C1
        );
        assert_eq!(store.read_manifest(&dir, "Q4 K/M"), Some(m.clone()));
        m.refs = vec!["main".into()];
        assert_eq!(store.manifests(), vec![(dir.clone(), m)]);
        assert!(store.available().unwrap() > 0);
    }

    const C1: &str = "1111111111111111111111111111111111111111";
    const C2: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn commits_are_ids_and_nothing_else() {
        assert_eq!(commit_id(Some(C1)).as_deref(), Some(C1));
        assert_eq!(commit_id(Some(&"ab".repeat(32))), Some("ab".repeat(32)));
        for bad in [
            "../../etc",
            "main",
            "ABCDEF0123456789ABCDEF0123456789ABCDEF01",
            "abc",
        ] {
            assert_eq!(commit_id(Some(bad)), None, "{bad}");
        }
        assert_eq!(commit_id(None), None);
    }

    #[test]
    fn a_revision_that_moved_keeps_its_old_snapshot_named_by_commit_and_links_kept_files() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("models")).unwrap();
        let hash = |b: &[u8]| crate::hex(&sha2::Sha256::digest(b));
        let kept = Chosen {
            name: "w.gguf".into(),
            size: 4,
            sha256: Some(hash(b"wwww")),
        };
        let old_dir = store.snapshot_dir("o/m", "main", Some(C1));
        store
            .prepare(&old_dir, std::slice::from_ref(&kept))
            .unwrap();
        std::fs::write(old_dir.join("w.gguf"), b"wwww").unwrap();
        let rec = store.verify(&old_dir, &kept, None, Some(C1)).unwrap();
        let mut old = manifest("o/m", "main", "F32");
        (old.files, old.verified, old.commit) = (vec![kept.clone()], vec![rec], Some(C1.into()));
        store.write_manifest(&old_dir, &old).unwrap();
        store.set_ref("o/m", "main", &old_dir).unwrap();
        // main moves to C2, which keeps w.gguf: linked, not fetched, with its record.
        let new_dir = store.snapshot_dir("o/m", "main", Some(C2));
        let linked = store.link_kept_files("o/m", &new_dir, std::slice::from_ref(&kept));
        assert_eq!(linked.len(), 1);
        assert!(linked[0].holds(&new_dir, &kept, None));
        assert_eq!(std::fs::read(new_dir.join("w.gguf")).unwrap(), b"wwww");
        // A file already there is not linked over.
        assert!(
            store
                .link_kept_files("o/m", &new_dir, std::slice::from_ref(&kept))
                .is_empty()
        );
        let new = Manifest {
            commit: Some(C2.into()),
            verified: linked,
            ..old.clone()
        };
        store.write_manifest(&new_dir, &new).unwrap();
        // Until the ref moves, `o/m` is the old snapshot.
        let all = store.manifests();
        let refs: Vec<&(PathBuf, Manifest)> = all.iter().collect();
        assert_eq!(pick(&refs, "o/m").unwrap().0, old_dir);
        store.set_ref("o/m", "main", &new_dir).unwrap();
        let all = store.manifests();
        let refs: Vec<&(PathBuf, Manifest)> = all.iter().collect();
        assert_eq!(pick(&refs, "o/m").unwrap().0, new_dir);
        assert_eq!(pick(&refs, "o/m@main").unwrap().0, new_dir);
        assert_eq!(pick(&refs, "o/m@1111111").unwrap().0, old_dir);
        assert_eq!(pick(&refs, &format!("o/m@{C1}:f32")).unwrap().0, old_dir);
        let ms: Vec<&Manifest> = all.iter().map(|(_, m)| m).collect();
        let shown: Vec<String> = ms.iter().map(|m| short_name(m, &ms)).collect();
        assert_eq!(shown, vec!["o/m@111111111111", "o/m"], "{all:?}");
        // The old snapshot deleted: its refs go too (none here), the new one stays named.
        store.remove_refs_to("o/m", &new_dir);
        assert!(!tmp.path().join("models/o--m/refs/main").exists());
    }

    #[test]
    fn a_store_written_by_an_older_build_is_read_as_it_is() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("models")).unwrap();
        let legacy = store.legacy_dir("o/m", "main");
        std::fs::create_dir_all(&legacy).unwrap();
        let m = manifest("o/m", "main", "F32");
        store.write_manifest(&legacy, &m).unwrap();
        assert_eq!(store.manifests(), vec![(legacy.clone(), m.clone())]);
        // A download of main at a commit, completed: the ref makes its snapshot main's, and
        // the old directory is no revision's any more.
        let snap = store.snapshot_dir("o/m", "main", Some(C2));
        store.prepare(&snap, &[]).unwrap();
        let new = Manifest {
            commit: Some(C2.into()),
            refs: Vec::new(),
            ..m.clone()
        };
        store.write_manifest(&snap, &new).unwrap();
        store.set_ref("o/m", "main", &snap).unwrap();
        let all = store.manifests();
        let refs: Vec<&(PathBuf, Manifest)> = all.iter().collect();
        assert_eq!(pick(&refs, "o/m").unwrap().0, snap);
        let old = all.iter().find(|(d, _)| *d == legacy).unwrap();
        assert!(old.1.refs.is_empty());
    }

    #[test]
    fn a_directory_symlink_planted_in_the_store_is_neither_written_through_nor_read() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("models")).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("main")).unwrap();
        // A manifest elsewhere that the store must not list through the link.
        let m = manifest("o/m", "main", "F32");
        std::fs::write(
            elsewhere.join("main/.toolvisor-model-F32.json"),
            serde_json::to_vec(&m).unwrap(),
        )
        .unwrap();
        std::os::unix::fs::symlink(&elsewhere, store.root().join("o--m")).unwrap();
        assert!(store.manifests().is_empty());
        let files = vec![Chosen {
            name: "a.gguf".into(),
            size: 4,
            sha256: None,
        }];
        let dir = store.snapshot_dir("o/m", "main", Some(C1));
        let e = store.prepare(&dir, &files).unwrap_err();
        assert!(e.to_string().contains("follows no links"), "{e}");
        // A revision directory (an older build's layout) or the snapshots directory planted
        // as a link inside a real repo directory, too.
        std::fs::remove_file(store.root().join("o--m")).unwrap();
        std::fs::create_dir(store.root().join("o--m")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("main"), store.root().join("o--m/main")).unwrap();
        assert!(store.manifests().is_empty());
        std::os::unix::fs::symlink(&elsewhere, store.root().join("o--m/snapshots")).unwrap();
        std::fs::create_dir_all(elsewhere.join(C1)).unwrap();
        std::fs::write(
            elsewhere.join(C1).join(".toolvisor-model-F32.json"),
            serde_json::to_vec(&m).unwrap(),
        )
        .unwrap();
        assert!(store.manifests().is_empty());
        assert!(store.prepare(&dir, &files).is_err());
        assert!(!elsewhere.join(C1).join("a.gguf").exists());
    }

    fn manifest(repo: &str, revision: &str, variant: &str) -> Manifest {
        Manifest {
            repo: repo.into(),
            revision: revision.into(),
            variant: variant.into(),
            files: Vec::new(),
            complete: true,
            verified: Vec::new(),
            commit: None,
            refs: vec![revision.into()],
        }
    }

    fn set_mtime(path: &Path, secs: i64) {
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64))
            .unwrap();
    }

    #[test]
    fn a_file_is_complete_only_when_its_bytes_are_the_listed_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("models")).unwrap();
        let hash = |b: &[u8]| crate::hex(&sha2::Sha256::digest(b));
        let old = Chosen {
            name: "a.gguf".into(),
            size: 4,
            sha256: Some(hash(b"abcd")),
        };
        let dir = store.snapshot_dir("o/m", "main", None);
        store.prepare(&dir, std::slice::from_ref(&old)).unwrap();
        let path = dir.join("a.gguf");
        std::fs::write(&path, b"abcd").unwrap();
        set_mtime(&path, 1_000_000);
        // No record: hashed, and recorded.
        let rec = store
            .verify(&dir, &old, None, None)
            .expect("the listed bytes");
        assert_eq!(rec.sha256.as_deref(), old.sha256.as_deref());
        assert!(rec.holds(&dir, &old, None));
        // The listing changes to other bytes of the same size: the record does not hold and
        // the bytes on disk do not hash to the new listing.
        let new = Chosen {
            sha256: Some(hash(b"wxyz")),
            ..old.clone()
        };
        assert!(!rec.holds(&dir, &new, None));
        assert_eq!(store.verify(&dir, &new, Some(&rec), None), None);
        assert_eq!(store.present(&dir, &new, Some(&rec)), (0, false));
        // The file changes on disk with the same size: the record no longer holds (mtime),
        // and hashing finds the bytes it has now.
        std::fs::write(&path, b"wxyz").unwrap();
        set_mtime(&path, 2_000_000);
        assert!(!rec.holds(&dir, &old, None));
        assert_eq!(store.verify(&dir, &old, Some(&rec), None), None);
        let rec2 = store.verify(&dir, &new, Some(&rec), None).unwrap();
        assert_eq!(rec2.mtime_s, 2_000_000);
        // A file listed without a hash: its record holds at the commit it was verified at.
        let plain = Chosen {
            sha256: None,
            ..old.clone()
        };
        assert_eq!(store.verify(&dir, &plain, None, Some("c1")), None);
        let rec3 = Verified::now(&dir, &plain, None, Some("c1")).unwrap();
        assert!(
            store
                .verify(&dir, &plain, Some(&rec3), Some("c1"))
                .is_some()
        );
        assert_eq!(store.verify(&dir, &plain, Some(&rec3), Some("c2")), None);
    }

    #[test]
    fn names_pick_one_model_and_the_shortest_is_suggested() {
        assert_eq!(parse_name("o/m"), ("o/m", None, None));
        assert_eq!(parse_name("o/m:F32"), ("o/m", None, Some("F32")));
        assert_eq!(parse_name("o/m@v2"), ("o/m", Some("v2"), None));
        assert_eq!(parse_name("o/m@v2:F32"), ("o/m", Some("v2"), Some("F32")));
        let a = manifest("o/m", "main", "F32");
        let b = manifest("o/m", "v2", "F32");
        let c = manifest("o/m", "v2", "Q8_0");
        let d = manifest("x/y", "main", "F16");
        let all = [&a, &b, &c, &d];
        assert_eq!(short_name(&a, &all), "o/m@main");
        assert_eq!(short_name(&b, &all), "o/m@v2:F32");
        assert_eq!(short_name(&c, &all), "o/m:Q8_0");
        assert_eq!(short_name(&d, &all), "x/y");
        for m in all {
            let n = short_name(m, &all);
            assert_eq!(
                choose(&all, &n),
                Ok(all.iter().position(|o| *o == m).unwrap()),
                "{n}"
            );
        }
        // "o/m:F32:F32", what the old hint suggested for two revisions, names nothing.
        assert!(!all.iter().any(|o| names(o, "o/m:F32:F32")));
        assert!(names(&c, "o/m@v2:q8_0"));
    }
}
