//! What `toolvisor mcp --print-config codex|claude --headless` prints, used verbatim with the
//! real harness (`toolvisor` found on PATH) — Codex's config block, Claude Code's `claude mcp
//! add` and `claude -p --allowedTools` lines — gets a read tool's answer and runs a write with
//! no other flags or approvals.

use std::process::Command;

use serde_json::json;
use toolvisor_tests::harness::{Endpoint, claude_line, codex_with, played, project};
use toolvisor_tests::{TestDaemon, bin};

/// What `toolvisor mcp --print-config HARNESS --headless` prints for this daemon and workdir.
fn print_config(d: &TestDaemon, work: &std::path::Path, harness: &str) -> String {
    let out = Command::new(bin())
        .args(["mcp", "--socket"])
        .arg(&d.socket)
        .arg("--workdir")
        .arg(work)
        .args(["--print-config", harness, "--headless"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn codex_runs_headless_with_the_printed_config_alone() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let printed = print_config(&d, &work, "codex");
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "read", "args": {"path": "pkg/greet.py"}},
            {"tool": "write", "args": {"path": "pkg/printed.py", "content": "PRINTED = 1\n"}},
            {"final": "done"}
        ]),
    );
    let run = codex_with(&d, &ep, &work, &printed);
    played(&run, &ep, &format!("\nconfig:\n{printed}"));
    let text = ep.results_text();
    assert!(text.contains("toolvisor-harness-7731"), "{text}");
    assert_eq!(
        std::fs::read_to_string(work.join("pkg/printed.py")).unwrap(),
        "PRINTED = 1\n",
        "{text}"
    );
}

#[test]
fn claude_runs_headless_with_the_printed_lines_alone() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let printed = print_config(&d, &work, "claude");
    let lines: Vec<Vec<&str>> = printed.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{printed}");
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "read", "args": {"path": "pkg/greet.py"}},
            {"tool": "write", "args": {"path": "pkg/printed.py", "content": "PRINTED = 1\n"}},
            {"final": "done"}
        ]),
    );
    let add = claude_line(&d, &ep, &work, &lines[0]);
    assert!(
        add.status.success(),
        "{printed}\nstdout: {}\nstderr: {}",
        add.stdout,
        add.stderr
    );
    let run = claude_line(&d, &ep, &work, &lines[1]);
    played(&run, &ep, &format!("\nlines:\n{printed}"));
    let text = ep.results_text();
    assert!(text.contains("toolvisor-harness-7731"), "{text}");
    assert_eq!(
        std::fs::read_to_string(work.join("pkg/printed.py")).unwrap(),
        "PRINTED = 1\n",
        "{text}"
    );
}
