//! `search_data {mode: "hybrid"}` end to end: the data hub's documents cut into chunks and
//! embedded by a real llama.cpp server (`llama-server --embeddings`, started by the inference
//! pool on the tiny GGUF of `tests/inference/make_tiny_gguf.py`), BM25 and vector ranks fused
//! by reciprocal rank, each hit citing its best chunk with the lines of the converted body;
//! an edit re-embeds only its changed chunk; a sensitive collection is never embedded; without
//! `[data] embedding_model` or with a model the store lacks, a clear error.
//!
//! The tiny model's weights are random, so its vectors mean nothing; what they do carry is
//! that the same text gives the same vector, so a query equal to one chunk's text is that
//! chunk's nearest neighbour (similarity 1), whatever the words BM25 sees.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::inference::{
    embedding_model, llama_server_dir, make_gguf, make_gguf_context, put_in_store,
};
use toolvisor_tests::{TestDaemon, wait_for};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The chunk text the tests query with (a section's whole text).
const STORAGE: &str = "Backups rotate nightly onto the cold tier and are kept for ninety days.";

/// A daemon whose data hub embeds with `model` (the tiny GGUF is in its store as
/// `tester/embed`), llama-server first on its PATH.
fn start(model: Option<&str>) -> (TestDaemon, std::path::PathBuf) {
    start_with(model, None, &[])
}

/// [`start`] with the tiny model declaring a context of `ctx` tokens (2048 without) and
/// more documents in `docs`.
fn start_with(
    model: Option<&str>,
    ctx: Option<u32>,
    more: &[(&str, &str)],
) -> (TestDaemon, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("models");
    let gguf = dir.path().join("tiny.gguf");
    match ctx {
        Some(ctx) => make_gguf_context(&gguf, 3, ctx),
        None => make_gguf(&gguf, 3),
    };
    put_in_store(
        &store,
        "tester/embed",
        "F32",
        "embed-f32.gguf",
        &std::fs::read(&gguf).unwrap(),
    );
    // The real small embedding model, as download_model would have stored its GGUF repo.
    put_in_store(
        &store,
        "sentence-transformers/all-MiniLM-L6-v2-GGUF",
        "F16",
        "all-MiniLM-L6-v2-f16.gguf",
        &std::fs::read(embedding_model()).unwrap(),
    );
    let docs = dir.path().join("originals/docs");
    let secret = dir.path().join("originals/secret");
    write(
        &docs.join("ops.md"),
        &format!(
            "# Operations\n\nHow the service runs.\n\n## Storage\n\n{STORAGE}\n\n## Alerts\n\nPages go to the on-call phone.\n"
        ),
    );
    write(
        &docs.join("backups.md"),
        "# Backups guide\n\nBackups backups backups: the word many times, so BM25 likes this one.\nBackups again.\n",
    );
    write(
        &docs.join("garden.md"),
        "# Garden\n\nTomatoes want sun, water.\n",
    );
    write(
        &secret.join("pay.md"),
        "# Pay\n\nBackups of the payroll rotate nightly.\n",
    );
    for (name, text) in more {
        write(&docs.join(name), text);
    }
    let path = format!(
        "{}:{}",
        llama_server_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let embedding = model.map_or(String::new(), |m| format!("embedding_model = {m:?}\n"));
    let cfg = format!(
        "[models]\nstore = {:?}\n[data]\n{embedding}[data.collections.docs]\npath = {:?}\n[data.collections.secret]\npath = {:?}\nsensitive = true\n",
        store.display().to_string(),
        docs.display().to_string(),
        secret.display().to_string()
    );
    (
        TestDaemon::start_with_env(dir, &cfg, &[("PATH", &path)]),
        docs,
    )
}

fn hybrid(d: &TestDaemon, query: &str) -> Outcome {
    d.call(
        "c",
        "search_data",
        json!({"query": query, "mode": "hybrid"}),
    )
}

/// The hybrid answer once every chunk has its vector (and `computed` reached `at_least`).
fn complete(d: &TestDaemon, query: &str, at_least: u64) -> Json {
    wait_for(
        "every chunk embedded",
        Duration::from_secs(120),
        || match hybrid(d, query) {
            Outcome::Ok(v)
                if v.0["complete"] == true
                    && v.0["embedding"]["computed"].as_u64() >= Some(at_least) =>
            {
                Some(v.0)
            }
            Outcome::Ok(_) => None,
            Outcome::Err(e) if e.kind == ErrorKind::NotReady => None,
            Outcome::Err(e) => panic!("hybrid search failed: {e}\n{}", d.log_text()),
        },
    )
}

fn hit<'a>(v: &'a Json, title: &str) -> &'a Json {
    v["hits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["title"] == title)
        .unwrap_or_else(|| panic!("no hit {title:?}: {v}"))
}

fn rrf(h: &Json) -> f64 {
    ["keyword_rank", "vector_rank"]
        .iter()
        .filter_map(|k| h[*k].as_u64())
        .map(|r| 1.0 / (60.0 + r as f64))
        .sum()
}

#[test]
fn hybrid_search_fuses_ranks_cites_chunks_and_re_embeds_only_what_changed() {
    let (d, docs) = start(Some("tester/embed"));
    let v = complete(&d, STORAGE, 1);
    assert_eq!(v["mode"], "hybrid", "{v}");
    // ops.md: Operations (1 chunk), Storage, Alerts; backups.md: 1; garden.md: 1. Never pay.md:
    // everything computed is a chunk this run reaches.
    assert_eq!(v["embedding"]["embedded"], 5, "{v}");
    assert_eq!(
        v["embedding"]["computed"], 5,
        "the sensitive collection was embedded: {v}"
    );
    assert_eq!(v["embedding"]["model"], "tester/embed");

    // The query is the Storage section's text: its nearest chunk whatever BM25 says.
    let ops = hit(&v, "Operations");
    assert_eq!(ops["vector_rank"], 1, "{v}");
    let chunk = &ops["chunk"];
    assert_eq!(chunk["section"], "Storage", "{v}");
    assert_eq!(chunk["text"], STORAGE);
    assert!(chunk["similarity"].as_f64().unwrap() > 0.999, "{chunk}");
    // The lines cite the converted body.
    let handle = ops["handle"].as_str().unwrap();
    let body = d.ok("c", "read_data", json!({"handle": handle, "view": "body"}))["body"]
        .as_str()
        .unwrap()
        .to_string();
    let lines: Vec<&str> = body.lines().collect();
    let [a, b] = [
        chunk["lines"][0].as_u64().unwrap(),
        chunk["lines"][1].as_u64().unwrap(),
    ];
    assert_eq!(
        lines[a as usize - 1..b as usize].join("\n"),
        STORAGE,
        "{body}"
    );
    // Every hit's score is its fused ranks; the one the words do not match still ranks.
    for h in v["hits"].as_array().unwrap() {
        assert!((h["score"].as_f64().unwrap() - rrf(h)).abs() < 1e-9, "{h}");
    }
    let garden = hit(&v, "Garden");
    assert!(
        garden["keyword_rank"].is_null() && garden["vector_rank"].is_u64(),
        "{garden}"
    );
    assert!(hit(&v, "Backups guide")["keyword_rank"].is_u64());
    assert!(
        v["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["collection"] == "docs"),
        "{v}"
    );
    // Keyword mode is what it was: BM25 only, no chunks.
    let k = d.ok("c", "search_data", json!({"query": "backups"}));
    assert!(
        k["hits"][0].get("chunk").is_none() && k.get("mode").is_none(),
        "{k}"
    );

    // One section changed: only its chunk is embedded again (5 + 1 computed).
    write(
        &docs.join("ops.md"),
        &format!(
            "# Operations\n\nHow the service runs.\n\n## Storage\n\n{STORAGE}\n\n## Alerts\n\nPages go to the team channel.\n"
        ),
    );
    let v = complete(&d, "Pages go to the team channel.", 6);
    assert_eq!(
        v["embedding"]["computed"], 6,
        "more than the changed chunk: {v}"
    );
    assert_eq!(v["embedding"]["embedded"], 5, "{v}");
    let ops = hit(&v, "Operations");
    assert_eq!(ops["vector_rank"], 1, "{v}");
    assert_eq!(ops["chunk"]["section"], "Alerts", "{v}");
    // The model is served under its own alias in the pool.
    let status = d.ok("c", "get_inference_status", json!({}));
    assert!(status.to_string().contains("data-embeddings"), "{status}");
}

#[test]
fn without_an_embedding_model_hybrid_is_not_available_naming_the_key() {
    let (d, _) = start(None);
    let Outcome::Err(e) = hybrid(&d, "backups") else {
        panic!("hybrid answered without a model")
    };
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(
        e.message.contains("[data] embedding_model") && e.hint.contains("embedding_model"),
        "{e}"
    );
    // Keyword search is unaffected, once the hub has converted its originals (until then it
    // answers `not_ready`, as it should: a full run under load asked before that).
    let v = wait_for("keyword search", Duration::from_secs(60), || {
        match d.call("c", "search_data", json!({"query": "backups"})) {
            Outcome::Ok(v) => Some(v.0),
            Outcome::Err(e) if e.kind == ErrorKind::NotReady => None,
            Outcome::Err(e) => panic!("search_data: {e}"),
        }
    });
    assert!(v["count"].as_u64().unwrap() >= 1, "{v}");
}

#[test]
fn a_model_the_store_lacks_is_said_with_the_store_hint() {
    let (d, _) = start(Some("tester/missing"));
    let e = wait_for(
        "the embedding to fail",
        Duration::from_secs(60),
        || match hybrid(&d, "backups") {
            Outcome::Err(e) if e.kind == ErrorKind::NotReady => None,
            Outcome::Err(e) => Some(e),
            Outcome::Ok(v) => panic!("answered with a model the store lacks: {}", v.0),
        },
    );
    assert_eq!(e.kind, ErrorKind::NotFound, "{e}");
    assert!(
        e.message.contains("tester/missing") && e.message.contains("[data] embedding_model"),
        "{e}"
    );
    assert!(e.hint.contains("download_model"), "{e}");
}

/// A section of about 900 characters of lowercase words: one chunk (under 1,000 characters)
/// of about 900 tokens for the tiny model's letter-by-letter vocabulary, past llama-server's
/// default batch of 512 tokens.
fn long_section() -> String {
    let words = ["quiet", "harbour", "lantern", "pebble", "meadow", "orchard"];
    let text: Vec<&str> = (0..130).map(|i| words[i % words.len()]).collect();
    let text = text.join(" ");
    assert!(text.len() > 800 && text.len() < 1000, "{}", text.len());
    format!("# Harbour notes\n\n{text}\n")
}

/// The embedding model's entry in `get_inference_status`.
fn embeddings_server(d: &TestDaemon) -> Json {
    let status = d.ok("c", "get_inference_status", json!({}));
    status["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["alias"] == "data-embeddings")
        .cloned()
        .unwrap_or_else(|| panic!("no data-embeddings model: {status}"))
}

/// The hybrid answer once no chunk waits (`pending` 0), complete or not.
fn settled(d: &TestDaemon, query: &str) -> Json {
    wait_for(
        "no chunk waiting for a vector",
        Duration::from_secs(120),
        || match hybrid(d, query) {
            Outcome::Ok(v) if v.0["embedding"]["pending"] == 0 => Some(v.0),
            Outcome::Ok(_) => None,
            Outcome::Err(e) if e.kind == ErrorKind::NotReady => None,
            Outcome::Err(e) => panic!("hybrid search failed: {e}\n{}", d.log_text()),
        },
    )
}

/// llama-server embeds a text in one physical batch, 512 tokens by default: a chunk longer
/// than that (and within the model's context) used to fail its whole batch of chunks, retried
/// for ever. The embeddings server's batch is the model's context now.
#[test]
fn a_chunk_past_the_servers_default_batch_is_embedded_with_the_rest() {
    let long = long_section();
    let (d, _) = start_with(Some("tester/embed"), None, &[("harbour.md", &long)]);
    let v = settled(&d, "quiet harbour lantern");
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["embedding"]["embedded"], 6, "{v}");
    assert!(v["embedding"].get("skipped").is_none(), "{v}");
    let harbour = hit(&v, "Harbour notes");
    assert!(harbour["vector_rank"].is_u64(), "{harbour}");
    // The server runs with the model's own context (2048), not the pool's default.
    let served = embeddings_server(&d);
    assert_eq!(served["context"], 2048, "{served}");
}

/// A chunk longer than the model's whole context is refused by the model: it is skipped and
/// said (`embedding.skipped`, why, `complete: false`), found by keyword still, and every other
/// chunk is embedded; nothing is retried for ever.
#[test]
fn a_chunk_past_the_models_context_is_skipped_and_said_and_the_rest_embedded() {
    let long = long_section();
    let (d, _) = start_with(Some("tester/embed"), Some(256), &[("harbour.md", &long)]);
    let v = settled(&d, "quiet harbour lantern");
    assert_eq!(v["embedding"]["embedded"], 5, "{v}");
    assert_eq!(v["embedding"]["skipped"], 1, "{v}");
    let why = v["embedding"]["skipped_because"]
        .as_str()
        .unwrap_or_default();
    assert!(
        why.contains("tester/embed") && why.contains("refused"),
        "{v}"
    );
    assert_eq!(
        v["complete"], false,
        "a skipped chunk leaves the answer partial: {v}"
    );
    let harbour = hit(&v, "Harbour notes");
    assert!(
        harbour["keyword_rank"].is_u64() && harbour["vector_rank"].is_null(),
        "{harbour}"
    );
    // The vectors of the rest rank as before.
    let v = settled(&d, STORAGE);
    assert_eq!(hit(&v, "Operations")["vector_rank"], 1, "{v}");
}

/// With a real embedding model (all-MiniLM-L6-v2, converted from PyPI by the install script)
/// and the config the docs give, hybrid search ranks by meaning: a paraphrase that shares no
/// word with its document (keyword search finds nothing for it) finds that document first,
/// and the vector side orders the rest by meaning too.
#[test]
fn a_real_embedding_model_finds_a_paraphrase_that_shares_no_word_first() {
    let (d, _) = start_with(
        Some("sentence-transformers/all-MiniLM-L6-v2-GGUF"),
        None,
        &[
            (
                "pets.md",
                "# Pets\n\nA feline rested on the rug all afternoon.\n",
            ),
            (
                "markets.md",
                "# Markets\n\nStock prices fell sharply on the exchange today.\n",
            ),
            (
                "cooking.md",
                "# Cooking\n\nSimmer the onions slowly until they turn golden.\n",
            ),
        ],
    );
    let query = "cat sleeping atop carpet";
    let v = settled(&d, query);
    // (Once the hub has converted everything: before, keyword search is not ready either.)
    let keyword = d.ok("c", "search_data", json!({"query": query}));
    assert_eq!(
        keyword["count"], 0,
        "the query shares a word with a document: {keyword}"
    );
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["embedding"]["embedded"], 8, "{v}");
    let hits = v["hits"].as_array().unwrap();
    assert_eq!(hits[0]["title"], "Pets", "{v}");
    assert!(hits[0]["keyword_rank"].is_null(), "{v}");
    let similarity = |title: &str| hit(&v, title)["chunk"]["similarity"].as_f64().unwrap();
    assert!(
        similarity("Pets") > similarity("Markets") + 0.2,
        "the paraphrase is not clearly nearer than an unrelated text: {v}"
    );
    // The model's own pooling and context (it declares mean and 512 tokens): no --pooling
    // forced, its context given to the server.
    let served = embeddings_server(&d);
    assert_eq!(served["context"], 512, "{served}");
}
