//! Keyword search of the store: a person's text made an FTS5 query that can never be a syntax
//! error (`fts_query`, `fts_query_any`), and the BM25-ranked search within a run's reach.

use super::*;

/// The FTS5 query for what a person typed: words (letters and digits) as quoted terms, and
/// `"quoted phrases"` as phrases, all of them required. FTS5's own operators, column filters,
/// quotes and parentheses are never passed through, so no query is a syntax error.
pub fn fts_query(text: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for (i, part) in text.split('"').enumerate() {
        let words: Vec<String> = part
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        if words.is_empty() {
            continue;
        }
        if i % 2 == 1 {
            terms.push(format!("\"{}\"", words.join(" ")));
        } else {
            terms.extend(words.into_iter().map(|w| format!("\"{w}\"")));
        }
    }
    terms.truncate(MAX_TERMS);
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// [`fts_query`] with any of its terms enough (hybrid search: a sentence whose every word no
/// document holds still ranks the documents holding some, BM25 counting how many and how rare).
pub fn fts_query_any(text: &str) -> Option<String> {
    fts_query(text).map(|q| {
        // Terms are quoted and quotes never occur inside one: split between them.
        q.split("\" \"").collect::<Vec<_>>().join("\" OR \"")
    })
}

impl Store {
    /// Full-text search within `reach`, ranked by BM25 (title weighs most, then tags).
    pub fn search(&self, reach: &Reach, query: &str, limit: usize) -> Result<Vec<DataHit>> {
        self.search_fts(reach, query, fts_query(query), limit)
    }

    /// `search` of the FTS5 query `fts` made of `query`.
    pub(super) fn search_fts(
        &self,
        reach: &Reach,
        query: &str,
        fts: Option<String>,
        limit: usize,
    ) -> Result<Vec<DataHit>> {
        let Some(fts) = fts else {
            return Err(DataError::InvalidArgs {
                message: format!("the query {query:?} has no words to search for"),
                hint:
                    "search for words or a \"quoted phrase\"; operators and punctuation are ignored"
                        .into(),
            });
        };
        if reach.names().is_empty() {
            return Ok(Vec::new());
        }
        // Ranking runs in the index alone: the reach is a column filter on the collection's
        // token (`collection : (…)`), trashed documents are not in the index (and the join
        // leaves out any a database from before that rule still has), and FTS5 ranks
        // by its configured `rank` (BM25: title weighs most, then tags). The snippet and the
        // title are made for the few rows kept, not for every match.
        let within = reach
            .names()
            .iter()
            .map(|n| collection_token(n))
            .collect::<Vec<_>>()
            .join(" OR ");
        // Where the reach covers every collection the index holds, the filter can only cost.
        let mut present = self
            .conn
            .prepare_cached("SELECT DISTINCT collection FROM docs")
            .map_err(self.db())?;
        let all_reachable = present
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(self.db())?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.db())?
            .iter()
            .all(|c| reach.contains(c));
        drop(present);
        let matching = if all_reachable {
            fts.clone()
        } else {
            format!("({fts}) AND collection : ({within})")
        };
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT docs_fts.rowid, d.collection, rank
                 FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid
                 WHERE docs_fts MATCH ?1 AND d.deleted_ms IS NULL
                 ORDER BY rank LIMIT ?2",
            )
            .map_err(self.db())?;
        let ranked: Vec<(i64, String, f64)> = stmt
            .query_map(params![matching, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .map_err(self.db())?
            .collect::<std::result::Result<_, _>>()
            .map_err(self.db())?;
        drop(stmt);
        let mut snippet = self
            .conn
            .prepare_cached(
                "SELECT snippet(docs_fts, 1, '«', '»', '…', 16), d.title, d.card
                 FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid
                 WHERE docs_fts MATCH ?1 AND docs_fts.rowid = ?2",
            )
            .map_err(self.db())?;
        let mut hits = Vec::with_capacity(ranked.len());
        for (id, collection, score) in ranked {
            let (text, title, card): (String, String, String) = snippet
                .query_row(params![matching, id], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(self.db())?;
            hits.push(DataHit {
                handle: self.handle(id),
                collection,
                title: shown_title(&card, title),
                snippet: text,
                score: -score,
                keyword_rank: None,
                vector_rank: None,
                chunk: None,
            });
        }
        Ok(hits)
    }
}
