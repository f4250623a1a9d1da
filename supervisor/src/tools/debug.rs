//! The `debug` handler: parses the arguments and names the caller (conversation, workdir);
//! the work is in `toolvisor-dap`. Runs in the conversation's lane (`debug` is not
//! parallel-safe), so one conversation's ops reach its session strictly in order.

use toolvisor_dap::{DebugCall, Debuggers};
use toolvisor_protocol::error::ToolError;
use toolvisor_protocol::results::DebugResult;
use toolvisor_protocol::tools::DebugArgs;

use super::CallCtx;

/// `debug` needs only the debuggers.
pub(crate) async fn run(
    debug: &Debuggers,
    ctx: &CallCtx,
    args: DebugArgs,
) -> Result<DebugResult, ToolError> {
    let call = DebugCall {
        conversation: ctx.conversation.clone(),
        workdir: ctx.workdir.clone(),
    };
    tracing::info!(conversation = ctx.conversation, call = ctx.id, op = ?args.op, "debug");
    debug.run(&call, args).await
}

/// The `debug` tool's declaration.
pub(crate) fn declare() -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::tools::{DebugArgs, DebugOp};
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    // Attached: the debug_adapters supervisor is part of every daemon; which adapters can
    // run for a checkout is `adapters`' business, not the surface's.
    vec![
        ToolSpec::new(
            "debug",
            Tier::Exec,
            "debug_adapters",
            "Debug a program (debugpy .py, lldb-dap native, delve .go), one session per conversation; breakpoints may precede launch.",
            |s, ctx, a: DebugArgs| Box::pin(run(&s.debug, ctx, a)),
        ).open_world()
        .serial()
        .approval(Approval::ops(&[
            DebugOp::Launch,
            DebugOp::Attach,
            DebugOp::Continue,
            DebugOp::Pause,
            DebugOp::StepOver,
            DebugOp::StepIn,
            DebugOp::StepOut,
            DebugOp::Evaluate,
            DebugOp::Terminate,
            DebugOp::Restart,
            DebugOp::SetVariable,
            DebugOp::RunTo,
        ])),
    ]
}
