//! Chunks and their vectors, for `search_data {mode: "hybrid"}`: each document of a collection
//! that may be embedded (never a sensitive one) is cut into chunks by section (a long section
//! at its paragraphs, at most [`CHUNK_CHARS`] each), with the chunk's lines in the converted
//! body; the embedding worker (`crate::hub`) gives each chunk a vector from `[data]
//! embedding_model`. Vectors are unit-length `f32`s in a BLOB of the same database (a flat
//! table: a search compares the query with every reachable chunk of the model: about 11 ms
//! at 4,000 chunks of 768 floats, docs/BENCHMARKS.md). Re-chunking a changed document
//! keeps the vector of every chunk whose text is unchanged, so only the changed chunks are
//! embedded again.
//!
//! A hybrid search fuses two rankings of documents by reciprocal rank fusion (RRF,
//! `1/(60 + rank)` summed): BM25 over the FTS index (any of the query's words: a sentence is
//! a fair hybrid query), and each document's best chunk by cosine similarity to the query's
//! vector. Each hit cites its best chunk: section, lines, text.

use std::collections::HashMap;

use rusqlite::params;
use serde::Serialize;

use super::{DataChunk, DataHit, Reach, Result, Store, fts_query_any, shown_title};
use crate::convert::Section;

/// The most characters of one chunk (a longer paragraph is cut at its lines; a longer line
/// is a chunk of its own, cut to [`EMBED_CHARS`] when embedded).
pub const CHUNK_CHARS: usize = 1000;
/// The most characters of a chunk sent to the embedding model.
pub const EMBED_CHARS: usize = 1500;
/// Each side's ranks fused: the best this many documents of each.
const FUSED: usize = 50;
/// RRF's constant: a rank `r` counts `1/(K + r)`.
const K: f64 = 60.0;
/// Characters of a chunk's text in a hit.
const CITED_CHARS: usize = 400;

/// A document's fused score, its BM25 rank and its vector rank.
type Fused = (f64, Option<usize>, Option<usize>);

/// One chunk of a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// The section's title (empty before the first heading).
    pub section: String,
    /// 1-based, inclusive, in the converted body (`read_data {view: "body"}`).
    pub line_start: u32,
    pub line_end: u32,
    pub text: String,
}

/// How far the embedding of the reachable documents is, for `model`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Chunks with a vector of the model.
    pub embedded: u64,
    /// Chunks still waiting for one (or documents not yet cut into chunks).
    pub pending: u64,
    /// Chunks the model refused to embed (alone, while it embedded others): found by
    /// keyword only, until their text changes.
    pub skipped: u64,
}

/// The chunks of a body made of `sections` (`convert::finish` joins each section's title and
/// text, and the sections, with one blank line).
pub fn chunks(sections: &[Section]) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut line = 1u32;
    for s in sections {
        let text_start = if s.title.is_empty() { line } else { line + 2 };
        let mut last = line;
        // Paragraphs: runs of non-blank lines, with their first line.
        let mut paragraphs: Vec<(u32, Vec<&str>)> = Vec::new();
        for (i, l) in s.text.lines().enumerate() {
            let n = text_start + i as u32;
            last = n;
            if l.trim().is_empty() {
                continue;
            }
            match paragraphs.last_mut() {
                Some((start, lines)) if *start + lines.len() as u32 == n => lines.push(l),
                _ => paragraphs.push((n, vec![l])),
            }
        }
        // Packed into chunks of at most CHUNK_CHARS; a longer paragraph at its lines.
        let mut current: Option<Chunk> = None;
        let flush = |c: &mut Option<Chunk>, out: &mut Vec<Chunk>| {
            if let Some(c) = c.take() {
                out.push(c);
            }
        };
        for (start, lines) in paragraphs {
            for (i, l) in lines.iter().enumerate() {
                let n = start + i as u32;
                let sep = if i == 0 { "\n\n" } else { "\n" };
                match &mut current {
                    Some(c) if c.text.len() + sep.len() + l.len() <= CHUNK_CHARS => {
                        c.text.push_str(sep);
                        c.text.push_str(l);
                        c.line_end = n;
                    }
                    _ => {
                        flush(&mut current, &mut out);
                        current = Some(Chunk {
                            section: s.title.clone(),
                            line_start: n,
                            line_end: n,
                            text: l.to_string(),
                        });
                    }
                }
            }
        }
        flush(&mut current, &mut out);
        if s.text.is_empty() && !s.title.is_empty() {
            out.push(Chunk {
                section: s.title.clone(),
                line_start: line,
                line_end: line,
                text: s.title.clone(),
            });
        }
        line = last + 2;
    }
    out
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[cfg(test)]
fn from_blob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// [`dot`] of a vector's BLOB (little-endian f32s, `b.len()` of them) and `b`.
fn dot_blob(blob: &[u8], b: &[f32]) -> f64 {
    let mut sum = 0f32;
    for (c, y) in blob.chunks_exact(4).zip(b) {
        sum += f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * y;
    }
    sum as f64
}

#[cfg(test)]
fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum()
}

impl Store {
    /// The chunks table, and the column saying which version of a document was cut.
    pub(super) fn create_chunks(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS chunks (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                doc_id INTEGER NOT NULL,
                ord INTEGER NOT NULL,
                section TEXT NOT NULL,
                line_start INTEGER NOT NULL,
                line_end INTEGER NOT NULL,
                text TEXT NOT NULL,
                model TEXT,
                vector BLOB
             );
             CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);",
        )?;
        let has: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('docs') WHERE name = 'chunked_ms'",
            [],
            |r| r.get(0),
        )?;
        if has == 0 {
            conn.execute_batch(
                "ALTER TABLE docs ADD COLUMN chunked_ms INTEGER NOT NULL DEFAULT -1",
            )?;
        }
        Ok(())
    }

    /// Drop the chunks of every document outside `embeddable` (a collection made sensitive
    /// since, or removed): their vectors are never kept. How many went.
    pub fn forget_chunks_outside(&mut self, embeddable: &Reach) -> Result<usize> {
        let n = self
            .conn
            .execute(
                "DELETE FROM chunks WHERE doc_id IN (SELECT id FROM docs
                   WHERE collection NOT IN (SELECT value FROM json_each(?1)))",
                [embeddable.json()],
            )
            .map_err(self.db())?;
        self.conn
            .execute(
                "UPDATE docs SET chunked_ms = -1
                 WHERE chunked_ms != -1 AND collection NOT IN (SELECT value FROM json_each(?1))",
                [embeddable.json()],
            )
            .map_err(self.db())?;
        Ok(n)
    }

    /// Cut up to `limit` documents of `embeddable` changed since they were last cut; a chunk
    /// whose text is unchanged keeps its vector. How many documents were cut.
    pub fn rechunk_changed(&mut self, embeddable: &Reach, limit: usize) -> Result<usize> {
        let stale: Vec<(i64, String, i64)> = {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "SELECT id, sections, updated_ms FROM docs
                     WHERE deleted_ms IS NULL AND chunked_ms != updated_ms
                       AND collection IN (SELECT value FROM json_each(?1))
                     LIMIT ?2",
                )
                .map_err(self.db())?;
            stmt.query_map(params![embeddable.json(), limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(self.db())?
            .collect::<std::result::Result<_, _>>()
            .map_err(self.db())?
        };
        let db = self.db_owned();
        for (id, sections, updated) in &stale {
            let sections: Vec<Section> = serde_json::from_str(sections).unwrap_or_default();
            let tx = self.conn.transaction().map_err(&db)?;
            let mut kept: HashMap<String, (Option<String>, Option<Vec<u8>>)> = HashMap::new();
            {
                let mut old = tx
                    .prepare("SELECT text, model, vector FROM chunks WHERE doc_id = ?1")
                    .map_err(&db)?;
                let rows = old
                    .query_map([id], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
                    .map_err(&db)?;
                for row in rows {
                    let (text, v): (String, _) = row.map_err(&db)?;
                    kept.insert(text, v);
                }
            }
            tx.execute("DELETE FROM chunks WHERE doc_id = ?1", [id])
                .map_err(&db)?;
            for (ord, c) in chunks(&sections).into_iter().enumerate() {
                let (model, vector) = kept.remove(&c.text).unwrap_or((None, None));
                tx.execute(
                    "INSERT INTO chunks (doc_id, ord, section, line_start, line_end, text, model, vector)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    params![id, ord as i64, c.section, c.line_start, c.line_end, c.text, model, vector],
                )
                .map_err(&db)?;
            }
            tx.execute(
                "UPDATE docs SET chunked_ms = ?2 WHERE id = ?1",
                params![id, updated],
            )
            .map_err(&db)?;
            tx.commit().map_err(&db)?;
        }
        Ok(stale.len())
    }

    /// Up to `limit` chunks of `embeddable` without a vector of `model`: (chunk id, the text to
    /// embed).
    pub fn chunks_to_embed(
        &self,
        embeddable: &Reach,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String)>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.id, c.text FROM chunks c JOIN docs d ON d.id = c.doc_id
                 WHERE d.deleted_ms IS NULL AND d.collection IN (SELECT value FROM json_each(?1))
                   AND (c.vector IS NULL OR c.model IS NOT ?2)
                 ORDER BY c.id LIMIT ?3",
            )
            .map_err(self.db())?;
        stmt.query_map(params![embeddable.json(), model, limit as i64], |r| {
            let text: String = r.get(1)?;
            Ok((r.get(0)?, text.chars().take(EMBED_CHARS).collect()))
        })
        .map_err(self.db())?
        .collect::<std::result::Result<_, _>>()
        .map_err(self.db())
    }

    /// Store the vectors of `model` for these chunks (a chunk re-cut meanwhile is gone, and
    /// its vector with it).
    pub fn put_vectors(&mut self, model: &str, vectors: &[(i64, Vec<f32>)]) -> Result<()> {
        let db = self.db_owned();
        let tx = self.conn.transaction().map_err(&db)?;
        for (id, v) in vectors {
            tx.execute(
                "UPDATE chunks SET model = ?2, vector = ?3 WHERE id = ?1",
                params![id, model, to_blob(v)],
            )
            .map_err(&db)?;
        }
        tx.commit().map_err(&db)
    }

    /// Mark these chunks as refused by `model`: an empty vector, so they are not asked for
    /// again until their text changes (re-cutting gives a changed text a new chunk) and never
    /// ranked by similarity.
    pub fn put_skipped(&mut self, model: &str, ids: &[i64]) -> Result<()> {
        let empty: Vec<(i64, Vec<f32>)> = ids.iter().map(|&id| (id, Vec::new())).collect();
        self.put_vectors(model, &empty)
    }

    /// How far the embedding of `reach`'s documents is.
    pub fn embedding_progress(&self, reach: &Reach, model: &str) -> Result<Progress> {
        // Vectors of the model: embedded (a BLOB of floats) and skipped (an empty one), in
        // one pass over the chunks.
        let (embedded, skipped, pending, uncut): (i64, i64, i64, i64) = self
            .conn
            .query_row(
                "SELECT
                   total(length(c.vector) > 0), total(length(c.vector) = 0),
                   (SELECT count(*) FROM chunks c JOIN docs d ON d.id = c.doc_id
                     WHERE d.deleted_ms IS NULL AND d.collection IN (SELECT value FROM json_each(?1))
                       AND (c.vector IS NULL OR c.model IS NOT ?2)),
                   (SELECT count(*) FROM docs d
                     WHERE d.deleted_ms IS NULL AND d.collection IN (SELECT value FROM json_each(?1))
                       AND d.chunked_ms != d.updated_ms)
                 FROM chunks c JOIN docs d ON d.id = c.doc_id
                 WHERE d.deleted_ms IS NULL AND d.collection IN (SELECT value FROM json_each(?1))
                   AND c.vector IS NOT NULL AND c.model = ?2",
                params![reach.json(), model],
                |r| {
                    Ok((
                        r.get::<_, f64>(0)? as i64,
                        r.get::<_, f64>(1)? as i64,
                        r.get(2)?,
                        r.get(3)?,
                    ))
                },
            )
            .map_err(self.db())?;
        Ok(Progress {
            embedded: embedded as u64,
            pending: (pending + uncut) as u64,
            skipped: skipped as u64,
        })
    }

    /// Each reachable document's chunk most like `query` (a unit vector of `model`), best
    /// first: (document id, its best chunk's id, their similarity). Only the ids and the
    /// vectors are read, each vector compared where SQLite holds it (no copy).
    fn nearest(&self, reach: &Reach, model: &str, query: &[f32]) -> Result<Vec<(i64, i64, f64)>> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.doc_id, c.id, c.vector
                 FROM chunks c JOIN docs d ON d.id = c.doc_id
                 WHERE d.deleted_ms IS NULL AND d.collection IN (SELECT value FROM json_each(?1))
                   AND c.model = ?2 AND c.vector IS NOT NULL AND length(c.vector) > 0",
            )
            .map_err(self.db())?;
        let mut best: HashMap<i64, (i64, f64)> = HashMap::new();
        let mut rows = stmt
            .query(params![reach.json(), model])
            .map_err(self.db())?;
        while let Some(row) = rows.next().map_err(self.db())? {
            let doc: i64 = row.get(0).map_err(self.db())?;
            let chunk: i64 = row.get(1).map_err(self.db())?;
            let rusqlite::types::ValueRef::Blob(blob) = row.get_ref(2).map_err(self.db())? else {
                continue;
            };
            if blob.len() != query.len() * 4 {
                continue;
            }
            let similarity = dot_blob(blob, query);
            if best.get(&doc).is_none_or(|(_, s)| similarity > *s) {
                best.insert(doc, (chunk, similarity));
            }
        }
        let mut ranked: Vec<(i64, i64, f64)> =
            best.into_iter().map(|(d, (c, s))| (d, c, s)).collect();
        ranked.sort_by(|x, y| y.2.total_cmp(&x.2).then(x.0.cmp(&y.0)));
        Ok(ranked)
    }

    /// The citation of chunk `id`.
    fn cite(&self, id: i64, similarity: f64) -> Result<DataChunk> {
        self.conn
            .prepare_cached("SELECT section, line_start, line_end, text FROM chunks WHERE id = ?1")
            .map_err(self.db())?
            .query_row([id], |r| {
                let text: String = r.get(3)?;
                let (first, last): (u32, u32) = (r.get(1)?, r.get(2)?);
                Ok(DataChunk {
                    section: r.get(0)?,
                    lines: vec![first.into(), last.into()],
                    text: text.chars().take(CITED_CHARS).collect(),
                    similarity,
                })
            })
            .map_err(self.db())
    }

    /// BM25 and vector ranks fused (RRF); each hit with its ranks and its best chunk. A query
    /// with no words to search for ranks by its vector alone.
    pub fn hybrid(
        &self,
        reach: &Reach,
        query: &str,
        vector: &[f32],
        model: &str,
        limit: usize,
    ) -> Result<Vec<DataHit>> {
        if reach.names().is_empty() {
            return Ok(Vec::new());
        }
        let keyword = match fts_query_any(query) {
            Some(any) => self.search_fts(reach, query, Some(any), FUSED)?,
            None => Vec::new(),
        };
        let mut near = self.nearest(reach, model, vector)?;
        let mut fused: HashMap<i64, Fused> = HashMap::new();
        for (rank, hit) in keyword.iter().enumerate() {
            let id = self.id_of(&hit.handle)?;
            let e = fused.entry(id).or_default();
            e.0 += 1.0 / (K + rank as f64 + 1.0);
            e.1 = Some(rank + 1);
        }
        for (rank, (id, _, _)) in near.iter().take(FUSED).enumerate() {
            let e = fused.entry(*id).or_default();
            e.0 += 1.0 / (K + rank as f64 + 1.0);
            e.2 = Some(rank + 1);
        }
        let mut order: Vec<(i64, Fused)> = fused.into_iter().collect();
        order.sort_by(|a, b| b.1.0.total_cmp(&a.1.0).then(a.0.cmp(&b.0)));
        order.truncate(limit);
        let mut keyword: HashMap<i64, DataHit> = keyword
            .into_iter()
            .filter_map(|h| Some((self.id_of(&h.handle).ok()?, h)))
            .collect();
        let best: HashMap<i64, (i64, f64)> = near.drain(..).map(|(d, c, s)| (d, (c, s))).collect();
        let mut brief = self
            .conn
            .prepare_cached("SELECT collection, title, card FROM docs WHERE id = ?1")
            .map_err(self.db())?;
        let mut hits = Vec::with_capacity(order.len());
        for (id, (score, keyword_rank, vector_rank)) in order {
            let chunk = match best.get(&id) {
                Some((c, similarity)) => Some(self.cite(*c, *similarity)?),
                None => None,
            };
            let mut hit = match keyword.remove(&id) {
                Some(h) => h,
                None => {
                    let (collection, title, card): (String, String, String) = brief
                        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .map_err(self.db())?;
                    DataHit {
                        handle: self.handle(id),
                        collection,
                        title: shown_title(&card, title),
                        snippet: chunk.as_ref().map(|c| c.text.clone()).unwrap_or_default(),
                        score: 0.0,
                        keyword_rank: None,
                        vector_rank: None,
                        chunk: None,
                    }
                }
            };
            hit.score = score;
            hit.keyword_rank = keyword_rank.map(|r| r as u64);
            hit.vector_rank = vector_rank.map(|r| r as u64);
            hit.chunk = chunk;
            hits.push(hit);
        }
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(title: &str, text: &str) -> Section {
        Section {
            title: title.into(),
            level: if title.is_empty() { 0 } else { 1 },
            text: text.into(),
        }
    }

    #[test]
    fn chunks_follow_sections_and_their_lines_are_the_bodys() {
        let sections = vec![
            section("", "Intro line."),
            section("Install", "Run it.\n\nThen check."),
            section("Empty", ""),
        ];
        let c = crate::convert::convert(
            std::path::Path::new("a.md"),
            "Intro line.\n\n# Install\n\nRun it.\n\nThen check.\n\n# Empty\n",
        );
        assert_eq!(c.sections, sections, "the converter makes these sections");
        let body: Vec<&str> = c.body.lines().collect();
        let got = chunks(&sections);
        assert_eq!(got.len(), 3, "{got:?}");
        for ch in &got {
            let lines = &body[ch.line_start as usize - 1..ch.line_end as usize];
            assert_eq!(
                lines.join("\n").replace("\n\n", "\n"),
                ch.text.replace("\n\n", "\n")
            );
        }
        assert_eq!(
            (got[1].section.as_str(), got[1].line_start, got[1].line_end),
            ("Install", 5, 7)
        );
        assert_eq!(got[1].text, "Run it.\n\nThen check.");
        assert_eq!((got[2].text.as_str(), got[2].line_start), ("Empty", 9));
    }

    #[test]
    fn a_long_section_is_cut_at_paragraphs_then_lines() {
        let para = "word ".repeat(120); // 600 characters
        let text = format!("{para}\n\n{para}\n\n{}", "x".repeat(CHUNK_CHARS + 10));
        let got = chunks(&[section("S", &text)]);
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got.iter().all(|c| c.section == "S"));
        assert_eq!(
            (got[0].line_start, got[1].line_start, got[2].line_start),
            (3, 5, 7)
        );
    }

    /// A unit vector per text for the store's own tests (letter counts): the fusion and
    /// the bookkeeping are the store's; the e2e tests embed with a real llama.cpp server.
    fn letters(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; 26];
        for c in text
            .to_ascii_lowercase()
            .bytes()
            .filter(u8::is_ascii_lowercase)
        {
            v[(c - b'a') as usize] += 1.0;
        }
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        v.into_iter().map(|x| x / n).collect()
    }

    /// A store in a temp dir, who ingests, and the dir as the originals' root.
    fn fresh_store() -> (
        tempfile::TempDir,
        Store,
        super::super::Who,
        crate::original::Root,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("hub.sqlite3")).unwrap();
        let who = super::super::Who {
            conversation: "c".into(),
            tool: "test".into(),
        };
        let root = crate::original::Root::of(dir.path()).unwrap();
        (dir, s, who, root)
    }

    fn embed_all(s: &mut Store, reach: &Reach) -> usize {
        s.rechunk_changed(reach, 100).unwrap();
        let todo = s.chunks_to_embed(reach, "m", 100).unwrap();
        let v: Vec<(i64, Vec<f32>)> = todo.iter().map(|(id, t)| (*id, letters(t))).collect();
        s.put_vectors("m", &v).unwrap();
        v.len()
    }

    #[test]
    fn only_embeddable_collections_get_chunks_and_an_edit_re_embeds_only_its_chunks() {
        let (dir, mut s, who, root) = fresh_store();
        let a = dir.path().join("a.md");
        let b = dir.path().join("b.md");
        let hr = dir.path().join("hr.md");
        std::fs::write(
            &a,
            "# Apples

red fruit

# Pears

green fruit
",
        )
        .unwrap();
        std::fs::write(
            &b,
            "# Zebra

stripes zzz
",
        )
        .unwrap();
        std::fs::write(
            &hr,
            "# Salaries

red numbers
",
        )
        .unwrap();
        let ida = s
            .ingest("docs", &root, &a, false, 1 << 20, &who)
            .unwrap()
            .unwrap();
        let idb = s
            .ingest("docs", &root, &b, false, 1 << 20, &who)
            .unwrap()
            .unwrap();
        s.ingest("hr", &root, &hr, false, 1 << 20, &who)
            .unwrap()
            .unwrap();
        let docs = Reach::new(["docs".to_string()]);
        assert_eq!(
            embed_all(&mut s, &docs),
            3,
            "two sections of a, one of b; none of hr"
        );
        let both = Reach::new(["docs".to_string(), "hr".to_string()]);
        assert_eq!(
            s.embedding_progress(&both, "m").unwrap(),
            Progress {
                embedded: 3,
                pending: 1,
                skipped: 0
            },
            "hr's document was never cut: it counts as waiting, never embedded"
        );
        assert_eq!(s.embedding_progress(&docs, "m").unwrap().pending, 0);
        // One section changed: only it is embedded again.
        std::fs::write(
            &a,
            "# Apples

red fruit

# Pears

yellow fruit, ripe
",
        )
        .unwrap();
        s.ingest("docs", &root, &a, false, 1 << 20, &who)
            .unwrap()
            .unwrap();
        assert_eq!(s.embedding_progress(&docs, "m").unwrap().pending, 1);
        assert_eq!(embed_all(&mut s, &docs), 1);
        // Another model: everything again.
        assert_eq!(s.chunks_to_embed(&docs, "other", 100).unwrap().len(), 3);

        // Fusion: "zzz stripes" matches b by its words and by its letters.
        let hits = s
            .hybrid(&docs, "stripes zzz", &letters("stripes zzz"), "m", 10)
            .unwrap();
        assert_eq!(hits[0].handle, s.handle(idb), "{hits:?}");
        assert_eq!(
            (hits[0].keyword_rank, hits[0].vector_rank),
            (Some(1), Some(1))
        );
        assert!(
            (hits[0].score - 2.0 / 61.0).abs() < 1e-12,
            "{}",
            hits[0].score
        );
        let c = hits[0].chunk.as_ref().unwrap();
        assert_eq!(
            (c.section.as_str(), c.lines.as_slice(), c.text.as_str()),
            ("Zebra", &[3, 3][..], "stripes zzz")
        );
        // a matches no word, only by its vector: ranked, without a keyword rank.
        let a_hit = hits.iter().find(|h| h.handle == s.handle(ida)).unwrap();
        assert_eq!((a_hit.keyword_rank, a_hit.vector_rank), (None, Some(2)));
        assert!((a_hit.score - 1.0 / 62.0).abs() < 1e-12);
        // Nothing of hr, ever; and a query of no words ranks by its vector alone.
        let hits = s
            .hybrid(&docs, "!!!", &letters("red numbers"), "m", 10)
            .unwrap();
        assert!(
            hits.iter()
                .all(|h| h.collection == "docs" && h.keyword_rank.is_none())
        );
        // hr made unembeddable after all: its chunks (none) and a's are forgotten when out.
        s.rechunk_changed(&both, 100).unwrap();
        assert_eq!(
            s.forget_chunks_outside(&docs).unwrap(),
            1,
            "hr's chunk dropped"
        );
        // Trashed documents are out of every ranking.
        s.trash(&docs, idb, &who).unwrap();
        let hits = s
            .hybrid(&docs, "stripes zzz", &letters("stripes zzz"), "m", 10)
            .unwrap();
        assert!(hits.iter().all(|h| h.handle != s.handle(idb)), "{hits:?}");
    }

    #[test]
    fn a_skipped_chunk_is_counted_never_ranked_and_not_asked_for_again_until_it_changes() {
        let (dir, mut s, who, root) = fresh_store();
        let a = dir.path().join("a.md");
        std::fs::write(&a, "# Apples\n\nred fruit\n\n# Pears\n\ngreen fruit\n").unwrap();
        s.ingest("docs", &root, &a, false, 1 << 20, &who)
            .unwrap()
            .unwrap();
        let docs = Reach::new(["docs".to_string()]);
        s.rechunk_changed(&docs, 100).unwrap();
        let todo = s.chunks_to_embed(&docs, "m", 100).unwrap();
        assert_eq!(todo.len(), 2);
        let (pears, apples) = (todo[1].clone(), todo[0].clone());
        s.put_vectors("m", &[(apples.0, letters(&apples.1))])
            .unwrap();
        s.put_skipped("m", &[pears.0]).unwrap();
        assert_eq!(
            s.embedding_progress(&docs, "m").unwrap(),
            Progress {
                embedded: 1,
                pending: 0,
                skipped: 1
            }
        );
        assert!(s.chunks_to_embed(&docs, "m", 100).unwrap().is_empty());
        // Ranked by keyword only: its vector is never compared.
        let hits = s
            .hybrid(&docs, "green", &letters("green fruit"), "m", 10)
            .unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(
            hits[0].vector_rank,
            Some(1),
            "apples' chunk stands for the doc"
        );
        // Another model asks for it again; a changed text is asked for again.
        assert_eq!(s.chunks_to_embed(&docs, "other", 100).unwrap().len(), 2);
        std::fs::write(&a, "# Apples\n\nred fruit\n\n# Pears\n\nripe pears\n").unwrap();
        s.ingest("docs", &root, &a, false, 1 << 20, &who)
            .unwrap()
            .unwrap();
        s.rechunk_changed(&docs, 100).unwrap();
        let again = s.chunks_to_embed(&docs, "m", 100).unwrap();
        assert_eq!(again.len(), 1);
        assert!(again[0].1.contains("ripe pears"), "{again:?}");
    }

    #[test]
    fn vectors_round_trip_through_their_blob() {
        let v = vec![0.25f32, -1.5, 3.0];
        assert_eq!(from_blob(&to_blob(&v)), v);
        assert!((dot(&v, &v) - 11.3125).abs() < 1e-9);
        assert!((dot_blob(&to_blob(&v), &v) - 11.3125).abs() < 1e-6);
    }
}
