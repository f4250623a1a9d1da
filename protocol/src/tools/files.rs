//! Arguments and results of The file and search tools (`read`, `ls`, `find`, `grep`, `write`, `edit`, `apply_patch`) and `tool_result_read`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `read {path, offset?, limit?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// File, relative to the workdir.
    pub path: String,
    /// First line (1-based); negative counts from the end (default 1).
    #[schemars(range(min = i64::MIN, max = i64::MAX))]
    pub offset: Option<i64>,
    /// Number of lines (default 2000; a read also stops at 40000 characters).
    #[schemars(range(min = 1, max = i64::MAX))]
    pub limit: Option<u64>,
}

/// `ls {path?}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsArgs {
    /// Directory (default: the workdir).
    pub path: Option<String>,
}

/// `find {pattern, path?, hidden?, ignored?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    /// Glob.
    pub pattern: String,
    /// Directory to search (default: the workdir).
    pub path: Option<String>,
    /// Include hidden files.
    pub hidden: Option<bool>,
    /// Include files .gitignore and .ignore exclude.
    pub ignored: Option<bool>,
    /// Most paths listed (default 1000); the total is always counted.
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_results: Option<u64>,
}

/// Case sensitivity of `grep`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GrepCase {
    #[default]
    Sensitive,
    Insensitive,
    Smart,
}

/// `grep {pattern, path?, glob?, case?, context?, max_results?, hidden?, ignored?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// Regex.
    pub pattern: String,
    /// File or directory (default: the workdir).
    pub path: Option<String>,
    /// Only files matching these globs, comma-separated, ! excludes (e.g. "*.rs,!*_test.rs").
    pub glob: Option<String>,
    /// Case sensitivity (default sensitive).
    pub case: Option<GrepCase>,
    /// Lines of context around each match (default 0).
    #[schemars(range(min = 0, max = 100))]
    pub context: Option<u64>,
    /// Most matching lines (default 200).
    #[schemars(range(min = 1, max = 100_000))]
    pub max_results: Option<u64>,
    /// Include hidden files.
    pub hidden: Option<bool>,
    /// Include files .gitignore and .ignore exclude.
    pub ignored: Option<bool>,
    /// A match may span lines, as `rg -U`: `\n` in the pattern matches a line break; each
    /// line of a match is shown.
    pub multiline: Option<bool>,
}

/// `write {path, content}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// File.
    pub path: String,
    /// Full content.
    pub content: String,
}

/// `edit {path, old_text, new_text, replace_all?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    /// File.
    pub path: String,
    /// Exact text to replace.
    pub old_text: String,
    /// Replacement.
    pub new_text: String,
    /// Replace every occurrence.
    pub replace_all: Option<bool>,
}

/// `apply_patch {patch}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    /// Unified diff or `*** Begin Patch` patch.
    pub patch: String,
}

/// `tool_result_read {ref, offset?, limit?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResultReadArgs {
    /// Reference from a projected result.
    #[serde(rename = "ref")]
    pub reference: String,
    /// First character.
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// Characters (default 12000).
    #[schemars(range(min = 1, max = 48_000))]
    pub limit: Option<u64>,
}
