//! README's "From an MCP harness" section, verbatim, on a machine with no daemon running: its
//! command lines (read from README.md, not copied here) are run as a user would, with
//! `toolvisor` and the language servers on PATH (as `cargo install` and the user's own
//! installs put them) and nothing else prepared — no `--socket`, no daemon, no config file.
//! Real Claude Code and Codex against the scripted model endpoint:
//!
//! - `claude mcp add --scope user toolvisor -- toolvisor mcp`, then `claude -p` allowed one
//!   write: the first `toolvisor mcp` starts the daemon; the write is denied saying no person
//!   could be asked (never that someone refused) and naming the flags that would let it run.
//! - `toolvisor mcp --print-config claude --headless` and the two lines it prints: `lsp
//!   references` answers right (every use, checked against the files), a kernel and a
//!   process start, and neither survives 10 s after `claude -p` exits.
//! - The daemon is killed; `toolvisor mcp --print-config codex >> ~/.codex/config.toml`, then
//!   `codex exec`: its `toolvisor mcp` starts a new daemon, `lsp references` answers right
//!   and `ask_user` answers `no_human` (Codex declines every elicitation).
//!
//! Every harness's `toolvisor mcp` finds the daemon at the default socket
//! (`/tmp/toolvisor-$UID/toolvisor.sock`: the harnesses pass no `XDG_RUNTIME_DIR`), so this is
//! the one test that uses it; it refuses to run while another daemon answers there.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_tests::harness::{
    Endpoint, claude_line_in, codex_with_in, path_with_toolvisor, played, sleeps, unique_sleep,
};
use toolvisor_tests::{alive, bin, lsp, wait_for};

/// The fenced `sh` lines of README's "From an MCP harness" section.
fn readme_lines() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let start = readme
        .find("## From an MCP harness")
        .expect("README has a \"From an MCP harness\" section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    let mut lines = Vec::new();
    let mut in_sh = false;
    for line in section.lines() {
        match (in_sh, line.trim()) {
            (false, "```sh") => in_sh = true,
            (true, "```") => in_sh = false,
            (true, l) if !l.is_empty() && !l.starts_with('#') => lines.push(l.to_string()),
            _ => {}
        }
    }
    lines
}

/// The README line starting with `prefix` (exactly one).
fn line(lines: &[String], prefix: &str) -> String {
    let found: Vec<&String> = lines.iter().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(
        found.len(),
        1,
        "README lines starting {prefix:?}: {lines:?}"
    );
    found[0].clone()
}

fn default_socket() -> PathBuf {
    PathBuf::from(format!(
        "/tmp/toolvisor-{}/toolvisor.sock",
        nix::unistd::getuid()
    ))
}

/// The pid of the daemon answering on the default socket, if one does.
fn daemon_pid() -> Option<u32> {
    let out = Command::new(bin())
        .args(["status", "--json", "--socket"])
        .arg(default_socket())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: Json = serde_json::from_slice(&out.stdout).ok()?;
    v["pid"]
        .as_u64()
        .or_else(|| v["daemon_pid"].as_u64())
        .map(|p| p as u32)
}

/// Kills whatever daemon the harnesses started, however the test ends.
struct StartedDaemons;

impl Drop for StartedDaemons {
    fn drop(&mut self) {
        if let Some(pid) = daemon_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// `sh -c LINE` in `workdir` with HOME `home` and the user's PATH; its stdout.
fn shell(line: &str, workdir: &Path, home: &Path, path: &std::ffi::OsStr) -> String {
    std::fs::create_dir_all(home).unwrap();
    let out = Command::new("sh")
        .args(["-c", line])
        .current_dir(workdir)
        .env_clear()
        .env("HOME", home)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A Python project where `greet` is defined once and used three times in two other files.
fn project(dir: &Path) -> PathBuf {
    let w = dir.join("proj");
    lsp::write(
        &w,
        "pyproject.toml",
        "[project]\nname = \"readme\"\nversion = \"0.1.0\"\n",
    );
    lsp::write(&w, "pkg/__init__.py", "");
    lsp::write(
        &w,
        "pkg/greet.py",
        "def greet(name: str) -> str:\n    return f\"hello, {name}\"\n",
    );
    lsp::write(
        &w,
        "pkg/cli.py",
        "from pkg.greet import greet\n\n\ndef main() -> None:\n    print(greet(\"cli\"))\n",
    );
    lsp::write(
        &w,
        "pkg/web.py",
        "import pkg.greet as g\n\n\ndef page() -> str:\n    return g.greet(\"web\") + g.greet(\"again\")\n",
    );
    w
}

/// `lsp references` of `greet` at its definition, as the model asks it.
fn references() -> Json {
    json!({"tool": "lsp", "args": {"op": "references", "file": "pkg/greet.py", "line": 1, "symbol": "greet"}})
}

/// The references answer names every use: the definition, the import and call in cli.py, both
/// calls in web.py (a grep of the tree finds the same lines), and says it is complete.
fn assert_references_right(text: &str, work: &Path) {
    let mut uses = Vec::new();
    for file in ["pkg/greet.py", "pkg/cli.py", "pkg/web.py"] {
        for (i, l) in std::fs::read_to_string(work.join(file))
            .unwrap()
            .lines()
            .enumerate()
        {
            if l.contains("greet(") || l.contains("import greet") {
                uses.push(format!("{file}:{}", i + 1));
            }
        }
    }
    assert_eq!(uses.len(), 4, "{uses:?}");
    for u in &uses {
        assert!(text.contains(u), "references miss {u}: {text}");
    }
    assert!(!text.contains("complete: false"), "{text}");
}

#[test]
fn readme_harness_section_verbatim_gets_claude_code_and_codex_to_a_right_references_answer() {
    assert!(
        daemon_pid().is_none(),
        "a daemon already answers on {}: this test starts from a machine with none running (stop it)",
        default_socket().display()
    );
    let _cleanup = StartedDaemons;
    let lines = readme_lines();
    let dir = tempfile::tempdir().unwrap();
    let work = project(dir.path());
    let servers = lsp::search_path();
    let path = path_with_toolvisor(&servers);

    // Claude Code, configured as README says, no delegation: a write is denied, honestly.
    let add = line(&lines, "claude mcp add");
    let words: Vec<&str> = add.split(' ').collect();
    let plain = dir.path().join("plain");
    let ep = Endpoint::start(
        &plain.join("ep"),
        json!([
            {"tool": "write", "args": {"path": "pkg/denied.py", "content": "NOPE = 1\n"}},
            {"final": "write refused"}
        ]),
    );
    let added = claude_line_in(&plain, &ep, &work, &words, &servers);
    assert!(added.status.success(), "{add}: {}", added.stderr);
    let run = claude_line_in(
        &plain,
        &ep,
        &work,
        &[
            "claude",
            "-p",
            "\"$TASK\"",
            "--allowedTools",
            "mcp__toolvisor__write",
        ],
        &servers,
    );
    played(&run, &ep, &format!("\n{add}"));
    let first = daemon_pid().expect("the first toolvisor mcp started no daemon");
    assert!(!work.join("pkg/denied.py").exists());
    let text = ep.results_text();
    assert!(
        text.contains("no person could be asked")
            && text.contains("--approvals harness")
            && text.contains("do not tell the user they declined"),
        "{text}"
    );
    assert!(!text.contains("the person answered"), "{text}");

    // Headless, as README prints it: references right; the run's kernel and process end with it.
    let print = line(&lines, "toolvisor mcp --print-config claude --headless");
    let headless = dir.path().join("headless");
    let printed = shell(&print, &work, &headless.join("claude-home"), &path);
    let printed: Vec<&str> = printed.lines().collect();
    assert_eq!(printed.len(), 2, "{print} printed {printed:?}");
    let secs = unique_sleep("readme");
    let ep = Endpoint::start(
        &headless.join("ep"),
        json!([
            references(),
            {"tool": "eval", "args": {"code": "import os\nprint('kernel pid', os.getpid())", "description": "note the kernel's pid for the test"}},
            {"tool": "process", "args": {"op": "start", "command": format!("sleep {secs}")}},
            {"final": "references found"}
        ]),
    );
    let added = claude_line_in(
        &headless,
        &ep,
        &work,
        &printed[0].split(' ').collect::<Vec<_>>(),
        &servers,
    );
    assert!(added.status.success(), "{}: {}", printed[0], added.stderr);
    let run = claude_line_in(
        &headless,
        &ep,
        &work,
        &printed[1].split(' ').collect::<Vec<_>>(),
        &servers,
    );
    played(&run, &ep, &format!("\n{}", printed.join("\n")));
    let text = ep.results_text();
    assert_references_right(&text, &work);
    let kernel: u32 = text
        .split("kernel pid ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no kernel pid in {text}"));
    wait_for(
        "the headless run's kernel and process to end within 10 s of claude's exit",
        Duration::from_secs(10),
        || (!alive(kernel) && sleeps(&secs).is_empty()).then_some(()),
    );
    assert_eq!(
        daemon_pid(),
        Some(first),
        "the daemon changed under one user"
    );

    // The daemon dies; Codex, configured as README says, starts another and answers.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(first as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for(
        "the killed daemon to stop answering",
        Duration::from_secs(10),
        || daemon_pid().is_none().then_some(()),
    );
    let append = line(&lines, "toolvisor mcp --print-config codex >>");
    let scratch = dir.path().join("codex-readme");
    // Codex made ~/.codex when it was installed and first run.
    std::fs::create_dir_all(scratch.join(".codex")).unwrap();
    shell(&append, &work, &scratch, &path);
    let config = std::fs::read_to_string(scratch.join(".codex/config.toml")).unwrap();
    let ep = Endpoint::start(
        &dir.path().join("codex-ep"),
        json!([
            references(),
            {"tool": "ask_user", "args": {"question": "Which greeting?", "options": [{"label": "hello"}, {"label": "hi"}]}},
            {"final": "done"}
        ]),
    );
    let run = codex_with_in(&dir.path().join("codex"), &ep, &work, &config, &servers);
    played(&run, &ep, &format!("\n{append}:\n{config}"));
    let text = ep.results_text();
    assert_references_right(&text, &work);
    assert!(text.contains("no_human"), "{text}");
    let second = daemon_pid().expect("Codex's toolvisor mcp started no daemon");
    assert_ne!(second, first);
}
