//! The renderings of the data tools' results (`results/data.rs`): `search_data`,
//! `read_data`, `list_data`, `write_data`, `delete_data`.

use super::{Doc, Outward, Render};
use crate::results::{
    DeleteDataResult, ListDataResult, ReadDataResult, SearchDataResult, WriteDataResult,
};

/// The query and its counts, then one hit a line.
impl Render for SearchDataResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("query", &self.query);
        doc.field("hits", &self.hits);
        doc.fact("count", self.count);
        if let Some(mode) = &self.mode {
            doc.string("mode", mode);
        }
        doc.field("embedding", &self.embedding);
        doc.opt("complete", self.complete);
    }
}

/// The document's card, and its body or section.
impl Render for ReadDataResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("card", &self.card);
        if let Some(body) = &self.body {
            doc.string("body", body);
        }
        doc.field("section", &self.section);
    }
}

/// One document a line, the collections, what went wrong.
impl Render for ListDataResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("documents", &self.documents);
        doc.fact("total", self.total);
        doc.fact("offset", self.offset);
        doc.field("collections", &self.collections);
        doc.field("warnings", &self.warnings);
    }
}

/// Whether it was created (or left as it was), and its card.
impl Render for WriteDataResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("card", &self.card);
        doc.fact("created", self.created);
        doc.opt("unchanged", self.unchanged);
    }
}

/// What was trashed and how the operator restores it.
impl Render for DeleteDataResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("handle", &self.handle);
        doc.string("title", &self.title);
        doc.fact("trashed", self.trashed);
        doc.string("restore", &self.restore);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::as_before;
    use serde_json::json;

    #[test]
    fn documents_read_as_before() {
        let card = json!({"handle":"D-1","collection":"docs","title":"Deploying","summary":"We deploy with helm.",
            "tags":["ops"],"annotation":"","source":"upload","note":false,"size":120,"modified_ms":1,
            "created_ms":1,"updated_ms":2,"sections":["Deploying","Rollback"]});
        as_before::<SearchDataResult>(
            "search_data",
            json!({"query":"helm rollback","count":1,"mode":"hybrid","complete":true,
                "embedding":{"model":"m","embedded":12,"pending":0,"computed":12},
                "hits":[{"handle":"D-1","collection":"docs","title":"Deploying","snippet":"Use «helm» «rollback»",
                    "score":3.1,"keyword_rank":1,"chunk":{"section":"Rollback","lines":[3,9],"text":"Use helm rollback\nto undo","similarity":0.8}}]}),
        );
        as_before::<ReadDataResult>(
            "read_data",
            json!({"card": card.clone(), "section": {"title":"Rollback","level":2,"text":"Use helm rollback\nto undo.\n"}}),
        );
        as_before::<ListDataResult>(
            "list_data",
            json!({"documents":[{"handle":"D-1","collection":"docs","title":"Deploying","summary":"We deploy.","tags":["ops"]}],
                "total":1,"offset":0,"collections":[{"name":"docs","documents":1}]}),
        );
        as_before::<WriteDataResult>(
            "write_data",
            json!({"card": card, "created": false, "unchanged": true}),
        );
        as_before::<DeleteDataResult>(
            "delete_data",
            json!({"handle":"D-1","title":"Standup","trashed":true,"restore":"toolvisor data restore D-1"}),
        );
    }
}
