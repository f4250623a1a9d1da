//! The MCP server handler: one MCP session bridged to one daemon connection (one run).
//! `tools/list` is the daemon's list for the run's surface; `tools/call` is a daemon call
//! whose approval requests and `ask_user` questions become elicitations, whose output events
//! become progress notifications and whose cancellation is the daemon's `Cancel`.
//!
//! The daemon connection is made after `initialize` (so the `Hello` can say whether the client
//! answers questions) and again after the daemon went away. `resources/read` of
//! `toolvisor://result/<ref>` goes through `tool_result_read`, and a watcher sends
//! `notifications/tools/list_changed` when the daemon's list changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ElicitRequestParams, GetTaskParams,
    GetTaskResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerConfig, TASKS_EXTENSION_ID,
};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use serde_json::{Value as Json, json};
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;
use toolvisor_protocol::ErrorKind;
use toolvisor_protocol::answer::{MAX_REFUSED_ANSWERS, check_answer};
use toolvisor_protocol::wire::{ClientFrame, Outcome, Question, QuestionAnswer, Surface, ToolInfo};

use crate::content;
use crate::daemon::{DaemonConn, HelloParts};
use crate::runs::{HANDLE_KEY, Runs, valid_handle};
use crate::{Approvals, BridgeError, Options};

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

/// One run's daemon connection and names, shared by the handler, its tool-list watcher and
/// (for 2026 clients) every request naming the run's handle.
pub(crate) struct Shared {
    opts: Arc<Options>,
    run_id: String,
    pub(crate) conversation: String,
    /// A 2026-07-28 run: no session, so no server-to-client requests (elicitation, list
    /// changes) and no question port.
    stateless: bool,
    /// The live connection; replaced when the daemon went away (a restart, a new policy)
    /// and a later request or the watcher connects again.
    conn: Mutex<Option<Arc<DaemonConn>>>,
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
                conn: Mutex::new(None),
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

impl Shared {
    /// The run of a 2026 client's handle: the handle names both run and conversation unless
    /// `--run` / `--conversation` fixed them.
    pub(crate) fn for_handle(opts: Arc<Options>, handle: &str) -> Shared {
        Shared {
            run_id: opts.run_id.clone().unwrap_or_else(|| handle.to_string()),
            conversation: opts
                .conversation
                .clone()
                .unwrap_or_else(|| handle.to_string()),
            opts,
            stateless: true,
            conn: Mutex::new(None),
        }
    }

    /// Whether its daemon connection is in use beyond this run (a call's task, a call
    /// waiting for an MRTR answer, a request connecting now).
    pub(crate) fn busy(&self) -> bool {
        match self.conn.try_lock() {
            Ok(conn) => conn.as_ref().is_some_and(|c| Arc::strong_count(c) > 1),
            Err(_) => true,
        }
    }

    /// Close the daemon connection; the conversation stays (a 2026 handle can come back).
    pub(crate) async fn close(&self) {
        self.close_ending(None).await;
    }

    /// Close the daemon connection, ending `end`'s conversation first if this connection
    /// made calls in it.
    pub(crate) async fn close_ending(&self, end: Option<&str>) {
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn {
            conn.close(end).await;
        }
    }

    async fn connect(&self, peer: &Peer<RoleServer>) -> Result<Arc<DaemonConn>, BridgeError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = slot.as_ref()
            && conn.closed().is_none()
        {
            return Ok(conn.clone());
        }
        // A 2026 client cannot be asked a question from outside a request: no question port.
        let elicits = !self.stateless && question_port(self.opts.questions, peer);
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
                run_token: self.opts.run_token.clone(),
            },
            qtx,
        )
        .await?;
        let conn = Arc::new(conn);
        if elicits {
            tokio::spawn(answer_questions(conn.clone(), peer.clone(), qrx));
        }
        *slot = Some(conn.clone());
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

/// Whether this session is a question port (`--questions`): see [`crate::Questions`].
fn question_port(mode: crate::Questions, peer: &Peer<RoleServer>) -> bool {
    match mode {
        crate::Questions::None => false,
        crate::Questions::Elicit => elicits(peer),
        crate::Questions::Auto => {
            elicits(peer)
                && !crate::calls::headless(crate::calls::client_name(peer, None).as_deref())
        }
    }
}

pub(crate) fn elicits(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
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

fn visible(tools: &[ToolInfo]) -> Vec<&ToolInfo> {
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

/// `ask_user` questions routed to this run: asked through elicitation; a declined or
/// cancelled elicitation skips the question, unless it came back faster than a person reads a
/// form: then no person saw it, and the answer says so (`no_person`; `ask_user` answers
/// `no_human`). An answer the question does not accept (a
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
                let verdict = match answer.no_person {
                    Some(_) => Ok(answer.clone()),
                    None => check_answer(&q, answer.clone()),
                };
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
        no_person: None,
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
    let result = match elicit(
        peer,
        message,
        json!({"type": "object", "properties": properties, "required": required}),
    )
    .await
    {
        Elicited::Accepted(result) => result,
        Elicited::Refused { unseen: None } => return skipped,
        Elicited::Refused { unseen: Some(why) } => {
            return QuestionAnswer {
                no_person: Some(why),
                skipped: false,
                ..skipped
            };
        }
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
        no_person: None,
    }
}

/// How a form elicitation ended.
pub(crate) enum Elicited {
    /// A person accepted the form, with this content.
    Accepted(Json),
    /// Declined, cancelled, or the request failed: `unseen` says how we know no person saw
    /// the form (it came back faster than a person reads one, [`crate::calls::UNSEEN`]);
    /// `None`: a person may have refused it.
    Refused { unseen: Option<String> },
}

/// Ask the client through a form elicitation.
pub(crate) async fn elicit(peer: &Peer<RoleServer>, message: String, schema: Json) -> Elicited {
    let params: ElicitRequestParams = match serde_json::from_value(json!({
        "mode": "form",
        "message": message,
        "requestedSchema": schema,
    })) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "could not build an elicitation request");
            return Elicited::Refused {
                unseen: Some(format!("toolvisor mcp could not build the form: {e}")),
            };
        }
    };
    let client = crate::calls::client_of(peer, None);
    let asked = std::time::Instant::now();
    let result = peer.create_elicitation(params).await;
    let took = asked.elapsed();
    let unseen = |what: &str| {
        (took < crate::calls::UNSEEN).then(|| {
            format!(
                "the MCP client {client} {what} the form after {} ms, faster than a person reads one, so it showed it to nobody (a headless run)",
                took.as_millis()
            )
        })
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            tracing::info!(error = %e, "the elicitation failed");
            return Elicited::Refused {
                unseen: Some(format!(
                    "the MCP client {client} failed the form request ({e})"
                )),
            };
        }
    };
    let result = serde_json::to_value(result).unwrap_or_default();
    let action = result.get("action").and_then(Json::as_str).unwrap_or("?");
    if action != "accept" {
        let what = if action == "cancel" {
            "cancelled"
        } else {
            "declined"
        };
        return Elicited::Refused {
            unseen: unseen(what),
        };
    }
    Elicited::Accepted(result.get("content").cloned().unwrap_or(json!({})))
}

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
