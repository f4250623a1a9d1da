//! Arguments and results of `eval`: a cell of a persistent kernel.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The language of an `eval` kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvalLanguage {
    #[default]
    Python,
    Javascript,
    /// TypeScript, run in the conversation's JavaScript kernel once its types are stripped.
    Typescript,
}

/// `eval {code, description, language?, reset?, timeout_s?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalArgs {
    pub code: String,
    /// 5-10 words saying what the cell does.
    #[schemars(extend("minWords" = 5, "maxWords" = 10))]
    pub description: String,
    /// Default: python.
    pub language: Option<EvalLanguage>,
    pub reset: Option<bool>,
    /// Seconds without output (default 300, max 3600).
    #[schemars(range(min = 1, max = 86_400))]
    pub timeout_s: Option<u64>,
}
