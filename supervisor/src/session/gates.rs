//! The gates every call passes before its tool runs — registry (unknown tool, policy,
//! surface, attachment), argument schema, the one parse of the arguments (which the
//! per-operation tier and the approval rule read), approval — each denial audited.
//! Calls from the wire and `tool()` calls from eval cells both come through [`execute`].

use super::*;
use crate::tools::CallCtx;

/// Gates, then the tool: registry (unknown, surface, policy, attachment: `checked`, the
/// call's one lookup, `Registry::check` of `tool` for this session), arguments, approval.
/// Every denial is audited. `tool()` calls from eval cells come through here too, with the
/// cell's call context (its session, conversation and call id).
pub(crate) async fn execute(
    daemon: &Arc<Daemon>,
    session: &Arc<Session>,
    ctx: &CallCtx,
    tool: &str,
    checked: Result<Arc<crate::tools::ToolSpec>, ToolError>,
    args: Value,
) -> Result<serde_json::Value, ToolError> {
    let audit = |event: &str, reason: &str| {
        daemon
            .audit()
            .record(event, &ctx.conversation, session.id, ctx.id, tool, reason)
    };
    let spec = match checked {
        Ok(spec) => spec,
        Err(err) => {
            match err.kind {
                ErrorKind::PolicyDenied => {
                    tracing::warn!(
                        tool,
                        conversation = ctx.conversation,
                        session = session.id,
                        "call denied by policy"
                    );
                    audit("policy_denied", &err.message);
                }
                ErrorKind::SurfaceDenied => {
                    tracing::warn!(
                        tool,
                        conversation = ctx.conversation,
                        session = session.id,
                        "call above the client's surface refused"
                    );
                    audit("surface_denied", &err.message);
                }
                _ => {}
            }
            return Err(err);
        }
    };
    let args = args.into_inner();
    validate(tool, &spec.schema, &args)?;
    // The one parse: the handler, the tier and the approval rule all read its result.
    let call = spec.prepare(&args)?;
    let tier = call.tier;
    if tier > session.hello.surface.max_tier {
        let err = ToolError::new(
            ErrorKind::SurfaceDenied,
            format!(
                "`{tool}` with op `{}` is {tier} tier, above this client's surface ({})",
                args.get("op")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or(""),
                session.hello.surface.max_tier
            ),
            format!("connect with a surface of at least `{tier}` to use it"),
        );
        audit("surface_denied", &err.message);
        return Err(err);
    }
    if call.needs_approval {
        let by = approve(daemon, session, ctx, tier, &spec, &call, &args)
            .await
            .inspect_err(|err| {
                tracing::info!(
                    tool,
                    conversation = ctx.conversation,
                    session = session.id,
                    reason = err.message,
                    "call not approved"
                );
                audit("approval_denied", &err.message);
            })?;
        // Who approved is on record too: a person, or (toolvisor mcp --approvals harness) the
        // MCP client the operator delegated approval to.
        audit("approved", &by);
    }
    crate::tools::run(daemon.services(), ctx, &spec, call).await
}

async fn approve(
    daemon: &Arc<Daemon>,
    session: &Session,
    ctx: &CallCtx,
    tier: toolvisor_protocol::wire::Tier,
    spec: &crate::tools::ToolSpec,
    call: &crate::tools::spec::Parsed,
    args: &serde_json::Value,
) -> Result<String, ToolError> {
    let tool = spec.name;
    if !session.hello.surface.approvals {
        return Err(ToolError::new(
            ErrorKind::ApprovalDenied,
            format!("`{tool}` needs approval and this client has no approval handler"),
            "connect with `surface.approvals = true` and answer ApprovalRequest frames (CLI: `toolvisor call --approve`)",
        ));
    }
    if session.reader_closed.load(Ordering::Relaxed) {
        return Err(ToolError::new(
            ErrorKind::ApprovalDenied,
            format!("`{tool}` needs approval and the client has closed its side of the connection"),
            "keep the connection open until every call that may need approval has its result",
        ));
    }
    let request_id = daemon.next_request_id();
    let (tx, rx) = oneshot::channel();
    lock(&session.approvals).insert(request_id, tx);
    // However this function ends (answer, timeout, cancellation), the request is withdrawn,
    // so a late answer gets a clear `not_found` instead of vanishing.
    struct Withdraw<'a>(&'a Session, u64);
    impl Drop for Withdraw<'_> {
        fn drop(&mut self) {
            lock(&self.0.approvals).remove(&self.1);
        }
    }
    let _withdraw = Withdraw(session, request_id);
    let request = DaemonFrame::ApprovalRequest(ApprovalRequest {
        request_id,
        call_id: ctx.id,
        conversation: ctx.conversation.clone(),
        tool: tool.to_string(),
        tier,
        summary: spec.approval_summary(daemon.services(), ctx, call, args),
        args: Value(args.clone()),
    });
    if session.out.send(request).await.is_err() {
        lock(&session.approvals).remove(&request_id);
        return Err(ToolError::new(
            ErrorKind::ApprovalDenied,
            "the client went away before approving",
            "reconnect and call again",
        ));
    }
    let timeout = Duration::from_secs(daemon.config().approval_timeout_s);
    let answer = tokio::time::timeout(timeout, rx).await;
    lock(&session.approvals).remove(&request_id);
    match answer {
        Ok(Ok(a)) if a.approved => Ok(a
            .reason
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| format!("approved by the client (session {})", session.id))),
        Ok(Ok(a)) => Err(ToolError::new(
            ErrorKind::ApprovalDenied,
            format!(
                "`{tool}` was not approved{}",
                a.reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
            "do not retry the same call; change the plan or ask the user",
        )),
        Ok(Err(_)) => Err(ToolError::new(
            ErrorKind::ApprovalDenied,
            "the client closed before answering the approval request",
            "reconnect and call again",
        )),
        Err(_) => Err(ToolError::new(
            ErrorKind::ApprovalDenied,
            format!(
                "no answer to the approval request within {} s",
                timeout.as_secs()
            ),
            "answer ApprovalRequest frames promptly, or raise approval_timeout_s",
        )),
    }
}
