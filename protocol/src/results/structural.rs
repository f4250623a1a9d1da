//! The results of the structural tools: `ast_grep`, `ast_edit`, `resolve`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tools::ResolveAction;

/// The result of `ast_grep`: the matches listed (the first `max_results`, by path and
/// position), the total count and what was searched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AstGrepResult {
    /// One line: how many matches in how many files (and whether the list was cut).
    pub summary: String,
    /// The grammar id searched (e.g. `python`).
    pub language: String,
    /// How the language was inferred for a directory; null when given or from a file.
    pub language_note: Option<String>,
    /// The context the pattern was parsed in, where it is not valid code on its own.
    pub pattern_context: Option<String>,
    /// The matches shown, ordered by path and position.
    pub matches: Vec<AstMatch>,
    /// Every match, including those not shown.
    pub total: u64,
    /// Matches listed in `matches`.
    pub shown: u64,
    /// `total > shown`: raise max_results or narrow path to see the rest.
    pub truncated: bool,
    /// Files of the language under the path (after ignore rules).
    pub files_searched: u64,
    /// Of those, the files parsed (the others lack the pattern's literal text).
    pub files_parsed: u64,
    /// Of those, the files answered from an earlier search of the same file version.
    pub files_cached: u64,
    /// Files with at least one match.
    pub files_matched: u64,
    /// Up to 20 files not searched, with why.
    pub skipped: Vec<AstSkipped>,
    /// Every file not searched.
    pub skipped_total: u64,
}

/// One structural match.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AstMatch {
    /// `path:line:column`, 1-based.
    pub location: String,
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// 1-based line of the match's start.
    pub line: u64,
    /// 1-based column of the match's start, in characters.
    pub column: u64,
    /// 1-based line of the match's end.
    pub end_line: u64,
    /// 1-based column of the match's end, in characters.
    pub end_column: u64,
    /// The matched text (at most 400 characters, then `…[+N chars]`).
    pub text: String,
    /// Metavariable name → captured text (at most 200 characters each).
    pub captures: BTreeMap<String, String>,
}

/// A file that was not searched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AstSkipped {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// Why: not UTF-8, too large, unreadable, a symbolic link.
    pub why: String,
}

/// The result of `ast_edit`: the staged edit (nothing is written until `resolve`), or
/// `edit_id` null when nothing would change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AstEditResult {
    /// The staged edit's id for `resolve` (`edit_N`); null when nothing was staged.
    pub edit_id: Option<String>,
    /// One line: replacements per file and how to resolve the edit.
    pub summary: String,
    /// Replacements staged.
    pub replacements: u64,
    /// The files the edit changes, with their replacements.
    pub files: Vec<AstEditFile>,
    /// The unified diff (two lines of context), cut after about 6000 characters; absent when nothing was staged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// Whether `preview` was cut; absent when nothing was staged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview_truncated: Option<bool>,
    /// The grammar id searched.
    pub language: String,
    /// How the language was inferred for a directory; null when given or from a file.
    pub language_note: Option<String>,
    /// The context the pattern was parsed in, where it is not valid code on its own.
    pub pattern_context: Option<String>,
    /// Matches not rewritten: nested inside another replaced match, or already the rewrite.
    pub notes: Vec<String>,
    /// Files of the language under the path (after ignore rules).
    pub files_searched: u64,
    /// Up to 20 files not searched, with why.
    pub skipped: Vec<AstSkipped>,
    /// Every file not searched.
    pub skipped_total: u64,
}

/// One file of a staged edit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AstEditFile {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// Replacements in it.
    pub replacements: u64,
}

/// The result of `resolve`: the edit accepted (every file written) or discarded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResolveResult {
    /// The edit resolved.
    pub edit_id: String,
    /// What was done with it.
    pub action: ResolveAction,
    /// One line: what was written or dropped.
    pub summary: String,
    /// discard: the files the dropped edit would have changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<String>>,
    /// accept: the files written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub written: Option<Vec<String>>,
    /// accept: replacements written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replacements: Option<u64>,
    /// accept: the language servers' diagnostics new for this run in the written files and their dependents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<super::lsp::WriteDiagnostics>,
}
