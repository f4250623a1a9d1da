//! Structural search figures: `ast_grep` through a warm toolvisor daemon (a repeated search,
//! answered from its memory of unchanged files) and through a daemon without that memory (a
//! first search) against the `ast-grep` CLI on the same large tree in the same run, for
//! `println!($$$A)`, `$A.unwrap()` and the literal-free `$X == $X`: median wall times, the
//! ratios, and the match counts (which must be equal).
//! Each run also searches with the library in-process and the literal prefilter off, to show
//! what the prefilter buys, that parsing itself costs what the CLI's does, and that the
//! prefilter changes no count.
//!
//! `AST_GREP_BIN=/path/to/ast-grep cargo bench -p toolvisor --bench structural`
//! (`npm i @ast-grep/cli` in a scratch directory puts it at `node_modules/.bin/ast-grep`).
//! The tree is `TOOLVISOR_BENCH_CORPUS`, default `$CARGO_HOME/registry/src`; runs per figure
//! `TOOLVISOR_BENCH_RUNS` (default 3). `TOOLVISOR_BENCH_FILES=N` searches a deterministic
//! subset of about N of the tree's Rust files instead (every k-th in path order, copied with
//! their relative paths into a temp dir), e.g. 1000 for the small tree.
//! `TOOLVISOR_BENCH_LANG` (default `rust`) and `TOOLVISOR_BENCH_PATTERNS` (one pattern per
//! line) search another language, e.g. `python` and `def $F($$$): $$$` over a venv's
//! site-packages.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;
use toolvisor_structural::search::{SearchRequest, search};

const PATTERNS: [&str; 3] = ["println!($$$A)", "$A.unwrap()", "$X == $X"];

/// The language searched (`TOOLVISOR_BENCH_LANG`, default `rust`).
fn lang() -> String {
    std::env::var("TOOLVISOR_BENCH_LANG").unwrap_or_else(|_| "rust".into())
}

/// The file extension of [`lang`]'s files, for the subset.
fn extension() -> &'static str {
    match lang().as_str() {
        "python" => "py",
        "javascript" => "js",
        "typescript" => "ts",
        "go" => "go",
        "c" => "c",
        _ => "rs",
    }
}

/// The patterns searched (`TOOLVISOR_BENCH_PATTERNS`, one per line), default [`PATTERNS`].
fn patterns() -> Vec<String> {
    match std::env::var("TOOLVISOR_BENCH_PATTERNS") {
        Ok(p) => p
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect(),
        Err(_) => PATTERNS.iter().map(|p| p.to_string()).collect(),
    }
}

fn corpus() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLVISOR_BENCH_CORPUS") {
        return PathBuf::from(p);
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    cargo_home.join("registry/src")
}

fn cli() -> PathBuf {
    if let Some(p) = std::env::var_os("AST_GREP_BIN") {
        return PathBuf::from(p);
    }
    for candidate in [
        "node_modules/.bin/ast-grep",
        "/tmp/sgcli/node_modules/.bin/ast-grep",
    ] {
        if Path::new(candidate).exists() {
            return PathBuf::from(candidate);
        }
    }
    eprintln!(
        "the ast-grep CLI is needed as the peer: `npm i @ast-grep/cli` in a scratch directory, then set AST_GREP_BIN=<dir>/node_modules/.bin/ast-grep"
    );
    std::process::exit(2);
}

/// Every file of the language under `dir` (hidden entries skipped, like both searchers'
/// walks).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(kind) = e.file_type() else { continue };
        let path = e.path();
        if kind.is_dir() {
            rust_files(&path, out);
        } else if kind.is_file() && path.extension().is_some_and(|x| x == extension()) {
            out.push(path);
        }
    }
}

/// A copy of about `n` of `root`'s Rust files (every k-th in path order) under `into`.
fn subset(root: &Path, n: usize, into: &Path) -> usize {
    let mut files = Vec::new();
    rust_files(root, &mut files);
    files.sort();
    let step = (files.len() / n.max(1)).max(1);
    let mut copied = 0;
    for f in files.iter().step_by(step).take(n) {
        let to = into.join(f.strip_prefix(root).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).expect("make the subset's directories");
        std::fs::copy(f, &to).expect("copy a file into the subset");
        copied += 1;
    }
    copied
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

thread_local! {
    static LAST_CACHED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// `files_cached` of the last `ast_grep` call.
fn last_cached() -> u64 {
    LAST_CACHED.with(|c| c.get())
}

/// One `ast_grep` call; (wall time, total, files searched, files parsed).
fn daemon_search(c: &mut Client, root: &Path, pattern: &str) -> (Duration, u64, u64, u64) {
    let started = Instant::now();
    let reply = c
        .call_with(
            "bench",
            "ast_grep",
            json!({"pattern": pattern, "path": root, "language": lang()}),
            |_| true,
        )
        .expect("ast_grep call");
    let elapsed = started.elapsed();
    let v: Json = match reply.outcome {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!("ast_grep failed: {e}"),
    };
    let n = |k: &str| v[k].as_u64().unwrap_or(0);
    LAST_CACHED.with(|c| c.set(n("files_cached")));
    (elapsed, n("total"), n("files_searched"), n("files_parsed"))
}

/// One CLI run printing a JSON line per match; (wall time, matches).
fn cli_search(sg: &Path, root: &Path, pattern: &str) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = Command::new(sg)
        .args([
            "run",
            "--pattern",
            pattern,
            "--lang",
            &lang(),
            "--json=stream",
        ])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run ast-grep");
    let out = child.stdout.take().unwrap();
    let count = BufReader::new(out).lines().map_while(Result::ok).count() as u64;
    child.wait().expect("ast-grep exit");
    (started.elapsed(), count)
}

/// The library in-process with the prefilter off: what parsing every file costs here.
fn library_without_prefilter(root: &Path, pattern: &str) -> (Duration, u64) {
    let started = Instant::now();
    let lang = lang();
    let result = search(&SearchRequest {
        pattern,
        language: Some(&lang),
        path: root,
        scope: &toolvisor_files::Scope::new(root, &[], false).unwrap(),
        max_results: 50,
        prefilter: false,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        cancel: None,
        limits: Default::default(),
    })
    .expect("search");
    (started.elapsed(), result.total as u64)
}

fn main() {
    let full = corpus();
    let subset_dir = tempfile::tempdir().expect("temp dir");
    let root = match std::env::var("TOOLVISOR_BENCH_FILES")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) => {
            let copied = subset(&full, n, subset_dir.path());
            println!("subset: {copied} {} files of {}", lang(), full.display());
            subset_dir.path().to_path_buf()
        }
        None => full,
    };
    let sg = cli();
    let runs: usize = std::env::var("TOOLVISOR_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let version = Command::new(&sg)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();

    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("toolvisor.sock");
    let _daemon = common::start_daemon(dir.path(), &socket, "");
    // The same daemon without its search memory: what a first search of a pattern costs.
    let cold_dir = tempfile::tempdir().expect("temp dir");
    let cold_socket = cold_dir.path().join("toolvisor.sock");
    let _cold = common::start_daemon(
        cold_dir.path(),
        &cold_socket,
        "[structural]\ncache_bytes = 0\n",
    );
    let options = common::read_options(&root, "bench");
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut client = loop {
        match Client::connect(&socket, options.clone()) {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the daemon did not come up: {e}"),
        }
    };

    println!(
        "corpus: {} ; peer: {version} ({}) ; runs per figure: {runs} ; load average: {}",
        root.display(),
        sg.display(),
        common::loadavg()
    );
    println!();
    let mut cold = loop {
        match Client::connect(&cold_socket, options.clone()) {
            Ok(c) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the daemon did not come up: {e}"),
        }
    };
    println!(
        "| pattern | files ({}) | parsed by toolvisor | toolvisor `ast_grep`, repeated (files from memory) | toolvisor, first search (no memory) | `ast-grep` CLI | ratio repeated | ratio first | toolvisor without prefilter (in-process) | ratio | matches: toolvisor / CLI / no prefilter | load average |",
        lang()
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut all_equal = true;
    for pattern in patterns() {
        let pattern = pattern.as_str();
        // Warm: the daemon, both processes' page cache.
        let _ = daemon_search(&mut client, &root, pattern);
        let _ = daemon_search(&mut cold, &root, pattern);
        let _ = cli_search(&sg, &root, pattern);
        let (mut ours, mut theirs, mut unfiltered) = (Vec::new(), Vec::new(), Vec::new());
        let mut first = Vec::new();
        let mut counts = (0, 0, 0, 0, 0);
        let mut cached = 0;
        // Interleaved, so load from other work on the machine falls on all alike.
        for _ in 0..runs {
            let (t, total, files, parsed) = daemon_search(&mut client, &root, pattern);
            ours.push(t);
            cached = last_cached();
            let (t_first, first_total, _, _) = daemon_search(&mut cold, &root, pattern);
            assert_eq!(
                first_total, total,
                "{pattern}: with and without memory differ"
            );
            first.push(t_first);
            let (t_cli, cli_total) = cli_search(&sg, &root, pattern);
            theirs.push(t_cli);
            let (t_raw, raw_total) = library_without_prefilter(&root, pattern);
            unfiltered.push(t_raw);
            counts = (total, cli_total, raw_total, files, parsed);
        }
        let (ours, theirs, unfiltered) = (median(ours), median(theirs), median(unfiltered));
        let first = median(first);
        let equal = counts.0 == counts.1 && counts.1 == counts.2;
        all_equal &= equal;
        println!(
            "| `{pattern}` | {} | {} | {} ({cached}) | {} | {} | {:.2}× | {:.2}× | {} | {:.2}× | {} / {} / {}{} | {} |",
            counts.3,
            counts.4,
            secs(ours),
            secs(first),
            secs(theirs),
            ours.as_secs_f64() / theirs.as_secs_f64(),
            first.as_secs_f64() / theirs.as_secs_f64(),
            secs(unfiltered),
            unfiltered.as_secs_f64() / theirs.as_secs_f64(),
            counts.0,
            counts.1,
            counts.2,
            if equal { "" } else { " (DIFFER)" },
            common::loadavg()
        );
    }
    if !all_equal {
        eprintln!("match counts differ between toolvisor and the CLI");
        std::process::exit(1);
    }
}
