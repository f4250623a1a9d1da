//! The session's side of a running call as tool handlers see it (`tools::Caller`): its
//! events go into the connection's outbox, and an eval cell's `tool()` bridge leads back
//! into the registry through the gates (`execute`), or out to the client for its
//! `bridge_tools`. This is the one back-edge from the tools into the session, behind traits.
//!
//! A cell's `tool()` call of the daemon's own registry runs through `execute`: the same gates as a
//! model's call, with the cell's session and call id, inline in the cell's lane turn, never queued
//! on the lane the cell holds (that would wait on the cell itself). A tool among the client's
//! `bridge_tools` is forwarded to the client, with the operator's policy and the client's tier
//! still checked here. `tool("eval")` is refused by the kernel (`toolvisor_kernel::Kernels`).

use toolvisor_kernel::{Bridge, BridgeFuture};

use super::*;
use crate::tools::{BoxFuture, CallCtx, Caller};

/// The caller of one call: the daemon and the session it came from.
pub(crate) struct SessionCaller {
    pub daemon: Arc<Daemon>,
    pub session: Arc<Session>,
}

impl SessionCaller {
    /// The context of call `id` of `session` for `conversation`, in `workdir`.
    pub fn ctx(
        daemon: &Arc<Daemon>,
        session: &Arc<Session>,
        id: u64,
        conversation: String,
        workdir: std::path::PathBuf,
    ) -> CallCtx {
        CallCtx {
            id,
            conversation,
            workdir,
            run_id: session.hello.run_id.clone(),
            surface: session.hello.surface.max_tier,
            caller: Arc::new(SessionCaller {
                daemon: daemon.clone(),
                session: session.clone(),
            }),
        }
    }
}

impl Caller for SessionCaller {
    fn event(&self, call: u64, event: Event) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self
                .session
                .out
                .send(DaemonFrame::Event { id: call, event })
                .await;
        })
    }

    fn bridge(&self, ctx: &CallCtx) -> Arc<dyn Bridge> {
        Arc::new(CellBridge {
            daemon: self.daemon.clone(),
            session: self.session.clone(),
            call_id: ctx.id,
            conversation: ctx.conversation.clone(),
            workdir: ctx.workdir.clone(),
        })
    }
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
    fn call(&self, tool: String, args: serde_json::Value) -> BridgeFuture {
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
                if daemon.registry().is_denied(&tool) {
                    let why = format!("tool `{tool}` is denied by the operator's policy");
                    daemon.audit().record(
                        "policy_denied",
                        &conversation,
                        session.id,
                        call_id,
                        &tool,
                        &why,
                    );
                    return Err(ToolError::new(
                        ErrorKind::PolicyDenied,
                        why,
                        "do not retry; ask the operator if the tool is needed",
                    ));
                }
                if let Some(spec) = daemon.registry().get(&tool)
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
                let timeout = Duration::from_secs(daemon.config().kernels.bridge_timeout_s);
                return session
                    .forward_bridge(&daemon, call_id, &conversation, &tool, args, timeout)
                    .await;
            }
            // A call of the daemon's own registry: the same gates as a model's call, run
            // inline in the cell's lane turn (waiting on the lane would wait on this cell).
            let ctx = SessionCaller::ctx(&daemon, &session, call_id, conversation, workdir);
            let checked = daemon.registry().check(&tool, &session.hello.surface);
            execute(&daemon, &session, &ctx, &tool, checked, Value(args)).await
        })
    }
}
