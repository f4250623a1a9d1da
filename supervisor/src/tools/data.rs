//! The data hub's tools (`search_data`, `read_data`, `list_data`, `write_data`,
//! `delete_data`): each call's reach is the collections its surface may see
//! (`DataConfig::reach`), resolved here and enforced by the store in SQL.

use toolvisor_data::store::{CardUpdate, DataCard, DataError, Reach, Who};
use toolvisor_data::{DataHub, EmbedFailure, HubError};
use toolvisor_inference::InferenceError;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    DataBrief, DataCollection, DataEmbedding, DataSection, DeleteDataResult, ListDataResult,
    ReadDataResult, SearchDataResult, WriteDataResult,
};
use toolvisor_protocol::tools::{
    DataView, DeleteDataArgs, ListDataArgs, ReadDataArgs, SearchDataArgs, SearchMode, WriteDataArgs,
};

use super::CallCtx;

fn error(e: HubError) -> ToolError {
    match e {
        HubError::NotReady(m) => ToolError::new(
            ErrorKind::NotReady,
            m,
            "retry in a moment: an answer from a half-converted store could miss documents; `toolvisor tree` shows the data store's progress",
        ),
        HubError::Failed(m) => ToolError::new(
            ErrorKind::ResourceFailed,
            format!("the data hub cannot serve: {m}"),
            "the operator can see the problem in `toolvisor status`; a corrupt database file can be moved aside (the hub rebuilds it from the originals at the next start)",
        ),
        HubError::Data(e) => data_error(e),
    }
}

fn data_error(e: DataError) -> ToolError {
    match e {
        DataError::NotFound(m) => ToolError::new(
            ErrorKind::NotFound,
            m,
            "list_data shows the documents and collections this run can reach",
        ),
        DataError::InvalidArgs { message, hint } | DataError::Refused { message, hint } => {
            ToolError::new(ErrorKind::InvalidArgs, message, hint)
        }
        e @ DataError::Db { .. } => ToolError::new(
            ErrorKind::ResourceFailed,
            e.to_string(),
            "the database is locked by another program or damaged; `toolvisor status` shows the data hub's state",
        ),
        e @ DataError::Io { .. } => ToolError::new(
            ErrorKind::Io,
            e.to_string(),
            "check the path's permissions and free space",
        ),
        e @ DataError::NotFollowed { .. } => ToolError::new(
            ErrorKind::PolicyDenied,
            e.to_string(),
            "the data hub reads regular files inside its collections only, never through a link",
        ),
    }
}

fn who(ctx: &CallCtx, tool: &str) -> Who {
    Who {
        conversation: ctx.conversation.clone(),
        tool: tool.to_string(),
    }
}

fn brief(card: DataCard) -> DataBrief {
    DataBrief {
        handle: card.handle,
        collection: card.collection,
        title: card.title,
        summary: card.summary,
        tags: card.tags,
    }
}

/// The data hub's embeddings from the inference pool: `[data] embedding_model` served for
/// embeddings (`toolvisor_inference::embed`).
pub(crate) struct PoolEmbedder {
    pub pool: std::sync::Arc<toolvisor_inference::Inference>,
    pub model: String,
}

impl toolvisor_data::Embedder for PoolEmbedder {
    fn embed<'a>(&'a self, texts: &'a [String]) -> toolvisor_data::embedder::Embedded<'a> {
        Box::pin(async move {
            self.pool.embed(&self.model, texts).await.map_err(|e| {
                let refused = matches!(e, InferenceError::EmbeddingsRefused { .. });
                let mut e = ToolError::from(e);
                e.message = format!("[data] embedding_model {:?}: {}", self.model, e.message);
                match refused {
                    true => EmbedFailure::Refused(e),
                    false => EmbedFailure::Failed(e),
                }
            })
        })
    }
}

/// `search_data`.
pub(crate) async fn run_search_data(
    hub: &DataHub,
    ctx: &CallCtx,
    a: SearchDataArgs,
) -> Result<SearchDataResult, ToolError> {
    let reach = hub.config().reach(ctx.surface.as_str());
    let within = reach.narrow(a.collection.as_deref()).map_err(data_error)?;
    let limit = a.limit.unwrap_or(10) as usize;
    let query = a.query.clone();
    if a.mode.unwrap_or_default() == SearchMode::Hybrid {
        return hybrid(hub, within, a.query, limit).await;
    }
    let hits = hub
        .with_store(move |s| s.search(&within, &query, limit))
        .await
        .map_err(error)?;
    Ok(SearchDataResult {
        query: a.query,
        count: hits.len() as u64,
        hits,
        mode: None,
        embedding: None,
        complete: None,
    })
}

/// `search_data {mode: "hybrid"}`: the query embedded by `[data] embedding_model`, BM25 and
/// vector ranks fused. Refused without the model; `not_ready` until a first chunk of the
/// searched collections has its vector; `complete: false` while some still wait.
async fn hybrid(
    hub: &DataHub,
    within: Reach,
    query: String,
    limit: usize,
) -> Result<SearchDataResult, ToolError> {
    let Some(model) = hub.config().embedding_model.clone() else {
        return Err(ToolError::new(
            ErrorKind::NotAvailable,
            "search_data mode \"hybrid\" needs an embedding model, and none is configured ([data] embedding_model)",
            "set `[data] embedding_model = \"owner/name\"` (a model of the store: download_model fetches one) in the daemon's config, or search with mode \"keyword\"",
        ));
    };
    let Some(embedder) = hub.embedder() else {
        return Err(ToolError::new(
            ErrorKind::NotAvailable,
            "search_data mode \"hybrid\": the inference pool that embeds is not running in this daemon",
            "`toolvisor status` shows why the inference pool did not start; search with mode \"keyword\" meanwhile",
        ));
    };
    if query.trim().is_empty() {
        return Err(ToolError::new(
            ErrorKind::InvalidArgs,
            "the query is empty",
            "give words, a \"quoted phrase\" or a sentence to search for",
        ));
    }
    let key = hub.config().vector_key().unwrap_or_else(|| model.clone());
    let (r, m) = (within.clone(), key.clone());
    let progress = hub
        .with_store(move |s| s.embedding_progress(&r, &m))
        .await
        .map_err(error)?;
    if progress.embedded == 0 && progress.pending > 0 {
        // A model that cannot embed (not in the store, no way to start it) is said as such,
        // with its own hint; anything else is a wait.
        if let Some(mut e) = hub.embedding_error() {
            e.message = format!(
                "search_data mode \"hybrid\": none of {} chunks could be embedded yet: {}",
                progress.pending, e.message
            );
            return Err(e);
        }
        return Err(ToolError::new(
            ErrorKind::NotReady,
            format!(
                "the data hub is embedding its documents with {model}: 0 of {} chunks have vectors yet",
                progress.pending
            ),
            "retry in a moment (get_inference_status shows the embedding model's server), or search with mode \"keyword\"",
        ));
    }
    let (prefix, _) = hub.config().prefixes();
    let vector = embedder
        .embed(&[format!("{prefix}{query}")])
        .await
        .map_err(|f| match f {
            EmbedFailure::Refused(mut e) => {
                e.message = format!("the query could not be embedded: {}", e.message);
                e.hint = "shorten the query, or search with mode \"keyword\"".into();
                e
            }
            EmbedFailure::Failed(e) => e,
        })?
        .pop()
        .ok_or_else(|| {
            ToolError::new(
                ErrorKind::ResourceFailed,
                format!("{model} gave the query no vector"),
                "get_inference_status shows the embedding model's server",
            )
        })?;
    let (q, m) = (query.clone(), key);
    let hits = hub
        .with_store(move |s| s.hybrid(&within, &q, &vector, &m, limit))
        .await
        .map_err(error)?;
    // Chunks the model refused are found by keyword only: said, with why, so a miss by
    // meaning is not taken for an answer.
    let skipped = (progress.skipped > 0).then_some(progress.skipped);
    let embedding = DataEmbedding {
        model,
        embedded: progress.embedded,
        pending: progress.pending,
        computed: hub.vectors_computed(),
        skipped,
        skipped_because: skipped
            .and_then(|_| hub.embedding_skip_reason())
            .map(|e| e.message),
    };
    Ok(SearchDataResult {
        query,
        mode: Some("hybrid".into()),
        count: hits.len() as u64,
        hits,
        embedding: Some(embedding),
        complete: Some(progress.pending == 0 && progress.skipped == 0),
    })
}

/// The document id `handle` names (handles are the store's own: `store::Handles`).
async fn id_of(hub: &DataHub, handle: &str) -> Result<i64, ToolError> {
    let handle = handle.to_string();
    hub.with_store(move |s| s.id_of(&handle))
        .await
        .map_err(error)
}

/// `read_data`.
pub(crate) async fn run_read_data(
    hub: &DataHub,
    ctx: &CallCtx,
    a: ReadDataArgs,
) -> Result<ReadDataResult, ToolError> {
    let reach = hub.config().reach(ctx.surface.as_str());
    let id = id_of(hub, &a.handle).await?;
    match a.view.unwrap_or_default() {
        DataView::Card => {
            let card = hub
                .with_store(move |s| s.card(&reach, id))
                .await
                .map_err(error)?;
            Ok(ReadDataResult {
                card,
                body: None,
                section: None,
            })
        }
        DataView::Body => {
            let (card, body) = hub
                .with_store(move |s| s.body(&reach, id))
                .await
                .map_err(error)?;
            Ok(ReadDataResult {
                card,
                body: Some(body),
                section: None,
            })
        }
        DataView::Section => {
            let which = a.section.clone().ok_or_else(|| {
                ToolError::new(
                    ErrorKind::InvalidArgs,
                    "view \"section\" needs `section`: the section's title or index",
                    "read the card first: its `sections` lists the titles in order",
                )
            })?;
            let (card, section) = hub
                .with_store(move |s| s.section(&reach, id, &which))
                .await
                .map_err(error)?;
            Ok(ReadDataResult {
                card,
                body: None,
                section: Some(DataSection {
                    title: section.title,
                    level: section.level,
                    text: section.text,
                }),
            })
        }
    }
}

/// `list_data`.
pub(crate) async fn run_list_data(
    hub: &DataHub,
    ctx: &CallCtx,
    a: ListDataArgs,
) -> Result<ListDataResult, ToolError> {
    let reach = hub.config().reach(ctx.surface.as_str());
    let within = reach.narrow(a.collection.as_deref()).map_err(data_error)?;
    let (limit, offset) = (
        a.limit.unwrap_or(50) as usize,
        a.offset.unwrap_or(0) as usize,
    );
    let tag = a.tag.clone();
    let unfiltered = a.collection.is_none() && a.tag.is_none();
    let all = reach.clone();
    let (cards, total, counts) = hub
        .with_store(move |s| {
            let (cards, total) = s.list(&within, tag.as_deref(), limit, offset)?;
            let counts = if unfiltered {
                Some(s.counts(&all)?)
            } else {
                None
            };
            Ok((cards, total, counts))
        })
        .await
        .map_err(error)?;
    let warnings = hub.warnings(&reach);
    Ok(ListDataResult {
        documents: cards.into_iter().map(brief).collect(),
        total,
        offset: offset as u64,
        collections: counts.map(|counts| {
            counts
                .into_iter()
                .map(|(name, documents)| DataCollection { name, documents })
                .collect()
        }),
        warnings: (!warnings.is_empty()).then_some(warnings),
    })
}

/// `delete_data`.
pub(crate) async fn run_delete_data(
    hub: &DataHub,
    ctx: &CallCtx,
    a: DeleteDataArgs,
) -> Result<DeleteDataResult, ToolError> {
    let tool = "delete_data";
    let reach = hub.config().reach(ctx.surface.as_str());
    let id = id_of(hub, &a.handle).await?;
    let who = who(ctx, tool);
    let card = hub
        .with_store(move |s| s.trash(&reach, id, &who))
        .await
        .map_err(error)?;
    Ok(DeleteDataResult {
        restore: format!(
            "the operator can restore it: toolvisor data restore {}",
            card.handle
        ),
        handle: card.handle,
        title: card.title,
        trashed: true,
    })
}

async fn write(
    hub: &DataHub,
    ctx: &CallCtx,
    reach: &Reach,
    a: WriteDataArgs,
) -> Result<WriteDataResult, ToolError> {
    let who = who(ctx, "write_data");
    match (a.handle, a.card, a.note) {
        (Some(handle), card, note) => {
            let id = id_of(hub, &handle).await?;
            let body_change = card.as_ref().is_some_and(|c| c.body.is_some()) || note.is_some();
            if body_change {
                let r = reach.clone();
                let (source, is_note) = hub
                    .with_store(move |s| s.source(&r, id))
                    .await
                    .map_err(error)?;
                let original = if is_note {
                    "a note the hub keeps".to_string()
                } else {
                    format!("its original {source}")
                };
                return Err(ToolError::new(
                    ErrorKind::InvalidArgs,
                    format!(
                        "the body of {handle} cannot be changed: a body is always what the pipeline converts from {original}"
                    ),
                    format!(
                        "either edit the original (the hub converts it again within a moment), or put your text in the card's annotation: write_data {{\"handle\": \"{handle}\", \"card\": {{\"annotation\": \"...\"}}}}; a new text can be a new note (write_data with `note` and no handle)"
                    ),
                ));
            }
            let Some(card) = card else {
                return Err(ToolError::new(
                    ErrorKind::InvalidArgs,
                    format!("write_data with handle {handle} has no `card` to change"),
                    "give `card` with any of title, summary, tags, annotation",
                ));
            };
            let update = CardUpdate {
                title: card.title,
                summary: card.summary,
                tags: card.tags,
                annotation: card.annotation,
            };
            let r = reach.clone();
            let (card, changed) = hub
                .with_store(move |s| s.update_card(&r, id, &update, &who))
                .await
                .map_err(error)?;
            Ok(WriteDataResult {
                card,
                created: false,
                unchanged: (!changed).then_some(true),
            })
        }
        (None, None, Some(note)) => {
            if note.title.trim().is_empty() {
                return Err(ToolError::new(
                    ErrorKind::InvalidArgs,
                    "the note's title is empty",
                    "give the note a title",
                ));
            }
            let id = hub
                .create_note(reach, &note.collection, &note.title, &note.text, who)
                .await
                .map_err(error)?;
            let r = reach.clone();
            let card = hub
                .with_store(move |s| s.card(&r, id))
                .await
                .map_err(error)?;
            Ok(WriteDataResult {
                card,
                created: true,
                unchanged: None,
            })
        }
        (None, Some(_), _) => Err(ToolError::new(
            ErrorKind::InvalidArgs,
            "write_data with `card` needs the `handle` of the document to change",
            "take a handle from search_data or list_data",
        )),
        (None, None, None) => Err(ToolError::new(
            ErrorKind::InvalidArgs,
            "write_data needs `handle` and `card` (change a card) or `note` (create a note)",
            "e.g. {\"note\": {\"title\": \"...\", \"text\": \"...\", \"collection\": \"notes\"}}",
        )),
    }
}

/// The data hub's tools, detached until `[data.collections]` names one.
pub(crate) fn declare(attached: &super::spec::Attachment) -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    let tools = vec![
        ToolSpec::new(
            "search_data",
            Tier::Read,
            "data_hub",
            "Search the user's document collections: full text ranked by BM25, or mode \"hybrid\" (keywords and meaning fused; needs [data] embedding_model), whose hits also cite their best chunk (section, lines). Hits have a handle (D-5c0e91a2f7), title and a snippet with the match between « ».",
            |s, ctx, a| Box::pin(run_search_data(&s.data, ctx, a)),
        ),
        ToolSpec::new(
            "read_data",
            Tier::Read,
            "data_hub",
            "Read a document by handle: its card (default), its whole body, or one section by title or index.",
            |s, ctx, a| Box::pin(run_read_data(&s.data, ctx, a)),
        ),
        ToolSpec::new(
            "list_data",
            Tier::Read,
            "data_hub",
            "List documents (newest change first), by collection or tag; without a filter also the reachable collections with their sizes.",
            |s, ctx, a| Box::pin(run_list_data(&s.data, ctx, a)),
        ),
        ToolSpec::new(
            "write_data",
            Tier::Write,
            "data_hub",
            "Change a document's card (title, summary, tags, annotation), or create a note in a collection. A body is never edited: it is converted from its original.",
            |s, ctx, a| Box::pin(async move { let reach = s.data.config().reach(ctx.surface.as_str()); write(&s.data, ctx, &reach, a).await }),
        )
        .additive()
        .approval(Approval::Always),
        ToolSpec::new(
            "delete_data",
            Tier::Write,
            "data_hub",
            "Move a document to the trash (the operator can restore it).",
            |s, ctx, a| Box::pin(run_delete_data(&s.data, ctx, a)),
        )
        .idempotent(true)
        .approval(Approval::Always),
    ];
    tools
        .into_iter()
        .map(|t| t.attachment(attached.clone()))
        .collect()
}

/// The data tools' attachment when `[data.collections]` names no collection.
pub(crate) fn no_collections() -> super::spec::Attachment {
    super::spec::Attachment::Detached(
        "the data hub has no collections: add [data.collections.NAME] path = \"/abs/folder\" to the daemon's config".into(),
    )
}
