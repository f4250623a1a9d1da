//! The `eval` handler: runs a cell on the conversation's kernel (`toolvisor_kernel`) with
//! the cell's `tool()` bridge, which its caller supplies (`Caller::bridge`: the session's
//! bridge goes back into the registry through the same gates as a model-issued call of that
//! conversation, or out to the client for its `bridge_tools`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use toolvisor_files::secrets::Secrets;
use toolvisor_kernel::{Bridge, CellRequest, Kernels, Language};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::EvalResult;
use toolvisor_protocol::tools::{EvalArgs, EvalLanguage};
use toolvisor_protocol::wire::Event;

use super::{CallCtx, Services};
use crate::config::KernelsConfig;

/// `eval`'s context: the kernels, their configuration, the secrets streamed output is
/// masked with, and the cell's `tool()` bridge.
pub(crate) struct EvalTools<'a> {
    pub kernels: &'a Kernels,
    pub config: &'a KernelsConfig,
    pub secrets: &'a Secrets,
    pub bridge: Arc<dyn Bridge>,
}

impl<'a> EvalTools<'a> {
    /// The context of the eval call `ctx`, with the bridge its caller gives the cell.
    pub fn of(services: &'a Services, ctx: &CallCtx) -> Self {
        EvalTools {
            kernels: &services.kernels,
            config: &services.config.kernels,
            secrets: services.secrets(),
            bridge: ctx.caller.bridge(ctx),
        }
    }
}

/// The approval prompt's line: language, description, first line of code.
fn summary(_: &Services, _: &CallCtx, a: &EvalArgs) -> String {
    let language = serde_json::to_value(a.language.unwrap_or_default())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "python".into());
    let first = a.code.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    format!("eval {language}: {} | {first}", a.description)
}

pub(crate) async fn run(
    cx: &EvalTools<'_>,
    ctx: &CallCtx,
    args: EvalArgs,
) -> Result<EvalResult, ToolError> {
    let config = cx.config;
    let timeout_s = args.timeout_s.unwrap_or(config.inactivity_s);
    if timeout_s == 0 || timeout_s > config.inactivity_max_s {
        return Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!(
                "eval: timeout_s = {timeout_s} is outside 1..={} (kernels.inactivity_max_s)",
                config.inactivity_max_s
            ),
            "output resets the budget: print progress from long cells, or run long work as a `process`",
        ));
    }
    let (language, typescript) = match args.language.unwrap_or_default() {
        EvalLanguage::Python => (Language::Python, false),
        EvalLanguage::Javascript => (Language::Javascript, false),
        EvalLanguage::Typescript => (Language::Javascript, true),
    };
    let request = CellRequest {
        conversation: ctx.conversation.clone(),
        language,
        code: args.code,
        typescript,
        reset: args.reset.unwrap_or(false),
        inactivity: Duration::from_secs(timeout_s),
        workdir: ctx.workdir.clone(),
    };
    tracing::info!(conversation = ctx.conversation, call = ctx.id, %language, description = args.description, "eval cell");
    let (tx, mut rx) = mpsc::channel(64);
    let running = cx.kernels.run(request, cx.bridge.clone(), Some(tx));
    tokio::pin!(running);
    let result = loop {
        tokio::select! {
            result = &mut running => break result,
            Some((stream, text)) = rx.recv() => {
                let text = super::files::mask_stream(cx.secrets, text);
                ctx.event(Event::Output { stream, text }).await
            }
        }
    };
    while let Ok((stream, text)) = rx.try_recv() {
        let text = super::files::mask_stream(cx.secrets, text);
        ctx.event(Event::Output { stream, text }).await;
    }
    result.map_err(|e| e.to_tool_error())
}
/// The `eval` tool's declaration.
pub(crate) fn declare() -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::{Approval, ToolSpec};

    vec![
        ToolSpec::new(
            "eval",
            Tier::Exec,
            "kernels",
            "Run a cell in this conversation's persistent Python, JavaScript or TypeScript kernel; figures come back; tool(name, args) calls tools.",
            |s, ctx, a| Box::pin(async move { run(&EvalTools::of(s, ctx), ctx, a).await }),
        )
        .open_world()
        .long_running()
        .passage(super::spec::Passage::FieldWhole("images"))
        .serial()
        .approval(Approval::Always)
        .summary(summary),
    ]
}
