//! The results of the files tools (`read`, `ls`, `find`, `grep`, `write`, `edit`,
//! `apply_patch`) and of `tool_result_read`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::lsp::WriteDiagnostics;

/// The result of `read`: a text file's lines, an image fitted to the model's limits, or an
/// image that could not be made to fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ReadResult {
    Text(ReadText),
    Image(ReadImage),
    ImageOmitted(ReadImageOmitted),
}

/// `read` of a text file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadText {
    /// The file, relative to the workdir (absolute outside it).
    pub path: String,
    /// `text`.
    pub kind: TextKind,
    /// The lines shown, each as `<number>\t<text>\n` (line endings normalised to `\n`).
    pub content: String,
    /// The first line shown (1-based); 0 for an empty file.
    pub offset: u64,
    /// Lines shown.
    pub lines: u64,
    /// Lines in the file; null when not counted (a large file not read to its end).
    pub total_lines: Option<u64>,
    /// The `offset` that reads on; null at the end of the file.
    pub next_offset: Option<u64>,
    /// The last line of the file is shown.
    pub eof: bool,
    /// Size of the file in bytes.
    pub size_bytes: u64,
    /// Lines cut at `files.read_max_line_chars` (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_lines: Option<u64>,
    /// Invalid UTF-8 sequences shown as U+FFFD (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_utf8: Option<u64>,
    /// `crlf` when a shown line ended in `\r\n` (absent: `\n`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_endings: Option<LineEndings>,
    /// What else to know about the read (where it stopped and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
}

/// `read` of an image, fitted to the model's limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadImage {
    /// `image`.
    pub kind: ImageKind,
    /// The MIME type of `data` (`image/png`, `image/jpeg`, ...).
    pub mime_type: String,
    /// Base64 of the encoded image.
    pub data: String,
    /// Width of the image shown, in pixels.
    pub width: u32,
    /// Height of the image shown, in pixels.
    pub height: u32,
    /// The pixels were resized or re-encoded (false: the file's own bytes).
    pub transformed: bool,
    /// The file's own image.
    pub source: ImageSource,
    /// How the image was fitted; null when it is the file's own bytes.
    pub note: Option<String>,
}

/// `read` of an image that could not be made to fit the model's limits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadImageOmitted {
    /// `image_omitted`.
    pub kind: ImageOmittedKind,
    /// The file's own image.
    pub source: ImageSource,
    /// Why the image was left out.
    pub note: Option<String>,
}

/// The image file as it is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ImageSource {
    /// Its format (`png`, `jpeg`, `gif`, `webp`, `bmp`).
    pub format: String,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Size of the file in bytes.
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TextKind {
    Text,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageKind {
    Image,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageOmittedKind {
    ImageOmitted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LineEndings {
    Crlf,
}

/// The result of `ls`: a directory's entries, sorted by name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LsResult {
    /// The directory listed (or the file, listed as its one entry).
    pub path: String,
    /// The entries, at most `files.ls_max_entries`.
    pub entries: Vec<LsEntry>,
    /// Entries in the directory (`entries` may hold fewer), protected ones not counted.
    pub total: u64,
    /// `entries` holds fewer than `total`.
    pub truncated: bool,
    /// Entries left out because they lie in a protected location (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_protected: Option<u64>,
    /// Why entries were left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
}

/// One entry of `ls`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LsEntry {
    /// The name; directories end in `/`.
    pub name: String,
    /// What the entry is (a symlink is not followed).
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// Size in bytes, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Where a symlink points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `true` for a file with an execute bit (absent: not executable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    File,
    Dir,
    Symlink,
    Other,
}

/// The result of `find`: matching paths, sorted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FindResult {
    /// The directory searched.
    pub path: String,
    /// The glob, as given.
    pub pattern: String,
    /// Matching paths relative to the workdir, sorted; directories end in `/`.
    pub paths: Vec<String>,
    /// Paths that matched (`paths` may hold fewer).
    pub total: u64,
    /// `paths` stops at `max_results`.
    pub truncated: bool,
    /// The search stopped at `files.search_timeout_s`.
    pub timed_out: bool,
    /// Errors met on the way (unreadable directories, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    /// Paths left out because they lie in a protected location (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_protected: Option<u64>,
    /// Why paths were left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// How many matched and how to see the rest, when truncated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The result of `grep`: matching lines as ripgrep prints them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GrepResult {
    /// The directory or file searched.
    pub path: String,
    /// The regex, as given.
    pub pattern: String,
    /// `path:line:text` for matches, `path-line-text` for context, `--` between groups.
    pub output: String,
    /// Matching lines shown.
    pub matches: u64,
    /// Files with a match.
    pub files_with_matches: u64,
    /// Files searched.
    pub files_searched: u64,
    /// Binary files skipped.
    pub skipped_binary: u64,
    /// The search stopped at `max_results`.
    pub truncated: bool,
    /// The search stopped at `files.search_timeout_s`.
    pub timed_out: bool,
    /// Errors met on the way (unreadable files, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    /// What else to know about the search (lines cut, paths left out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// Paths left out because they lie in a protected location (absent: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_protected: Option<u64>,
}

/// The result of `write`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteResult {
    /// The file written, relative to the workdir.
    pub path: String,
    /// `created` or `modified`.
    pub status: ChangeStatus,
    /// Bytes written.
    pub bytes: u64,
    /// Lines written.
    pub lines: u64,
    /// Size of the file before; null when it was created.
    pub previous_bytes: Option<u64>,
    /// New diagnostics of the written file, from its language server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<WriteDiagnostics>,
}

/// The result of `edit`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EditResult {
    /// The file edited, relative to the workdir.
    pub path: String,
    /// Texts replaced.
    pub replacements: u64,
    /// The line where each replaced text started.
    pub lines: Vec<u64>,
    /// Unified diff of the edit (3 lines of context).
    pub diff: String,
    /// What else to know about the edit (line endings matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// New diagnostics of the edited file, from its language server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<WriteDiagnostics>,
}

/// The result of `apply_patch`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApplyPatchResult {
    /// The files changed, in the patch's order.
    pub files: Vec<PatchedFile>,
    /// What else to know (hunks applied at an offset, sections matched loosely, files left
    /// as they were).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// New diagnostics of the files written, from their language servers (absent when the
    /// patch only deleted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<WriteDiagnostics>,
}

/// One file `apply_patch` changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PatchedFile {
    /// The file, relative to the workdir (a moved file's new path).
    pub path: String,
    /// `created`, `modified` or `deleted`.
    pub status: ChangeStatus,
    /// Hunks or sections applied.
    pub hunks: u64,
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
    /// The old path of a moved file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
}

/// What a write did to a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeStatus {
    Created,
    Modified,
    Deleted,
}

impl ChangeStatus {
    /// The status as results spell it (`created`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeStatus::Created => "created",
            ChangeStatus::Modified => "modified",
            ChangeStatus::Deleted => "deleted",
        }
    }
}

/// The result of `tool_result_read`: one page of a stored result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResultReadResult {
    /// The stored result's ref.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The characters from `offset` to `next_offset`.
    pub text: String,
    /// The first character returned.
    pub offset: u64,
    /// The offset that reads on (`total_chars` at the end).
    pub next_offset: u64,
    /// Characters in the stored text.
    pub total_chars: u64,
    /// The page reaches the end of the stored text.
    pub eof: bool,
    /// The tool whose result it is.
    pub source_tool: String,
    /// The stored text's type (`text/plain`, `application/json`, `application/x-ndjson`).
    pub content_type: String,
    /// How the result is kept (`inspectable`, ...).
    pub storage_kind: String,
    /// Secret names masked in the stored text, with counts.
    pub masked: BTreeMap<String, u64>,
    /// The limit was lowered so the answer fits one frame.
    pub envelope_clamped: bool,
}
