//! Multi-file writes, all or nothing: `write_all` (the one multi-file writer: `apply_patch`,
//! `lsp_rename`, `lsp_edit`, `resolve accept`) and its crash journal. Before the first write, every
//! target's real path, its original bytes (or "did not exist") and the bytes about to be
//! written (or "to be deleted") go to one 0600 file under `<state_dir>/journal/`, fsynced;
//! then the files are written; then the journal is removed. A daemon that finds a journal at
//! start was killed between the two and rolls the files back, so all or nothing holds across
//! a crash. A file that holds neither its original nor the patched bytes was changed by
//! someone since: it is left alone and logged, never clobbered.
//!
//! `lsp_edit` writes through the same journal. The rollback runs in `Daemon::start`, before any
//! connection is accepted (`roll_back`, each file restored with `write_atomic` beneath a scope of
//! the journaled write's workdir): a file holding the written bytes gets its original back, one
//! holding the original is left as it is, and one holding anything else was changed by someone
//! since and is left alone and logged. One journal format serves every multi-file write.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value as Json, json};

use crate::error::Error;
use crate::paths::{Access, Resolved, Scope};
use crate::write::write_atomic;

/// One target of a journaled write.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The file's real path, as checked against the scope.
    pub real: PathBuf,
    /// Its bytes before the write; `None`: it did not exist.
    pub before: Option<Vec<u8>>,
    /// The bytes being written; `None`: it is being deleted.
    pub after: Option<Vec<u8>>,
}

/// The journal directory (`<state_dir>/journal`, 0700; each journal 0600: they hold whole
/// file contents).
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    seq: AtomicU64,
}

/// A journal on disk for writes in progress; [`Mark::finish`] removes it when the writes are
/// done (or undone). Dropped without `finish` (a panic) it stays, and the next start rolls
/// the files back.
#[must_use = "a journal left on disk rolls its files back at the next start"]
pub struct Mark {
    path: PathBuf,
}

impl Mark {
    /// The writes are complete (or were undone in process): forget them.
    pub fn finish(self) {
        if let Err(e) = std::fs::remove_file(&self.path) {
            tracing::error!(journal = %self.path.display(), error = %e, "cannot remove a finished write journal; the next start will roll its files back unless they changed");
        }
    }
}

/// What a rollback did with one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It held the written bytes and was put back.
    Restored(PathBuf),
    /// It still held its original bytes (not written yet).
    Untouched(PathBuf),
    /// It holds neither: someone changed it since; left alone.
    ChangedSince(PathBuf),
    /// It could not be checked or restored.
    Failed(PathBuf, String),
}

/// One file of an all-or-nothing write: where, what it held (`None`: it did not exist) and
/// what it gets (`None`: it is deleted).
pub struct Planned<'a> {
    pub target: &'a Resolved,
    pub before: Option<&'a [u8]>,
    pub after: Option<&'a [u8]>,
}

/// How one planned file is written: [`write_one`] in the daemon; tests inject failures.
pub type WriteOne<'a> = &'a dyn Fn(&Resolved, Option<&[u8]>) -> crate::error::Result<()>;

/// Write `bytes` to `target` with [`write_atomic`], or delete it (`None`).
pub fn write_one(target: &Resolved, bytes: Option<&[u8]>) -> crate::error::Result<()> {
    match bytes {
        Some(bytes) => write_atomic(target, bytes),
        None => target.remove_file(),
    }
}

/// How an all-or-nothing write failed, and what became of the files written before.
#[derive(Debug)]
pub struct Failed {
    /// The file whose write failed (its real path); `None`: the journal could not be
    /// written, so no file was touched.
    pub real: Option<std::path::PathBuf>,
    pub error: Error,
    /// Files written before the failure and put back as they were.
    pub restored: Vec<std::path::PathBuf>,
    /// Files written before the failure whose restore failed too, with why.
    pub unrestored: Vec<(std::path::PathBuf, Error)>,
}

/// Write every planned file or none — the one multi-file writer (`apply_patch`,
/// `lsp_rename`, `resolve accept`). With a journal, every target's before and after is on
/// disk before the first write, so a daemon killed mid-way has the files rolled back at its
/// next start; a write that fails puts back, in process, what was already written.
pub fn write_all(
    tool: &str,
    root: &Path,
    planned: &[Planned<'_>],
    journal: Option<&Journal>,
) -> crate::error::Result<()> {
    write_all_with(tool, root, planned, journal, &write_one).map_err(|f| f.error)
}

/// [`write_all`], each file written by `write`, reporting what was put back on a failure.
pub fn write_all_with(
    tool: &str,
    root: &Path,
    planned: &[Planned<'_>],
    journal: Option<&Journal>,
    write: WriteOne<'_>,
) -> Result<(), Box<Failed>> {
    let mark = match journal {
        Some(j) => {
            let entries: Vec<Entry> = planned
                .iter()
                .map(|p| Entry {
                    real: p.target.real.clone(),
                    before: p.before.map(<[u8]>::to_vec),
                    after: p.after.map(<[u8]>::to_vec),
                })
                .collect();
            Some(j.begin(tool, root, &entries).map_err(|e| {
                Box::new(Failed {
                    real: None,
                    error: Error::io("the write journal", "record", e),
                    restored: Vec::new(),
                    unrestored: Vec::new(),
                })
            })?)
        }
        None => None,
    };
    for (i, p) in planned.iter().enumerate() {
        if let Err(error) = write(p.target, p.after) {
            let mut restored = Vec::new();
            let mut unrestored = Vec::new();
            for prev in planned[..i].iter().rev() {
                match write(prev.target, prev.before) {
                    Ok(()) => restored.push(prev.target.real.clone()),
                    Err(e) => unrestored.push((prev.target.real.clone(), e)),
                }
            }
            restored.reverse();
            if let Some(mark) = mark {
                mark.finish();
            }
            return Err(Box::new(Failed {
                real: Some(p.target.real.clone()),
                error,
                restored,
                unrestored,
            }));
        }
    }
    if let Some(mark) = mark {
        mark.finish();
    }
    Ok(())
}

fn b64(bytes: &Option<Vec<u8>>) -> Json {
    bytes.as_ref().map_or(Json::Null, |b| json!(B64.encode(b)))
}

fn un_b64(v: &Json) -> Result<Option<Vec<u8>>, String> {
    match v {
        Json::Null => Ok(None),
        Json::String(s) => B64.decode(s).map(Some).map_err(|e| e.to_string()),
        _ => Err("not a string".into()),
    }
}

impl Journal {
    /// Open (creating, 0700) the journal directory `dir`.
    pub fn open(dir: &Path) -> std::io::Result<Journal> {
        crate::private_dir(dir, "the write journal directory")?;
        toolvisor_kit::private::remove_stale_temps(dir);
        Ok(Journal {
            dir: dir.to_path_buf(),
            seq: AtomicU64::new(0),
        })
    }

    /// Record `entries` of a write under the workdir `root`, durably, before the first write.
    pub fn begin(&self, tool: &str, root: &Path, entries: &[Entry]) -> std::io::Result<Mark> {
        let files: Vec<Json> = entries
            .iter()
            .map(|e| {
                json!({
                    "path": B64.encode(e.real.as_os_str().as_bytes()),
                    "before": b64(&e.before),
                    "after": b64(&e.after),
                })
            })
            .collect();
        let record = json!({
            "tool": tool,
            "root": B64.encode(root.as_os_str().as_bytes()),
            "files": files,
        });
        let path = self.dir.join(format!(
            "{tool}-{}-{}.json",
            std::process::id(),
            self.seq.fetch_add(1, Ordering::Relaxed)
        ));
        // Atomic and synced: a journal is on disk whole before the first write, or not at all.
        toolvisor_kit::private::write_private_file(
            &path,
            &serde_json::to_vec(&record).map_err(std::io::Error::other)?,
            "a write journal",
            toolvisor_kit::private::Durability::Synced,
        )
        .map_err(std::io::Error::other)?;
        Ok(Mark { path })
    }

    /// Roll back every journal left by a daemon that died mid-write, then remove it. Each
    /// file is checked against a scope of its workdir built by `scope` (so it is restored
    /// through the file tools' confined write path) and restored only if it holds the bytes
    /// that were being written. Call at start, before any call runs.
    pub fn roll_back(&self, scope: &dyn Fn(&Path) -> crate::error::Result<Scope>) -> Vec<Outcome> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            match roll_back_one(&path, scope) {
                Ok(mut done) => out.append(&mut done),
                Err(why) => {
                    tracing::error!(journal = %path.display(), error = %why, "cannot roll back an interrupted write journal; its files are left as they are")
                }
            }
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::error!(journal = %path.display(), error = %e, "cannot remove a rolled-back write journal");
            }
        }
        out
    }
}

fn roll_back_one(
    path: &Path,
    scope: &dyn Fn(&Path) -> crate::error::Result<Scope>,
) -> Result<Vec<Outcome>, String> {
    let bytes = toolvisor_kit::special::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let record: Json = serde_json::from_slice(&bytes).map_err(|e| format!("damaged: {e}"))?;
    let path_of = |v: &Json| -> Result<PathBuf, String> {
        let b = un_b64(v)?.ok_or("no path")?;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(b)))
    };
    let root = path_of(&record["root"])?;
    let scope =
        scope(&root).map_err(|e| format!("cannot open the workdir {}: {e}", root.display()))?;
    let files = record["files"].as_array().ok_or("no files")?;
    let tool = record["tool"].as_str().unwrap_or("multi-file write");
    let mut out = Vec::new();
    // Restore in reverse order of writing.
    for f in files.iter().rev() {
        let real = path_of(&f["path"])?;
        let before = un_b64(&f["before"])?;
        let after = un_b64(&f["after"])?;
        let outcome = restore(&scope, &real, before.as_deref(), after.as_deref());
        match &outcome {
            Outcome::Restored(p) => {
                tracing::warn!(path = %p.display(), tool, "restored a file written by a multi-file write that a crash interrupted")
            }
            Outcome::ChangedSince(p) => {
                tracing::error!(path = %p.display(), tool, "not restoring a file of an interrupted multi-file write: it holds neither its original nor the new content (changed since); left as it is")
            }
            Outcome::Failed(p, why) => {
                tracing::error!(path = %p.display(), tool, error = %why, "cannot restore a file of an interrupted multi-file write")
            }
            Outcome::Untouched(_) => {}
        }
        out.push(outcome);
    }
    Ok(out)
}

/// Put `real` back to `before` (`None`: delete it) if it holds `after`, through `scope`'s
/// confined writer; a file that holds `before` is left, one that holds anything else was
/// changed since and is left alone, never clobbered.
pub fn restore(scope: &Scope, real: &Path, before: Option<&[u8]>, after: Option<&[u8]>) -> Outcome {
    let failed = |why: String| Outcome::Failed(real.to_path_buf(), why);
    let Some(given) = real.to_str() else {
        return failed("the path is not UTF-8".into());
    };
    let target = match scope.resolve(given, Access::Write) {
        Ok(t) => t,
        Err(e) => return failed(e.to_string()),
    };
    if target.real != real {
        return failed(format!(
            "it resolves to {} now (a symbolic link was put on its path); not followed",
            target.real.display()
        ));
    }
    let now = match crate::edit::load(&target) {
        Ok(b) => Some(b),
        Err(Error::NotFound { .. }) => None,
        Err(e) => return failed(e.to_string()),
    };
    if now.as_deref() == before {
        return Outcome::Untouched(real.to_path_buf());
    }
    if now.as_deref() != after {
        return Outcome::ChangedSince(real.to_path_buf());
    }
    let done = match before {
        Some(bytes) => write_atomic(&target, bytes),
        None => target.remove_file(),
    };
    match done {
        Ok(()) => Outcome::Restored(real.to_path_buf()),
        Err(e) => failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_failed_write_puts_back_the_files_written_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = Scope::new(dir.path(), &[], false).unwrap();
        for n in ["a", "b", "c"] {
            std::fs::write(dir.path().join(n), format!("old {n}")).unwrap();
        }
        let targets: Vec<Resolved> = ["a", "b", "c", "new"]
            .iter()
            .map(|n| s.resolve(n, Access::Write).unwrap())
            .collect();
        let planned: Vec<Planned> = targets
            .iter()
            .zip([Some(&b"old a"[..]), Some(b"old b"), Some(b"old c"), None])
            .map(|(t, before)| Planned {
                target: t,
                before,
                after: Some(b"new"),
            })
            .collect();
        let failing = |t: &Resolved, bytes: Option<&[u8]>| {
            if t.real.ends_with("c") && bytes == Some(b"new") {
                return Err(Error::io("c", "write", std::io::Error::other("disk full")));
            }
            write_one(t, bytes)
        };
        let failed = write_all_with("test", s.root(), &planned, None, &failing).unwrap_err();
        assert_eq!(failed.real.as_deref(), Some(targets[2].real.as_path()));
        assert_eq!(
            failed.restored,
            vec![targets[0].real.clone(), targets[1].real.clone()]
        );
        assert!(failed.unrestored.is_empty());
        for n in ["a", "b", "c"] {
            assert_eq!(
                std::fs::read_to_string(dir.path().join(n)).unwrap(),
                format!("old {n}")
            );
        }
        assert!(!dir.path().join("new").exists());
        write_all("test", s.root(), &planned, None).unwrap();
        for n in ["a", "b", "c", "new"] {
            assert_eq!(std::fs::read_to_string(dir.path().join(n)).unwrap(), "new");
        }
    }

    #[test]
    fn rolls_back_written_files_and_leaves_changed_ones() {
        let work = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = work.path().canonicalize().unwrap();
        let p = |n: &str| root.join(n);
        std::fs::write(p("written.txt"), "new").unwrap();
        std::fs::write(p("pending.txt"), "old").unwrap();
        std::fs::write(p("user.txt"), "mine").unwrap();
        std::fs::write(p("created.txt"), "fresh").unwrap();
        let journal = Journal::open(&state.path().join("journal")).unwrap();
        let e = |n: &str, before: Option<&str>, after: Option<&str>| Entry {
            real: p(n),
            before: before.map(|s| s.as_bytes().to_vec()),
            after: after.map(|s| s.as_bytes().to_vec()),
        };
        let mark = journal
            .begin(
                "apply_patch",
                &root,
                &[
                    e("written.txt", Some("old"), Some("new")),
                    e("pending.txt", Some("old"), Some("new")),
                    e("user.txt", Some("old"), Some("new")),
                    e("created.txt", None, Some("fresh")),
                    e("deleted.txt", Some("gone"), None),
                ],
            )
            .unwrap();
        std::mem::forget(mark);
        let mode = std::fs::metadata(state.path().join("journal"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let outcomes = journal.roll_back(&|r| Scope::new(r, &[], false));
        assert_eq!(std::fs::read_to_string(p("written.txt")).unwrap(), "old");
        assert_eq!(std::fs::read_to_string(p("pending.txt")).unwrap(), "old");
        assert_eq!(std::fs::read_to_string(p("user.txt")).unwrap(), "mine");
        assert!(!p("created.txt").exists());
        assert_eq!(std::fs::read_to_string(p("deleted.txt")).unwrap(), "gone");
        assert!(outcomes.contains(&Outcome::ChangedSince(p("user.txt"))));
        assert!(outcomes.contains(&Outcome::Untouched(p("pending.txt"))));
        assert_eq!(
            std::fs::read_dir(state.path().join("journal"))
                .unwrap()
                .count(),
            0,
            "the journal is removed once rolled back"
        );
    }

    /// A FIFO where a journal record lies (a `bash` call can make one) is passed by at start,
    /// never waited on: the old code opened it and the daemon never finished starting.
    #[test]
    fn a_fifo_in_the_journal_is_not_waited_on() {
        let state = tempfile::tempdir().unwrap();
        let journal = Journal::open(&state.path().join("journal")).unwrap();
        let fifo = state.path().join("journal/1.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(journal.roll_back(&|r| Scope::new(r, &[], false)));
        });
        let outcomes = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the roll-back waited on the FIFO");
        assert!(outcomes.is_empty(), "{outcomes:?}");
        assert!(!fifo.exists(), "the FIFO is removed like a damaged record");
    }
}
