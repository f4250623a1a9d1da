//! `find` and `grep` through the real daemon on a real tree: `.gitignore`, hidden files,
//! a binary file, non-UTF-8 content, switches for hidden and ignored files, globs, context,
//! matches across lines (`multiline`),
//! and a 200 MB file searched (and its tail read) without the daemon holding it in memory.

use std::io::Write;
use std::path::Path;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, options};

fn client(d: &TestDaemon, workdir: &Path) -> Client {
    let mut o = options(Codec::Bincode, Tier::Read, false);
    o.workdir = workdir.display().to_string();
    Client::connect(&d.socket, o).expect("connect")
}

fn call(c: &mut Client, tool: &str, args: Json) -> Result<Json, ToolError> {
    match c.call("c", tool, args).expect("call").outcome {
        Outcome::Ok(v) => Ok(v.0),
        Outcome::Err(e) => Err(e),
    }
}

fn ok(c: &mut Client, tool: &str, args: Json) -> Json {
    call(c, tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}"))
}

fn strings(v: &Json) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// src/{main.rs, util/strings.rs}, README.md, .gitignore (target/, *.log), target/debug.rs,
/// build.log, .config/settings.rs, .git/HEAD, logo.bin (binary), legacy.txt (Latin-1).
fn tree() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let p = t.path();
    for d in ["src/util", "target", ".config", ".git"] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    let files: [(&str, &[u8]); 10] = [
        (".gitignore", b"target/\n*.log\n"),
        ("src/main.rs", b"mod util;\nfn main() {\n    let token = util::parse(\"x\");\n    println!(\"{token}\");\n}\n"),
        ("src/util/strings.rs", b"pub fn parse(s: &str) -> String {\n    // TODO: Parse properly\n    s.to_string()\n}\n"),
        ("README.md", b"# Demo\nparse things\n"),
        ("target/debug.rs", b"fn parse() {}\n"),
        ("build.log", b"parse failed\n"),
        (".config/settings.rs", b"const PARSE: bool = true; // parse\n"),
        (".git/HEAD", b"ref: refs/heads/main parse\n"),
        ("logo.bin", b"\x89XYZ\0\0parse\0binary"),
        ("legacy.txt", b"parse caf\xe9 cr\xe8me\n"),
    ];
    for (name, body) in files {
        std::fs::write(p.join(name), body).unwrap();
    }
    t
}

#[test]
fn find_is_ignore_aware_with_switches() {
    let d = TestDaemon::start("");
    let t = tree();
    let mut c = client(&d, t.path());
    let v = ok(&mut c, "find", json!({"pattern": "*.rs"}));
    assert_eq!(strings(&v["paths"]), ["src/main.rs", "src/util/strings.rs"]);
    assert_eq!(v["total"], 2);
    let v = ok(&mut c, "find", json!({"pattern": "*.rs", "hidden": true}));
    assert_eq!(
        strings(&v["paths"]),
        [".config/settings.rs", "src/main.rs", "src/util/strings.rs"]
    );
    let v = ok(&mut c, "find", json!({"pattern": "*.rs", "ignored": true}));
    assert_eq!(
        strings(&v["paths"]),
        ["src/main.rs", "src/util/strings.rs", "target/debug.rs"]
    );
    let v = ok(
        &mut c,
        "find",
        json!({"pattern": "*", "hidden": true, "ignored": true}),
    );
    let all = strings(&v["paths"]);
    assert!(all.contains(&".git/HEAD".to_string()) && all.contains(&"build.log".to_string()));
    let v = ok(&mut c, "find", json!({"pattern": "src/**/*.rs"}));
    assert_eq!(v["total"], 2);
    let v = ok(&mut c, "find", json!({"pattern": "util"}));
    assert_eq!(strings(&v["paths"]), ["src/util/"]);
    let v = ok(
        &mut c,
        "find",
        json!({"pattern": "*.rs", "path": "src/util"}),
    );
    assert_eq!(strings(&v["paths"]), ["src/util/strings.rs"]);
    let v = ok(&mut c, "find", json!({"pattern": "*", "max_results": 2}));
    assert_eq!(
        (
            v["truncated"].as_bool(),
            v["paths"].as_array().unwrap().len()
        ),
        (Some(true), 2)
    );

    let e = call(&mut c, "find", json!({"pattern": "[oops"})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    let e = call(&mut c, "find", json!({"pattern": "*", "path": "../.."})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfScope, "{e}");
}

#[test]
fn grep_multiline_matches_across_lines() {
    let d = TestDaemon::start("");
    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("lib.rs"),
        "fn a() {}\n#[derive(Debug)]\nstruct S {\n    x: u8,\n}\n",
    )
    .unwrap();
    let mut c = client(&d, t.path());
    let pattern = r"#\[derive\(Debug\)\]\nstruct \w+";
    let e = call(&mut c, "grep", json!({"pattern": pattern})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.message.contains("multiline: true"), "{e}");
    let v = ok(
        &mut c,
        "grep",
        json!({"pattern": pattern, "multiline": true}),
    );
    assert_eq!(
        v["output"],
        "lib.rs:2:#[derive(Debug)]\nlib.rs:3:struct S {\n"
    );
    assert_eq!(v["matches"], 2);
    assert_eq!(v["files_with_matches"], 1);
}

#[test]
fn grep_skips_ignored_hidden_and_binary_and_shows_context() {
    let d = TestDaemon::start("");
    let t = tree();
    let mut c = client(&d, t.path());
    let v = ok(&mut c, "grep", json!({"pattern": "parse"}));
    assert_eq!(
        v["output"],
        "README.md:2:parse things\nlegacy.txt:1:parse caf\u{FFFD} cr\u{FFFD}me\nsrc/main.rs:3:    let token = util::parse(\"x\");\nsrc/util/strings.rs:1:pub fn parse(s: &str) -> String {\n"
    );
    assert_eq!(v["matches"], 4);
    assert_eq!(v["skipped_binary"], 1);

    let v = ok(
        &mut c,
        "grep",
        json!({"pattern": "parse", "case": "insensitive", "glob": "*.rs", "hidden": true}),
    );
    assert_eq!(v["files_with_matches"], 3, "{}", v["output"]);
    assert!(
        v["output"]
            .as_str()
            .unwrap()
            .contains(".config/settings.rs:1:")
    );
    let v = ok(
        &mut c,
        "grep",
        json!({"pattern": "parse", "ignored": true, "glob": "!*.md,!*.txt"}),
    );
    let out = v["output"].as_str().unwrap();
    assert!(
        out.contains("build.log:1:parse failed") && out.contains("target/debug.rs:1:"),
        "{out}"
    );
    assert!(!out.contains("README"), "{out}");

    let v = ok(
        &mut c,
        "grep",
        json!({"pattern": "TODO", "path": "src", "context": 1}),
    );
    assert_eq!(
        v["output"],
        "src/util/strings.rs-1-pub fn parse(s: &str) -> String {\nsrc/util/strings.rs:2:    // TODO: Parse properly\nsrc/util/strings.rs-3-    s.to_string()\n"
    );
    let v = ok(&mut c, "grep", json!({"pattern": "Parse", "case": "smart"}));
    assert_eq!(v["matches"], 1);
    let v = ok(
        &mut c,
        "grep",
        json!({"pattern": "parse", "path": "logo.bin"}),
    );
    assert_eq!(v["matches"], 0);
    assert!(v["notes"][0].as_str().unwrap().contains("binary"), "{v}");
    let v = ok(&mut c, "grep", json!({"pattern": "nothing-like-this"}));
    assert_eq!(
        (v["matches"].as_u64(), v["output"].as_str()),
        (Some(0), Some(""))
    );

    let e = call(&mut c, "grep", json!({"pattern": "(unclosed"})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.message.contains("regex"), "{e}");
    let e = call(&mut c, "grep", json!({"pattern": "x", "path": "/etc"})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfScope);
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn grep_streams_a_200_mb_file() {
    let d = TestDaemon::start("");
    let t = tempfile::tempdir().unwrap();
    // 200 chunks of 1 MiB of text; a needle after chunk 100 and one at the very end.
    let line = "the quick brown fox jumps over the lazy dog 0123456789 abcdefghij\n";
    let per_chunk = (1 << 20) / line.len();
    let chunk: String = line.repeat(per_chunk);
    let path = t.path().join("huge.log.txt");
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    for i in 0..200 {
        f.write_all(chunk.as_bytes()).unwrap();
        if i == 99 {
            f.write_all(b"NEEDLE_one in the middle\n").unwrap();
        }
    }
    f.write_all(b"NEEDLE_two at the end\n").unwrap();
    drop(f);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size > 200_000_000, "{size}");

    let mut c = client(&d, t.path());
    let v = ok(&mut c, "grep", json!({"pattern": "NEEDLE_[a-z]+"}));
    let mid = 100 * per_chunk + 1;
    let end = 200 * per_chunk + 2;
    assert_eq!(
        v["output"],
        format!(
            "huge.log.txt:{mid}:NEEDLE_one in the middle\nhuge.log.txt:{end}:NEEDLE_two at the end\n"
        )
    );
    // The tail of the same file by line number, counted to the end.
    let v = ok(
        &mut c,
        "read",
        json!({"path": "huge.log.txt", "offset": -1}),
    );
    assert_eq!(v["content"], format!("{end}\tNEEDLE_two at the end\n"));
    assert_eq!(v["total_lines"], end);
    // Streamed: the daemon never held the file.
    let peak = peak_rss_kib(d.pid());
    assert!(
        peak < 150 * 1024,
        "daemon peak RSS {peak} KiB after a 200 MB grep"
    );
    std::fs::remove_file(&path).unwrap();
}
