//! The MCP client of a request, and asking it: who it says it is (`clientInfo`), whether it
//! declines every form unseen, whether it shows forms at all, a form elicitation and how it
//! ended (a person's answer, or a refusal no person saw), and the `ask_user` questions of a run
//! asked through such forms (the run's question port).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ElicitRequestParams, RequestMetaObject};
use rmcp::service::ElicitationMode;
use rmcp::{Peer, RoleServer};
use serde_json::{Value as Json, json};
use tokio::sync::mpsc;
use toolvisor_protocol::answer::{MAX_REFUSED_ANSWERS, check_answer};
use toolvisor_protocol::wire::{ClientFrame, Question, QuestionAnswer};

use crate::daemon::DaemonConn;

/// A form declined or cancelled sooner than this after it was sent was shown to no person:
/// nobody reads a form and decides in under a second, while a headless harness answers in
/// milliseconds. Such an approval is denied saying no person could be asked, and such a
/// question answers `no_human`, never "the person refused" or "skipped".
pub const UNSEEN: Duration = Duration::from_secs(1);

/// MCP clients (`clientInfo.name` prefixes) that declare elicitation but decline every form
/// without showing it: Codex (`codex-mcp-client`), in `codex exec` and its TUI alike. They
/// are not asked at all.
pub const HEADLESS_CLIENTS: &[&str] = &["codex"];

/// Whether a client of this `clientInfo.name` declines every form unseen.
pub(crate) fn headless(name: Option<&str>) -> bool {
    name.is_some_and(|n| HEADLESS_CLIENTS.iter().any(|p| n.starts_with(p)))
}

/// The MCP client, as it named itself (`initialize`, or a 2026 request's `_meta`).
pub(crate) fn client_of(peer: &Peer<RoleServer>, meta: Option<&RequestMetaObject>) -> String {
    if let Some(info) = meta.and_then(|m| m.client_info()) {
        return format!("{} {}", info.name, info.version);
    }
    match peer.peer_info() {
        Some(info) => format!("{} {}", info.client_info.name, info.client_info.version),
        None => "(a client that named itself nowhere)".to_string(),
    }
}

/// The MCP client's `clientInfo.name` (`initialize`, or a 2026 request's `_meta`).
pub(crate) fn client_name(
    peer: &Peer<RoleServer>,
    meta: Option<&RequestMetaObject>,
) -> Option<String> {
    if let Some(info) = meta.and_then(|m| m.client_info()) {
        return Some(info.name.clone());
    }
    peer.peer_info().map(|info| info.client_info.name.clone())
}

/// Whether this session is a question port (`--questions`): see [`crate::Questions`].
pub(crate) fn question_port(mode: crate::Questions, peer: &Peer<RoleServer>) -> bool {
    match mode {
        crate::Questions::None => false,
        crate::Questions::Elicit => elicits(peer),
        crate::Questions::Auto => elicits(peer) && !headless(client_name(peer, None).as_deref()),
    }
}

pub(crate) fn elicits(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// `ask_user` questions routed to this run: asked through elicitation; a declined or
/// cancelled elicitation skips the question, unless it came back faster than a person reads a
/// form: then no person saw it, and the answer says so (`no_person`; `ask_user` answers
/// `no_human`). An answer the question does not accept (a
/// choice outside its options, typed into a client that does not enforce the form's enum)
/// is sent on, so the daemon counts it, and the person is asked again saying what was
/// wrong; the daemon ends the question after `MAX_REFUSED_ANSWERS` of them, and the asking
/// call gets an error naming the last, instead of waiting for its timeout.
pub(crate) async fn answer_questions(
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
    /// the form (it came back faster than a person reads one, [`UNSEEN`]);
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
    let client = client_of(peer, None);
    let asked = std::time::Instant::now();
    let result = peer.create_elicitation(params).await;
    let took = asked.elapsed();
    let unseen = |what: &str| {
        (took < UNSEEN).then(|| {
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
