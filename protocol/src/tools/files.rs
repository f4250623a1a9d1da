//! Arguments and results of The file and search tools (`read`, `ls`, `find`, `grep`, `write`, `edit`, `apply_patch`) and `tool_result_read`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `read {path, offset?, limit?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    pub path: String,
    /// First line, 1-based; negative counts from the end.
    #[schemars(range(min = i64::MIN, max = i64::MAX))]
    pub offset: Option<i64>,
    /// Lines (default 2000).
    #[schemars(range(min = 1, max = i64::MAX))]
    pub limit: Option<u64>,
}

/// `ls {path?}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsArgs {
    /// Default: the workdir.
    pub path: Option<String>,
}

/// `find {pattern, path?, hidden?, ignored?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    pub pattern: String,
    /// Default: the workdir.
    pub path: Option<String>,
    pub hidden: Option<bool>,
    pub ignored: Option<bool>,
    /// Default 1000; all are counted.
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
    pub pattern: String,
    /// Default: the workdir.
    pub path: Option<String>,
    /// Comma-separated globs; ! excludes ("*.rs,!*_test.rs").
    pub glob: Option<String>,
    pub case: Option<GrepCase>,
    #[schemars(range(min = 0, max = 100))]
    pub context: Option<u64>,
    /// Default 200.
    #[schemars(range(min = 1, max = 100_000))]
    pub max_results: Option<u64>,
    pub hidden: Option<bool>,
    pub ignored: Option<bool>,
    /// A match may span lines (`rg -U`).
    pub multiline: Option<bool>,
}

/// `write {path, content}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    pub path: String,
    pub content: String,
}

/// `edit {path, old_text, new_text, replace_all?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    pub path: String,
    /// Must match once unless replace_all.
    pub old_text: String,
    pub new_text: String,
    pub replace_all: Option<bool>,
}

/// `apply_patch {patch}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPatchArgs {
    pub patch: String,
}

/// `tool_result_read {ref, offset?, limit?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResultReadArgs {
    #[serde(rename = "ref")]
    pub reference: String,
    #[schemars(range(min = 0, max = i64::MAX))]
    pub offset: Option<u64>,
    /// Characters (default 12000).
    #[schemars(range(min = 1, max = 48_000))]
    pub limit: Option<u64>,
}
