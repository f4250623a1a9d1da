//! Arguments and results of The structural tools: `ast_grep`, `ast_edit`, `resolve`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ast_grep {pattern, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AstGrepArgs {
    /// Code pattern with metavariables, e.g. `$A.unwrap()`: `$NAME` one node, `$$$NAME` a
    /// run of siblings, `$_` a wildcard that binds nothing.
    pub pattern: String,
    /// File or directory, relative to the workdir (default: the workdir).
    pub path: Option<String>,
    /// Grammar id: bash, c, cpp, csharp, css, dart, elixir, go, haskell, hcl, html, java,
    /// javascript, json, kotlin, lua, markdown, nix, php, python, ruby, rust, scala,
    /// solidity, swift, tsx, typescript, yaml, zig; inferred from a file path.
    pub language: Option<String>,
    /// Matches listed (default 50); the total is always counted.
    #[schemars(range(min = 1, max = 10_000))]
    pub max_results: Option<u64>,
}

/// `ast_edit {pattern, rewrite, path?, language?, max_results?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AstEditArgs {
    /// Code pattern with metavariables.
    pub pattern: String,
    /// Replacement template; $NAME and $$$NAME are replaced by what the pattern captured.
    pub rewrite: String,
    /// File or directory, relative to the workdir (default: the workdir).
    pub path: Option<String>,
    /// Grammar id (see ast_grep); inferred from a file path.
    pub language: Option<String>,
    /// Most replacements to stage (default 50); more is refused, never staged in part.
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
    /// Id returned by ast_edit, e.g. "edit_1".
    pub edit_id: String,
    /// accept writes the staged change; discard drops it.
    pub action: ResolveAction,
}
