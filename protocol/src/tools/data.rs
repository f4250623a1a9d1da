//! Arguments and results of The data hub's tools: `search_data`, `read_data`, `list_data`, `write_data`, `delete_data`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `search_data {query, collection?, limit?, mode?}`: search of the data hub.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchDataArgs {
    /// Words to find (all of them), or a "quoted phrase"; operators and punctuation are ignored.
    pub query: String,
    /// Only this collection.
    pub collection: Option<String>,
    /// Most hits (default 10).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u64>,
    /// `keyword` (default): BM25 over the words. `hybrid`: BM25 and the similarity of the
    /// query's embedding to the documents' chunks, fused; each hit cites its best chunk.
    pub mode: Option<SearchMode>,
}

/// How `search_data` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// BM25 over the words (every word required).
    #[default]
    Keyword,
    /// BM25 and vector similarity fused by reciprocal rank; needs `[data] embedding_model`.
    Hybrid,
}

/// What `read_data` returns of a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DataView {
    /// Title, summary, tags, source, sizes, times, annotation, section titles.
    #[default]
    Card,
    /// The card and the whole converted body.
    Body,
    /// The card and one section (`section`: its title or index).
    Section,
}

/// `read_data {handle, view?, section?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadDataArgs {
    /// A document handle, e.g. D-5c0e91a2f7.
    pub handle: String,
    /// card (default), body or section.
    pub view: Option<DataView>,
    /// With view section: the section's title, or its index from 0.
    #[serde(default, deserialize_with = "title_or_index")]
    #[schemars(schema_with = "title_or_index_schema")]
    pub section: Option<String>,
}

/// A section named by its title (a string) or its index (an integer, or a string of digits:
/// `2` and `"2"` are the same section). Only a self-describing format (JSON, where harnesses
/// send either) can tell the two apart; bincode carries the string.
fn title_or_index<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    if !d.is_human_readable() {
        return Option::<String>::deserialize(d);
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum TitleOrIndex {
        Title(String),
        Index(u64),
    }
    Ok(Option::<TitleOrIndex>::deserialize(d)?.map(|s| match s {
        TitleOrIndex::Title(t) => t,
        TitleOrIndex::Index(i) => i.to_string(),
    }))
}

fn title_or_index_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "integer"],
        "minimum": 0,
        "description": "With view section: the section's title, or its index from 0."
    })
}

/// `list_data {collection?, tag?, limit?, offset?}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDataArgs {
    /// Only this collection.
    pub collection: Option<String>,
    /// Only documents with this tag.
    pub tag: Option<String>,
    /// Most cards (default 50).
    #[schemars(range(min = 1, max = 200))]
    pub limit: Option<u64>,
    /// Cards to skip.
    #[schemars(range(min = 0, max = 1_000_000))]
    pub offset: Option<u64>,
}

/// The card fields `write_data` may change (never the body).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataCardArgs {
    /// New title.
    pub title: Option<String>,
    /// New summary.
    pub summary: Option<String>,
    /// New tags (replace the old ones).
    pub tags: Option<Vec<String>>,
    /// A free-form annotation (searchable).
    pub annotation: Option<String>,
    /// Refused: a body is always what the pipeline makes from its original.
    pub body: Option<String>,
}

/// A new note for `write_data`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataNoteArgs {
    /// The note's title.
    pub title: String,
    /// The note's text (Markdown).
    pub text: String,
    /// The collection it belongs to.
    pub collection: String,
}

/// `write_data {handle?, card?, note?}`: change a document's card, or create a note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteDataArgs {
    /// The document whose card changes.
    pub handle: Option<String>,
    /// The card fields to change.
    pub card: Option<DataCardArgs>,
    /// A new note (without handle).
    pub note: Option<DataNoteArgs>,
}

/// `delete_data {handle}`: move a document to the trash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteDataArgs {
    /// A document handle, e.g. D-5c0e91a2f7.
    pub handle: String,
}
