//! The results of the lsp tools that write: `lsp_rename`, `lsp_edit` and `synced_write`, with
//! the diagnostics new for the run after the write (`WriteDiagnostics`, in `lsp.rs`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::lsp::{LspEditedFile, LspServer, WriteDiagnostics};

// ---- lsp_rename ----

/// The result of `lsp_rename`: the preview (`dry_run`) or the rename written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum LspRenameResult {
    Preview(LspRenamePreview),
    Renamed(LspRenamed),
}

/// The result of `lsp_rename` with `dry_run: true`: the whole edit per file; nothing written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspRenamePreview {
    /// Every changed line, old then new.
    pub text: String,
    /// True: a preview.
    pub dry_run: bool,
    /// False: nothing was written.
    pub written: bool,
    /// The files the rename would edit.
    pub files: Vec<LspPreviewedFile>,
    /// Text edits over all files.
    pub edits: u64,
    /// Changed lines not shown (past 200 over all files).
    pub lines_not_shown: u64,
    /// No gap in the server's index is known.
    pub complete: bool,
    /// Why the rename may miss files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
}

/// One file of a rename preview.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspPreviewedFile {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// Text edits in it.
    pub edits: u64,
    /// Its changed lines shown (none when the edit changes its line count).
    pub lines: Vec<LspChangedLine>,
}

/// A line a rename would change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspChangedLine {
    /// 1-based line.
    pub line: u64,
    /// The line now.
    pub old: String,
    /// The line after the rename.
    pub new: String,
}

/// The result of `lsp_rename` written: the files edited and the diagnostics new for the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspRenamed {
    /// The rename, the files and the new diagnostics, as lines.
    pub text: String,
    /// The files edited.
    pub files: Vec<LspEditedFile>,
    /// Text edits over all files.
    pub edits: u64,
    /// The diagnostics new for the run after the write.
    pub diagnostics: WriteDiagnostics,
    /// No gap in the server's index is known.
    pub complete: bool,
    /// Why the rename may have missed files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
}

// ---- lsp_edit ----

/// The result of `lsp_edit`: the files edited, all or none, and the diagnostics new for the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspEditResult {
    /// The edit, the files and the new diagnostics, as lines.
    pub text: String,
    /// The files edited (format: none when already formatted).
    pub files: Vec<LspEditedFile>,
    /// Text edits over all files.
    pub edits: u64,
    /// The diagnostics new for the run after the write (absent when nothing was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<WriteDiagnostics>,
    /// The server that computed the edit.
    pub server: LspServer,
    /// apply_code_action: the action's command, which was not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_not_run: Option<String>,
    /// format: the formatting options sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<LspFormattingOptions>,
}

/// The formatting options `lsp_edit format` sent (LSP `FormattingOptions`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LspFormattingOptions {
    /// The indentation step (spaces) or a tab's width.
    pub tab_size: u64,
    /// Indent with spaces (false: tabs).
    pub insert_spaces: bool,
    /// Trim trailing whitespace on every line.
    pub trim_trailing_whitespace: bool,
    /// End the file with a newline.
    pub insert_final_newline: bool,
    /// Trim the newlines after the final one.
    pub trim_final_newlines: bool,
}

// ---- synced_write ----

/// The result of `synced_write`: the diagnostics new for the run in the file written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyncedWriteResult {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// The new diagnostics and notes, as lines (`diagnostics.text`).
    pub text: String,
    /// The diagnostics new for the run.
    pub diagnostics: WriteDiagnostics,
}
