//! The trash and the history of the store: a deleted document stays, restorable by the
//! operator (`toolvisor data trash`, `toolvisor data restore`), and every change to a
//! document is one of its revisions.

use super::*;

impl Store {
    /// Move a document to the trash (restorable).
    pub fn trash(&mut self, reach: &Reach, id: i64, who: &Who) -> Result<DataCard> {
        let card = self.card(reach, id)?;
        self.set_deleted(id, Some(now_ms()), who, &json!({"deleted": true}))?;
        Ok(card)
    }

    /// The trash, newest first (for the operator: every collection).
    pub fn trash_list(&self) -> Result<Vec<Trashed>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, collection, title, card, deleted_ms FROM docs
                 WHERE deleted_ms IS NOT NULL ORDER BY deleted_ms DESC",
            )
            .map_err(self.db())?;
        let rows = stmt
            .query_map([], |r| {
                let title: String = r.get(2)?;
                let card: String = r.get(3)?;
                Ok(Trashed {
                    handle: self.handle(r.get(0)?),
                    collection: r.get(1)?,
                    title: shown_title(&card, title),
                    deleted_ms: r.get::<_, i64>(4)? as u64,
                })
            })
            .map_err(self.db())?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.db())?;
        Ok(rows)
    }

    /// Every document not in the trash, whatever its collection, as (handle, collection,
    /// title): the operator's `toolvisor data list`, never a tool's answer.
    pub fn operator_list(&self) -> Result<Vec<(String, String, String)>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, collection, title, card FROM docs
                 WHERE deleted_ms IS NULL ORDER BY collection, id",
            )
            .map_err(self.db())?;
        let rows = stmt
            .query_map([], |r| {
                let title: String = r.get(2)?;
                let card: String = r.get(3)?;
                Ok((self.handle(r.get(0)?), r.get(1)?, shown_title(&card, title)))
            })
            .map_err(self.db())?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.db())?;
        Ok(rows)
    }

    /// Bring a trashed document back (the operator's `toolvisor data restore`).
    pub fn restore(&mut self, id: i64, who: &Who) -> Result<()> {
        let trashed: Option<i64> = self
            .conn
            .query_row(
                "SELECT id FROM docs WHERE id = ?1 AND deleted_ms IS NOT NULL",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.db())?;
        if trashed.is_none() {
            return Err(DataError::NotFound(format!(
                "{} is not in the trash",
                self.handle(id)
            )));
        }
        self.set_deleted(id, None, who, &json!({"restored": true}))
    }

    /// A document's revisions, oldest first: `(ts_ms, conversation, tool, change)`.
    pub fn revisions(&self, id: i64) -> Result<Vec<(u64, String, String, serde_json::Value)>> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT ts_ms, conversation, tool, change FROM revisions WHERE doc_id = ?1 ORDER BY id",
            )
            .map_err(self.db())?;
        let rows = stmt
            .query_map([id], |r| {
                let change: String = r.get(3)?;
                Ok((
                    r.get::<_, i64>(0)? as u64,
                    r.get(1)?,
                    r.get(2)?,
                    serde_json::from_str(&change).unwrap_or(serde_json::Value::Null),
                ))
            })
            .map_err(self.db())?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(self.db())?;
        Ok(rows)
    }
}
