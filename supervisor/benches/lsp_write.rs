//! How long a write takes to answer with its diagnostics, its dependents checked one at a time
//! or several at once (`[lsp] dependents_at_once`): `cargo bench -p toolvisor --bench
//! lsp_write` (needs `scripts/install-test-deps`, and click 8.1.7's sources in
//! `.test-deps/bench-projects/`, which `scripts/bench-model-reads --only definition` fetches).
//! On a fresh copy of click per setting, pyright as the server: an `edit` of
//! `src/click/formatting.py` (20 importers checked, 17 of them through other files) and back,
//! `TOOLVISOR_BENCH_ROUNDS` times (default 5), after a first write that also takes the
//! baselines. Every answer must say "no new diagnostics". Nothing is asserted about times.
//! `TOOLVISOR_BENCH_DAEMON=<path>` runs another build.

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::json;

fn deps() -> PathBuf {
    std::env::var_os("TOOLVISOR_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"))
}

const FILE: &str = "src/click/formatting.py";
const OLD: &str = "FORCED_WIDTH: t.Optional[int] = None";

/// The first write's time and the later writes' times, in ms.
fn run(click: &Path, at_once: usize, rounds: usize) -> (f64, Vec<f64>) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("click");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(click)
        .arg(&root)
        .status()
        .unwrap();
    assert!(copied.success(), "copy click");
    let sock = dir.path().join("toolvisor.sock");
    let bin = |d: &str| format!("{:?}", deps().join(d).display().to_string());
    let config = format!(
        "[lsp]\nsearch_path = [{}, {}]\ndependents_at_once = {at_once}\n",
        bin("node_modules/.bin"),
        bin("lsp-venv/bin")
    );
    let _daemon = common::start_daemon(dir.path(), &sock, &config);
    common::wait_socket(&sock);
    // A write-surface harness in the copy, approving its writes.
    let mut options = common::read_options(&root, "bench");
    options.surface.max_tier = toolvisor_protocol::wire::Tier::Write;
    options.surface.approvals = true;
    let mut c = toolvisor_protocol::client::Client::connect(&sock, options).expect("connect");
    // The server started and the file open: what is timed is the write.
    common::call(&mut c, "lsp", json!({"op": "symbols", "file": FILE}));
    let mut write = |from: &str, to: &str| {
        let t = Instant::now();
        let v = common::call(
            &mut c,
            "edit",
            json!({"path": FILE, "old_text": from, "new_text": to}),
        );
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        let text = v["diagnostics"]["text"].as_str().unwrap_or_default();
        assert!(text.starts_with("no new diagnostics"), "{v}");
        assert!(text.contains("also checked 20 importing files"), "{v}");
        ms
    };
    let changed = format!("{OLD}  # set by tests");
    let first = write(OLD, &changed);
    let mut later = vec![write(&changed, OLD)];
    for _ in 1..rounds {
        later.push(write(OLD, &changed));
        later.push(write(&changed, OLD));
    }
    (first, later)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let click = deps().join("bench-projects/click-8.1.7");
    if !click.join(FILE).is_file() {
        eprintln!(
            "lsp_write: {} is missing: `scripts/bench-model-reads --only definition` fetches it",
            click.display()
        );
        return;
    }
    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut rows = Vec::new();
    for at_once in [1, 8] {
        let (first, later) = run(&click, at_once, rounds);
        rows.push((at_once, first, median(later.clone()), later));
    }
    println!(
        "| `dependents_at_once` | first write (baselines too) | later writes (median of {}) | min–max | load |",
        rounds * 2
    );
    println!("|---:|---:|---:|---:|---|");
    for (at_once, first, med, later) in &rows {
        let (lo, hi) = later
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        println!(
            "| {at_once} | {first:.0} ms | {med:.0} ms | {lo:.0}–{hi:.0} ms | {} |",
            common::loadavg()
        );
    }
    let (one, eight) = (&rows[0], &rows[1]);
    println!(
        "\n8 at once / 1 at a time: first write {:.2}, later writes {:.2}",
        eight.1 / one.1,
        eight.2 / one.2
    );
}
