//! The store: one SQLite database (WAL, so a SIGKILL mid-write loses nothing committed) with
//! the documents, an FTS5 index of their title, body and tags, and every change as a revision.
//! Every read and write a tool makes names the collections its run may reach ([`Reach`]); the
//! store filters by them in SQL, so a document outside them is `not_found`, whatever was asked.
//!
//! The call's `Reach` is computed from the configuration and the session's surface tier, never from
//! arguments, passed to every query and applied in SQL (`collection IN json_each(?)`); a sensitive
//! collection is never in a `Reach`, and what is out of reach answers exactly like what does not
//! exist. Text from a call reaches SQLite only as bound parameters, and a search only as quoted
//! FTS5 terms and phrases (`fts_query`). Documents are keyed by their original's path, so ids are
//! stable across re-conversion and restarts; the index covers the effective title, the body with
//! its annotation, and the tags. SQLite is bundled (FTS5 and JSON built in), opened in WAL mode
//! with a 2 s busy timeout and a `quick_check`; every body records the converter's
//! `crate::convert::VERSION`, so a store opened by a pipeline that converts differently converts
//! every document again.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::json;

use crate::convert::{self, Section};
use crate::original::{NotRead, Opened, Root};

mod handles;
mod search;
mod trash;
mod vectors;

pub use handles::Handles;
pub use search::{fts_query, fts_query_any};
pub use toolvisor_protocol::results::{DataCard, DataChunk, DataHit};
pub use vectors::{CHUNK_CHARS, Chunk, Progress, chunks};

/// How long a statement waits for another connection's lock (the operator's CLI) before it
/// fails: never a hang.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The most terms a search query keeps.
const MAX_TERMS: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{0}")]
    NotFound(String),
    #[error("{message}")]
    InvalidArgs { message: String, hint: String },
    #[error("{message}")]
    Refused { message: String, hint: String },
    #[error("the data hub's database {path}: {source}")]
    Db {
        path: String,
        source: rusqlite::Error,
    },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// An original that the hub does not read: a link, or not a regular file.
    #[error("{path}: {why}")]
    NotFollowed { path: String, why: String },
}

pub type Result<T> = std::result::Result<T, DataError>;

/// Who made a change: recorded with every revision.
#[derive(Clone, Debug)]
pub struct Who {
    pub conversation: String,
    pub tool: String,
}

impl Who {
    pub fn operator(command: &str) -> Who {
        Who {
            conversation: "operator".into(),
            tool: command.into(),
        }
    }
}

/// The collections one call may reach: resolved by the hub from the configuration (never
/// sensitive ones) and the run's pin. Empty reaches nothing.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    names: Vec<String>,
}

impl Reach {
    pub fn new(names: impl IntoIterator<Item = String>) -> Reach {
        let mut names: Vec<String> = names.into_iter().collect();
        names.sort();
        names.dedup();
        Reach { names }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    fn json(&self) -> String {
        serde_json::to_string(&self.names).unwrap_or_else(|_| "[]".into())
    }

    /// Narrow to `collection` when one is named; a name outside the reach is answered like a
    /// name that does not exist, so a sensitive collection's existence never shows.
    pub fn narrow(&self, collection: Option<&str>) -> Result<Reach> {
        match collection {
            None => Ok(self.clone()),
            Some(c) if self.contains(c) => Ok(Reach::new([c.to_string()])),
            // The name is not echoed: an unknown and a sensitive collection answer alike.
            Some(_) => Err(DataError::NotFound(
                "the collection named in `collection` is not reachable from this run".into(),
            )),
        }
    }
}

/// What a tool may change on a card (never the body).
#[derive(Clone, Debug, Default)]
pub struct CardUpdate {
    pub title: Option<String>,
    pub summary: Option<String>,
    pub tags: Option<Vec<String>>,
    pub annotation: Option<String>,
}

/// A trashed document, for the operator.
#[derive(Clone, Debug, Serialize)]
pub struct Trashed {
    pub handle: String,
    pub collection: String,
    pub title: String,
    pub deleted_ms: u64,
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// How document ids are shown as handles (`handles`).
    handles: Handles,
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store {
    /// Open (or create) the database at `path`: its files 0600 (`dbfile`), WAL, a busy
    /// timeout, the schema, and a quick integrity check, so a corrupt file is an error naming
    /// it at start, not a wrong answer later.
    pub fn open(path: &Path) -> Result<Store> {
        let db = |source| DataError::Db {
            path: path.display().to_string(),
            source,
        };
        crate::dbfile::make_private(path).map_err(|e| DataError::Io {
            what: "cannot make private",
            path: e.path.display().to_string(),
            source: e.source,
        })?;
        let conn = Connection::open(path).map_err(db)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(db)?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(db)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(db)?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(db)?;
        if check != "ok" {
            return Err(db(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(format!("integrity check failed: {check}")),
            )));
        }
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS docs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                collection TEXT NOT NULL,
                source TEXT NOT NULL UNIQUE,
                note INTEGER NOT NULL DEFAULT 0,
                size INTEGER NOT NULL,
                mtime_ms INTEGER NOT NULL,
                created_ms INTEGER NOT NULL,
                updated_ms INTEGER NOT NULL,
                title TEXT NOT NULL,
                summary TEXT NOT NULL,
                tags TEXT NOT NULL,
                sections TEXT NOT NULL,
                body TEXT NOT NULL,
                card TEXT NOT NULL DEFAULT '{}',
                deleted_ms INTEGER
             );
             CREATE INDEX IF NOT EXISTS docs_collection ON docs(collection);
             CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
                title, body, tags, collection,
                tokenize = 'unicode61 remove_diacritics 2'
             );
             INSERT INTO docs_fts (docs_fts, rank) VALUES ('rank', 'bm25(10.0, 1.0, 5.0, 0.0)');
             CREATE TABLE IF NOT EXISTS revisions (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                doc_id INTEGER NOT NULL,
                ts_ms INTEGER NOT NULL,
                conversation TEXT NOT NULL,
                tool TEXT NOT NULL,
                change TEXT NOT NULL
             );
             CREATE INDEX IF NOT EXISTS revisions_doc ON revisions(doc_id);",
        )
        .map_err(db)?;
        // Which pipeline version made each body (`convert::VERSION`); a database from before
        // the column has 0 everywhere, so every document is converted again at the next scan.
        let versioned: bool = conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('docs') WHERE name = 'converter'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(db)?;
        if !versioned {
            conn.execute_batch("ALTER TABLE docs ADD COLUMN converter INTEGER NOT NULL DEFAULT 0")
                .map_err(db)?;
        }
        Store::create_chunks(&conn).map_err(db)?;
        let handles = Handles::load(&conn).map_err(db)?;
        Ok(Store {
            conn,
            path: path.to_path_buf(),
            handles,
        })
    }

    /// The handle of document `id`.
    pub fn handle(&self, id: i64) -> String {
        self.handles.show(id)
    }

    /// The document id a handle names (whether a run may reach it is the caller's check).
    pub fn id_of(&self, handle: &str) -> Result<i64> {
        self.handles.parse(handle)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn db(&self) -> impl Fn(rusqlite::Error) -> DataError + '_ {
        move |source| DataError::Db {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Documents not in the trash.
    pub fn count(&self) -> Result<u64> {
        self.conn
            .query_row(
                "SELECT count(*) FROM docs WHERE deleted_ms IS NULL",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n as u64)
            .map_err(self.db())
    }

    /// Convert `source` (an original of `collection`) if it is new, changed since its last
    /// conversion, or was converted by another pipeline version; its id stays the same. Returns the document's id, or `None` when nothing
    /// changed or the file is not a format the pipeline converts.
    pub fn ingest(
        &mut self,
        collection: &str,
        root: &Root,
        source: &Path,
        note: bool,
        max_bytes: u64,
        who: &Who,
    ) -> Result<Option<i64>> {
        let Some(opened) = open_original(root, source)? else {
            return Ok(None);
        };
        let meta = &opened.meta;
        let size = meta.len();
        let mtime_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        let key = source.display().to_string();
        let known = self.known(&key)?;
        // In the trash because its original was removed, and the original is back: it comes
        // back with it. In the trash for any other reason (`delete_data`): it stays there.
        let trashed = known.as_ref().is_some_and(|k| k.5.is_some());
        let returns = match &known {
            Some((id, .., Some(_))) => self.trashed_for_removal(*id)?,
            _ => false,
        };
        if let Some((_, s, m, c, v, _)) = &known
            && !returns
            && *s as u64 == size
            && *m as u64 == mtime_ms
            && c == collection
            && *v == convert::VERSION
        {
            return Ok(None);
        }
        if size > max_bytes {
            tracing::warn!(
                path = key,
                size,
                max_bytes,
                "data hub: original too large; not converted"
            );
            return Ok(None);
        }
        let bytes = opened.read(max_bytes).map_err(|e| read_error(source, e))?;
        let text = String::from_utf8_lossy(&bytes);
        let c = convert::convert(source, &text);
        let row = DocRow {
            collection,
            key: &key,
            note,
            size,
            mtime_ms,
            now: now_ms(),
            sections: serde_json::to_string(&c.sections).unwrap_or_else(|_| "[]".into()),
            tags: serde_json::to_string(&c.tags).unwrap_or_else(|_| "[]".into()),
            c: &c,
        };
        // A trashed document that does not return is converted again like any other, and
        // stays in the trash: out of the index (so out of every search) until it is restored,
        // which indexes it.
        let stays_trashed = trashed && !returns;
        self.save(known.map(|k| k.0), &row, returns, stays_trashed, who)
            .map(Some)
    }

    /// What `docs` holds of the original at `key`: id, size, mtime, collection, converter
    /// version and when it was trashed.
    fn known(&self, key: &str) -> Result<Option<Known>> {
        self.conn
            .query_row(
                "SELECT id, size, mtime_ms, collection, converter, deleted_ms FROM docs WHERE source = ?1",
                [key],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                    ))
                },
            )
            .optional()
            .map_err(self.db())
    }

    /// Writes a converted original in one transaction: its row (the `known` one updated, or a
    /// new one), its return from the trash, its index entry, and the revision saying so.
    fn save(
        &mut self,
        known: Option<i64>,
        row: &DocRow<'_>,
        returns: bool,
        stays_trashed: bool,
        who: &Who,
    ) -> Result<i64> {
        let db = self.db_owned();
        let tx = self.conn.transaction().map_err(&db)?;
        let id = write_row(&tx, known, row).map_err(&db)?;
        if returns {
            tx.execute("UPDATE docs SET deleted_ms = NULL WHERE id = ?1", [id])
                .map_err(&db)?;
        }
        if !stays_trashed {
            index(&tx, id).map_err(&db)?;
        }
        let mut change = json!({"converted": {"size": row.size, "title": row.c.title}});
        if stays_trashed {
            change["in_trash"] = json!(true);
        }
        if returns {
            change["original_returned"] = json!(true);
        }
        revision(&tx, id, who, &change).map_err(&db)?;
        tx.commit().map_err(&db)?;
        Ok(id)
    }

    /// Whether trashed document `id` went to the trash because its original was removed
    /// (its latest trashing revision says so), not by `delete_data`.
    fn trashed_for_removal(&self, id: i64) -> Result<bool> {
        let change: Option<String> = self
            .conn
            .query_row(
                "SELECT change FROM revisions WHERE doc_id = ?1
                   AND (json_extract(change, '$.original_removed') IS NOT NULL
                        OR json_extract(change, '$.deleted') IS NOT NULL)
                 ORDER BY id DESC LIMIT 1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.db())?;
        Ok(change.is_some_and(|c| c.contains("\"original_removed\"")))
    }

    fn db_owned(&self) -> impl Fn(rusqlite::Error) -> DataError + use<> {
        let path = self.path.display().to_string();
        move |source| DataError::Db {
            path: path.clone(),
            source,
        }
    }

    /// Originals of `collection` that are gone (not in `present`) move to the trash, with a
    /// revision saying why; they come back if the original does (`ingest`).
    pub fn originals_gone(
        &mut self,
        collection: &str,
        present: &HashSet<String>,
        who: &Who,
    ) -> Result<usize> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, source FROM docs WHERE collection = ?1 AND deleted_ms IS NULL")
            .map_err(self.db())?;
        let rows: Vec<(i64, String)> = stmt
            .query_map([collection], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.db())?
            .collect::<std::result::Result<_, _>>()
            .map_err(self.db())?;
        drop(stmt);
        let gone: Vec<i64> = rows
            .into_iter()
            .filter(|(_, s)| !present.contains(s))
            .map(|(id, _)| id)
            .collect();
        for &id in &gone {
            self.set_deleted(id, Some(now_ms()), who, &json!({"original_removed": true}))?;
        }
        Ok(gone.len())
    }

    /// The original at `source` was removed: its document goes to the trash.
    pub fn original_removed(&mut self, source: &Path, who: &Who) -> Result<bool> {
        let id: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM docs WHERE source = ?1 AND deleted_ms IS NULL",
                [source.display().to_string()],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.db())?;
        match id {
            Some(id) => {
                self.set_deleted(id, Some(now_ms()), who, &json!({"original_removed": true}))?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn set_deleted(
        &mut self,
        id: i64,
        deleted: Option<u64>,
        who: &Who,
        change: &serde_json::Value,
    ) -> Result<()> {
        let db = self.db_owned();
        let tx = self.conn.transaction().map_err(&db)?;
        tx.execute(
            "UPDATE docs SET deleted_ms = ?2 WHERE id = ?1",
            params![id, deleted.map(|d| d as i64)],
        )
        .map_err(&db)?;
        if deleted.is_some() {
            tx.execute("DELETE FROM docs_fts WHERE rowid = ?1", [id])
                .map_err(&db)?;
        } else {
            index(&tx, id).map_err(&db)?;
        }
        revision(&tx, id, who, change).map_err(&db)?;
        tx.commit().map_err(&db)
    }

    fn row(&self, reach: &Reach, id: i64) -> Result<Row> {
        self.conn
            .query_row(
                "SELECT id, collection, source, note, size, mtime_ms, created_ms, updated_ms,
                        title, summary, tags, sections, body, card
                 FROM docs WHERE id = ?1 AND deleted_ms IS NULL
                   AND collection IN (SELECT value FROM json_each(?2))",
                params![id, reach.json()],
                Row::from,
            )
            .optional()
            .map_err(self.db())?
            .ok_or_else(|| {
                DataError::NotFound(format!(
                    "no document {} is reachable from this run",
                    self.handle(id)
                ))
            })
    }

    pub fn card(&self, reach: &Reach, id: i64) -> Result<DataCard> {
        Ok(self.row(reach, id)?.card(&self.handles))
    }

    /// The card and the whole body.
    pub fn body(&self, reach: &Reach, id: i64) -> Result<(DataCard, String)> {
        let row = self.row(reach, id)?;
        let body = row.body.clone();
        Ok((row.card(&self.handles), body))
    }

    /// One section, by title (case-insensitive; the first match) or by index.
    pub fn section(&self, reach: &Reach, id: i64, which: &str) -> Result<(DataCard, Section)> {
        let row = self.row(reach, id)?;
        let sections = row.sections();
        let found = match which.parse::<usize>() {
            Ok(i) => sections.get(i).cloned(),
            Err(_) => sections
                .iter()
                .find(|s| s.title.eq_ignore_ascii_case(which.trim()))
                .cloned(),
        };
        let titles: Vec<String> = sections.iter().map(|s| s.title.clone()).collect();
        match found {
            Some(s) => Ok((row.card(&self.handles), s)),
            None => Err(DataError::NotFound(format!(
                "{} has no section {which:?}; its sections are {titles:?} (name one, or give its index from 0)",
                self.handle(id)
            ))),
        }
    }

    /// Cards within `reach` (newest change first), optionally with `tag`; and how many match.
    pub fn list(
        &self,
        reach: &Reach,
        tag: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<DataCard>, u64)> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, collection, source, note, size, mtime_ms, created_ms, updated_ms,
                        title, summary, tags, sections, '' AS body, card
                 FROM docs WHERE deleted_ms IS NULL
                   AND collection IN (SELECT value FROM json_each(?1))
                 ORDER BY updated_ms DESC, id DESC",
            )
            .map_err(self.db())?;
        let tag = tag.map(str::to_lowercase);
        let mut total = 0u64;
        let mut cards = Vec::new();
        let rows = stmt
            .query_map([reach.json()], Row::from)
            .map_err(self.db())?;
        for row in rows {
            let card = row.map_err(self.db())?.card(&self.handles);
            if tag.as_ref().is_some_and(|t| !card.tags.contains(t)) {
                continue;
            }
            if total as usize >= offset && cards.len() < limit {
                cards.push(card);
            }
            total += 1;
        }
        Ok((cards, total))
    }

    /// Documents per reachable collection.
    pub fn counts(&self, reach: &Reach) -> Result<Vec<(String, u64)>> {
        let mut out = Vec::new();
        for name in reach.names() {
            let n: i64 = self
                .conn
                .query_row(
                    "SELECT count(*) FROM docs WHERE collection = ?1 AND deleted_ms IS NULL",
                    [name],
                    |r| r.get(0),
                )
                .map_err(self.db())?;
            out.push((name.clone(), n as u64));
        }
        Ok(out)
    }

    /// Change a card (never the body), as one revision.
    pub fn update_card(
        &mut self,
        reach: &Reach,
        id: i64,
        update: &CardUpdate,
        who: &Who,
    ) -> Result<(DataCard, bool)> {
        let row = self.row(reach, id)?;
        let now = row.card(&self.handles);
        let mut over = overrides(&row.card_json);
        let mut change = serde_json::Map::new();
        let asked = update.title.is_some()
            || update.summary.is_some()
            || update.tags.is_some()
            || update.annotation.is_some();
        if !asked {
            return Err(DataError::InvalidArgs {
                message: "the card update changes nothing".into(),
                hint: "give at least one of card.title, card.summary, card.tags, card.annotation"
                    .into(),
            });
        }
        // Only what differs from the card as it is now is a change.
        let mut set = |key: &str, value: serde_json::Value, same: bool| {
            if !same {
                over.insert(key.into(), value.clone());
                change.insert(key.into(), value);
            }
        };
        if let Some(t) = &update.title {
            set("title", json!(t), *t == now.title);
        }
        if let Some(s) = &update.summary {
            set("summary", json!(s), *s == now.summary);
        }
        if let Some(tags) = &update.tags {
            let tags = convert::split_tags(&tags.join(","));
            let same = tags == now.tags;
            set("tags", json!(tags), same);
        }
        if let Some(a) = &update.annotation {
            set("annotation", json!(a), *a == now.annotation);
        }
        // The card already says all that: nothing written, no revision.
        if change.is_empty() {
            return Ok((now, false));
        }
        let db = self.db_owned();
        let tx = self.conn.transaction().map_err(&db)?;
        tx.execute(
            "UPDATE docs SET card = ?2, updated_ms = ?3 WHERE id = ?1",
            params![
                id,
                serde_json::Value::Object(over).to_string(),
                now_ms() as i64
            ],
        )
        .map_err(&db)?;
        index(&tx, id).map_err(&db)?;
        revision(&tx, id, who, &json!({"card": change})).map_err(&db)?;
        tx.commit().map_err(&db)?;
        Ok((self.card(reach, id)?, true))
    }

    /// The source path of a reachable document (to refuse a body change naming it).
    pub fn source(&self, reach: &Reach, id: i64) -> Result<(String, bool)> {
        let row = self.row(reach, id)?;
        Ok((row.source, row.note))
    }
}

/// A document's row as `docs` has it for an original: id, size, mtime (ms), collection,
/// converter version, and when it went to the trash.
type Known = (i64, i64, i64, String, i64, Option<i64>);

/// An original converted, as a row of `docs`.
struct DocRow<'a> {
    collection: &'a str,
    key: &'a str,
    note: bool,
    size: u64,
    mtime_ms: u64,
    now: u64,
    sections: String,
    tags: String,
    c: &'a convert::Converted,
}

/// `cannot read` of the original at `source`.
fn read_error(source: &Path, e: std::io::Error) -> DataError {
    DataError::Io {
        what: "cannot read",
        path: source.display().to_string(),
        source: e,
    }
}

/// The original at `source` opened through `root`, or `None` when it is not a format the
/// pipeline converts; a link among those is refused, so the hub names it among its warnings.
fn open_original(root: &Root, source: &Path) -> Result<Option<Opened>> {
    if !convert::supported(source) {
        // Not an original, but a link is still named among the warnings (a linked
        // directory, say): the hub enters none.
        if std::fs::symlink_metadata(source).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(DataError::NotFollowed {
                path: source.display().to_string(),
                why: NotRead::Link.why(),
            });
        }
        return Ok(None);
    }
    match root.open(source) {
        Ok(opened) => Ok(Some(opened)),
        Err(NotRead::Io(e)) => Err(read_error(source, e)),
        Err(not) => Err(DataError::NotFollowed {
            path: source.display().to_string(),
            why: not.why(),
        }),
    }
}

/// Updates the `known` document's row to `row`, or inserts `row` as a new document; its id.
fn write_row(
    tx: &rusqlite::Transaction<'_>,
    known: Option<i64>,
    row: &DocRow<'_>,
) -> rusqlite::Result<i64> {
    let c = row.c;
    Ok(match known {
        Some(id) => {
            tx.execute(
                "UPDATE docs SET collection=?2, size=?3, mtime_ms=?4, updated_ms=?5, title=?6,
                     summary=?7, tags=?8, sections=?9, body=?10, converter=?11 WHERE id=?1",
                params![
                    id,
                    row.collection,
                    row.size as i64,
                    row.mtime_ms as i64,
                    row.now as i64,
                    c.title,
                    c.summary,
                    row.tags,
                    row.sections,
                    c.body,
                    convert::VERSION
                ],
            )?;
            id
        }
        None => {
            tx.execute(
                "INSERT INTO docs (collection, source, note, size, mtime_ms, created_ms,
                     updated_ms, title, summary, tags, sections, body, converter)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    row.collection,
                    row.key,
                    row.note as i64,
                    row.size as i64,
                    row.mtime_ms as i64,
                    row.now as i64,
                    c.title,
                    c.summary,
                    row.tags,
                    row.sections,
                    c.body,
                    convert::VERSION
                ],
            )?;
            tx.last_insert_rowid()
        }
    })
}

/// (Re)write document `id`'s index entry from its effective card and body.
fn index(tx: &rusqlite::Transaction<'_>, id: i64) -> rusqlite::Result<()> {
    let (title, tags, body, card, collection): (String, String, String, String, String) = tx
        .query_row(
            "SELECT title, tags, body, card, collection FROM docs WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
    let over = overrides(&card);
    let title = over
        .get("title")
        .and_then(|t| t.as_str())
        .map_or(title, str::to_string);
    let tags: Vec<String> = over
        .get("tags")
        .cloned()
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_else(|| serde_json::from_str(&tags).unwrap_or_default());
    let annotation = over
        .get("annotation")
        .and_then(|a| a.as_str())
        .unwrap_or("");
    tx.execute("DELETE FROM docs_fts WHERE rowid = ?1", [id])?;
    tx.execute(
        "INSERT INTO docs_fts (rowid, title, body, tags, collection) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            id,
            title,
            format!("{body}\n{annotation}"),
            tags.join(" "),
            collection_token(&collection)
        ],
    )?;
    Ok(())
}

/// A collection's name as one index token of its own (letters and digits only), so a column
/// filter on it matches that collection exactly: `docs` never matches `my-docs`.
fn collection_token(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    format!("c{hex}")
}

fn revision(
    tx: &rusqlite::Transaction<'_>,
    id: i64,
    who: &Who,
    change: &serde_json::Value,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO revisions (doc_id, ts_ms, conversation, tool, change) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![id, now_ms() as i64, who.conversation, who.tool, change.to_string()],
    )?;
    Ok(())
}

fn overrides(card: &str) -> serde_json::Map<String, serde_json::Value> {
    serde_json::from_str(card).unwrap_or_default()
}

/// The title a hit or trash entry shows: the card's own (`write_data`), else `converted`.
fn shown_title(card: &str, converted: String) -> String {
    overrides(card)
        .get("title")
        .and_then(|t| t.as_str())
        .map_or(converted, str::to_string)
}

struct Row {
    id: i64,
    collection: String,
    source: String,
    note: bool,
    size: i64,
    mtime_ms: i64,
    created_ms: i64,
    updated_ms: i64,
    title: String,
    summary: String,
    tags: String,
    sections: String,
    body: String,
    card_json: String,
}

impl Row {
    fn from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
        Ok(Row {
            id: r.get(0)?,
            collection: r.get(1)?,
            source: r.get(2)?,
            note: r.get::<_, i64>(3)? != 0,
            size: r.get(4)?,
            mtime_ms: r.get(5)?,
            created_ms: r.get(6)?,
            updated_ms: r.get(7)?,
            title: r.get(8)?,
            summary: r.get(9)?,
            tags: r.get(10)?,
            sections: r.get(11)?,
            body: r.get(12)?,
            card_json: r.get(13)?,
        })
    }

    fn sections(&self) -> Vec<Section> {
        serde_json::from_str(&self.sections).unwrap_or_default()
    }

    fn card(&self, handles: &Handles) -> DataCard {
        let over = overrides(&self.card_json);
        let text = |k: &str, base: &str| {
            over.get(k)
                .and_then(|v| v.as_str())
                .map_or(base.to_string(), str::to_string)
        };
        DataCard {
            handle: handles.show(self.id),
            collection: self.collection.clone(),
            title: text("title", &self.title),
            summary: text("summary", &self.summary),
            tags: over
                .get("tags")
                .cloned()
                .and_then(|t| serde_json::from_value(t).ok())
                .unwrap_or_else(|| serde_json::from_str(&self.tags).unwrap_or_default()),
            annotation: text("annotation", ""),
            source: self.source.clone(),
            note: self.note,
            size: self.size as u64,
            modified_ms: self.mtime_ms as u64,
            created_ms: self.created_ms as u64,
            updated_ms: self.updated_ms as u64,
            sections: self.sections().into_iter().map(|s| s.title).collect(),
        }
    }
}

#[cfg(test)]
mod tests;
