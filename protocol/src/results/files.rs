//! The results of the files tools (`read`, `ls`, `find`, `grep`, `write`, `edit`,
//! `apply_patch`) and of `tool_result_read`.

use std::collections::BTreeMap;

use super::lsp::WriteDiagnostics;
use schemars::JsonSchema;

/// The result of `read`: a text file's lines, an image fitted to the model's limits, or an
/// image that could not be made to fit.
#[derive(JsonSchema)]
#[serde(untagged)]
pub enum ReadResult {
    Text(ReadText),
    Image(ReadImage),
    ImageOmitted(ReadImageOmitted),
}

/// `read` of a text file.
#[derive(JsonSchema)]
pub struct ReadText {
    /// The file, relative to the workdir (absolute outside it).
    path: String,
    /// `text`.
    kind: TextKind,
    /// The lines shown, each as `<number>\t<text>\n` (line endings normalised to `\n`).
    content: String,
    /// The first line shown (1-based); 0 for an empty file.
    offset: u64,
    /// Lines shown.
    lines: u64,
    /// Lines in the file; null when not counted (a large file not read to its end).
    total_lines: Option<u64>,
    /// The `offset` that reads on; null at the end of the file.
    next_offset: Option<u64>,
    /// The last line of the file is shown.
    eof: bool,
    /// Size of the file in bytes.
    size_bytes: u64,
    /// Lines cut at `files.read_max_line_chars` (absent: none).
    cut_lines: Option<u64>,
    /// Invalid UTF-8 sequences shown as U+FFFD (absent: none).
    invalid_utf8: Option<u64>,
    /// `crlf` when a shown line ended in `\r\n` (absent: `\n`).
    line_endings: Option<LineEndings>,
    /// What else to know about the read (where it stopped and why).
    notes: Option<Vec<String>>,
}

/// `read` of an image, fitted to the model's limits.
#[derive(JsonSchema)]
pub struct ReadImage {
    /// `image`.
    kind: ImageKind,
    /// The MIME type of `data` (`image/png`, `image/jpeg`, ...).
    mime_type: String,
    /// Base64 of the encoded image.
    data: String,
    /// Width of the image shown, in pixels.
    width: u32,
    /// Height of the image shown, in pixels.
    height: u32,
    /// The pixels were resized or re-encoded (false: the file's own bytes).
    transformed: bool,
    /// The file's own image.
    source: ImageSource,
    /// How the image was fitted; null when it is the file's own bytes.
    note: Option<String>,
}

/// `read` of an image that could not be made to fit the model's limits.
#[derive(JsonSchema)]
pub struct ReadImageOmitted {
    /// `image_omitted`.
    kind: ImageOmittedKind,
    /// The file's own image.
    source: ImageSource,
    /// Why the image was left out.
    note: Option<String>,
}

/// The image file as it is.
#[derive(JsonSchema)]
struct ImageSource {
    /// Its format (`png`, `jpeg`, `gif`, `webp`, `bmp`).
    format: String,
    /// Width in pixels.
    width: u32,
    /// Height in pixels.
    height: u32,
    /// Size of the file in bytes.
    bytes: u64,
}

#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
enum TextKind {
    Text,
}

#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ImageKind {
    Image,
}

#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ImageOmittedKind {
    ImageOmitted,
}

#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
enum LineEndings {
    Crlf,
}

/// The result of `ls`: a directory's entries, sorted by name.
#[derive(JsonSchema)]
pub struct LsResult {
    /// The directory listed (or the file, listed as its one entry).
    path: String,
    /// The entries, at most `files.ls_max_entries`.
    entries: Vec<LsEntry>,
    /// Entries in the directory (`entries` may hold fewer), protected ones not counted.
    total: u64,
    /// `entries` holds fewer than `total`.
    truncated: bool,
    /// Entries left out because they lie in a protected location (absent: none).
    skipped_protected: Option<u64>,
    /// Why entries were left out.
    notes: Option<Vec<String>>,
}

/// One entry of `ls`.
#[derive(JsonSchema)]
struct LsEntry {
    /// The name; directories end in `/`.
    name: String,
    /// What the entry is (a symlink is not followed).
    #[serde(rename = "type")]
    kind: EntryType,
    /// Size in bytes, for files.
    size: Option<u64>,
    /// Where a symlink points.
    target: Option<String>,
    /// `true` for a file with an execute bit (absent: not executable).
    executable: Option<bool>,
}

#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
enum EntryType {
    File,
    Dir,
    Symlink,
    Other,
}

/// The result of `find`: matching paths, sorted.
#[derive(JsonSchema)]
pub struct FindResult {
    /// The directory searched.
    path: String,
    /// The glob, as given.
    pattern: String,
    /// Matching paths relative to the workdir, sorted; directories end in `/`.
    paths: Vec<String>,
    /// Paths that matched (`paths` may hold fewer).
    total: u64,
    /// `paths` stops at `max_results`.
    truncated: bool,
    /// The search stopped at `files.search_timeout_s`.
    timed_out: bool,
    /// Errors met on the way (unreadable directories, ...).
    errors: Option<Vec<String>>,
    /// Paths left out because they lie in a protected location (absent: none).
    skipped_protected: Option<u64>,
    /// Why paths were left out.
    notes: Option<Vec<String>>,
    /// How many matched and how to see the rest, when truncated.
    note: Option<String>,
}

/// The result of `grep`: matching lines as ripgrep prints them.
#[derive(JsonSchema)]
pub struct GrepResult {
    /// The directory or file searched.
    path: String,
    /// The regex, as given.
    pattern: String,
    /// `path:line:text` for matches, `path-line-text` for context, `--` between groups.
    output: String,
    /// Matching lines shown.
    matches: u64,
    /// Files with a match.
    files_with_matches: u64,
    /// Files searched.
    files_searched: u64,
    /// Binary files skipped.
    skipped_binary: u64,
    /// The search stopped at `max_results`.
    truncated: bool,
    /// The search stopped at `files.search_timeout_s`.
    timed_out: bool,
    /// Errors met on the way (unreadable files, ...).
    errors: Option<Vec<String>>,
    /// What else to know about the search (lines cut, paths left out).
    notes: Option<Vec<String>>,
    /// Paths left out because they lie in a protected location (absent: none).
    skipped_protected: Option<u64>,
}

/// The result of `write`.
#[derive(JsonSchema)]
pub struct WriteResult {
    /// The file written, relative to the workdir.
    path: String,
    /// `created` or `modified`.
    status: ChangeStatus,
    /// Bytes written.
    bytes: u64,
    /// Lines written.
    lines: u64,
    /// Size of the file before; null when it was created.
    previous_bytes: Option<u64>,
    /// New diagnostics of the written file, from its language server.
    diagnostics: Option<WriteDiagnostics>,
}

/// The result of `edit`.
#[derive(JsonSchema)]
pub struct EditResult {
    /// The file edited, relative to the workdir.
    path: String,
    /// Texts replaced.
    replacements: u64,
    /// The line where each replaced text started.
    lines: Vec<u64>,
    /// Unified diff of the edit (3 lines of context).
    diff: String,
    /// What else to know about the edit (line endings matched).
    notes: Option<Vec<String>>,
    /// New diagnostics of the edited file, from its language server.
    diagnostics: Option<WriteDiagnostics>,
}

/// The result of `apply_patch`.
#[derive(JsonSchema)]
pub struct ApplyPatchResult {
    /// The files changed, in the patch's order.
    files: Vec<PatchedFile>,
    /// What else to know (hunks applied at an offset, sections matched loosely, files left
    /// as they were).
    notes: Option<Vec<String>>,
    /// New diagnostics of the files written, from their language servers (absent when the
    /// patch only deleted).
    diagnostics: Option<WriteDiagnostics>,
}

/// One file `apply_patch` changed.
#[derive(JsonSchema)]
struct PatchedFile {
    /// The file, relative to the workdir (a moved file's new path).
    path: String,
    /// `created`, `modified` or `deleted`.
    status: ChangeStatus,
    /// Hunks or sections applied.
    hunks: u64,
    /// Lines added.
    added: u64,
    /// Lines removed.
    removed: u64,
    /// The old path of a moved file.
    moved_from: Option<String>,
}

/// What a write did to a file.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ChangeStatus {
    Created,
    Modified,
    Deleted,
}

/// The result of `tool_result_read`: one page of a stored result.
#[derive(JsonSchema)]
pub struct ToolResultReadResult {
    /// The stored result's ref.
    #[serde(rename = "ref")]
    reference: String,
    /// The characters from `offset` to `next_offset`.
    text: String,
    /// The first character returned.
    offset: u64,
    /// The offset that reads on (`total_chars` at the end).
    next_offset: u64,
    /// Characters in the stored text.
    total_chars: u64,
    /// The page reaches the end of the stored text.
    eof: bool,
    /// The tool whose result it is.
    source_tool: String,
    /// The stored text's type (`text/plain`, `application/json`, `application/x-ndjson`).
    content_type: String,
    /// How the result is kept (`inspectable`, ...).
    storage_kind: String,
    /// Secret names masked in the stored text, with counts.
    masked: BTreeMap<String, u64>,
    /// The limit was lowered so the answer fits one frame.
    envelope_clamped: bool,
}
