//! Arguments and results of The structural tools: `ast_grep`, `ast_edit`, `resolve`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ast_grep {pattern, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AstGrepArgs {
    /// Code pattern, e.g. `$A.unwrap()`.
    pub pattern: String,
    /// Default: the workdir.
    pub path: Option<String>,
    /// Grammar id (python, rust, tsx, go, ...); default: by path.
    pub language: Option<String>,
    /// Default 50; all are counted.
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: Option<u64>,
}

/// `ast_edit {pattern, rewrite, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AstEditArgs {
    pub pattern: String,
    /// $NAME and $$$NAME become their captures.
    pub rewrite: String,
    /// Default: the workdir.
    pub path: Option<String>,
    /// Default: by path.
    pub language: Option<String>,
    /// Default 50; more is refused.
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: Option<u64>,
}

/// What `resolve` does with a staged edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResolveAction {
    Accept,
    Discard,
}

/// `resolve {edit_id, action}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveArgs {
    pub edit_id: String,
    pub action: ResolveAction,
}
