//! The data hub's figures (docs/BENCHMARKS.md): the first conversion of a generated corpus
//! (documents and MB per second), `search` latency on it once warm (p50/p99 over many queries),
//! and the time from an original's change on disk to its new words being searchable through
//! the running hub (the store actor and its watcher, as the daemon runs them).
//!
//! `cargo bench -p toolvisor-data --bench hub [-- DOCS]` (default 10,000 documents).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::Actor;
use toolvisor_data::hub::{CollectionConfig, DataConfig};
use toolvisor_data::store::{Reach, Store, Who};
use toolvisor_data::{DataHub, HubError};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{KindSupervisor, SupervisorArgs};

const WORDS: &[&str] = &[
    "deploy",
    "cluster",
    "rollback",
    "budget",
    "release",
    "kernel",
    "index",
    "search",
    "query",
    "table",
    "socket",
    "daemon",
    "config",
    "policy",
    "backup",
    "restore",
    "metric",
    "alert",
    "latency",
    "throughput",
    "memory",
    "storage",
    "network",
    "ingress",
    "service",
    "account",
    "invoice",
    "customer",
    "contract",
    "meeting",
    "roadmap",
    "feature",
    "defect",
    "review",
    "design",
    "schema",
    "migration",
    "pipeline",
    "artifact",
    "runner",
];

/// A small deterministic generator (no dependency for random text).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn word(&mut self) -> &'static str {
        WORDS[(self.next() as usize) % WORDS.len()]
    }
    fn unit(&mut self) -> f64 {
        (self.next() % 1_000_000) as f64 / 1_000_000.0
    }
    /// A word of a 20,000-word vocabulary, drawn log-uniformly (a Zipf-like spread: a few
    /// words in most documents, most words in few), as prose is.
    fn zipf(&mut self) -> String {
        let i = (VOCAB as f64).powf(self.unit()) as usize - 1;
        format!("{}{}", SYLLABLES[i % SYLLABLES.len()], i)
    }
}

const VOCAB: usize = 20_000;
const SYLLABLES: &[&str] = &["ka", "lo", "mi", "ten", "sor", "va", "quel", "dri"];

fn generate(dir: &Path, docs: usize) -> u64 {
    let mut rng = Lcg(42);
    let mut bytes = 0u64;
    for i in 0..docs {
        let mut text = format!(
            "---\ntags: [{}, {}]\n---\n# {} {} {i}\n",
            rng.word(),
            rng.word(),
            rng.word(),
            rng.word()
        );
        for s in 0..3 {
            text.push_str(&format!("\n## Part {s} {}\n", rng.word()));
            for w in 0..110 {
                if w % 10 == 0 {
                    text.push_str("the ");
                }
                let word = if w % 7 == 0 {
                    rng.word().to_string()
                } else {
                    rng.zipf()
                };
                text.push_str(&word);
                text.push(' ');
            }
            text.push_str(&format!("unique{i}x{s}\n"));
        }
        let sub = dir.join(format!("d{:02}", i % 50));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(format!("doc{i}.md")), &text).unwrap();
        bytes += text.len() as u64;
    }
    bytes
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let docs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let bytes = generate(&corpus, docs);
    println!(
        "corpus: {docs} documents, {:.1} MB of Markdown",
        bytes as f64 / 1e6
    );

    // 1. The first conversion, as the store actor does it.
    let db = dir.path().join("bench.sqlite3");
    let mut store = Store::open(&db).unwrap();
    let who = Who::operator("bench");
    let mut files = Vec::new();
    for sub in std::fs::read_dir(&corpus).unwrap() {
        for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    let began = Instant::now();
    for f in &files {
        let root = toolvisor_data::original::Root::of(f.parent().unwrap()).unwrap();
        store
            .ingest("docs", &root, f, false, 1 << 24, &who)
            .unwrap();
    }
    let took = began.elapsed();
    println!(
        "ingest: {:.0} documents/s, {:.2} MB/s ({:.2} s)",
        docs as f64 / took.as_secs_f64(),
        bytes as f64 / 1e6 / took.as_secs_f64(),
        took.as_secs_f64()
    );

    // 2. Search latency, warm: words drawn as the corpus draws them (one, two, a word and a
    // topic word), and exact phrases; then the worst case, a word in every document.
    let reach = Reach::new(["docs".to_string()]);
    let mut rng = Lcg(7);
    for _ in 0..200 {
        store.search(&reach, &rng.zipf(), 10).unwrap();
    }
    let run = |store: &Store, queries: &[String]| {
        let mut times = Vec::new();
        for q in queries {
            let t = Instant::now();
            store.search(&reach, q, 10).unwrap();
            times.push(t.elapsed());
        }
        times.sort();
        times
    };
    let queries: Vec<String> = (0..2000)
        .map(|i| match i % 4 {
            0 => rng.zipf(),
            1 => format!("{} {}", rng.zipf(), rng.zipf()),
            2 => format!("{} {}", rng.word(), rng.zipf()),
            _ => format!("\"unique{}x1\"", rng.next() as usize % docs),
        })
        .collect();
    let times = run(&store, &queries);
    println!(
        "search_data (store): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms over {} queries",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3,
        times.len()
    );
    // 2b. Hybrid ranking (`search_data {mode: "hybrid"}` less the query's embedding, which is
    // the model's): every document cut into chunks, each with a 768-float unit vector (the
    // size of the common embedding models; random: the scan costs the same), then BM25 with
    // any word and the flat vector scan fused, against keyword search in the same rounds.
    const DIM: usize = 768;
    let unit = |rng: &mut Lcg| {
        let v: Vec<f32> = (0..DIM)
            .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect::<Vec<f32>>()
    };
    let began = Instant::now();
    while store.rechunk_changed(&reach, 1000).unwrap() > 0 {}
    let cut = began.elapsed();
    let mut chunks = 0;
    loop {
        let todo = store.chunks_to_embed(&reach, "bench", 512).unwrap();
        if todo.is_empty() {
            break;
        }
        chunks += todo.len();
        let v: Vec<(i64, Vec<f32>)> = todo
            .into_iter()
            .map(|(id, _)| (id, unit(&mut rng)))
            .collect();
        store.put_vectors("bench", &v).unwrap();
    }
    let (mut hybrid, mut keyword) = (Vec::new(), Vec::new());
    for round in 0..6 {
        for hybrid_side in [round % 2 == 0, round % 2 != 0] {
            for _ in 0..20 {
                let q = format!("{} {}", rng.zipf(), rng.word());
                let t = Instant::now();
                if hybrid_side {
                    let qv = unit(&mut rng);
                    let t = Instant::now();
                    store.hybrid(&reach, &q, &qv, "bench", 10).unwrap();
                    hybrid.push(t.elapsed());
                } else {
                    store.search(&reach, &q, 10).unwrap();
                    keyword.push(t.elapsed());
                }
            }
        }
    }
    hybrid.sort();
    keyword.sort();
    println!(
        "hybrid (store, {chunks} chunks of {DIM} floats; cut in {:.2} s): p50 {:.1} ms, p99 {:.1} ms over {} queries; keyword search in the same rounds p50 {:.2} ms ({:.0}×)",
        cut.as_secs_f64(),
        percentile(&hybrid, 0.5).as_secs_f64() * 1e3,
        percentile(&hybrid, 0.99).as_secs_f64() * 1e3,
        hybrid.len(),
        percentile(&keyword, 0.5).as_secs_f64() * 1e3,
        percentile(&hybrid, 0.5).as_secs_f64() / percentile(&keyword, 0.5).as_secs_f64()
    );
    let worst: Vec<String> = (0..100)
        .map(|i| {
            if i % 2 == 0 {
                "the".into()
            } else {
                rng.word().to_string()
            }
        })
        .collect();
    let times = run(&store, &worst);
    println!(
        "search_data, a word in (nearly) every document: p50 {:.2} ms, p99 {:.2} ms over {} queries",
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times.len()
    );
    drop(store);

    // 3. Change → searchable, through the running hub (actor + watcher) on the same corpus.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let notifier = TreeNotifier::default();
        let (sup, _) = Actor::spawn(
            None,
            KindSupervisor,
            SupervisorArgs {
                kind: "data".into(),
                notifier: notifier.clone(),
                keep_ended: Duration::from_secs(60),
                status: NodeStatus::new("supervisor", "data", String::new(), notifier.clone()),
            },
        )
        .await
        .unwrap();
        let mut config = DataConfig::default();
        config.collections.insert(
            "docs".into(),
            CollectionConfig {
                path: Some(corpus.clone()),
                sensitive: false,
            },
        );
        let hubdir = dir.path().join("hub");
        std::fs::create_dir_all(&hubdir).unwrap();
        // The database of step 1: the hub's first pass finds nothing changed.
        std::fs::rename(&db, hubdir.join("hub.sqlite3")).unwrap();
        let hub = Arc::new(DataHub::new(config, &hubdir, sup, notifier));
        let t = Instant::now();
        hub.start().await.unwrap();
        loop {
            match hub.with_store(|s| s.count()).await {
                Ok(_) => break,
                Err(HubError::NotReady(_)) => tokio::time::sleep(Duration::from_millis(5)).await,
                Err(e) => panic!("{e:?}"),
            }
        }
        println!(
            "hub ready on an unchanged corpus of {docs}: {:.2} s",
            t.elapsed().as_secs_f64()
        );
        let mut lat = Vec::new();
        for round in 0..30 {
            let word = format!("freshword{round}");
            let i = round * 7;
            let path = corpus.join(format!("d{:02}/doc{i}.md", i % 50));
            let mut text = std::fs::read_to_string(&path).unwrap();
            text.push_str(&format!("\n{word}\n"));
            let t = Instant::now();
            std::fs::write(&path, text).unwrap();
            loop {
                let w = word.clone();
                let r = Reach::new(["docs".to_string()]);
                let hits = hub.with_store(move |s| s.search(&r, &w, 1)).await.unwrap();
                if !hits.is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            lat.push(t.elapsed());
        }
        lat.sort();
        println!(
            "change → searchable: p50 {:.1} ms, max {:.1} ms over {} edits",
            percentile(&lat, 0.5).as_secs_f64() * 1e3,
            lat.last().unwrap().as_secs_f64() * 1e3,
            lat.len()
        );
    });
}
