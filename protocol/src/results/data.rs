//! The results of the data tools: `search_data`, `read_data`, `list_data`, `write_data`,
//! `delete_data`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One search hit of `search_data`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataHit {
    /// The document's handle (`D-5c0e91a2f7`).
    pub handle: String,
    /// Its collection.
    pub collection: String,
    /// Its title.
    pub title: String,
    /// The best passage, matches between « and » (hybrid: the best chunk's text where the
    /// words did not match).
    pub snippet: String,
    /// Relevance, higher is better: BM25 (keyword), the fused reciprocal-rank score (hybrid).
    pub score: f64,
    /// Hybrid: the rank by BM25, where the words matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword_rank: Option<u64>,
    /// Hybrid: the rank by the best chunk's similarity, where among the best 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vector_rank: Option<u64>,
    /// Hybrid: the document's chunk most like the query, where it has vectors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk: Option<DataChunk>,
}

/// A hybrid hit's citation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataChunk {
    /// The section's heading (empty for the text before the first heading).
    pub section: String,
    /// `[first, last]` line, 1-based, inclusive, in the converted body (`read_data` body).
    pub lines: Vec<u64>,
    /// The chunk's text (its first 400 characters).
    pub text: String,
    /// Cosine similarity to the query (1 is the same direction).
    pub similarity: f64,
}

/// How far the embedding of the searched documents is (hybrid).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataEmbedding {
    /// `[data] embedding_model`.
    pub model: String,
    /// Chunks with a vector of the model.
    pub embedded: u64,
    /// Chunks (or changed documents) still waiting for one: ranked by BM25 alone meanwhile.
    pub pending: u64,
    /// Vectors this daemon computed since it started (all collections it embeds): a changed
    /// document costs only its changed chunks.
    pub computed: u64,
    /// Chunks the model refused (longer than its context, most often): ranked by BM25
    /// alone until their text changes. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    /// The model's last refusal of a skipped chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_because: Option<String>,
}

/// The result of `search_data`: the hits, best first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchDataResult {
    /// The query as given.
    pub query: String,
    /// The hits, best first.
    pub hits: Vec<DataHit>,
    /// How many hits.
    pub count: u64,
    /// `keyword` or `hybrid`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Hybrid: the embedding's progress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding: Option<DataEmbedding>,
    /// Hybrid: false while chunks of the searched collections wait for vectors, or when the
    /// model refused some (`embedding.skipped`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
}

/// A document's card: what the pipeline made, with what tools changed on top.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataCard {
    /// The document's handle (`D-5c0e91a2f7`).
    pub handle: String,
    /// Its collection.
    pub collection: String,
    /// Its title.
    pub title: String,
    /// Its summary (the opening text, unless changed).
    pub summary: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// The annotation tools wrote (empty if none).
    pub annotation: String,
    /// The original's path (a note's original is kept by the hub).
    pub source: String,
    /// A note the hub keeps, not a file of a collection.
    pub note: bool,
    /// The original's size in bytes.
    pub size: u64,
    /// When the original was modified (ms since the epoch).
    pub modified_ms: u64,
    /// When the hub first saw it (ms since the epoch).
    pub created_ms: u64,
    /// The last change of its card or body (ms since the epoch).
    pub updated_ms: u64,
    /// Section titles, in order (read one with `view: "section"`).
    pub sections: Vec<String>,
}

/// One section of a body: the text under one heading.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataSection {
    /// The heading (empty for the text before the first heading).
    pub title: String,
    /// Heading depth (1 for `#`/`<h1>`; 0 for the text before any heading).
    pub level: u8,
    /// The section's text.
    pub text: String,
}

/// The result of `read_data`: the card, with the body or one section when asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadDataResult {
    /// The document's card.
    pub card: DataCard,
    /// view body: the whole converted body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// view section: the section asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<DataSection>,
}

/// A card in brief, as `list_data` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataBrief {
    /// The document's handle (`D-5c0e91a2f7`).
    pub handle: String,
    /// Its collection.
    pub collection: String,
    /// Its title.
    pub title: String,
    /// Its summary.
    pub summary: String,
    /// Its tags.
    pub tags: Vec<String>,
}

/// A reachable collection and its size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DataCollection {
    /// The collection's name.
    pub name: String,
    /// Documents in it (not counting the trash).
    pub documents: u64,
}

/// The result of `list_data`: cards in brief, newest change first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ListDataResult {
    /// The cards of this page.
    pub documents: Vec<DataBrief>,
    /// Documents matching the filter, in all pages.
    pub total: u64,
    /// Cards skipped.
    pub offset: u64,
    /// Without a filter: the reachable collections with their sizes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collections: Option<Vec<DataCollection>>,
    /// Originals of the reachable collections found and not read (a symbolic link, a FIFO),
    /// each with why: the hub follows no links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

/// The result of `write_data`: the changed or created card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteDataResult {
    /// The card as it is now.
    pub card: DataCard,
    /// A new note was created (false: a card was changed).
    pub created: bool,
    /// The card already said what the update asked: nothing was written, no revision made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unchanged: Option<bool>,
}

/// The result of `delete_data`: the document moved to the trash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DeleteDataResult {
    /// The document's handle (`D-5c0e91a2f7`).
    pub handle: String,
    /// Its title.
    pub title: String,
    /// Always true: it is in the trash.
    pub trashed: bool,
    /// How the operator restores it.
    pub restore: String,
}
