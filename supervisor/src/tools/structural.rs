//! Handlers of the structural tools: `ast_grep`, `ast_edit`, `resolve`.

use std::sync::Arc;

use serde_json::Value as Json;
use toolvisor_protocol::error::ToolError;

use crate::daemon::Daemon;
use crate::registry::ToolSpec;
use crate::session::CallCtx;

pub async fn run(
    _daemon: &Arc<Daemon>,
    _ctx: &CallCtx,
    spec: &ToolSpec,
    _args: Json,
) -> Result<Json, ToolError> {
    Err(super::no_worker(spec.name))
}
