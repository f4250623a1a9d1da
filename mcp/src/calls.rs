//! `tools/call`: a daemon call whose approval requests are answered as the operator chose
//! (`--approvals`), whose output events become progress notifications and whose MCP
//! cancellation is the daemon's `Cancel`.
//!
//! On 2026-07-28 there are no server-to-client requests: an approval that needs a person is
//! asked back as a multi round-trip request (`inputRequests` with one form elicitation, and
//! a `requestState` under which the call waits in [`Runs`]); the client's retry carries the
//! answer and the call goes on. A client with the Tasks extension gets a task for the
//! start-then-poll tools and for an `eval` or `bash` still running after `INLINE_WAIT`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CreateTaskResult, InputRequests,
    InputRequiredResult, ProgressNotificationParam, ProgressToken, RequestMetaObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::{Value as Json, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolvisor_protocol::wire::{ApprovalRequest, ClientFrame, Event, JobFollow, Outcome, ToolInfo};
use toolvisor_protocol::{ErrorKind, ToolError};

use crate::bridge::{Bridge, listener_client, runs_full, stateless};
use crate::client::{Elicited, UNSEEN, client_name, client_of, elicit, elicits, headless};
use crate::content::Shape;
use crate::daemon::{CallMsg, DaemonConn};
use crate::runs::{Pending, Runs, Shared};
use crate::tasks::{INLINE_WAIT, POLL};
use crate::{Approvals, BridgeError, HANDLE_KEY, content};

/// How long a cancelled call may take to answer `cancelled` before we stop waiting.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// The key of the approval form in an MRTR `inputRequests`.
const APPROVE_INPUT: &str = "toolvisor_approval";

/// The hint of an approval denied because no person could be asked (it replaces the daemon's
/// "change the plan or ask the user", which presumes someone refused).
const NOBODY_HINT: &str = "nobody refused this: no person could be asked, so do not tell the user they declined, and do not retry the same call; do the work another way, or tell the user this tool needs approval that this headless run cannot get (the operator can start toolvisor mcp with --approvals harness and put the tool on the harness's own allow list)";

/// Why an approval was denied without asking anyone: the mode in force, that no person could
/// be asked and why, and what the operator changes to let such calls run.
fn nobody_asked(tool: &str, client: &str, why: &str) -> String {
    format!(
        "no person could be asked, so nobody refused it: {why}. toolvisor mcp runs with --approvals elicit (the default), where a person approves each such call in the MCP client {client}'s form, and denies it when none can be asked. For a headless run the operator starts toolvisor mcp with --approvals harness and puts the tool on the harness's allow list (Claude Code: --allowedTools mcp__toolvisor__{tool}; Codex: approval_mode = \"approve\" under [mcp_servers.toolvisor.tools.{tool}])"
    )
}

/// What happened to a call driven for a while.
enum Step {
    Done(Outcome),
    /// An approval a person must answer, and the client can only be asked by MRTR.
    Ask(ApprovalRequest, mpsc::Receiver<CallMsg>),
    /// Still running at the deadline (it becomes a task).
    Running(mpsc::Receiver<CallMsg>),
}

/// What a driven call may do besides waiting.
struct Drive<'a> {
    conn: &'a Arc<DaemonConn>,
    id: u64,
    tool: &'a str,
    mode: Approvals,
    client: String,
    /// Progress notifications and elicitation go to this peer, when there is one.
    peer: Option<&'a Peer<RoleServer>>,
    token: Option<ProgressToken>,
    /// Ask approvals back as MRTR (a 2026 client that can show a form).
    mrtr: bool,
    /// Fired when the caller cancels (MCP cancellation, `tasks/cancel`).
    cancel: CancellationToken,
    /// Answer [`Step::Running`] after this long.
    deadline: Option<Duration>,
    /// Set when an approval of this call was denied because no person could be asked.
    nobody: Arc<AtomicBool>,
}

impl Drive<'_> {
    /// Drives the call to its end here, with no deadline (no room to park it, or for a
    /// task), and answers it as `tool`'s result.
    async fn drive_to_end(
        self,
        rx: mpsc::Receiver<CallMsg>,
        handle: &Option<String>,
        shape: &Shape,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = self.tool;
        let step = Drive {
            deadline: None,
            ..self
        }
        .run(rx)
        .await;
        let Step::Done(outcome) = step else {
            return Err(ErrorData::internal_error(
                "the call neither ended nor waited",
                None,
            ));
        };
        finish(tool, outcome, handle, shape)
    }

    async fn run(&self, mut rx: mpsc::Receiver<CallMsg>) -> Step {
        // If this future is dropped before the outcome (the transport went away, the
        // session ended), the daemon still hears `cancel`, so nothing the call started
        // outlives it.
        let mut guard = CancelOnDrop {
            conn: self.conn,
            id: self.id,
            armed: true,
        };
        let mut steps = 0u64;
        let mut cancelled = false;
        let deadline = async {
            match self.deadline {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending::<()>().await,
            }
        };
        tokio::pin!(deadline);
        loop {
            let msg = tokio::select! {
                msg = rx.recv() => msg,
                _ = self.cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    let _ = self.conn.send(&ClientFrame::Cancel { id: self.id });
                    continue;
                }
                _ = tokio::time::sleep(CANCEL_GRACE), if cancelled => None,
                _ = &mut deadline, if !cancelled => {
                    guard.armed = false;
                    return Step::Running(rx);
                }
            };
            match msg {
                None => {
                    guard.armed = false;
                    return Step::Done(Outcome::Err(ToolError::new(
                        ErrorKind::Cancelled,
                        format!("{}: the call was cancelled by the MCP client", self.tool),
                        "call again if you still need it",
                    )));
                }
                Some(CallMsg::Done(mut outcome)) => {
                    guard.armed = false;
                    if let Outcome::Err(e) = &mut outcome
                        && e.kind == ErrorKind::ApprovalDenied
                        && self.nobody.load(Ordering::Relaxed)
                    {
                        e.hint = NOBODY_HINT.to_string();
                    }
                    return Step::Done(outcome);
                }
                Some(CallMsg::Approval(areq)) => {
                    if self.mrtr && self.mode == Approvals::Elicit {
                        guard.armed = false;
                        return Step::Ask(areq, rx);
                    }
                    let conn = self.conn.clone();
                    let peer = self.peer.cloned();
                    let (mode, client) = (self.mode, self.client.clone());
                    let nobody = self.nobody.clone();
                    tokio::spawn(async move {
                        approve(&conn, peer.as_ref(), mode, &client, areq, &nobody).await
                    });
                }
                Some(CallMsg::Event(event)) => {
                    let (Some(token), Some(peer)) = (&self.token, self.peer) else {
                        continue;
                    };
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
                        let _ = peer.notify_progress(p).await;
                    }
                }
            }
        }
    }
}

/// Answer one approval request as the operator chose (`--approvals`): through elicitation
/// when a person can be asked (else denied, saying no person could be asked, and `nobody`
/// set), by the MCP client's own call (`harness`), or never.
pub(crate) async fn approve(
    conn: &DaemonConn,
    peer: Option<&Peer<RoleServer>>,
    mode: Approvals,
    client: &str,
    req: ApprovalRequest,
    nobody: &AtomicBool,
) {
    let tool = req.tool.as_str();
    let (approved, reason) = if mode == Approvals::Harness {
        (
            true,
            format!(
                "approved by the MCP client {client}, to which the operator delegated approval (toolvisor mcp --approvals harness)"
            ),
        )
    } else if mode == Approvals::Deny {
        (
            false,
            "the operator runs toolvisor mcp with --approvals deny: nothing that needs approval runs here".to_string(),
        )
    } else if let Some(peer) = peer.filter(|p| elicits(p)) {
        if headless(client_name(peer, None).as_deref()) {
            nobody.store(true, Ordering::Relaxed);
            (
                false,
                nobody_asked(
                    tool,
                    client,
                    "this client declines every elicitation form without showing it to anyone",
                ),
            )
        } else {
            let message = format!(
                "toolvisor asks to approve a {} call: {}",
                req.tier, req.summary
            );
            match elicit(peer, message, approval_form(&req)).await {
                Elicited::Accepted(c) if c.get("approve").and_then(Json::as_bool) == Some(true) => {
                    (
                        true,
                        format!("a person approved in the MCP client {client}'s elicitation form"),
                    )
                }
                Elicited::Accepted(_) => (
                    false,
                    "the person answered no in the MCP client's approval form".to_string(),
                ),
                Elicited::Refused { unseen: Some(why) } => {
                    nobody.store(true, Ordering::Relaxed);
                    (false, nobody_asked(tool, client, &why))
                }
                Elicited::Refused { unseen: None } => (
                    false,
                    "the person declined or cancelled the approval form in the MCP client"
                        .to_string(),
                ),
            }
        }
    } else {
        nobody.store(true, Ordering::Relaxed);
        (
            false,
            nobody_asked(
                tool,
                client,
                "the MCP client declared no elicitation capability (or the call runs as a task, which cannot ask), so it cannot show an approval form",
            ),
        )
    };
    let _ = conn.answer_approval(req.request_id, approved, Some(reason));
}

fn approval_form(req: &ApprovalRequest) -> Json {
    json!({
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Approve",
            "description": format!("run {}", req.summary)}},
        "required": ["approve"],
    })
}

/// Whether a 2026 client can show a form (its `_meta` declares elicitation).
fn can_show_forms(meta: Option<&RequestMetaObject>) -> bool {
    meta.and_then(|m| m.client_capabilities())
        .is_some_and(|c| c.elicitation.is_some())
}

fn supports_tasks(meta: Option<&RequestMetaObject>) -> bool {
    meta.and_then(|m| m.client_capabilities())
        .is_some_and(|c| c.supports_tasks())
}

fn lost(e: &BridgeError) -> ToolError {
    ToolError::new(
        ErrorKind::ResourceFailed,
        format!("toolvisor mcp lost the daemon: {e}"),
        "check the daemon (`toolvisor status`) and restart the MCP server",
    )
}

fn to_result(value: Json) -> Result<CallToolResult, ErrorData> {
    serde_json::from_value(value).map_err(|e| {
        ErrorData::internal_error(format!("toolvisor mcp built a bad tool result: {e}"), None)
    })
}

/// A finished call's result, with the run's handle in `_meta` for a 2026 client.
fn finish(
    tool: &str,
    outcome: Outcome,
    handle: &Option<String>,
    shape: &Shape,
) -> Result<CallToolResponse, ErrorData> {
    let mut value = content::outcome_result(tool, outcome, shape);
    if let Some(h) = handle {
        value["_meta"] = json!({ HANDLE_KEY: h });
    }
    to_result(value).map(Into::into)
}

/// `tools/call`.
pub(crate) async fn call_tool(
    bridge: &Bridge,
    req: CallToolRequestParams,
    ctx: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    // A 2026 request carries its context in `_meta` (the request's, else the params').
    let meta = req.meta.clone().or_else(|| Some(ctx.meta.clone()));
    let meta = meta.as_ref();
    let tool = req.name.to_string();
    let (parked, shared, handle) = call_scope(bridge, &req, &ctx).await?;
    let conn = bridge.conn_of(&shared, &ctx.peer).await?;
    let v2026 = stateless(&ctx);
    let token = req
        .meta
        .as_ref()
        .and_then(|m| m.get_progress_token())
        .or_else(|| ctx.meta.get_progress_token());
    let mode = shared_mode(bridge);
    let client = client_of(&ctx.peer, meta);
    let shape = Shape::for_client(bridge.runs.opts(), client_name(&ctx.peer, meta).as_deref());
    let nobody = Arc::new(AtomicBool::new(false));
    // An MRTR retry: the call is already running; it gets the answer and goes on.
    let (conn, id, rx) = match parked {
        Some(p) => answer_parked(p, &req, &tool, &shared.conversation, &client, &nobody)?,
        None => {
            let args = Json::Object(req.arguments.clone().unwrap_or_default());
            match conn.start_call(&shared.conversation, &tool, args) {
                Ok((id, rx)) => (conn, id, rx),
                Err(e) => return finish(&tool, Outcome::Err(lost(&e)), &handle, &shape),
            }
        }
    };
    let tasks_ok = v2026 && supports_tasks(meta);
    // What the daemon's tool list says of this tool: whether it may run long, whether its
    // call starts a job to follow.
    let info = conn
        .welcome()
        .tools
        .iter()
        .find(|t| t.name == tool)
        .cloned();
    let drive = Drive {
        conn: &conn,
        id,
        tool: &tool,
        mode,
        client: client.clone(),
        peer: Some(&ctx.peer),
        token,
        mrtr: v2026 && can_show_forms(meta),
        cancel: ctx.ct.clone(),
        deadline: (tasks_ok && info.as_ref().is_some_and(|i| i.long_running))
            .then_some(INLINE_WAIT),
        nobody,
    };
    match drive.run(rx).await {
        Step::Done(outcome) => {
            if tasks_ok
                && let Some(info) = &info
                && let Outcome::Ok(v) = &outcome
                && let Some(job) = Job::of(info, &v.0)
                && let Some(task) = follow(
                    &bridge.runs,
                    &conn,
                    &shared.conversation,
                    job,
                    &client,
                    shape.clone(),
                )
            {
                return Ok(task_response(task, &handle));
            }
            finish(&tool, outcome, &handle, &shape)
        }
        Step::Ask(areq, rx) => {
            ask_back(
                bridge,
                drive,
                areq,
                rx,
                &shared.conversation,
                &handle,
                &shape,
            )
            .await
        }
        Step::Running(rx) => run_as_task(bridge, drive, rx, &handle, &shape).await,
    }
}

/// The call waiting for this request's answer when it is an MRTR retry, and the run the
/// call belongs to with its handle.
async fn call_scope(
    bridge: &Bridge,
    req: &CallToolRequestParams,
    ctx: &RequestContext<RoleServer>,
) -> Result<(Option<Pending>, Arc<Shared>, Option<String>), ErrorData> {
    // An MRTR retry belongs to the run of the call it answers (a retry need not name it).
    let parked = match &req.request_state {
        Some(state) => Some(bridge.runs.unpark(state).ok_or_else(|| {
            ErrorData::invalid_params(
                format!("requestState {state:?} names no call waiting for an answer (it was answered already, it waited over 10 minutes, or toolvisor mcp restarted)"),
                Some(json!({"kind": "not_found", "hint": "call the tool again"})),
            )
        })?),
        None => None,
    };
    let named = req.meta.as_ref().and_then(|m| m.get(HANDLE_KEY)).is_some()
        || ctx.meta.get(HANDLE_KEY).is_some();
    let (shared, handle) = match &parked {
        Some(p) if !named && p.handle.is_some() => {
            let h = p.handle.clone().unwrap_or_default();
            let shared = bridge
                .runs
                .run(&h, listener_client(ctx))
                .await
                .map_err(|full| runs_full(&full))?;
            (shared, Some(h))
        }
        _ => bridge.scope(ctx, req.meta.as_ref()).await?,
    };
    Ok((parked, shared, handle))
}

/// Gives the daemon the answer an MRTR retry carries for the approval its parked call waits
/// on; the call to drive on.
fn answer_parked(
    p: Pending,
    req: &CallToolRequestParams,
    tool: &str,
    conversation: &str,
    client: &str,
    nobody: &AtomicBool,
) -> Result<(Arc<DaemonConn>, u64, mpsc::Receiver<CallMsg>), ErrorData> {
    let state = req.request_state.clone().unwrap_or_default();
    if p.tool != tool || p.conversation != conversation {
        return Err(ErrorData::invalid_params(
            format!(
                "requestState {state:?} belongs to a {} call of another conversation or tool",
                p.tool
            ),
            Some(
                json!({"kind": "invalid_args", "hint": "retry the same call with the same arguments and _meta"}),
            ),
        ));
    }
    let (approved, reason) = retry_answer(req, p.since, tool, client, nobody);
    let _ = p
        .conn
        .answer_approval(p.approval.request_id, approved, Some(reason));
    Ok((p.conn, p.id, p.rx))
}

/// Whether an MRTR retry approves the call, and the reason the daemon records (`nobody` set
/// when no person could have answered the form sent at `since`).
fn retry_answer(
    req: &CallToolRequestParams,
    since: std::time::Instant,
    tool: &str,
    client: &str,
    nobody: &AtomicBool,
) -> (bool, String) {
    let answer = req
        .input_responses
        .as_ref()
        .and_then(|r| r.get(APPROVE_INPUT))
        .cloned();
    let approved = answer.as_ref().is_some_and(|a| {
        a.get("action").and_then(Json::as_str) == Some("accept")
            && a.pointer("/content/approve").and_then(Json::as_bool) == Some(true)
    });
    let took = since.elapsed();
    let action = answer
        .as_ref()
        .and_then(|a| a.get("action"))
        .and_then(Json::as_str)
        .unwrap_or("");
    let reason = if approved {
        format!("a person approved in the MCP client {client}'s elicitation form (input request)")
    } else if answer.is_none() {
        nobody.store(true, Ordering::Relaxed);
        nobody_asked(
            tool,
            client,
            "the MCP client's retry carried no answer to the approval form",
        )
    } else if action != "accept" && took < UNSEEN {
        nobody.store(true, Ordering::Relaxed);
        nobody_asked(
            tool,
            client,
            &format!(
                "the MCP client {client} answered the approval form with {action:?} after {} ms, faster than a person reads one, so it showed it to nobody (a headless run)",
                took.as_millis()
            ),
        )
    } else if action == "accept" {
        "the person answered no in the MCP client's approval form".to_string()
    } else {
        format!("the person answered the approval form with {action:?} in the MCP client")
    };
    (approved, reason)
}

/// Parks a call whose approval a person must answer and asks the client back (MRTR); with
/// no room to park, denies the approval and waits for the call's end here.
async fn ask_back(
    bridge: &Bridge,
    drive: Drive<'_>,
    areq: ApprovalRequest,
    rx: mpsc::Receiver<CallMsg>,
    conversation: &str,
    handle: &Option<String>,
    shape: &Shape,
) -> Result<CallToolResponse, ErrorData> {
    let tool = drive.tool;
    let message = format!(
        "toolvisor asks to approve a {} call: {}",
        areq.tier, areq.summary
    );
    let form = approval_form(&areq);
    let pending = Pending::new(
        drive.conn.clone(),
        drive.id,
        rx,
        areq.clone(),
        tool.to_string(),
        conversation.to_string(),
        handle.clone(),
    );
    let state = match bridge.runs.park(pending) {
        Ok(state) => state,
        Err(p) => {
            let _ = p.conn.answer_approval(
                areq.request_id,
                false,
                Some("too many calls wait for an approval answer in this toolvisor mcp (256); answer those first".into()),
            );
            // The approval it waits for is not asked back as a form again.
            return Drive {
                mrtr: false,
                ..drive
            }
            .drive_to_end(p.rx, handle, shape)
            .await;
        }
    };
    let mut requests = InputRequests::new();
    let elicitation = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": form},
    }))
    .map_err(|e| {
        ErrorData::internal_error(
            format!("toolvisor mcp built a bad input request: {e}"),
            None,
        )
    })?;
    requests.insert(APPROVE_INPUT.to_string(), elicitation);
    let mut input = InputRequiredResult::new(Some(requests), Some(state));
    if let Some(h) = handle {
        input.meta = serde_json::from_value(json!({ HANDLE_KEY: h })).ok();
    }
    Ok(CallToolResponse::InputRequired(input))
}

/// Makes a call still running at the deadline a task, driven to its end in the background;
/// with no room for a task, waits for its end here.
async fn run_as_task(
    bridge: &Bridge,
    drive: Drive<'_>,
    rx: mpsc::Receiver<CallMsg>,
    handle: &Option<String>,
    shape: &Shape,
) -> Result<CallToolResponse, ErrorData> {
    let tool = drive.tool;
    let Some((task_id, cancel)) = bridge.runs.tasks.create(&format!("{tool} is running")) else {
        // No room for a task: wait for it here, as for a client without tasks.
        return drive.drive_to_end(rx, handle, shape).await;
    };
    let runs = bridge.runs.clone();
    let conn = drive.conn.clone();
    let (tool2, id2, task2) = (tool.to_string(), drive.id, task_id.clone());
    let (mode, client) = (drive.mode, drive.client);
    let shape2 = shape.clone();
    tokio::spawn(async move {
        let drive = Drive {
            conn: &conn,
            id: id2,
            tool: &tool2,
            mode,
            client,
            peer: None,
            token: None,
            mrtr: false,
            cancel,
            deadline: None,
            nobody: Arc::new(AtomicBool::new(false)),
        };
        if let Step::Done(outcome) = drive.run(rx).await {
            let cancelled = matches!(&outcome, Outcome::Err(e) if e.kind == ErrorKind::Cancelled);
            if cancelled {
                runs.tasks
                    .cancelled(&task2, &format!("{tool2} was cancelled"));
            } else {
                runs.tasks.complete(
                    &task2,
                    content::outcome_result(&tool2, outcome, &shape2),
                    &format!("{tool2} ended"),
                );
            }
        }
    });
    Ok(task_response(task_id, handle))
}

fn shared_mode(bridge: &Bridge) -> Approvals {
    bridge.runs.opts().approvals
}

fn task_response(task_id: String, handle: &Option<String>) -> CallToolResponse {
    // The entry exists: it was made just now.
    let seed = rmcp::model::Task::new(
        task_id,
        rmcp::model::TaskStatus::Working,
        crate::tasks::iso8601(std::time::SystemTime::now()),
        crate::tasks::iso8601(std::time::SystemTime::now()),
    )
    .with_poll_interval_ms(POLL.as_millis() as u64);
    let mut created = CreateTaskResult::new(seed);
    if let Some(h) = handle {
        created =
            created.with_meta(serde_json::from_value(json!({ HANDLE_KEY: h })).unwrap_or_default());
    }
    CallToolResponse::Task(created)
}

/// The job a start-then-poll call started, and how to follow and stop it: the tool's
/// `JobFollow`, as the daemon's tool list gives it (`ToolInfo::follow`).
struct Job {
    tool: String,
    follow: JobFollow,
    name: String,
}

impl Job {
    /// The job `info`'s call started, as its `result` names it; `None` for a tool that starts
    /// none, or a job already ended well (a model already in the store, already ready).
    fn of(info: &ToolInfo, result: &Json) -> Option<Job> {
        let follow = info.follow.clone()?;
        let name = follow.job_of(result)?;
        Some(Job {
            tool: info.name.clone(),
            follow,
            name,
        })
    }

    /// What polls it.
    fn poll(&self) -> (&str, Json) {
        let f = &self.follow;
        (&f.poll, JobFollow::args_for(&f.poll_args, &self.name))
    }

    /// What stops it.
    fn stop(&self) -> (&str, Json) {
        let f = &self.follow;
        (&f.stop, JobFollow::args_for(&f.stop_args, &self.name))
    }

    /// The job's entry in a poll's answer, and whether it has ended (and failed).
    fn look(&self, answer: &Json) -> Option<(Json, bool, bool)> {
        self.follow.look(&self.name, answer)
    }
}

/// A task following `job` until it ends (or `tasks/cancel` stops it); `None` when no room.
fn follow(
    runs: &Arc<Runs>,
    conn: &Arc<DaemonConn>,
    conversation: &str,
    job: Job,
    client: &str,
    shape: Shape,
) -> Option<String> {
    let (task_id, cancel) = runs
        .tasks
        .create(&format!("{} {} started", job.tool, job.name))?;
    let conn = conn.clone();
    let conversation = conversation.to_string();
    let client = client.to_string();
    let task = task_id.clone();
    // The task table outlives this request; the poller holds what it needs.
    let runs = runs.clone();
    tokio::spawn(async move {
        let tasks = &runs.tasks;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => {
                    let reason = format!("the MCP client {client} cancelled the task it started (tasks/cancel); toolvisor mcp approves stopping it");
                    let (tool, args) = job.stop();
                    let outcome = conn.call_answering(&conversation, tool, args, true, &reason).await;
                    let said = match outcome {
                        Ok(Outcome::Ok(_)) => format!("{} {} stopped ({tool})", job.tool, job.name),
                        Ok(Outcome::Err(e)) => format!("{} {}: {tool} failed: {e}", job.tool, job.name),
                        Err(e) => format!("{} {}: {tool} failed: {e}", job.tool, job.name),
                    };
                    tasks.cancelled(&task, &said);
                    return;
                }
                _ = tokio::time::sleep(POLL) => {}
            }
            let (tool, args) = job.poll();
            let answer = match conn.call(&conversation, tool, args).await {
                Ok(Outcome::Ok(v)) => v.0,
                Ok(Outcome::Err(e)) => {
                    tasks.complete(
                        &task,
                        content::outcome_result(&job.tool, Outcome::Err(e), &shape),
                        "following the job failed",
                    );
                    return;
                }
                Err(e) => {
                    tasks.complete(
                        &task,
                        content::outcome_result(&job.tool, Outcome::Err(lost(&e)), &shape),
                        "toolvisor mcp lost the daemon",
                    );
                    return;
                }
            };
            let Some((entry, ended, failed)) = job.look(&answer) else {
                let gone = ToolError::new(
                    ErrorKind::NotFound,
                    format!("{} {} is gone from {tool}", job.tool, job.name),
                    "it ended and was collected, or the daemon restarted; list it again",
                );
                tasks.complete(
                    &task,
                    content::outcome_result(&job.tool, Outcome::Err(gone), &shape),
                    "the job is gone",
                );
                return;
            };
            let state = entry["state"].as_str().unwrap_or("?").to_string();
            if ended {
                let mut result = content::outcome_result(
                    &job.tool,
                    Outcome::Ok(toolvisor_protocol::Value(entry)),
                    &shape,
                );
                if failed {
                    result["isError"] = json!(true);
                }
                tasks.complete(
                    &task,
                    result,
                    &format!("{} {}: {state}", job.tool, job.name),
                );
                return;
            }
            let percent = entry["percent"]
                .as_f64()
                .map(|p| format!(" {p:.1} %"))
                .unwrap_or_default();
            tasks.progress(
                &task,
                format!("{} {}: {state}{percent}", job.tool, job.name),
            );
        }
    });
    Some(task_id)
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
