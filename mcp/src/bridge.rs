//! One MCP session bridged to one daemon connection (one run): the session's state
//! ([`Bridge`]), the run a request belongs to (the session's, or a 2026-07-28 client's handle in
//! [`Runs`]), the MCP tool entries of the daemon's tools, and a watcher that sends
//! `notifications/tools/list_changed` when the daemon's list changes. The MCP methods on it are
//! `handler.rs`; `tools/call` is `calls.rs`.
//!
//! The daemon connection is made after `initialize` (so the `Hello` can say whether the client
//! answers questions) and again after the daemon went away.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::{Value as Json, json};
use tokio_util::sync::CancellationToken;
use toolvisor_protocol::wire::ToolInfo;

use crate::daemon::DaemonConn;
use crate::runs::{Runs, Shared, valid_handle};
use crate::{BridgeError, HANDLE_KEY, Options};

/// One MCP session's handler (for a 2026-07-28 client over HTTP, one request's). Dropping it
/// (the session ended) stops its tool-list watcher and closes its daemon connection; the
/// runs of 2026 clients live in [`Runs`] instead and outlive it.
pub struct Bridge {
    shared: Arc<Shared>,
    pub(crate) runs: Arc<Runs>,
    /// This session's own name: a 2026 request over stdio that names no handle belongs to
    /// it (one client for the process's life); over HTTP such a request gets a fresh one.
    session: String,
    single: bool,
    stop: CancellationToken,
    watching: std::sync::Once,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.cancel();
        // An HTTP session that ended (DELETE, idle expiry): its calls in flight are cancelled.
        // stdio awaits `SessionEnd::close` itself before the runtime stops, which also ends the
        // conversation: closing here first would take the connection from under it.
        if self.single {
            return;
        }
        let shared = self.shared.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { shared.close().await });
        }
    }
}

/// Closes a stdio session's daemon connections after its MCP transport ended.
pub struct SessionEnd {
    shared: Arc<Shared>,
    runs: Arc<Runs>,
    /// The process's own 2026 handle (requests naming none).
    own: String,
}

impl SessionEnd {
    /// Cancel the calls still in flight, end the session's conversation unless the operator
    /// named it (`--conversation`, which is how a harness resumes one), and close the
    /// connections. Over stdio the process is the run: its own conversation (a session's, or
    /// that of the 2026 requests naming no handle) ends with it. A conversation whose handle
    /// a 2026 client named stays, as over HTTP: the client may name it again.
    pub async fn close(self) {
        let ends = self.shared.opts.conversation.is_none();
        let end = ends.then(|| self.shared.conversation.clone());
        let own = self.runs.take(&self.own);
        self.shared.close_ending(end.as_deref()).await;
        if let Some(run) = own {
            let end = ends.then(|| run.conversation.clone());
            run.close_ending(end.as_deref()).await;
        }
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// Whether this request speaks 2026-07-28 or later (no session).
pub(crate) fn stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

impl Bridge {
    pub fn new(opts: Arc<Options>, runs: Arc<Runs>) -> Bridge {
        let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let session = format!("mcp-{}-{nanos:x}-{n}", std::process::id());
        let conversation = opts.conversation.clone().unwrap_or_else(|| session.clone());
        let run_id = opts.run_id.clone().unwrap_or_else(|| session.clone());
        Bridge {
            session,
            single: false,
            shared: Arc::new(Shared {
                opts,
                run_id,
                conversation,
                stateless: false,
                conn: tokio::sync::Mutex::new(None),
            }),
            runs,
            stop: CancellationToken::new(),
            watching: std::sync::Once::new(),
        }
    }

    /// This handler serves one client for its whole life (stdio): a 2026 request that names
    /// no conversation handle belongs to the session's own.
    pub fn single_client(mut self) -> Bridge {
        self.single = true;
        self
    }

    /// What closes this session's daemon connection once its transport has ended.
    pub fn session_end(&self) -> SessionEnd {
        SessionEnd {
            shared: self.shared.clone(),
            runs: self.runs.clone(),
            own: self.session.clone(),
        }
    }

    /// The run a request belongs to, and for a 2026 request the handle to give back: the
    /// one its `_meta` names (`toolvisor/conversation`), else a fresh one.
    pub(crate) async fn scope(
        &self,
        ctx: &RequestContext<RoleServer>,
        params_meta: Option<&rmcp::model::RequestMetaObject>,
    ) -> Result<(Arc<Shared>, Option<String>), ErrorData> {
        if !stateless(ctx) {
            return Ok((self.shared.clone(), None));
        }
        let named = params_meta
            .and_then(|m| m.get(HANDLE_KEY))
            .or_else(|| ctx.meta.get(HANDLE_KEY));
        let handle = match named {
            None if self.single => self.session.clone(),
            None => Runs::mint(),
            Some(Json::String(h)) if valid_handle(h) => h.clone(),
            Some(other) => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "_meta[\"{HANDLE_KEY}\"] must be the handle toolvisor mcp gave back (1 to 64 of A-Z a-z 0-9 _ . -), not {other}"
                    ),
                    Some(
                        json!({"kind": "invalid_args", "hint": format!("send the `{HANDLE_KEY}` value of an earlier result's _meta, or none to start a new conversation")}),
                    ),
                ));
            }
        };
        let shared = self
            .runs
            .run(&handle, listener_client(ctx))
            .await
            .map_err(|full| runs_full(&full))?;
        Ok((shared, Some(handle)))
    }

    /// The daemon connection of `shared`, made on first use (after `initialize`, so the
    /// Hello can say whether this client answers questions) and again after the daemon went
    /// away. The first use of a session's also starts the tool-list watcher.
    pub(crate) async fn conn_of(
        &self,
        shared: &Arc<Shared>,
        peer: &Peer<RoleServer>,
    ) -> Result<Arc<DaemonConn>, ErrorData> {
        let conn = shared
            .connect(peer)
            .await
            .map_err(|e| daemon_unreachable(&e))?;
        if !shared.stateless {
            self.watching.call_once(|| {
                tokio::spawn(watch_tools(
                    shared.clone(),
                    conn.welcome().tools.clone(),
                    peer.clone(),
                    self.stop.clone(),
                ));
            });
        }
        Ok(conn)
    }
}

/// The client of a request that came through the HTTP listener (`http::handle` puts it in
/// the request's extensions); `None` over stdio.
pub(crate) fn listener_client(ctx: &RequestContext<RoleServer>) -> Option<crate::peer::Peer> {
    ctx.extensions
        .get::<hyper::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<crate::peer::Peer>())
        .copied()
}

/// A new 2026-07-28 run refused past the listener's caps.
pub(crate) fn runs_full(full: &crate::gate::CapsFull) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode(-32000),
        full.message.clone(),
        Some(json!({"kind": "busy", "message": full.message, "hint": full.hint})),
    )
}

pub(crate) fn daemon_unreachable(e: &BridgeError) -> ErrorData {
    ErrorData::internal_error(
        format!("toolvisor mcp cannot reach the daemon: {e}"),
        Some(json!({"kind": "resource_failed", "message": e.to_string(),
            "hint": "start the daemon (`toolvisor serve`) or pass the right --socket"})),
    )
}

/// The MCP tool entry of a daemon tool: its name, description and schema as declared, and
/// the annotations harnesses classify tools by (Codex runs only `readOnlyHint` tools under
/// `approval_policy = "never"`; Claude Code shows them in its permission prompt). Its
/// `outputSchema` only when results carry `structuredContent` (`structured`): it is most of
/// the list's size, and a client checks nothing against it otherwise.
pub fn mcp_tool(t: &ToolInfo, structured: bool) -> Json {
    let read_only = t.tier == toolvisor_protocol::wire::Tier::Read;
    let mut tool = json!({
        "name": t.name,
        "description": t.description,
        "inputSchema": lean_schema(&t.schema.0),
        "annotations": {
            "readOnlyHint": read_only,
            "destructiveHint": !read_only && t.destructive,
            "idempotentHint": t.idempotent,
            "openWorldHint": t.open_world,
        },
        "_meta": {
            "toolvisor/tier": t.tier.as_str(),
            "toolvisor/requires_approval": t.requires_approval,
            "toolvisor/parallel_safe": t.parallel_safe,
        },
    });
    // Clients check `structuredContent` against it (a result with `isError` is not checked).
    if structured && let Some(schema) = &t.output_schema {
        tool["outputSchema"] = schema.0.clone();
    }
    tool
}

/// An arguments' schema as a model reads it (every harness passes `inputSchema` on to its
/// model, so each character is paid on every request): without what only a validator needs —
/// `additionalProperties: false` and numeric bounds (a value past one is refused naming the
/// bound) — and without the description of an array's items (its field's says it). The daemon
/// still checks every call against the whole schema, so nothing is let through that was
/// refused before.
pub fn lean_schema(schema: &Json) -> Json {
    fn walk(v: &Json, in_properties: bool, in_items: bool) -> Json {
        match v {
            Json::Object(map) => Json::Object(
                map.iter()
                    .filter(|(k, v)| {
                        in_properties
                            || !(matches!(k.as_str(), "minimum" | "maximum")
                                || (k.as_str() == "additionalProperties"
                                    && v == &&Json::Bool(false))
                                || (in_items && k.as_str() == "description"))
                    })
                    .map(|(k, v)| {
                        let props = !in_properties && k == "properties";
                        let items = !in_properties && k == "items";
                        (k.clone(), walk(v, props, items))
                    })
                    .collect(),
            ),
            Json::Array(items) => {
                Json::Array(items.iter().map(|x| walk(x, false, false)).collect())
            }
            other => other.clone(),
        }
    }
    walk(schema, false, false)
}

pub(crate) fn visible(tools: &[ToolInfo]) -> Vec<&ToolInfo> {
    tools.iter().filter(|t| t.available).collect()
}

/// What a tool list change is judged by: the available tools' names and descriptions (a
/// Welcome's list carries no schemas, and schemas change only with the binary).
fn listed(tools: &[ToolInfo]) -> Vec<(&str, &str)> {
    visible(tools)
        .into_iter()
        .map(|t| (t.name.as_str(), t.description.as_str()))
        .collect()
}

/// Look at the run's tool list after tree changes and every `poll` (connecting again when
/// the daemon went away); tell the client when what it may see changed.
async fn watch_tools(
    shared: Arc<Shared>,
    mut last: Vec<ToolInfo>,
    peer: Peer<RoleServer>,
    stop: CancellationToken,
) {
    let poll = shared.opts.poll;
    loop {
        let current = shared.conn.lock().await.clone();
        let changed = async {
            match &current {
                Some(c) if c.closed().is_none() => {
                    c.tree_changed.notified().await;
                    // A burst of tree changes (a server starting) is one look.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = changed => {}
            _ = tokio::time::sleep(poll) => {}
        }
        let Ok(conn) = shared.connect(&peer).await else {
            continue;
        };
        let Ok(now) = conn.list_tools().await else {
            continue;
        };
        if listed(&now) != listed(&last) {
            last = now;
            if peer.notify_tool_list_changed().await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lean_schema_keeps_every_field_and_what_a_model_reads() {
        let schema = json!({"type": "object", "additionalProperties": false, "required": ["op"],
            "properties": {
                "op": {"type": "string", "enum": ["a", "b"]},
                "offset": {"type": "integer", "minimum": 0, "maximum": i64::MAX},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1_048_576},
                "minimum": {"type": "integer", "minimum": 0},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "points": {"type": "array", "items": {"type": "object", "description": "One.",
                    "additionalProperties": false, "properties": {"line": {"minimum": 1,
                        "description": "1-based."}}}}}});
        assert_eq!(
            lean_schema(&schema),
            json!({"type": "object", "required": ["op"],
                "properties": {
                    "op": {"type": "string", "enum": ["a", "b"]},
                    "offset": {"type": "integer"},
                    "limit": {"type": "integer"},
                    "minimum": {"type": "integer"},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                    "points": {"type": "array", "items": {"type": "object",
                        "properties": {"line": {"description": "1-based."}}}}}})
        );
    }
}
