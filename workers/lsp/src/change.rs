//! One file's part of a workspace edit: its path, its text before and after, and how many edits
//! made it. What an edit is planned as (`edit.rs`), written, and previewed (`rename_preview.rs`).

use std::path::PathBuf;

/// One file's part of a workspace edit.
#[derive(Debug)]
pub struct FileChange {
    pub path: PathBuf,
    pub old: String,
    pub new: String,
    pub edits: usize,
}
