//! Helpers for the language-server tests: find the real servers that
//! `scripts/install-test-deps` installs (failing loudly when one is missing), write small
//! projects, and call tools with the project as the workdir.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{Outcome, Tier};

use crate::{TestDaemon, options};

/// `.test-deps/` at the workspace root (or `$TOOLVISOR_TEST_DEPS`).
pub fn test_deps() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLVISOR_TEST_DEPS") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.test-deps")
}

/// Where the test servers live, searched after the project-local directories.
pub fn search_path() -> Vec<PathBuf> {
    let deps = test_deps();
    vec![deps.join("node_modules/.bin"), deps.join("lsp-venv/bin")]
}

/// The path of a server binary the tests need; panics (never skips) when it is missing.
pub fn require(bin: &str) -> PathBuf {
    let mut dirs = search_path();
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    for d in dirs {
        let p = d.join(bin);
        if p.is_file() {
            // A rustup proxy exists even when the component is not installed: ask it.
            if bin == "rust-analyzer" {
                let ok = std::process::Command::new(&p)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success());
                if !ok {
                    continue;
                }
            }
            return p;
        }
    }
    panic!(
        "the language server `{bin}` is not installed: run scripts/install-test-deps \
         (it installs pyright, pylsp, clangd, typescript-language-server, rust-analyzer and gopls)"
    );
}

/// The `[lsp]` config section every language-server test uses, plus `extra` lines.
pub fn lsp_config(extra: &str) -> String {
    let dirs: Vec<String> = search_path()
        .iter()
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    format!("[lsp]\nsearch_path = [{}]\n{extra}", dirs.join(", "))
}

/// A temp project with `files` (path, content); returns the dir (canonical path inside).
pub fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp project");
    for (path, content) in files {
        write(dir.path(), path, content);
    }
    dir
}

/// A Python package whose `pkg.core.enlist` is called from `modules` modules, `pkg/mod{i}.py`
/// each holding `module(i)` (which imports and calls it), with a `pyproject.toml`.
pub fn enlist_package(modules: usize, module: impl Fn(usize) -> String) -> tempfile::TempDir {
    let dir = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        (
            "pkg/core.py",
            "def enlist(name: str) -> str:\n    return name\n",
        ),
    ]);
    for i in 0..modules {
        write(dir.path(), &format!("pkg/mod{i}.py"), &module(i));
    }
    dir
}

/// Asserts that a partial answer names each of `places` (`file:line`) in its
/// `partial_reason` and its text: the uses the server could not see.
pub fn names_each(v: &Json, places: &[String]) {
    let reason = v["partial_reason"].as_str().unwrap_or("");
    let text = v["text"].as_str().unwrap_or("");
    for place in places {
        assert!(
            reason.contains(place.as_str()) && text.contains(place.as_str()),
            "{place} holds the name the server did not report; the answer does not name it: {v}"
        );
    }
}

/// `v`, a workspace symbols answer, is a list of exactly `cap` that a server cut at its own
/// silent limit, and says so.
pub fn says_cut_at(v: &Json, cap: u64) {
    assert_eq!(v["total"], cap, "the server's cut: {v}");
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap_or("")
            .contains(&format!("at most {cap} workspace symbols")),
        "{v}"
    );
}

pub fn write(root: &Path, path: &str, content: &str) {
    let p = root.join(path);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(p, content).expect("write project file");
}

/// Canonical form of a temp dir path (servers report canonical paths).
pub fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).expect("canonicalize")
}

/// A client whose workdir is `workdir` and whose run is `run`.
pub fn client_in(d: &TestDaemon, workdir: &Path, run: &str) -> Client {
    let mut opts = options(Codec::Json, Tier::Exec, true);
    opts.workdir = canonical(workdir).display().to_string();
    opts.run_id = run.to_string();
    Client::connect(&d.socket, opts).expect("connect to the test daemon")
}

/// Call `tool` in `workdir` (approving everything) and return the outcome.
pub fn call_in(d: &TestDaemon, workdir: &Path, tool: &str, args: Json) -> Outcome {
    let mut c = client_in(d, workdir, "test-run");
    c.call_with("c", tool, args, |_| true)
        .expect("call")
        .outcome
}

/// Like `call_in`, but the call must succeed.
pub fn ok_in(d: &TestDaemon, workdir: &Path, tool: &str, args: Json) -> Json {
    match call_in(d, workdir, tool, args.clone()) {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!(
            "{tool} {args} failed: {e}\n--- daemon log (tail) ---\n{}",
            tail(&d.log_text(), 80)
        ),
    }
}

/// Like `call_in`, but the call must fail; returns the error.
pub fn err_in(
    d: &TestDaemon,
    workdir: &Path,
    tool: &str,
    args: Json,
) -> toolvisor_protocol::ToolError {
    match call_in(d, workdir, tool, args.clone()) {
        Outcome::Err(e) => e,
        Outcome::Ok(v) => panic!("{tool} {args} should have failed, got {}", v.0),
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `git args` in `root` with a fixed identity and no user or system config; panics
/// when it fails.
pub fn git(root: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(root)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How often `word` occurs as a whole word in the files under `root` ending in one of
/// `extensions` (what `rg -w` counts), hidden directories skipped.
pub fn word_count(root: &Path, word: &str, extensions: &[&str]) -> usize {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut n = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let kind = e.file_type().expect("file type");
            if kind.is_dir() {
                if !name.starts_with('.') && name != "node_modules" {
                    dirs.push(e.path());
                }
            } else if extensions.iter().any(|x| name.ends_with(&format!(".{x}"))) {
                let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                n += text
                    .match_indices(word)
                    .filter(|(i, _)| {
                        !is_word(text[..*i].chars().next_back())
                            && !is_word(text[i + word.len()..].chars().next())
                    })
                    .count();
            }
        }
    }
    n
}
