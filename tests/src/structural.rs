//! Helpers for the structural tests: a small tree of source files and its contents.

use std::path::{Path, PathBuf};

/// Four Python files under `root/proj`, each with two `print(...)` calls; returns them.
pub fn four_files(root: &Path) -> Vec<PathBuf> {
    let dir = root.join("proj");
    std::fs::create_dir_all(&dir).expect("create proj");
    (1..=4)
        .map(|i| {
            let path = dir.join(format!("m{i}.py"));
            std::fs::write(&path, format!("print({i})\nx = {i}\nprint(x, {i})\n"))
                .expect("write a source file");
            path
        })
        .collect()
}

/// The contents of `files`, in order.
pub fn contents(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_else(|e| format!("<{e}>")))
        .collect()
}

/// What `four_files` wrote, for comparing.
pub fn original(i: usize) -> String {
    format!("print({i})\nx = {i}\nprint(x, {i})\n")
}

/// The content after `print($$$A)` → `log($$$A)`.
pub fn rewritten(i: usize) -> String {
    format!("log({i})\nx = {i}\nlog(x, {i})\n")
}
