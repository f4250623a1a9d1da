//! The figure of docs/BENCHMARKS.md "Changes on disk outside the daemon": per
//! server, the time from a change made on disk outside the daemon (a call added to a module
//! no query opened) to a correct `references` answer — its total equal to the word count of
//! the files — through the watcher, against the workaround before it (`lsp reload`, then
//! `references`), alternated round by round. It asserts only that the answers are correct;
//! the times are printed. Run it with
//! `cargo nextest run -p toolvisor-tests --test lsp_outside_change_latency --run-ignored only --no-capture`.

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require, word_count, write};

const ROUNDS: usize = 5;

struct Server {
    name: &'static str,
    bin: &'static str,
    files: Vec<(String, String)>,
    query: Value,
    ext: &'static [&'static str],
    /// The module a round edits, and the line it appends (a call of `enlist`).
    module: &'static str,
    call: fn(usize) -> String,
}

fn servers(root: &Path) -> Vec<Server> {
    let dir = root.display().to_string();
    let mut py = vec![
        ("pyproject.toml".to_string(), String::new()),
        ("pkg/__init__.py".into(), String::new()),
        (
            "pkg/core.py".into(),
            "def enlist(name: str) -> str:\n    return name\n".into(),
        ),
    ];
    let mut ts = vec![
        (
            "tsconfig.json".to_string(),
            "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}, \"include\": [\"src\"]}\n".to_string(),
        ),
        ("src/core.ts".into(), "export function enlist(name: string): string {\n    return name;\n}\n".into()),
    ];
    let mut c = vec![
        ("core.h".to_string(), "int enlist(int x);\n".to_string()),
        (
            "core.c".into(),
            "#include \"core.h\"\n\nint enlist(int x) { return x; }\n".into(),
        ),
    ];
    let mut rs = vec![
        (
            "Cargo.toml".to_string(),
            "[package]\nname = \"lat\"\nversion = \"0.1.0\"\nedition = \"2021\"\n".to_string(),
        ),
        (
            "src/core.rs".into(),
            "pub fn enlist(x: u32) -> u32 {\n    x\n}\n".into(),
        ),
    ];
    let mut lib = String::from("pub mod core;\n");
    let mut units = vec!["core.c".to_string()];
    for i in 0..20 {
        py.push((
            format!("pkg/mod{i}.py"),
            format!("from pkg.core import enlist\n\nX = enlist(\"{i}\")\n"),
        ));
        ts.push((
            format!("src/mod{i}.ts"),
            format!("import {{ enlist }} from \"./core\";\n\nexport const x = enlist(\"{i}\");\n"),
        ));
        c.push((
            format!("mod{i}.c"),
            format!("#include \"core.h\"\n\nint m{i}(void) {{ return enlist({i}); }}\n"),
        ));
        units.push(format!("mod{i}.c"));
        rs.push((
            format!("src/mod{i}.rs"),
            format!("pub fn m() -> u32 {{\n    crate::core::enlist({i})\n}}\n"),
        ));
        lib.push_str(&format!("pub mod mod{i};\n"));
    }
    rs.push(("src/lib.rs".into(), lib));
    let db: Vec<Value> = units
        .iter()
        .map(|f| json!({"directory": dir, "file": format!("{dir}/{f}"), "arguments": ["cc", "-c", f]}))
        .collect();
    c.push((
        "compile_commands.json".into(),
        serde_json::to_string(&db).unwrap(),
    ));
    vec![
        Server {
            name: "pyright",
            bin: "pyright-langserver",
            files: py,
            query: json!({"op": "references", "file": "pkg/core.py", "line": 1, "symbol": "enlist"}),
            ext: &["py"],
            module: "pkg/mod7.py",
            call: |n| format!("Y{n} = enlist(\"r{n}\")\n"),
        },
        Server {
            name: "typescript-language-server",
            bin: "typescript-language-server",
            files: ts,
            query: json!({"op": "references", "file": "src/core.ts", "line": 1, "symbol": "enlist"}),
            ext: &["ts"],
            module: "src/mod7.ts",
            call: |n| format!("export const y{n} = enlist(\"r{n}\");\n"),
        },
        Server {
            name: "clangd",
            bin: "clangd",
            files: c,
            query: json!({"op": "references", "file": "core.c", "line": 3, "symbol": "enlist"}),
            ext: &["c", "h"],
            module: "mod7.c",
            call: |n| format!("int r{n}(void) {{ return enlist({n}); }}\n"),
        },
        Server {
            name: "rust-analyzer",
            bin: "rust-analyzer",
            files: rs,
            query: json!({"op": "references", "file": "src/core.rs", "line": 1, "symbol": "enlist"}),
            ext: &["rs"],
            module: "src/mod7.rs",
            call: |n| format!("pub fn r{n}() -> u32 {{\n    crate::core::enlist({n})\n}}\n"),
        },
    ]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Appends a call to the module, then asks until the answer is right (the first answer is
/// checked to be right too); returns the milliseconds from the write to the right answer.
fn round(d: &TestDaemon, root: &Path, s: &Server, n: usize, reload: bool) -> f64 {
    let path = root.join(s.module);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&(s.call)(n));
    let started = Instant::now();
    std::fs::write(&path, &text).unwrap();
    if reload {
        ok_in(
            d,
            root,
            "lsp",
            json!({"op": "reload", "file": s.query["file"]}),
        );
    }
    let want = word_count(root, "enlist", s.ext) as u64;
    let v = ok_in(d, root, "lsp", s.query.clone());
    assert_eq!(v["total"], want, "{} (reload: {reload}): {v}", s.name);
    started.elapsed().as_secs_f64() * 1000.0
}

#[test]
#[ignore = "a benchmark: prints figures for docs/BENCHMARKS.md; run with --run-ignored only"]
fn outside_change_to_a_correct_answer() {
    for i in 0..4 {
        let p = project(&[]);
        let root = p.path().canonicalize().unwrap();
        let s = servers(&root).remove(i);
        require(s.bin);
        for (path, content) in &s.files {
            write(&root, path, content);
        }
        let d = TestDaemon::start(&lsp_config(""));
        // Warm: the first answer (index built).
        let v = ok_in(&d, &root, "lsp", s.query.clone());
        assert_eq!(v["total"], word_count(&root, "enlist", s.ext) as u64, "{v}");
        let (mut watched, mut reloaded, mut unchanged) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..ROUNDS {
            // For reference: the same question with nothing changed.
            let started = Instant::now();
            ok_in(&d, &root, "lsp", s.query.clone());
            unchanged.push(started.elapsed().as_secs_f64() * 1000.0);
            // Alternate which side goes first.
            let order = if r % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for reload in order {
                let ms = round(&d, &root, &s, r * 2 + usize::from(reload), reload);
                if reload {
                    reloaded.push(ms);
                } else {
                    watched.push(ms);
                }
            }
        }
        let (w, rl) = (median(watched.clone()), median(reloaded.clone()));
        println!(
            "{}: change on disk -> correct references: {w:.1} ms through the watcher (median of {ROUNDS}: {watched:.0?}), {rl:.1} ms with lsp reload ({reloaded:.0?}); watcher / reload {:.2}x; unchanged {:.1} ms; load {}",
            s.name,
            w / rl,
            median(unchanged),
            load()
        );
    }
}
