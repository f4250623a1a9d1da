//! What one structural call may take in memory: a minified file (one huge line, whose syntax
//! tree takes gigabytes) is skipped with the rule that skipped it and refused when named; and
//! the daemon-wide parse budget makes concurrent calls past it answer `busy`, naming its key,
//! while the daemon's peak resident memory stays under a generous bound.

use std::path::Path;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{call_in, err_in, ok_in, project};

/// A field of `/proc/<pid>/status` given in kB (`VmHWM:`, the peak resident), in bytes.
fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"));
    line[key.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse::<u64>()
        .unwrap()
        * 1024
}

#[test]
fn a_minified_file_is_skipped_with_its_rule_and_refused_when_named() {
    let p = project(&[("ok.js", "foo(1);\nfoo(2);\n")]);
    let w = p.path();
    // 2 MiB of JavaScript on one line, containing the pattern's text.
    std::fs::write(w.join("app.min.js"), "foo(3);var a=1;".repeat(140_000)).unwrap();
    let d =
        TestDaemon::start("[structural]\nmax_minified_bytes = 524288\nmax_line_bytes = 16384\n");
    let v = ok_in(
        &d,
        w,
        "ast_grep",
        json!({"pattern": "foo($A)", "path": "."}),
    );
    assert_eq!(v["total"], 2, "only ok.js is parsed: {v:#}");
    assert_eq!(v["skipped_total"], 1, "{v:#}");
    assert_eq!(
        v["skipped"][0],
        json!({
            "path": "app.min.js",
            "why": "minified: a 2.0 MiB file with a line of 2.0 MiB; files over 512 KiB with lines over 16 KiB are skipped (structural.max_minified_bytes, structural.max_line_bytes)"
        }),
        "{v:#}"
    );
    let e = err_in(
        &d,
        w,
        "ast_grep",
        json!({"pattern": "foo($A)", "path": "app.min.js"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(
        e.message
            .contains("app.min.js is not parsed: minified: a 2.0 MiB file")
            && e.message.contains("structural.max_minified_bytes"),
        "{e}"
    );
    assert!(e.hint.contains("grep"), "{e}");
    // ast_edit follows the same rule.
    let e = err_in(
        &d,
        w,
        "ast_edit",
        json!({"pattern": "foo($A)", "rewrite": "bar($A)", "path": "app.min.js"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    let v = ok_in(
        &d,
        w,
        "ast_edit",
        json!({"pattern": "foo($A)", "rewrite": "bar($A)", "path": "."}),
    );
    assert_eq!(v["replacements"], 2, "{v:#}");
    assert_eq!(v["skipped"][0]["path"], "app.min.js", "{v:#}");
}

/// `n` files of `bytes` each, of short lines, where `needle` occurs once.
fn big_files(w: &Path, n: usize, bytes: usize) {
    for i in 0..n {
        let mut text = String::with_capacity(bytes + 64);
        text.push_str("needle(0);\n");
        let mut j = 0;
        while text.len() < bytes {
            text.push_str(&format!("let v{j} = [{j}, {j}, {j}];\n"));
            j += 1;
        }
        std::fs::write(w.join(format!("f{i}.js")), text).unwrap();
    }
}

/// Run `calls` concurrent `ast_grep` calls, on file `f<i>.js` each.
fn concurrent(d: &TestDaemon, w: &Path, calls: usize) -> Vec<Outcome> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..calls)
            .map(|i| {
                s.spawn(move || {
                    call_in(
                        d,
                        w,
                        "ast_grep",
                        json!({"pattern": "needle($A)", "path": format!("f{i}.js")}),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn a_small_parse_budget_answers_busy_naming_its_key_and_bounds_the_daemons_memory() {
    const CALLS: usize = 4;
    const FILE: usize = 3 * 1024 * 1024;
    let p = project(&[]);
    let w = p.path();
    big_files(w, CALLS, FILE);
    let d = TestDaemon::start(
        "[structural]\ncache_bytes = 0\nparse_budget_bytes = 1048576\nparse_wait_ms = 0\n",
    );
    let pid = d.pid();
    let before = status_kib(pid, "VmHWM:");
    let mut busy = 0;
    let mut answered = 0;
    // `cache_bytes = 0`: every call parses.
    for _round in 0..10 {
        for outcome in concurrent(&d, w, CALLS) {
            match outcome {
                Outcome::Ok(v) => {
                    let v: Json = v.0;
                    assert_eq!(v["total"], 1, "{v:#}");
                    answered += 1;
                }
                Outcome::Err(e) => {
                    assert_eq!(e.kind, ErrorKind::Busy, "{e}");
                    assert!(
                        e.message.contains("structural.parse_budget_bytes")
                            && e.message.contains("of 1 MiB at once"),
                        "{e}"
                    );
                    assert!(e.hint.contains("parse_budget_bytes"), "{e}");
                    busy += 1;
                }
            }
        }
        if busy > 0 && answered > 0 {
            break;
        }
    }
    assert!(busy > 0, "no call past the budget was answered busy");
    assert!(answered > 0, "no call was answered at all");
    // One of these parses takes about 170 MiB; with a budget of 1 GiB instead, the same
    // calls ran four at once and the peak grew by about 670 MiB.
    let grown = status_kib(pid, "VmHWM:").saturating_sub(before);
    eprintln!("peak grew by {} MiB", grown >> 20);
    assert!(
        grown < 400 << 20,
        "the daemon's peak resident memory grew by {} MiB",
        grown >> 20
    );
}
