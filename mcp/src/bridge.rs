//! The MCP server handler: one MCP session bridged to one daemon connection (one run).
//! `tools/list` is the daemon's list for the run's surface; `tools/call` is a daemon call
//! whose approval requests and `ask_user` questions become elicitations, whose output events
//! become progress notifications and whose cancellation is the daemon's `Cancel`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ServerConfig,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value as Json, json};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;
use toolvisor_protocol::answer::{MAX_REFUSED_ANSWERS, check_answer};
use toolvisor_protocol::wire::{
    ClientFrame, Event, Outcome, Question, QuestionAnswer, Surface, ToolInfo,
};
use toolvisor_protocol::{ErrorKind, ToolError};

use crate::content;
use crate::daemon::{CallMsg, DaemonConn, HelloParts};
use crate::{Approvals, BridgeError, Options};

/// How long a cancelled call may take to answer `cancelled` before we stop waiting.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// One MCP session's handler. Dropping it (the session ended) stops its tool-list watcher
/// and closes its daemon connection.
pub struct Bridge {
    shared: Arc<Shared>,
    conversation: String,
    stop: CancellationToken,
    watching: std::sync::Once,
}

/// What the handler and its tool-list watcher share.
struct Shared {
    opts: Arc<Options>,
    run_id: String,
    /// The live connection; replaced when the daemon went away (a restart, a new policy)
    /// and a later request or the watcher connects again.
    conn: Mutex<Option<Arc<DaemonConn>>>,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.cancel();
        // An HTTP session that ended (DELETE, idle expiry): its calls in flight are cancelled.
        // (stdio awaits `SessionEnd::close` itself before the runtime stops.)
        let shared = self.shared.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { shared.close().await });
        }
    }
}

/// Closes a session's daemon connection after its MCP transport ended.
pub struct SessionEnd(Arc<Shared>);

impl SessionEnd {
    /// Cancel the calls still in flight and close the connection.
    pub async fn close(self) {
        self.0.close().await;
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(0);

impl Bridge {
    pub fn new(opts: Arc<Options>) -> Bridge {
        let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let session = format!("mcp-{}-{nanos:x}-{n}", std::process::id());
        let conversation = opts.conversation.clone().unwrap_or_else(|| session.clone());
        let run_id = opts.run_id.clone().unwrap_or(session);
        Bridge {
            shared: Arc::new(Shared {
                opts,
                run_id,
                conn: Mutex::new(None),
            }),
            conversation,
            stop: CancellationToken::new(),
            watching: std::sync::Once::new(),
        }
    }

    /// What closes this session's daemon connection once its transport has ended.
    pub fn session_end(&self) -> SessionEnd {
        SessionEnd(self.shared.clone())
    }

    /// The daemon connection, made on first use (after `initialize`, so the Hello can say
    /// whether this client answers questions) and again after the daemon went away. The
    /// first use also starts the tool-list watcher.
    async fn conn(&self, peer: &Peer<RoleServer>) -> Result<Arc<DaemonConn>, ErrorData> {
        let conn = self
            .shared
            .connect(peer)
            .await
            .map_err(|e| daemon_unreachable(&e))?;
        self.watching.call_once(|| {
            tokio::spawn(watch_tools(
                self.shared.clone(),
                conn.welcome().tools.clone(),
                peer.clone(),
                self.stop.clone(),
            ));
        });
        Ok(conn)
    }
}

impl Shared {
    async fn close(&self) {
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn {
            conn.close().await;
        }
    }

    async fn connect(&self, peer: &Peer<RoleServer>) -> Result<Arc<DaemonConn>, BridgeError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref()
            && conn.closed().is_none()
        {
            return Ok(conn.clone());
        }
        let elicits = elicits(peer);
        let (qtx, qrx) = mpsc::unbounded_channel();
        // `deny`: nothing above the read tier is offered or callable.
        let max_tier = match self.opts.approvals {
            Approvals::Deny => self.opts.surface.min(toolvisor_protocol::wire::Tier::Read),
            _ => self.opts.surface,
        };
        let conn = DaemonConn::connect(
            HelloParts {
                run_id: self.run_id.clone(),
                workdir: self.opts.workdir.clone(),
                surface: Surface {
                    max_tier,
                    // Approval requests always reach us: we ask through elicitation or
                    // deny, saying why.
                    approvals: true,
                    questions: elicits,
                    bridge_tools: Vec::new(),
                },
                socket: &self.opts.socket,
            },
            qtx,
        )
        .await?;
        let conn = Arc::new(conn);
        tokio::spawn(answer_questions(conn.clone(), peer.clone(), qrx));
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

fn daemon_unreachable(e: &BridgeError) -> ErrorData {
    ErrorData::internal_error(
        format!("toolvisor mcp cannot reach the daemon: {e}"),
        Some(json!({"kind": "resource_failed", "message": e.to_string(),
            "hint": "start the daemon (`toolvisor serve`) or pass the right --socket"})),
    )
}

fn elicits(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// The MCP tool entry of a daemon tool: its name, description and schema as declared, and
/// the annotations harnesses classify tools by (Codex runs only `readOnlyHint` tools under
/// `approval_policy = "never"`; Claude Code shows them in its permission prompt).
pub fn mcp_tool(t: &ToolInfo) -> Json {
    let read_only = t.tier == toolvisor_protocol::wire::Tier::Read;
    json!({
        "name": t.name,
        "description": t.description,
        "inputSchema": t.schema.0,
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
    })
}

fn visible(tools: &[ToolInfo]) -> Vec<&ToolInfo> {
    tools.iter().filter(|t| t.available).collect()
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
        if visible(&now) != visible(&last) {
            last = now;
            if peer.notify_tool_list_changed().await.is_err() {
                return;
            }
        }
    }
}

/// `ask_user` questions routed to this run: asked through elicitation; a declined or
/// cancelled elicitation skips the question. An answer the question does not accept (a
/// choice outside its options, typed into a client that does not enforce the form's enum)
/// is sent on, so the daemon counts it, and the person is asked again saying what was
/// wrong; the daemon ends the question after `MAX_REFUSED_ANSWERS` of them, and the asking
/// call gets an error naming the last, instead of waiting for its timeout.
async fn answer_questions(
    conn: Arc<DaemonConn>,
    peer: Peer<RoleServer>,
    mut questions: mpsc::UnboundedReceiver<Question>,
) {
    while let Some(q) = questions.recv().await {
        let conn = conn.clone();
        let peer = peer.clone();
        tokio::spawn(async move {
            let mut refused: Option<String> = None;
            for _ in 0..MAX_REFUSED_ANSWERS {
                let answer = ask(&peer, &q, refused.as_deref()).await;
                let verdict = check_answer(&q, answer.clone());
                if conn.send(&ClientFrame::QuestionAnswer(answer)).is_err() {
                    return;
                }
                match verdict {
                    Ok(_) => return,
                    Err(why) => refused = Some(why),
                }
            }
        });
    }
}

async fn ask(peer: &Peer<RoleServer>, q: &Question, refused: Option<&str>) -> QuestionAnswer {
    let skipped = QuestionAnswer {
        question_id: q.question_id,
        selected: Vec::new(),
        text: None,
        skipped: true,
    };
    let labels: Vec<&str> = q.options.iter().map(|o| o.label.as_str()).collect();
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    if !labels.is_empty() {
        if q.multi_select {
            properties.insert(
                "choices".into(),
                json!({"type": "string", "title": "Choices",
                    "description": format!("comma-separated, among: {}", labels.join(", "))}),
            );
        } else {
            let names: Vec<String> = q
                .options
                .iter()
                .map(|o| match &o.description {
                    Some(d) => format!("{} — {d}", o.label),
                    None => o.label.clone(),
                })
                .collect();
            properties.insert(
                "choice".into(),
                json!({"type": "string", "title": "Choice", "enum": labels, "enumNames": names}),
            );
            if !q.allow_free_text {
                required.push("choice");
            }
        }
    }
    if q.allow_free_text || labels.is_empty() {
        properties.insert("text".into(), json!({"type": "string", "title": "Answer"}));
    }
    let mut message = match &q.context {
        Some(c) if !c.is_empty() => format!("{}\n\n{c}", q.question),
        _ => q.question.clone(),
    };
    if let Some(why) = refused {
        message =
            format!("Your last answer could not be used: {why}. Please answer again.\n\n{message}");
    }
    let Some(result) = elicit(
        peer,
        message,
        json!({"type": "object", "properties": properties, "required": required}),
    )
    .await
    else {
        return skipped;
    };
    let mut selected = Vec::new();
    if let Some(choice) = result.get("choice").and_then(Json::as_str) {
        selected.push(choice.to_string());
    }
    if let Some(choices) = result.get("choices").and_then(Json::as_str) {
        selected.extend(
            choices
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
    }
    let text = result
        .get("text")
        .and_then(Json::as_str)
        .filter(|t| !t.is_empty())
        .map(String::from);
    QuestionAnswer {
        question_id: q.question_id,
        selected,
        text,
        skipped: false,
    }
}

/// Ask the client through a form elicitation; `Some(content)` when the person accepted.
async fn elicit(peer: &Peer<RoleServer>, message: String, schema: Json) -> Option<Json> {
    let params: ElicitRequestParams = match serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema,
    })) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "could not build an elicitation request");
            return None;
        }
    };
    let result = match peer.create_elicitation(params).await {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(error = %e, "the elicitation failed");
            return None;
        }
    };
    let result = serde_json::to_value(result).ok()?;
    if result.get("action").and_then(Json::as_str) != Some("accept") {
        return None;
    }
    Some(result.get("content").cloned().unwrap_or(json!({})))
}

/// The MCP client as its `initialize` named it: `claude-code 2.1.3`.
fn client_name(peer: &Peer<RoleServer>) -> String {
    match peer.peer_info() {
        Some(info) => format!("{} {}", info.client_info.name, info.client_info.version),
        None => "(a client that sent no initialize)".to_string(),
    }
}

/// Answer one approval request as the operator chose (`--approvals`): through elicitation
/// when the client has it (else denied), by the MCP client's own call (`harness`), or never.
async fn approve(
    conn: &DaemonConn,
    peer: &Peer<RoleServer>,
    mode: Approvals,
    req: toolvisor_protocol::wire::ApprovalRequest,
) {
    let (approved, reason) = if mode == Approvals::Harness {
        (
            true,
            Some(format!(
                "approved by the MCP client {}, to which the operator delegated approval (toolvisor mcp --approvals harness)",
                client_name(peer)
            )),
        )
    } else if mode == Approvals::Deny {
        (
            false,
            Some("the operator runs toolvisor mcp with --approvals deny: nothing that needs approval runs here".to_string()),
        )
    } else if elicits(peer) {
        let message = format!(
            "toolvisor asks to approve a {} call: {}",
            req.tier, req.summary
        );
        let schema = json!({
            "type": "object",
            "properties": {"approve": {"type": "boolean", "title": "Approve",
                "description": format!("run {}", req.summary)}},
            "required": ["approve"],
        });
        match elicit(peer, message, schema).await {
            Some(c) if c.get("approve").and_then(Json::as_bool) == Some(true) => (
                true,
                Some(format!(
                    "a person approved in the MCP client {}'s elicitation form",
                    client_name(peer)
                )),
            ),
            Some(_) => (
                false,
                Some("the person answered no in the MCP client".to_string()),
            ),
            None => (
                false,
                Some("the MCP client declined or cancelled the approval request".to_string()),
            ),
        }
    } else {
        (
            false,
            Some(
                "the MCP client declared no elicitation capability, so toolvisor mcp cannot ask a person; approvals are denied, never granted by default (use a client with elicitation, or let the harness's own permission system approve: toolvisor mcp --approvals harness)"
                    .to_string(),
            ),
        )
    };
    let _ = conn.answer_approval(req.request_id, approved, reason);
}

fn progress_token(
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Option<ProgressToken> {
    req.meta
        .as_ref()
        .and_then(|m| m.get_progress_token())
        .or_else(|| ctx.meta.get_progress_token())
}

fn to_result(value: Json) -> Result<CallToolResult, ErrorData> {
    serde_json::from_value(value).map_err(|e| {
        ErrorData::internal_error(format!("toolvisor mcp built a bad tool result: {e}"), None)
    })
}

impl Bridge {
    async fn run_call(
        &self,
        req: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let conn = self.conn(&ctx.peer).await?;
        let token = progress_token(&req, &ctx);
        let args = Json::Object(req.arguments.clone().unwrap_or_default());
        let tool = req.name.to_string();
        let (id, mut rx) = match conn.start_call(&self.conversation, &tool, args) {
            Ok(x) => x,
            Err(e) => return to_result(content::error_result(&lost(&e))),
        };
        // If this future is dropped before the outcome (the transport went away, the
        // session ended), the daemon still hears `cancel`, so nothing the call started
        // outlives it.
        let mut guard = CancelOnDrop {
            conn: &conn,
            id,
            armed: true,
        };
        let mut steps = 0u64;
        let mut cancelled = false;
        let outcome = loop {
            let msg = tokio::select! {
                msg = rx.recv() => msg,
                _ = ctx.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    let _ = conn.send(&ClientFrame::Cancel { id });
                    continue;
                }
                _ = tokio::time::sleep(CANCEL_GRACE), if cancelled => None,
            };
            match msg {
                None => {
                    guard.armed = false;
                    break Outcome::Err(ToolError::new(
                        ErrorKind::Cancelled,
                        format!("{tool}: the call was cancelled by the MCP client"),
                        "call again if you still need it",
                    ));
                }
                Some(CallMsg::Done(outcome)) => {
                    guard.armed = false;
                    break outcome;
                }
                Some(CallMsg::Approval(areq)) => {
                    let conn = conn.clone();
                    let peer = ctx.peer.clone();
                    let mode = self.shared.opts.approvals;
                    tokio::spawn(async move { approve(&conn, &peer, mode, areq).await });
                }
                Some(CallMsg::Event(event)) => {
                    let Some(token) = &token else { continue };
                    steps += 1;
                    let message = match event {
                        Event::Output { text, .. } => text,
                        Event::Progress { message, .. } => message,
                    };
                    // The step count always increases, as MCP asks; the daemon's fraction
                    // (when it has one) is in the message's place only as text.
                    let param: Result<ProgressNotificationParam, _> =
                        serde_json::from_value(json!({
                            "progressToken": token,
                            "progress": steps,
                            "message": message,
                        }));
                    if let Ok(p) = param {
                        let _ = ctx.peer.notify_progress(p).await;
                    }
                }
            }
        };
        to_result(content::outcome_result(&tool, outcome))
    }
}

/// Sends the daemon `cancel` for a call whose outcome never arrived here.
struct CancelOnDrop<'a> {
    conn: &'a DaemonConn,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.conn.send(&ClientFrame::Cancel { id: self.id });
        }
    }
}

fn lost(e: &BridgeError) -> ToolError {
    ToolError::new(
        ErrorKind::ResourceFailed,
        format!("toolvisor mcp lost the daemon: {e}"),
        "check the daemon (`toolvisor status`) and restart the MCP server",
    )
}

impl ServerHandler for Bridge {
    fn get_info(&self) -> ServerConfig {
        serde_json::from_value(json!({
            "protocolVersion": ProtocolVersion::V_2025_11_25,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {},
            },
            "serverInfo": {"name": "toolvisor", "version": env!("CARGO_PKG_VERSION")},
            "instructions": "toolvisor hosts live coding tools (files, search, language servers, debuggers, kernels, processes). Large results come back projected with a toolvisor://result/<ref> resource link: read it with resources/read (add ?offset=N to page) or the tool_result_read tool.",
        }))
        .unwrap_or_default()
    }

    /// Server-to-client requests (elicitation) are gone from 2026-07-28 on; we negotiate
    /// the revisions that still have them.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let conn = self.conn(&ctx.peer).await?;
        let tools = conn
            .list_tools()
            .await
            .map_err(|e| daemon_unreachable(&e))?;
        let list: Vec<Json> = visible(&tools).into_iter().map(mcp_tool).collect();
        serde_json::from_value(json!({ "tools": list })).map_err(|e| {
            ErrorData::internal_error(format!("a daemon tool did not fit MCP's Tool: {e}"), None)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.run_call(request, ctx).await.map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // Stored results are reached by the links in call results, not enumerated.
        Ok(ListResourcesResult::default())
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
        }]}))
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
        let conn = self.conn(&ctx.peer).await?;
        let outcome = conn
            .call(&self.conversation, "tool_result_read", page.args())
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
