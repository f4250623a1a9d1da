//! Checks that every `.rs` file of this crate opens with a `//!` line saying why it exists.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_file_opens_with_a_module_doc_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    assert!(files.len() > 5);
    let missing: Vec<_> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).expect("readable file");
            !text.starts_with("//! ")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` line: {missing:?}"
    );
    let mod_rs: Vec<_> = files
        .iter()
        .filter(|path| path.file_name().is_some_and(|name| name == "mod.rs"))
        .collect();
    assert!(mod_rs.is_empty(), "mod.rs files: {mod_rs:?}");
}
