//! The `eval` handler: runs a cell on the conversation's kernel (`toolvisor_kernel`) and
//! gives the cell its `tool()` bridge back into the registry, through the same gates as a
//! model-issued call of that conversation, or out to the client for its `bridge_tools`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value as Json;
use tokio::sync::mpsc;
use toolvisor_kernel::{Bridge, BridgeFuture, CellRequest, Language};
use toolvisor_protocol::Value;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::tools::{EvalArgs, EvalLanguage};
use toolvisor_protocol::wire::Event;

use super::parse;
use crate::daemon::Daemon;
use crate::session::{CallCtx, Session};

/// The approval prompt's line: language, description, first line of code.
pub fn summary(args: &Json) -> String {
    let field = |k: &str| args.get(k).and_then(Json::as_str).unwrap_or("");
    let language = match field("language") {
        "" => "python",
        other => other,
    };
    let first = field("code")
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    format!("eval {language}: {} | {first}", field("description"))
}

pub async fn run(daemon: &Arc<Daemon>, ctx: &CallCtx, args: Json) -> Result<Json, ToolError> {
    let args: EvalArgs = parse("eval", args)?;
    let config = &daemon.config.kernels;
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
    let language = match args.language.unwrap_or_default() {
        EvalLanguage::Python => Language::Python,
        EvalLanguage::Javascript => Language::Javascript,
    };
    let request = CellRequest {
        conversation: ctx.conversation.clone(),
        language,
        code: args.code,
        reset: args.reset.unwrap_or(false),
        inactivity: Duration::from_secs(timeout_s),
        workdir: ctx.workdir.clone(),
    };
    tracing::info!(conversation = ctx.conversation, call = ctx.id, %language, description = args.description, "eval cell");
    let bridge = Arc::new(CellBridge {
        daemon: daemon.clone(),
        session: ctx.session.clone(),
        call_id: ctx.id,
        conversation: ctx.conversation.clone(),
        workdir: ctx.workdir.clone(),
    });
    let (tx, mut rx) = mpsc::channel(64);
    let running = daemon.kernels.run(request, bridge, Some(tx));
    tokio::pin!(running);
    let result = loop {
        tokio::select! {
            result = &mut running => break result,
            Some((stream, text)) = rx.recv() => {
                let text = super::files::mask_stream(daemon, text);
                ctx.event(Event::Output { stream, text }).await
            }
        }
    };
    while let Ok((stream, text)) = rx.try_recv() {
        let text = super::files::mask_stream(daemon, text);
        ctx.event(Event::Output { stream, text }).await;
    }
    result.map_err(|e| e.to_tool_error())
}

/// `tool(name, args)` of one cell.
struct CellBridge {
    daemon: Arc<Daemon>,
    session: Arc<Session>,
    /// The eval call the cell belongs to (approval requests and bridge calls name it).
    call_id: u64,
    conversation: String,
    workdir: std::path::PathBuf,
}

impl Bridge for CellBridge {
    fn call(&self, tool: String, args: Json) -> BridgeFuture {
        let daemon = self.daemon.clone();
        let session = self.session.clone();
        let call_id = self.call_id;
        let conversation = self.conversation.clone();
        let workdir = self.workdir.clone();
        Box::pin(async move {
            let surface = &session.hello.surface;
            if surface.bridge_tools.iter().any(|t| t == &tool) {
                // The client runs this tool itself and applies its own approvals; the
                // operator's policy and the client's tier still hold here.
                if daemon.registry.is_denied(&tool) {
                    let why = format!("tool `{tool}` is denied by the operator's policy");
                    daemon
                        .audit
                        .record("policy_denied", &conversation, session.id, &tool, &why);
                    return Err(ToolError::new(
                        ErrorKind::PolicyDenied,
                        why,
                        "do not retry; ask the operator if the tool is needed",
                    ));
                }
                if let Some(spec) = daemon.registry.get(&tool)
                    && spec.tier > surface.max_tier
                {
                    return Err(ToolError::new(
                        ErrorKind::SurfaceDenied,
                        format!(
                            "tool `{tool}` is {} tier, above this client's surface ({})",
                            spec.tier, surface.max_tier
                        ),
                        format!(
                            "connect with a surface of at least `{}` to use it",
                            spec.tier
                        ),
                    ));
                }
                let timeout = Duration::from_secs(daemon.config.kernels.bridge_timeout_s);
                return session
                    .forward_bridge(&daemon, call_id, &conversation, &tool, args, timeout)
                    .await;
            }
            // A call of the daemon's own registry: the same gates as a model's call, run
            // inline in the cell's lane turn (waiting on the lane would wait on this cell).
            let ctx = CallCtx {
                id: call_id,
                conversation,
                workdir,
                session,
            };
            crate::session::execute(&daemon, &ctx, &tool, Value(args)).await
        })
    }
}

/// The `eval` tool's declaration.
pub(crate) fn declare() -> Vec<crate::registry::ToolSpec> {
    use toolvisor_protocol::tools::EvalArgs;
    use toolvisor_protocol::wire::Tier;

    use crate::registry::{Approval, ToolSpec};

    vec![
        ToolSpec::new::<EvalArgs>(
            "eval",
            Tier::Exec,
            "kernels",
            "Run a cell in a persistent Python or JavaScript kernel of this conversation: variables, imports and loaded data persist between calls; the last expression is echoed; display(), pandas tables and matplotlib figures come back as outputs; %pip, %cd, !cmd, %%bash and %%timeit work; tool(name, args) calls this registry from the cell.",
        )
        .serial()
        .approval(Approval::Always),
    ]
}
