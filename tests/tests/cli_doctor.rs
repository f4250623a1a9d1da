//! `toolvisor doctor` on one screen: the binary on PATH, the daemon, the language servers and
//! debug adapters of the languages present (as the daemon resolves them), the harness configs;
//! every line that is not right names what to run, and the exit code says whether any is not.

use std::process::Command;

use toolvisor_tests::lsp::{lsp_config, project, require};
use toolvisor_tests::{TestDaemon, bin};

/// A language whose server cannot exist on any machine, present in the project.
const ABSENT: &str = r#"
[lsp.languages.absentlang]
extensions = ["absent"]
markers = ["absent.marker"]
servers = [["toolvisor-test-absent-server"]]
"#;

fn doctor(d: &TestDaemon, workdir: &std::path::Path, home: &std::path::Path) -> (bool, String) {
    let path_dir = home.join("bin");
    std::fs::create_dir_all(&path_dir).unwrap();
    let _ = std::os::unix::fs::symlink(bin(), path_dir.join("toolvisor"));
    let out = Command::new(bin())
        .arg("doctor")
        .arg("--socket")
        .arg(&d.socket)
        .arg("--workdir")
        .arg(workdir)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("PATH", format!("{}:/usr/bin:/bin", path_dir.display()))
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), String::from_utf8(out.stdout).unwrap())
}

fn line<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find(|l| l.get(4..).is_some_and(|l| l.starts_with(label)))
        .unwrap_or_else(|| panic!("no {label} line in\n{text}"))
}

#[test]
fn doctor_names_what_is_missing_and_what_to_run() {
    require("pyright-langserver");
    let d = TestDaemon::start(&lsp_config(ABSENT));
    let proj = project(&[
        ("pyproject.toml", ""),
        ("a.py", "x = 1\n"),
        ("absent.marker", ""),
    ]);
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();

    let (ok, text) = doctor(&d, proj.path(), home.path());
    assert!(!ok, "harnesses are not configured, yet it exits 0:\n{text}");
    assert!(line(&text, "binary").starts_with("ok "), "{text}");
    let daemon = line(&text, "daemon");
    assert!(
        daemon.starts_with("ok ") && daemon.contains(&format!("pid {}", d.pid())),
        "{text}"
    );
    let languages: Vec<&str> = text.lines().filter(|l| l.contains(" language ")).collect();
    let python = languages
        .iter()
        .find(|l| l.contains("python:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        python.starts_with("ok ") && python.contains("available"),
        "{text}"
    );
    let absent = languages
        .iter()
        .find(|l| l.contains("absentlang:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        absent.starts_with("!! ")
            && absent.contains("binary not found")
            && absent.contains("toolvisor-test-absent-server"),
        "{text}"
    );
    // Only languages present here: no line for one without its marker.
    assert!(!text.contains("rust:"), "{text}");
    let codex = line(&text, "codex");
    assert!(
        codex.starts_with("!! ") && codex.contains("toolvisor mcp --print-config codex >>"),
        "{text}"
    );
    let claude = line(&text, "claude");
    assert!(
        claude.starts_with("!! ") && claude.contains("claude mcp add"),
        "{text}"
    );

    // Configured the README's way, the harness lines are right.
    let printed = Command::new(bin())
        .args(["mcp", "--print-config", "codex"])
        .output()
        .unwrap();
    std::fs::write(home.path().join(".codex/config.toml"), &printed.stdout).unwrap();
    std::fs::write(
        home.path().join(".claude.json"),
        serde_json::json!({"mcpServers": {"toolvisor": {"type": "stdio", "command": "toolvisor", "args": ["mcp"]}}})
            .to_string(),
    )
    .unwrap();
    let (_, text) = doctor(&d, proj.path(), home.path());
    assert!(line(&text, "codex").starts_with("ok "), "{text}");
    assert!(line(&text, "claude").starts_with("ok "), "{text}");
}

#[test]
fn doctor_without_a_daemon_starts_one_and_says_so() {
    let mut d = TestDaemon::start("");
    d.kill_hard();
    let proj = project(&[("README.md", "hi\n")]);
    let home = tempfile::tempdir().unwrap();
    let (_, text) = doctor(&d, proj.path(), home.path());
    let daemon = line(&text, "daemon");
    assert!(
        daemon.starts_with("ok ") && daemon.contains("started now"),
        "{text}"
    );
    // The daemon it started answers the next doctor as running.
    let (_, text) = doctor(&d, proj.path(), home.path());
    assert!(!line(&text, "daemon").contains("started now"), "{text}");
    let pid: i32 = line(&text, "daemon")
        .split("pid ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}
