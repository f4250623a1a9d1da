//! The `debug` handler: parses the arguments and names the caller (conversation, workdir);
//! the work is in `toolvisor-dap`. Runs in the conversation's lane (`debug` is not
//! parallel-safe), so one conversation's ops reach its session strictly in order.

use serde_json::Value as Json;
use toolvisor_dap::{DebugCall, Debuggers};
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::tools::DebugArgs;

use super::CallCtx;

/// `debug` needs only the debuggers.
pub async fn run(debug: &Debuggers, ctx: &CallCtx, args: Json) -> Result<Json, ToolError> {
    let args: DebugArgs = super::parse("debug", args)?;
    let call = DebugCall {
        conversation: ctx.conversation.clone(),
        workdir: ctx.workdir.clone(),
    };
    tracing::info!(conversation = ctx.conversation, call = ctx.id, op = ?args.op, "debug");
    debug.run(&call, args).await
}
