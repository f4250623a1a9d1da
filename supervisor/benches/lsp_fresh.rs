//! The time from a change to a correct answer, per language server (`cargo bench -p toolvisor
//! --bench lsp_fresh`; needs `scripts/install-test-deps`, a C compiler and cargo): a module
//! imported by another (a header included by it) changes its signature on disk, outside the
//! daemon, as a `git checkout` would, and back, `TOOLVISOR_BENCH_ROUNDS` times each way
//! (default 5). Each change is timed from the write to an `lsp diagnostics` answer of the
//! importing file that is `complete` and has errors on exactly the lines the compiler reports
//! (pyright's CLI, tsc, `cc -fsyntax-only`, `cargo check`, `go build -gcflags=-e`, each run once per state before the
//! rounds). The first answer after each change is checked: the bench prints how many were
//! already right, and how many were wrong while saying `complete: true` (an answer
//! that must never be); a wrong answer is asked again every 50 ms, at most 60 s. Nothing is asserted
//! about times. `TOOLVISOR_BENCH_DAEMON=<path>` runs another build (before/after).

#[allow(dead_code)]
#[path = "support/common.rs"]
mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::wire::Outcome;

/// Calls in the importing file: each one an error in the broken state.
const CALLS: usize = 12;
/// A wrong answer is asked again until right, at most this long.
const PATIENCE: Duration = Duration::from_secs(60);

fn deps() -> PathBuf {
    std::env::var_os("TOOLVISOR_TEST_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps"))
}

/// One server's project: its files, the dependency that changes (good and broken text), the
/// importing file asked about, and how the compiler finds that file's error lines.
struct Case {
    server: &'static str,
    files: Vec<(String, String)>,
    dependency: &'static str,
    good: String,
    broken: String,
    asked: &'static str,
    truth: fn(&Path, &str) -> BTreeSet<u64>,
    trusted: bool,
}

fn cases() -> Vec<Case> {
    let calls = |f: &dyn Fn(usize) -> String| (0..CALLS).map(f).collect::<String>();
    vec![
        Case {
            server: "pyright",
            files: vec![
                ("pyproject.toml".into(), String::new()),
                ("pkg/__init__.py".into(), String::new()),
                (
                    "pkg/uses.py".into(),
                    format!(
                        "from pkg.core import enlist\n\n{}",
                        calls(&|i| format!("x{i}: str = enlist(\"m{i}\")\n"))
                    ),
                ),
            ],
            dependency: "pkg/core.py",
            good: "def enlist(name: str) -> str:\n    return name\n".into(),
            broken: "def enlist(name: int) -> int:\n    return name\n".into(),
            asked: "pkg/uses.py",
            truth: pyright_lines,
            trusted: false,
        },
        Case {
            server: "typescript-language-server",
            files: vec![
                (
                    "tsconfig.json".into(),
                    "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}, \"include\": [\"src\"]}\n".into(),
                ),
                (
                    "src/uses.ts".into(),
                    format!(
                        "import {{ enlist }} from \"./core\";\n\n{}",
                        calls(&|i| format!("export const x{i}: string = enlist(\"m{i}\");\n"))
                    ),
                ),
            ],
            dependency: "src/core.ts",
            good: "export function enlist(name: string): string {\n    return name;\n}\n".into(),
            broken: "export function enlist(name: number): number {\n    return name;\n}\n".into(),
            asked: "src/uses.ts",
            truth: tsc_lines,
            trusted: false,
        },
        Case {
            server: "clangd",
            files: vec![(
                "uses.c".into(),
                format!(
                    "#include \"core.h\"\n\n{}",
                    calls(&|i| format!("int u{i}(void) {{ return enlist({i}); }}\n"))
                ),
            )],
            dependency: "core.h",
            good: "#pragma once\nint enlist(int x);\n".into(),
            broken: "#pragma once\n/* two ints now */\nint enlist(int x, int y);\n".into(),
            asked: "uses.c",
            truth: cc_lines,
            trusted: false,
        },
        Case {
            server: "rust-analyzer",
            files: vec![
                (
                    "Cargo.toml".into(),
                    "[package]\nname = \"fresh\"\nversion = \"0.1.0\"\nedition = \"2021\"\n".into(),
                ),
                ("src/lib.rs".into(), "pub mod core;\npub mod uses;\n".into()),
                (
                    "src/uses.rs".into(),
                    calls(&|i| format!("pub fn u{i}() -> u32 {{\n    crate::core::enlist({i})\n}}\n")),
                ),
            ],
            dependency: "src/core.rs",
            good: "pub fn enlist(x: u32) -> u32 {\n    x\n}\n".into(),
            broken: "pub fn enlist(x: &str) -> u32 {\n    x.len() as u32\n}\n".into(),
            asked: "src/uses.rs",
            truth: cargo_lines,
            trusted: true,
        },
        Case {
            server: "gopls",
            files: vec![
                ("go.mod".into(), "module example.com/fresh\n\ngo 1.19\n".into()),
                (
                    "uses/uses.go".into(),
                    format!(
                        "package uses\n\nimport \"example.com/fresh/core\"\n\n{}",
                        calls(&|i| format!("func U{i}() string {{\n\treturn core.Enlist(\"m{i}\")\n}}\n"))
                    ),
                ),
            ],
            dependency: "core/core.go",
            good: "package core\n\nfunc Enlist(name string) string {\n\treturn name\n}\n".into(),
            broken: "package core\n\nfunc Enlist(name int) string {\n\treturn \"\"\n}\n".into(),
            asked: "uses/uses.go",
            truth: go_lines,
            trusted: false,
        },
    ]
}

/// Lines (1-based) of `file` with an error, from `text` lines of the form
/// `<prefix><line><rest>` that contain `marker`.
fn lines_of(text: &str, prefix: &str, sep: char, marker: &str) -> BTreeSet<u64> {
    text.lines()
        .filter(|l| l.contains(marker))
        .filter_map(|l| l.strip_prefix(prefix))
        .filter_map(|rest| rest.split(sep).next()?.parse().ok())
        .collect()
}

fn pyright_lines(root: &Path, file: &str) -> BTreeSet<u64> {
    let out = Command::new(deps().join("node_modules/.bin/pyright"))
        .arg("--outputjson")
        .current_dir(root)
        .output()
        .expect("pyright runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("pyright's JSON");
    let path = root.join(file).display().to_string();
    v["generalDiagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["file"] == path.as_str() && d["severity"] == "error")
        .filter_map(|d| d.pointer("/range/start/line").and_then(Value::as_u64))
        .map(|l| l + 1)
        .collect()
}

fn tsc_lines(root: &Path, file: &str) -> BTreeSet<u64> {
    let out = Command::new(deps().join("node_modules/.bin/tsc"))
        .args(["--noEmit", "-p", ".", "--pretty", "false"])
        .current_dir(root)
        .output()
        .expect("tsc runs");
    lines_of(
        &String::from_utf8_lossy(&out.stdout),
        &format!("{file}("),
        ',',
        "): error TS",
    )
}

fn cc_lines(root: &Path, file: &str) -> BTreeSet<u64> {
    let out = Command::new("cc")
        .args(["-fsyntax-only", file])
        .current_dir(root)
        .output()
        .expect("cc runs");
    lines_of(
        &String::from_utf8_lossy(&out.stderr),
        &format!("{file}:"),
        ':',
        ": error:",
    )
}

/// The go command's environment in the Go case: the test dependencies' build cache and
/// GOPATH, no network.
fn go_vars() -> Vec<(&'static str, String)> {
    let go = deps().join("go");
    vec![
        ("GOCACHE", go.join("cache").display().to_string()),
        ("GOPATH", go.join("path").display().to_string()),
        ("GOFLAGS", "-mod=mod".into()),
        ("GOTOOLCHAIN", "local".into()),
        ("GOPROXY", "off".into()),
    ]
}

fn go_lines(root: &Path, file: &str) -> BTreeSet<u64> {
    // Every error (`-e`: not only the first ten), as `uses/uses.go:6:21: cannot use …`.
    let out = Command::new("go")
        .args(["build", "-gcflags=-e", "./..."])
        .envs(go_vars())
        .current_dir(root)
        .output()
        .expect("go runs");
    lines_of(
        &String::from_utf8_lossy(&out.stderr),
        &format!("{file}:"),
        ':',
        ": ",
    )
}

fn cargo_lines(root: &Path, file: &str) -> BTreeSet<u64> {
    let target = root.parent().unwrap().join("cargo-target");
    let out = Command::new("cargo")
        .args(["check", "--quiet", "--message-format=short", "--target-dir"])
        .arg(&target)
        .current_dir(root)
        .output()
        .expect("cargo runs");
    lines_of(
        &String::from_utf8_lossy(&out.stderr),
        &format!("{file}:"),
        ':',
        ": error",
    )
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn diagnostics(c: &mut Client, file: &str) -> Value {
    let args = json!({"op": "diagnostics", "file": file});
    match c.call("bench", "lsp", args.clone()).expect("call").outcome {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => json!({"error": e.to_string()}),
    }
}

/// The lines with an error in an answer, and whether it says it is complete.
fn answered(v: &Value) -> (BTreeSet<u64>, bool) {
    let lines = v["diagnostics"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["severity"] == "error")
        .filter_map(|d| d["line"].as_u64())
        .collect();
    (lines, v["complete"] == true)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Figures {
    ms: Vec<f64>,
    first_right: usize,
    wrong_and_complete: usize,
    never: usize,
}

fn run(case: &Case, rounds: usize) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("proj");
    for (path, text) in &case.files {
        write(&root, path, text);
    }
    write(&root, case.dependency, &case.good);
    if case.server == "clangd" {
        let d = root.display().to_string();
        let db = json!([{"directory": d, "file": format!("{d}/{}", case.asked),
            "arguments": ["cc", "-c", case.asked]}]);
        write(&root, "compile_commands.json", &db.to_string());
    }
    // The truth of each state, from the compiler, before the daemon starts.
    let good = (case.truth)(&root, case.asked);
    write(&root, case.dependency, &case.broken);
    let broken = (case.truth)(&root, case.asked);
    write(&root, case.dependency, &case.good);
    assert!(
        good.is_empty(),
        "{}: the good state compiles: {good:?}",
        case.server
    );
    assert!(
        broken.len() >= CALLS,
        "{}: the compiler finds each broken call: {broken:?}",
        case.server
    );
    let sock = dir.path().join("toolvisor.sock");
    let bin = |d: &str| format!("{:?}", deps().join(d).display().to_string());
    let mut config = format!(
        "[lsp]\nsearch_path = [{}, {}]\n",
        bin("node_modules/.bin"),
        bin("lsp-venv/bin")
    );
    if case.server == "gopls" {
        let vars: Vec<String> = go_vars()
            .iter()
            .map(|(k, v)| format!("{k} = {v:?}"))
            .collect();
        config.push_str(&format!(
            "[env]\nset = {{ PYTHONDONTWRITEBYTECODE = \"1\", {} }}\n",
            vars.join(", ")
        ));
    }
    if case.trusted {
        config.push_str(&format!(
            "[trust]\nroots = [{:?}]\n",
            root.display().to_string()
        ));
    }
    let _daemon = common::start_daemon(dir.path(), &sock, &config);
    common::wait_socket(&sock);
    let mut c = Client::connect(&sock, common::read_options(&root, "bench")).expect("connect");
    // Warm: the first right answer of the good state.
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered(&diagnostics(&mut c, case.asked)) != (good.clone(), true) {
        assert!(Instant::now() < deadline, "{}: never warm", case.server);
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut f = Figures {
        ms: Vec::new(),
        first_right: 0,
        wrong_and_complete: 0,
        never: 0,
    };
    for _ in 0..rounds {
        for (text, want) in [(&case.broken, &broken), (&case.good, &good)] {
            // Let the server go quiet, as between an agent's calls.
            std::thread::sleep(Duration::from_millis(500));
            let started = Instant::now();
            write(&root, case.dependency, text);
            let mut first = true;
            loop {
                let (lines, complete) = answered(&diagnostics(&mut c, case.asked));
                let right = complete && lines == *want;
                if first {
                    f.first_right += usize::from(right);
                    f.wrong_and_complete += usize::from(complete && !right);
                    first = false;
                }
                if right {
                    f.ms.push(started.elapsed().as_secs_f64() * 1000.0);
                    break;
                }
                if started.elapsed() > PATIENCE {
                    f.never += 1;
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    f
}

fn main() {
    let rounds: usize = std::env::var("TOOLVISOR_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
        .max(1);
    let only = std::env::var("TOOLVISOR_BENCH_SERVERS").ok();
    println!(
        "| server | change → correct `diagnostics` (median of {}) | min–max | first answer right | first answer wrong, `complete: true` | not right within 60 s | load |",
        rounds * 2
    );
    println!("|---|---|---|---|---|---|---|");
    for case in cases() {
        if only.as_deref().is_some_and(|o| !o.contains(case.server)) {
            continue;
        }
        let f = run(&case, rounds);
        let (lo, hi) =
            f.ms.iter()
                .fold((f64::MAX, 0f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        let med = if f.ms.is_empty() {
            "—".to_string()
        } else {
            format!("{:.0} ms", median(f.ms.clone()))
        };
        println!(
            "| {} | {med} | {lo:.0}–{hi:.0} ms | {} of {} | {} | {} | {} |",
            case.server,
            f.first_right,
            rounds * 2,
            f.wrong_and_complete,
            f.never,
            common::loadavg()
        );
    }
}
