//! The results of the human tools: `ask_user` and the `vibe_*` background workers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::tools::VibeInfo;

// `ask_user`'s and the single-worker `vibe_*` tools' results are their serialized types,
// `tools::AskUserOutput` and `tools::VibeInfo`, which derive their schemas.

/// The result of `vibe_list`: this conversation's workers, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VibeListResult {
    /// Each worker's info, its result cut to a preview.
    pub workers: Vec<VibeInfo>,
}
