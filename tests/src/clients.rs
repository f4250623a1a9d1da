//! Helpers for the client-package suites (`clients/python`, `clients/typescript`): where the
//! repository and the test dependencies are, a daemon with eval kernels for them to talk to,
//! and running a language's test runner with the daemon's socket in its environment, failing
//! with its whole output.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::TestDaemon;

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("repository root")
}

/// `$TOOLVISOR_TEST_DEPS`, else the repository's `.test-deps`.
pub fn test_deps() -> PathBuf {
    match std::env::var_os("TOOLVISOR_TEST_DEPS") {
        Some(p) => PathBuf::from(p),
        None => repo().join(".test-deps"),
    }
}

/// The daemon the suites run against: default config plus the eval kernels (for the bridge
/// call), so `bash`, `process`, `ask_user` and `eval` are all there.
pub fn daemon() -> TestDaemon {
    crate::eval::daemon("")
}

/// Copy the files of `from` (recursively, skipping build outputs) into `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create copy dir");
    for entry in std::fs::read_dir(from).expect("read source dir").flatten() {
        let name = entry.file_name();
        let skip = ["node_modules", "dist", "build", "__pycache__"];
        if skip.iter().any(|s| name == *s) || name.to_string_lossy().ends_with(".egg-info") {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copy file");
        }
    }
}

/// Run `cmd` to completion; panic with its command line, status and both outputs unless
/// it succeeded. Returns stdout and stderr joined.
pub fn run(what: &str, cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\n{text}",
        out.status
    );
    text
}

/// The first fenced block of `lang` in docs/CLIENTS.md: the complete example of that client.
pub fn doc_example(lang: &str) -> String {
    let doc = std::fs::read_to_string(repo().join("docs/CLIENTS.md")).expect("docs/CLIENTS.md");
    let fence = format!("```{lang}\n");
    let start = doc
        .find(&fence)
        .unwrap_or_else(|| panic!("docs/CLIENTS.md has no ```{lang} block"))
        + fence.len();
    let end = doc[start..].find("\n```").expect("the block ends") + start;
    doc[start..=end].to_string()
}
