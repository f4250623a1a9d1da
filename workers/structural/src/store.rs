//! Staged edits, persisted on disk so a daemon restart loses none. Each edit belongs to the
//! conversation that staged it and holds, per file, the content captured at staging and the
//! new content. Accept resolves every file through the accepting call's file scope, reads it
//! beneath the scope's root and compares it with its snapshot, and rejects the whole change if
//! any differs; otherwise it writes every file through the file tools' one multi-file writer
//! (`toolvisor_files::journal::write_all`: journaled, so a crash in the middle is rolled back at
//! the next start, and a failed write puts back the files already written).
//!
//! On disk (`dir`): `next_id` (the next edit number, so ids stay unique across restarts) and
//! one `edit_<n>.json` per edit; resolved edits keep a small tombstone (no contents) so a
//! second resolve gets "already accepted", not "unknown".
//!
//! A staged edit is on disk (`<state_dir>/structural/edits/`, through
//! `kit::private::write_private_file`, synced; `next_id` persisted before an id is used) before
//! `ast_edit` answers, so a daemon restart loses none and ids never repeat. At accept, every file
//! must resolve in the accepting call's scope (else `out_of_scope`) to its staged real path (a
//! symbolic link put in its place is a `conflict`: a staged file is replaced, never written through
//! a link). The edit is marked accepting on disk before the first write; a store that finds such a
//! mark when it opens (after the journal's rollback, `Daemon::start`) stages the edit again,
//! putting back through the file scope any file still holding the new content (the journal has
//! normally done so already; a record of an older version had no journal).

use std::collections::BTreeMap;
use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use toolvisor_files::Scope;
use toolvisor_files::journal::{self, Journal};
use toolvisor_files::paths::{Access, Resolved};

use crate::rewrite::Proposal;
use crate::{Error, Result};

/// Where an edit is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditState {
    Staged,
    /// Files are being written; found at open only after a crash, and rolled back.
    Accepting,
    Accepted,
    Discarded,
}

impl std::fmt::Display for EditState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EditState::Staged => "staged",
            EditState::Accepting => "being accepted",
            EditState::Accepted => "accepted",
            EditState::Discarded => "discarded",
        })
    }
}

/// A file that no longer holds the content captured at staging.
#[derive(Clone, Debug, Serialize)]
pub struct Changed {
    pub path: PathBuf,
    pub why: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredFile {
    path: PathBuf,
    replacements: usize,
    /// Absent in tombstones.
    before: Option<String>,
    after: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Record {
    id: String,
    conversation: String,
    state: EditState,
    created_ms: u64,
    resolved_ms: Option<u64>,
    pattern: String,
    rewrite: String,
    language: String,
    replacements: usize,
    files: Vec<StoredFile>,
}

/// What the store keeps in memory about an edit (no file contents).
#[derive(Clone, Debug, Serialize)]
pub struct EditInfo {
    pub id: String,
    pub conversation: String,
    pub state: EditState,
    pub created_ms: u64,
    pub resolved_ms: Option<u64>,
    pub language: String,
    pub replacements: usize,
    /// (path, replacements) per file.
    pub files: Vec<(PathBuf, usize)>,
}

impl From<&Record> for EditInfo {
    fn from(r: &Record) -> Self {
        EditInfo {
            id: r.id.clone(),
            conversation: r.conversation.clone(),
            state: r.state,
            created_ms: r.created_ms,
            resolved_ms: r.resolved_ms,
            language: r.language.clone(),
            replacements: r.replacements,
            files: r
                .files
                .iter()
                .map(|f| (f.path.clone(), f.replacements))
                .collect(),
        }
    }
}

/// Why a staged file may not be written any more (the accepting call's scope said no); the
/// file scope's own error, kept whole so the caller can show it.
pub type Refusal = Box<dyn std::error::Error + Send + Sync>;

/// The result of staging.
#[derive(Clone, Debug, Serialize)]
pub struct Staged {
    pub id: String,
    pub files: usize,
    pub replacements: usize,
}

/// The result of an accept.
#[derive(Clone, Debug, Serialize)]
pub struct Accepted {
    pub id: String,
    pub written: Vec<PathBuf>,
    pub replacements: usize,
}

/// Staged edits of every conversation, persisted under one directory.
pub struct EditStore {
    dir: PathBuf,
    inner: Mutex<Inner>,
    /// Serializes resolves, so two accepts never interleave their writes.
    resolving: Mutex<()>,
}

struct Inner {
    next: u64,
    edits: BTreeMap<u64, EditInfo>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn number(id: &str) -> Option<u64> {
    id.strip_prefix("edit_")?.parse().ok()
}

fn ago(ms: Option<u64>) -> String {
    let Some(ms) = ms else {
        return "earlier".into();
    };
    let s = now_ms().saturating_sub(ms) / 1000;
    match s {
        0..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} days ago", s / 86_400),
    }
}

impl EditStore {
    /// Open (creating) the store in `dir`. A record still marked accepting was left by a
    /// crash mid-accept: its files that hold the new content are put back (through
    /// `scope_of`'s scope of each file's directory, the file tools' confined writer; the
    /// write journal has normally done so already) and it is staged again.
    pub fn open(dir: &Path, scope_of: ScopeOf<'_>) -> Result<EditStore> {
        let store_err = |message: String| Error::Store {
            path: dir.to_path_buf(),
            message,
        };
        // Staged edits hold whole files: the store is ours alone, whatever the umask or an
        // older version left.
        toolvisor_kit::private::ensure_own_dir(dir, "the staged-edit store")
            .map_err(|e| store_err(e.to_string()))?;
        // A record's temp file left by a daemon killed mid-write.
        toolvisor_kit::private::remove_stale_temps(dir);
        let mut next = match toolvisor_kit::special::read_to_string(&dir.join("next_id")) {
            Ok(text) => text
                .trim()
                .parse::<u64>()
                .map_err(|_| store_err(format!("next_id holds {text:?}, not a number")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
            Err(e) => return Err(store_err(format!("cannot read next_id: {e}"))),
        };
        let mut edits = BTreeMap::new();
        let entries = fs::read_dir(dir).map_err(|e| store_err(format!("cannot list: {e}")))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(n) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(number)
            else {
                continue;
            };
            let mut record = match read_record(&path) {
                Ok(r) => r,
                Err(e) => {
                    // One damaged record must not take every other edit down with it.
                    tracing::error!(path = %path.display(), error = %e, "unreadable staged edit; ignored");
                    next = next.max(n + 1);
                    continue;
                }
            };
            if record.state == EditState::Accepting {
                roll_back_interrupted(&mut record, scope_of);
                write_record(&path, &record).map_err(|e| {
                    store_err(format!("cannot save the rollback of {}: {e}", record.id))
                })?;
            }
            next = next.max(n + 1);
            edits.insert(n, EditInfo::from(&record));
        }
        Ok(EditStore {
            dir: dir.to_path_buf(),
            inner: Mutex::new(Inner { next, edits }),
            resolving: Mutex::new(()),
        })
    }

    fn path_of(&self, n: u64) -> PathBuf {
        self.dir.join(format!("edit_{n}.json"))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Persist `proposal` as a new staged edit of `conversation`.
    pub fn stage(
        &self,
        conversation: &str,
        pattern: &str,
        rewrite: &str,
        proposal: &Proposal,
    ) -> Result<Staged> {
        let n = {
            let mut inner = self.lock();
            let n = inner.next;
            // The counter is on disk before the id is used: ids never repeat, even after
            // a crash.
            write_bytes(&self.dir.join("next_id"), (n + 1).to_string().as_bytes()).map_err(
                |e| Error::Io {
                    path: self.dir.join("next_id"),
                    source: e,
                },
            )?;
            inner.next = n + 1;
            n
        };
        let record = Record {
            id: format!("edit_{n}"),
            conversation: conversation.to_string(),
            state: EditState::Staged,
            created_ms: now_ms(),
            resolved_ms: None,
            pattern: pattern.to_string(),
            rewrite: rewrite.to_string(),
            language: proposal.language.to_string(),
            replacements: proposal.replacements,
            files: proposal
                .files
                .iter()
                .map(|f| StoredFile {
                    path: f.path.clone(),
                    replacements: f.replacements,
                    before: Some(f.before.clone()),
                    after: Some(f.after.clone()),
                })
                .collect(),
        };
        let path = self.path_of(n);
        write_record(&path, &record).map_err(|e| Error::Io { path, source: e })?;
        self.lock().edits.insert(n, EditInfo::from(&record));
        Ok(Staged {
            id: record.id,
            files: proposal.files.len(),
            replacements: proposal.replacements,
        })
    }

    /// The edit `id` if it belongs to `conversation`. Another conversation's edit is
    /// reported exactly like an unknown one.
    pub fn get(&self, conversation: &str, id: &str) -> Result<EditInfo> {
        let not_found = || Error::EditNotFound {
            id: id.to_string(),
            conversation: conversation.to_string(),
        };
        let n = number(id.trim()).ok_or_else(not_found)?;
        let inner = self.lock();
        let info = inner.edits.get(&n).ok_or_else(not_found)?;
        if info.conversation != conversation {
            return Err(not_found());
        }
        Ok(info.clone())
    }

    /// Edits of `conversation`, oldest first.
    pub fn list(&self, conversation: &str) -> Vec<EditInfo> {
        self.lock()
            .edits
            .values()
            .filter(|e| e.conversation == conversation)
            .cloned()
            .collect()
    }

    fn staged(&self, conversation: &str, id: &str) -> Result<(u64, EditInfo)> {
        let info = self.get(conversation, id)?;
        match info.state {
            EditState::Staged => Ok((number(&info.id).unwrap_or(0), info)),
            state => Err(Error::EditResolved {
                id: info.id.clone(),
                state,
                ago: ago(info.resolved_ms),
            }),
        }
    }

    fn save(&self, n: u64, record: &Record) -> Result<()> {
        let path = self.path_of(n);
        write_record(&path, record).map_err(|e| Error::Io { path, source: e })?;
        self.lock().edits.insert(n, EditInfo::from(record));
        Ok(())
    }

    fn load(&self, n: u64) -> Result<Record> {
        let path = self.path_of(n);
        read_record(&path).map_err(|message| Error::Store {
            path: path.clone(),
            message,
        })
    }

    /// Drop a staged edit; nothing is written.
    pub fn discard(&self, conversation: &str, id: &str) -> Result<EditInfo> {
        let _resolving = self.resolving.lock().unwrap_or_else(|p| p.into_inner());
        let (n, _) = self.staged(conversation, id)?;
        let mut record = self.load(n)?;
        record.state = EditState::Discarded;
        record.resolved_ms = Some(now_ms());
        tombstone(&mut record);
        self.save(n, &record)?;
        Ok(EditInfo::from(&record))
    }

    /// Accept, writing through the file tools' atomic writer (see [`EditStore::accept_with`]).
    pub fn accept(
        &self,
        conversation: &str,
        id: &str,
        scope: &Scope,
        journal: Option<&Journal>,
    ) -> Result<Accepted> {
        self.accept_with(conversation, id, scope, journal, &journal::write_one)
    }

    /// Accept: every file must resolve for writing in `scope` (else [`Error::Refused`],
    /// nothing read or written, the edit stays staged), must still be where it was (its real
    /// path unchanged: not swapped for a symbolic link) and must still hold its staging
    /// snapshot, read beneath the scope's root (else [`Error::Conflict`], nothing written, the
    /// edit stays staged). Then every file is written by `write_all` (journaled in `journal`);
    /// if one write fails, those already written are restored and the edit stays staged.
    pub fn accept_with(
        &self,
        conversation: &str,
        id: &str,
        scope: &Scope,
        journal: Option<&Journal>,
        write: journal::WriteOne<'_>,
    ) -> Result<Accepted> {
        let _resolving = self.resolving.lock().unwrap_or_else(|p| p.into_inner());
        let (n, info) = self.staged(conversation, id)?;
        let mut record = self.load(n)?;
        let mut targets = Vec::with_capacity(record.files.len());
        let mut refused: Vec<(PathBuf, Refusal)> = Vec::new();
        for file in &record.files {
            let resolved = match file.path.to_str() {
                Some(text) => scope.resolve(text, Access::Write),
                None => Err(toolvisor_files::Error::bad(
                    "path",
                    format!("{} is not valid UTF-8", file.path.display()),
                )),
            };
            match resolved {
                Ok(target) => targets.push(target),
                Err(why) => refused.push((file.path.clone(), Box::new(why))),
            }
        }
        if !refused.is_empty() {
            let more = refused.len() - 1;
            let (path, source) = refused.swap_remove(0);
            return Err(Error::Refused {
                id: info.id,
                path,
                source,
                more,
            });
        }
        let mut changed = Vec::new();
        for (file, target) in record.files.iter().zip(&targets) {
            if target.real != file.path {
                changed.push(Changed {
                    path: file.path.clone(),
                    why: format!(
                        "now resolves to {} (a symbolic link is on its path since staging; a staged file is written at its real path only)",
                        target.real.display()
                    ),
                });
                continue;
            }
            let before = file.before.as_deref().unwrap_or_default();
            match read_beneath(target) {
                Ok(now) if now == before.as_bytes() => {}
                Ok(_) => changed.push(Changed {
                    path: file.path.clone(),
                    why: "modified since staging".into(),
                }),
                Err(toolvisor_files::Error::NotFound { .. }) => changed.push(Changed {
                    path: file.path.clone(),
                    why: "deleted since staging".into(),
                }),
                Err(e) => changed.push(Changed {
                    path: file.path.clone(),
                    why: format!("unreadable: {e}"),
                }),
            }
        }
        if !changed.is_empty() {
            return Err(Error::Conflict {
                id: info.id,
                total: record.files.len(),
                changed,
            });
        }
        // Marked before the first write: a crash from here on leaves the edit to be staged
        // again at the next open (its files rolled back by the journal).
        record.state = EditState::Accepting;
        self.save(n, &record)?;
        let planned: Vec<journal::Planned<'_>> = record
            .files
            .iter()
            .zip(&targets)
            .map(|(file, target)| journal::Planned {
                target,
                before: Some(file.before.as_deref().unwrap_or_default().as_bytes()),
                after: Some(file.after.as_deref().unwrap_or_default().as_bytes()),
            })
            .collect();
        if let Err(failed) =
            journal::write_all_with("resolve", scope.root(), &planned, journal, write)
        {
            let failed = *failed;
            let mut back = record.clone();
            back.state = EditState::Staged;
            self.save(n, &back)?;
            return Err(Error::WriteFailed {
                id: info.id,
                path: failed.real.unwrap_or_else(|| scope.root().to_path_buf()),
                source: Box::new(failed.error),
                restored: failed.restored,
                unrestored: failed
                    .unrestored
                    .into_iter()
                    .map(|(p, e)| (p, e.to_string()))
                    .collect(),
            });
        }
        let written: Vec<PathBuf> = record.files.iter().map(|f| f.path.clone()).collect();
        record.state = EditState::Accepted;
        record.resolved_ms = Some(now_ms());
        tombstone(&mut record);
        self.save(n, &record)?;
        Ok(Accepted {
            id: info.id,
            written,
            replacements: record.replacements,
        })
    }
}

/// The whole file `target`, opened beneath its scope's root (a directory swapped for a
/// symbolic link since the check is not followed out).
fn read_beneath(target: &Resolved) -> std::result::Result<Vec<u8>, toolvisor_files::Error> {
    let mut file = target.open()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| target.error("read", e))?;
    Ok(bytes)
}

fn tombstone(record: &mut Record) {
    for file in &mut record.files {
        file.before = None;
        file.after = None;
    }
}

/// The file scope of a directory, for putting back the files of an interrupted accept.
pub type ScopeOf<'a> = &'a dyn Fn(&Path) -> toolvisor_files::Result<Scope>;

/// After a crash during an accept: put back every file that holds the new content, through
/// the file tools' confined writer (the journal's own restore), and stage the edit again.
fn roll_back_interrupted(record: &mut Record, scope_of: ScopeOf<'_>) {
    for file in &record.files {
        let (Some(before), Some(after)) = (&file.before, &file.after) else {
            continue;
        };
        let dir = file.path.parent().unwrap_or(Path::new("/"));
        let outcome = match scope_of(dir) {
            Ok(scope) => journal::restore(
                &scope,
                &file.path,
                Some(before.as_bytes()),
                Some(after.as_bytes()),
            ),
            Err(e) => journal::Outcome::Failed(file.path.clone(), e.to_string()),
        };
        match outcome {
            journal::Outcome::Restored(path) => tracing::warn!(
                edit = record.id, path = %path.display(),
                "restored a file written by an accept that a crash interrupted"
            ),
            journal::Outcome::Untouched(_) => {}
            journal::Outcome::ChangedSince(path) => tracing::error!(
                edit = record.id, path = %path.display(),
                "not restoring a file of an interrupted accept: it holds neither its staged nor its new content (changed since); left as it is"
            ),
            journal::Outcome::Failed(path, why) => tracing::error!(
                edit = record.id, path = %path.display(), error = %why,
                "cannot restore a file written by an interrupted accept"
            ),
        }
    }
    record.state = EditState::Staged;
}

/// The store's own files (records, `next_id`) hold whole file contents and the id counter:
/// private (0600) and synced, through the daemon's one writer of private state.
fn write_bytes(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    toolvisor_kit::private::write_private_file(
        path,
        bytes,
        "a staged-edit record",
        toolvisor_kit::private::Durability::Synced,
    )
    .map_err(std::io::Error::other)
}

fn write_record(path: &Path, record: &Record) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    write_bytes(path, &bytes)
}

fn read_record(path: &Path) -> std::result::Result<Record, String> {
    let bytes = toolvisor_kit::special::read(path).map_err(|e| format!("cannot read: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("damaged record: {e}"))
}
