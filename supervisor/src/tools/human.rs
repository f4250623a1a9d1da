//! Handlers of the human-in-the-loop and background-worker tools: `ask_user` (through the
//! question ports of `crate::questions`) and `vibe_*` (through `toolvisor_jobs::vibe`); plus
//! what the daemon needs at start to decide whether vibe mode is on.

use std::collections::BTreeMap;
use std::time::Duration;

use toolvisor_jobs::vibe::{self, VibeLimits, Vibes};
use toolvisor_kit::launch::Launcher;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::VibeListResult;
use toolvisor_protocol::tools::{
    AskUserArgs, AskUserOutput, VibeInfo, VibeKillArgs, VibeSendArgs, VibeSpawnArgs, VibeTier,
    VibeWaitArgs,
};
use toolvisor_protocol::wire::Question;

use super::spec::Attachment;
use super::{CallCtx, Services};
use crate::config::{Config, VibeConfig};
use crate::questions::{MAX_REFUSED_ANSWERS, QuestionPorts, Resolution, no_human};

/// The vibe tools' attachment when no worker command is configured.
pub(crate) fn vibe_off() -> Attachment {
    Attachment::Detached(
        "vibe mode is off: no worker command is configured ([vibe.tiers.fast] or [vibe.tiers.good] command = [...] in the daemon's config)".into(),
    )
}

/// What a skipped or timed-out question tells the model to do.
pub const GUIDANCE: &str = "proceed on the assumptions you stated and do not ask this again";

/// How long `vibe_wait` waits when no timeout is given.
const VIBE_WAIT_DEFAULT_S: u64 = 600;

/// `vibe_spawn`.
pub(crate) async fn run_vibe_spawn(
    vibes: &Vibes,
    ctx: &CallCtx,
    a: VibeSpawnArgs,
) -> Result<VibeInfo, ToolError> {
    let conv = ctx.conversation.as_str();
    let tier = a.tier.unwrap_or_default();
    vibes
        .spawn(conv, ctx.workdir.clone(), a.brief, a.label, tier)
        .await
}

/// `vibe_send`.
pub(crate) async fn run_vibe_send(
    vibes: &Vibes,
    ctx: &CallCtx,
    a: VibeSendArgs,
) -> Result<VibeInfo, ToolError> {
    let conv = ctx.conversation.as_str();
    vibes.send(conv, &a.worker_id, a.message).await
}

/// `vibe_wait`.
pub(crate) async fn run_vibe_wait(
    vibes: &Vibes,
    ctx: &CallCtx,
    a: VibeWaitArgs,
) -> Result<VibeInfo, ToolError> {
    let conv = ctx.conversation.as_str();
    let timeout = Duration::from_secs(a.timeout_seconds.unwrap_or(VIBE_WAIT_DEFAULT_S));
    vibes.wait(conv, &a.worker_id, timeout).await
}

/// `vibe_kill`.
pub(crate) async fn run_vibe_kill(
    vibes: &Vibes,
    ctx: &CallCtx,
    a: VibeKillArgs,
) -> Result<VibeInfo, ToolError> {
    let conv = ctx.conversation.as_str();
    vibes.kill(conv, &a.worker_id).await
}

/// `vibe_list`.
pub(crate) async fn run_vibe_list(
    vibes: &Vibes,
    ctx: &CallCtx,
    toolvisor_protocol::tools::VibeListArgs {}: toolvisor_protocol::tools::VibeListArgs,
) -> Result<VibeListResult, ToolError> {
    let conv = ctx.conversation.as_str();
    Ok(VibeListResult {
        workers: vibes.list(conv),
    })
}

fn invalid(message: String, hint: &str) -> ToolError {
    ToolError::new(ErrorKind::InvalidArgs, format!("ask_user: {message}"), hint)
}

/// `ask_user`'s context: the question ports, and how long a question waits for its answer.
pub(crate) struct AskUser<'a> {
    pub questions: &'a QuestionPorts,
    pub timeout: Duration,
}

impl<'a> AskUser<'a> {
    pub fn of(services: &'a Services) -> Self {
        AskUser {
            questions: &services.questions,
            timeout: Duration::from_secs(services.config.ask_user_timeout_s),
        }
    }
}

/// `ask_user`: the question goes to the run's question port; the answer is the person's
/// answer or skip, or why nobody answered.
pub async fn ask_user(
    cx: &AskUser<'_>,
    ctx: &CallCtx,
    args: AskUserArgs,
) -> Result<AskUserOutput, ToolError> {
    let allow_free_text = check_question(&args)?;
    let run_id = ctx.run_id.clone();
    let question = Question {
        question_id: 0,
        run_id: run_id.clone(),
        conversation: ctx.conversation.clone(),
        question: args.question,
        context: args.context.filter(|c| !c.trim().is_empty()),
        options: args.options,
        allow_free_text,
        multi_select: args.multi_select,
    };
    let mut asked = match cx.questions.ask(question).await {
        Ok(asked) => asked,
        Err(e) => {
            tracing::info!(
                run = run_id,
                conversation = ctx.conversation,
                "ask_user: no question port for the run"
            );
            return Err(e);
        }
    };
    let question_id = asked.question_id;
    tracing::info!(
        question = question_id,
        port_session = asked.port,
        run = run_id,
        conversation = ctx.conversation,
        "ask_user: question sent"
    );
    let limit = cx.timeout;
    let resolution = tokio::time::timeout(limit, &mut asked.rx).await;
    match resolution {
        Ok(Ok(resolution)) => resolved(resolution, question_id, &run_id),
        Ok(Err(_)) => Err(port_gone(question_id, &run_id)),
        Err(_) => {
            tracing::info!(
                question = question_id,
                timeout_s = limit.as_secs(),
                "ask_user: no answer in time"
            );
            asked.set_withdraw_reason(format!("no answer within {} s", limit.as_secs()));
            Err(ToolError::new(
                ErrorKind::Timeout,
                format!(
                    "no answer to question {question_id} within {} s",
                    limit.as_secs()
                ),
                format!("{GUIDANCE} (the operator can raise ask_user_timeout_s)"),
            ))
        }
    }
}

/// Refuses a question that is empty, has an option without a label or two with the same
/// one, or that nothing could answer; whether it takes free text.
fn check_question(args: &AskUserArgs) -> Result<bool, ToolError> {
    if args.question.trim().is_empty() {
        return Err(invalid(
            "`question` is empty".into(),
            "ask one clear question",
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, o) in args.options.iter().enumerate() {
        if o.label.trim().is_empty() {
            return Err(invalid(
                format!("option {} has an empty label", i + 1),
                "give every option a short, distinct label",
            ));
        }
        if !seen.insert(o.label.as_str()) {
            return Err(invalid(
                format!("two options are labelled {:?}", o.label),
                "give every option a distinct label",
            ));
        }
    }
    let allow_free_text = args.allow_free_text.unwrap_or(args.options.is_empty());
    if args.options.is_empty() && !allow_free_text {
        return Err(invalid(
            "no options and `allow_free_text: false`: nothing could answer this question".into(),
            "give options, or allow free text",
        ));
    }
    Ok(allow_free_text)
}

/// What the question's resolution answers the model.
fn resolved(
    resolution: Resolution,
    question_id: u64,
    run_id: &str,
) -> Result<AskUserOutput, ToolError> {
    match resolution {
        Resolution::Answered(a) if a.skipped => Ok(AskUserOutput {
            question_id,
            selected: Vec::new(),
            text: None,
            skipped: true,
            guidance: Some(format!("The person skipped this question: {GUIDANCE}.")),
        }),
        Resolution::Answered(a) => Ok(AskUserOutput {
            question_id,
            selected: a.selected,
            text: a.text,
            skipped: false,
            guidance: None,
        }),
        Resolution::Refused(why) => Err(ToolError::new(
            ErrorKind::InvalidArgs,
            format!(
                "the person's client sent {MAX_REFUSED_ANSWERS} answers to question {question_id} that this question does not accept (the last: {why})"
            ),
            "ask again with options that cover what the person wants to say, or with allow_free_text: true",
        )),
        Resolution::NoPerson(why) => {
            tracing::info!(question = question_id, %why, "ask_user: no person saw the question");
            let mut err = no_human(run_id);
            err.message = format!(
                "no person saw question {question_id}, so nobody skipped it: {why}; {}",
                err.message
            );
            Err(err)
        }
        Resolution::PortGone => Err(port_gone(question_id, run_id)),
    }
}

/// The person's client went away with question `question_id` pending.
fn port_gone(question_id: u64, run_id: &str) -> ToolError {
    tracing::info!(
        question = question_id,
        "ask_user: the port left with the question pending"
    );
    let mut err = no_human(run_id);
    err.message = format!(
        "the person's client disconnected while question {question_id} was pending; {}",
        err.message
    );
    err
}

/// The tier commands of the configuration.
pub fn vibe_limits(config: &VibeConfig) -> VibeLimits {
    let mut tiers = BTreeMap::new();
    if let Some(t) = &config.tiers.fast {
        tiers.insert(VibeTier::Fast, t.command.clone());
    }
    if let Some(t) = &config.tiers.good {
        tiers.insert(VibeTier::Good, t.command.clone());
    }
    VibeLimits {
        tiers,
        max_running: config.max_running.max(1),
        max_queued: config.max_queued,
        keep_idle: Duration::from_secs(config.keep_s),
        attempt_timeout: (config.attempt_timeout_s > 0)
            .then(|| Duration::from_secs(config.attempt_timeout_s)),
        result_bytes: config.result_bytes.max(1024),
        socket: None,
    }
}

/// Vibe mode: the tiers whose command resolves for the daemon's children, and the
/// attachment of the `vibe_*` tools (attached while at least one tier resolves, else
/// detached with what each tier lacks). Tiers that do not resolve are dropped.
pub fn vibe_mode(config: &Config, launcher: &Launcher) -> (VibeLimits, Attachment) {
    let mut limits = vibe_limits(&config.vibe);
    if limits.tiers.is_empty() {
        return (limits, vibe_off());
    }
    let mut problems = Vec::new();
    limits.tiers.retain(|tier, command| match vibe::check_command(command, &launcher.env) {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(tier = %tier, problem = why, "vibe tier disabled: its command does not resolve");
            problems.push(format!("[vibe.tiers.{tier}]: {why}"));
            false
        }
    });
    if limits.tiers.is_empty() {
        let why = format!(
            "vibe mode is off: no configured worker command resolves ({})",
            problems.join("; ")
        );
        return (limits, Attachment::Detached(why));
    }
    let on: Vec<_> = limits.tiers.keys().map(|t| t.as_str()).collect();
    tracing::info!(tiers = on.join(","), "vibe mode on");
    (limits, Attachment::Attached)
}

/// The declarations of `ask_user` and the `vibe_*` tools. The vibe tools start detached;
/// the daemon replaces that with what its configuration says ([`vibe_mode`]).
pub(crate) fn declare(vibe: &Attachment) -> Vec<super::spec::ToolSpec> {
    use toolvisor_protocol::wire::Tier;

    use super::spec::ToolSpec;

    let roster = |spec: ToolSpec| spec.attachment(vibe.clone());
    vec![
        // A question port can attach to any run; whether a person is attached *now* is
        // decided per call (`no_human`).
        ToolSpec::new(
            "ask_user",
            Tier::Read,
            "question_port",
            "Ask the user a question and wait for the answer.",
            |s, ctx, a| Box::pin(async move { ask_user(&AskUser::of(s), ctx, a).await }),
        )
        .idempotent(false),
        roster(
            ToolSpec::new(
                "vibe_spawn",
                Tier::Read,
                "vibe_roster",
                "Start a background worker on a brief; returns a worker id at once.",
                |s, ctx, a| Box::pin(run_vibe_spawn(&s.vibes, ctx, a)),
            )
            .idempotent(false)
            .open_world()
            .follows(super::spec::follow(
                "worker_id",
                (
                    "vibe_wait",
                    serde_json::json!({"worker_id": "{id}", "timeout_seconds": 0}),
                ),
                ("vibe_kill", serde_json::json!({"worker_id": "{id}"})),
                None,
                &["done", "failed", "killed"],
                "done",
            )),
        ),
        roster(
            ToolSpec::new(
                "vibe_send",
                Tier::Read,
                "vibe_roster",
                "Append a message to a worker's brief and rerun it.",
                |s, ctx, a| Box::pin(run_vibe_send(&s.vibes, ctx, a)),
            )
            .idempotent(false)
            .open_world(),
        ),
        roster(ToolSpec::new(
            "vibe_wait",
            Tier::Read,
            "vibe_roster",
            "Wait for a worker to finish (or the timeout) and return its state and last result.",
            |s, ctx, a| Box::pin(run_vibe_wait(&s.vibes, ctx, a)),
        )),
        roster(
            ToolSpec::new(
                "vibe_kill",
                Tier::Read,
                "vibe_roster",
                "Stop a worker and its whole process group.",
                |s, ctx, a| Box::pin(run_vibe_kill(&s.vibes, ctx, a)),
            )
            .idempotent(false),
        ),
        roster(ToolSpec::new(
            "vibe_list",
            Tier::Read,
            "vibe_roster",
            "List workers: tier, state, elapsed, last result.",
            |s, ctx, a| Box::pin(run_vibe_list(&s.vibes, ctx, a)),
        )),
    ]
}
