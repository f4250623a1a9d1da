//! The MCP methods of a session ([`ServerHandler`] for [`Bridge`]): `tools/list` is the daemon's
//! list for the run's surface, `tools/call` a daemon call (`calls.rs`), tasks are read and
//! cancelled in [`crate::tasks`], and `resources/read` of `toolvisor://result/<ref>` goes through
//! `tool_result_read`.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, GetTaskResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerConfig, TASKS_EXTENSION_ID,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value as Json, json};
use toolvisor_protocol::ErrorKind;
use toolvisor_protocol::wire::Outcome;

use crate::bridge::{Bridge, daemon_unreachable, mcp_tool, visible};
use crate::{HANDLE_KEY, content};

/// The server instructions, which harnesses pass on to the model (Claude Code does): only what changes what
/// a model does (how to get the rest of a result cut short, where relative paths start). What
/// a client program needs (the 2026 conversation handle, resource links) is in
/// docs/OPERATIONS.md, not in every prompt.
pub const INSTRUCTIONS: &str = "A large result comes back cut short, with a ref (tr_…) to the whole: call tool_result_read with that ref (offset to page on) when you need the rest. Relative paths start at the run's workdir.";

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": ProtocolVersion::V_2026_07_28,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {},
                "extensions": {TASKS_EXTENSION_ID: {}},
            },
            "serverInfo": {"name": "toolvisor", "version": env!("CARGO_PKG_VERSION")},
            "instructions": INSTRUCTIONS,
        }))
        .unwrap_or_default()
    }

    /// 2026-07-28 (stateless: no initialize, per-request `_meta`, `server/discover`, MRTR,
    /// the Tasks extension) and every revision before it, negotiated per request.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2026_07_28))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (shared, handle) = self
            .scope(&ctx, request.as_ref().and_then(|r| r.meta.as_ref()))
            .await?;
        let conn = self.conn_of(&shared, &ctx.peer).await?;
        let tools = conn
            .list_tools()
            .await
            .map_err(|e| daemon_unreachable(&e))?;
        let list: Vec<Json> = visible(&tools)
            .into_iter()
            .map(|t| mcp_tool(t, self.runs.opts().structured))
            .collect();
        let mut result = json!({ "tools": list, "resultType": "complete" });
        if let Some(h) = handle {
            result["_meta"] = json!({ HANDLE_KEY: h });
        }
        serde_json::from_value(result).map_err(|e| {
            ErrorData::internal_error(format!("a daemon tool did not fit MCP's Tool: {e}"), None)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        crate::calls::call_tool(self, request, ctx).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.runs.tasks.get(&request.task_id)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.runs.tasks.cancel(&request.task_id)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // Stored results are reached by the links in call results, not enumerated.
        serde_json::from_value(json!({"resources": [], "resultType": "complete"}))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        serde_json::from_value(json!({"resourceTemplates": [{
            "uriTemplate": "toolvisor://result/{ref}{?offset,limit}",
            "name": "stored result",
            "description": "A large tool result stored by the daemon, read by pages of characters (tool_result_read).",
            "mimeType": "text/plain",
        }], "resultType": "complete"}))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let page = content::parse_result_uri(&request.uri).map_err(|e| {
            ErrorData::invalid_params(e.message.clone(), Some(content::error_json(&e)))
        })?;
        let (shared, _) = self.scope(&ctx, request.meta.as_ref()).await?;
        let conn = self.conn_of(&shared, &ctx.peer).await?;
        let outcome = conn
            .call(&shared.conversation, "tool_result_read", page.args())
            .await
            .map_err(|e| daemon_unreachable(&e))?;
        match outcome {
            Outcome::Ok(v) => {
                let read: ReadResourceResult =
                    serde_json::from_value(content::resource_page(&request.uri, &page, &v.0))
                        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                Ok(read.into())
            }
            Outcome::Err(e) => Err(match e.kind {
                ErrorKind::NotFound | ErrorKind::InvalidRef | ErrorKind::Expired => {
                    ErrorData::resource_not_found(e.to_string(), Some(content::error_json(&e)))
                }
                _ => ErrorData::invalid_params(e.to_string(), Some(content::error_json(&e))),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::Runs;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn the_instructions_say_only_what_changes_what_a_model_does() {
        let opts = Arc::new(crate::Options {
            socket: "/nonexistent".into(),
            surface: toolvisor_protocol::wire::Tier::Read,
            conversation: None,
            run_id: None,
            workdir: "/w".into(),
            poll: Duration::from_secs(1),
            approvals: crate::Approvals::Elicit,
            questions: crate::Questions::None,
            structured: false,
            images: crate::Images::Auto,
            run_token: None,
            renderer: Default::default(),
        });
        let info =
            serde_json::to_value(Bridge::new(opts.clone(), Runs::new(opts)).get_info()).unwrap();
        let text = info["instructions"].as_str().unwrap();
        assert!(text.contains("tool_result_read"), "{text}");
        // Client plumbing a model never sends: 2026 handles, resources/read.
        assert!(
            !text.contains("_meta") && !text.contains("resources/read"),
            "{text}"
        );
        assert!(
            text.chars().count() <= 200,
            "{} characters: {text}",
            text.chars().count()
        );
    }
}
