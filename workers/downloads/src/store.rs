//! The model store on disk: one directory per repo and revision
//! (`<store>/<owner>--<name>/<revision>/`), the repo's files under it as the repo names them,
//! a `.part` file beside each file still arriving, and one manifest per downloaded variant
//! (`.toolvisor-model-<variant>.json`: its files, sizes, hashes, whether it is complete, and
//! what was verified of each file in place: its size, mtime, sha256, the commit it came from).
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

/// What a variant's manifest says.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub repo: String,
    pub revision: String,
    pub variant: String,
    pub files: Vec<Chosen>,
    /// Every file verified and in place.
    pub complete: bool,
    /// What was verified of each file in place (files never verified have no entry).
    #[serde(default)]
    pub verified: Vec<Verified>,
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

    /// `<store>/<owner>--<name>/<revision>` (both already checked by `choose`); a pull
    /// request's `refs/pr/N` is one directory, `refs%2Fpr%2FN` (`%` is in no plain revision,
    /// so no branch can share it).
    pub fn model_dir(&self, repo: &str, revision: &str) -> PathBuf {
        self.root
            .join(repo.replace('/', "--"))
            .join(revision.replace('/', "%2F"))
    }

    fn manifest_path(&self, repo: &str, revision: &str, variant: &str) -> PathBuf {
        self.model_dir(repo, revision)
            .join(format!(".toolvisor-model-{}.json", label_part(variant)))
    }

    /// Create the model's directory and the directories its files need (0700).
    pub fn prepare(
        &self,
        repo: &str,
        revision: &str,
        files: &[Chosen],
    ) -> Result<PathBuf, DownloadError> {
        let dir = self.model_dir(repo, revision);
        // The store follows no link: a repo or revision directory planted as a symlink (to
        // put the files elsewhere) is refused, not written through. `create` below makes
        // real directories only.
        for own in [dir.parent().unwrap_or(&dir), dir.as_path()] {
            if let Ok(m) = std::fs::symlink_metadata(own)
                && !m.is_dir()
            {
                return Err(DownloadError::io(
                    "refusing to use",
                    own,
                    "it is not a directory of the store (a symbolic link or a file is there; the store follows no links): move it away",
                ));
            }
        }
        for f in files {
            let parent = dir.join(&f.name);
            let parent = parent.parent().unwrap_or(&dir);
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode_private()
                .create(parent)
                .map_err(|e| DownloadError::io("cannot create", parent, e))?;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode_private()
            .create(&dir)
            .map_err(|e| DownloadError::io("cannot create", &dir, e))?;
        Ok(dir)
    }

    pub fn write_manifest(&self, m: &Manifest) -> Result<(), DownloadError> {
        let path = self.manifest_path(&m.repo, &m.revision, &m.variant);
        let bytes = serde_json::to_vec_pretty(m)
            .map_err(|e| DownloadError::io("cannot encode", &path, e))?;
        write_private_file(&path, &bytes, "a model manifest", Durability::Synced)
            .map_err(|e| DownloadError::io("cannot write", &path, e))
    }

    /// Remove `m`'s manifest (its model is gone).
    pub fn remove_manifest(&self, m: &Manifest) -> Result<(), DownloadError> {
        let path = self.manifest_path(&m.repo, &m.revision, &m.variant);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(DownloadError::io("cannot remove", &path, e)),
        }
    }

    /// The manifest of `variant`, if there is one.
    pub fn read_manifest(&self, repo: &str, revision: &str, variant: &str) -> Option<Manifest> {
        let bytes = std::fs::read(self.manifest_path(repo, revision, variant)).ok()?;
        serde_json::from_slice(&bytes).ok()
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
        let got = crate::transfer::hex(&hasher.finalize());
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
        if let Some(have) = crate::ranged::have(&part, file.size) {
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

    /// Every manifest in the store.
    pub fn manifests(&self) -> Vec<(PathBuf, Manifest)> {
        let mut out = Vec::new();
        let Ok(repos) = std::fs::read_dir(&self.root) else {
            return out;
        };
        // Only real directories: a planted symlink is not entered.
        let real_dir = |e: &std::fs::DirEntry| e.file_type().is_ok_and(|t| t.is_dir());
        for repo in repos.flatten().filter(real_dir) {
            let Ok(revs) = std::fs::read_dir(repo.path()) else {
                continue;
            };
            for rev in revs.flatten().filter(real_dir) {
                let dir = rev.path();
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().to_string();
                    let manifest = name.starts_with(".toolvisor-model-")
                        && name.ends_with(".json")
                        && e.file_type().is_ok_and(|t| t.is_file());
                    if !manifest {
                        continue;
                    }
                    let parsed = std::fs::read(e.path())
                        .ok()
                        .and_then(|b| serde_json::from_slice::<Manifest>(&b).ok());
                    if let Some(m) = parsed {
                        out.push((dir.clone(), m));
                    }
                }
            }
        }
        out.sort_by(|a, b| {
            (&a.1.repo, &a.1.revision, &a.1.variant).cmp(&(&b.1.repo, &b.1.revision, &b.1.variant))
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
/// takes it).
pub fn names(m: &Manifest, name: &str) -> bool {
    let (repo, revision, variant) = parse_name(name);
    m.repo == repo
        && revision.is_none_or(|r| r == m.revision)
        && variant.is_none_or(|v| v.eq_ignore_ascii_case(&m.variant))
}

/// Which of `models` (directory and manifest) `name` names: the one, or none or several,
/// each with the names of those it is among (the shortest that picks each alone, as
/// [`short_name`] gives them): the store's names for none, the candidates' for several.
pub fn pick<'a>(
    models: &[&'a (PathBuf, Manifest)],
    name: &str,
) -> Result<&'a (PathBuf, Manifest), Picked> {
    let all: Vec<&Manifest> = models.iter().map(|(_, m)| m).collect();
    let found: Vec<&'a (PathBuf, Manifest)> = models
        .iter()
        .copied()
        .filter(|(_, m)| names(m, name))
        .collect();
    let shown = |of: &[&'a (PathBuf, Manifest)]| {
        of.iter()
            .map(|(_, m)| short_name(m, &all))
            .collect::<Vec<_>>()
    };
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(Picked::None(shown(models))),
        many => Err(Picked::Several(shown(many))),
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
/// `repo@revision`, else `repo@revision:variant`.
pub fn short_name(m: &Manifest, all: &[&Manifest]) -> String {
    let candidates = [
        m.repo.clone(),
        format!("{}:{}", m.repo, m.variant),
        format!("{}@{}", m.repo, m.revision),
        format!("{}@{}:{}", m.repo, m.revision, m.variant),
    ];
    let last = candidates[3].clone();
    candidates
        .into_iter()
        .find(|n| all.iter().filter(|o| names(o, n)).count() == 1)
        .unwrap_or(last)
}

/// `<dir>/<name>.part`.
pub fn part_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.part"))
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
        let dir = store.prepare("o/m", "main", &files).unwrap();
        assert_eq!(dir, tmp.path().join("models/o--m/main"));
        std::fs::write(dir.join("sub/a.gguf"), b"abcd").unwrap();
        std::fs::write(part_path(&dir, "b.gguf"), b"x").unwrap();
        // In place but never verified: not complete.
        assert_eq!(store.present(&dir, &files[0], None), (0, false));
        let rec = Verified::now(&dir, &files[0], None, Some("c1"));
        assert_eq!(store.present(&dir, &files[0], rec.as_ref()), (4, true));
        assert_eq!(store.present(&dir, &files[1], None), (1, false));
        let m = Manifest {
            repo: "o/m".into(),
            revision: "main".into(),
            variant: "Q4 K/M".into(),
            files,
            complete: false,
            verified: rec.into_iter().collect(),
        };
        store.write_manifest(&m).unwrap();
        assert!(dir.join(".toolvisor-model-Q4_K_M.json").exists());
        assert_eq!(store.manifests(), vec![(dir.clone(), m.clone())]);
        assert_eq!(store.read_manifest("o/m", "main", "Q4 K/M"), Some(m));
        assert!(store.available().unwrap() > 0);
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
        let e = store.prepare("o/m", "main", &files).unwrap_err();
        assert!(e.to_string().contains("follows no links"), "{e}");
        // A revision directory planted as a link inside a real repo directory, too.
        std::fs::remove_file(store.root().join("o--m")).unwrap();
        std::fs::create_dir(store.root().join("o--m")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("main"), store.root().join("o--m/main")).unwrap();
        assert!(store.manifests().is_empty());
        assert!(store.prepare("o/m", "main", &files).is_err());
        assert!(!elsewhere.join("main/a.gguf").exists());
    }

    fn manifest(repo: &str, revision: &str, variant: &str) -> Manifest {
        Manifest {
            repo: repo.into(),
            revision: revision.into(),
            variant: variant.into(),
            files: Vec::new(),
            complete: true,
            verified: Vec::new(),
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
        let hash = |b: &[u8]| crate::transfer::hex(&sha2::Sha256::digest(b));
        let old = Chosen {
            name: "a.gguf".into(),
            size: 4,
            sha256: Some(hash(b"abcd")),
        };
        let dir = store
            .prepare("o/m", "main", std::slice::from_ref(&old))
            .unwrap();
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
            assert_eq!(all.iter().filter(|o| names(o, &n)).count(), 1, "{n}");
        }
        // "o/m:F32:F32", what the old hint suggested for two revisions, names nothing.
        assert!(!all.iter().any(|o| names(o, "o/m:F32:F32")));
        assert!(names(&c, "o/m@v2:q8_0"));
    }
}
