//! the Codex CLI (npm @openai/codex, `codex exec`) headless against a scripted model endpoint and `toolvisor mcp`: reads
//! answer; a write lands when the operator delegated approval to the harness
//! (`--approvals harness`, the tool on the harness's own allow-list) and is audited as approved
//! by that client; the default (`elicit`, which a headless harness cannot answer) denies it,
//! saying no person could be asked; `ask_user` answers `no_human` instead of a skip nobody
//! made (`--questions none`, and by default, since Codex declines every form unseen), and with
//! the default a `toolvisor operator` attached to every run answers it.

use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{
    ClientFrame, ClientKind, DaemonFrame, QuestionAnswer, Surface, Tier,
};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::harness::{Endpoint, audit, codex, played, project};

#[test]
fn reads_answer_with_what_the_files_hold() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "read", "args": {"path": "pkg/greet.py"}},
            {"tool": "grep", "args": {"pattern": "def greet", "path": "pkg"}},
            {"final": "read done"}
        ]),
    );
    let run = codex(&d, &ep, &work, &[], &["read", "grep"]);
    played(&run, &ep, "");
    let text = ep.results_text();
    assert!(text.contains("toolvisor-harness-7731"), "{text}");
    assert!(text.contains("greet.py:6:def greet"), "{text}");
}

#[test]
fn a_write_runs_when_the_operator_delegated_approval_and_is_audited() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "write", "args": {"path": "pkg/written.py", "content": "WRITTEN_BY_HARNESS = True\n"}},
            {"final": "write done"}
        ]),
    );
    let run = codex(&d, &ep, &work, &["--approvals", "harness"], &["write"]);
    played(&run, &ep, "");
    assert_eq!(
        std::fs::read_to_string(work.join("pkg/written.py")).unwrap(),
        "WRITTEN_BY_HARNESS = True\n"
    );
    let approved: Vec<_> = audit(&d)
        .into_iter()
        .filter(|r| r["event"] == "approved" && r["tool"] == "write")
        .collect();
    assert_eq!(approved.len(), 1, "{approved:?}");
    let reason = approved[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("approved by the MCP client codex-mcp-client 0.171.0")
            && reason.contains("--approvals harness"),
        "{reason}"
    );
}

#[test]
fn without_delegation_a_headless_write_is_denied() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "write", "args": {"path": "pkg/denied.py", "content": "NOPE = 1\n"}},
            {"final": "write refused"}
        ]),
    );
    let run = codex(&d, &ep, &work, &[], &["write"]);
    played(&run, &ep, "");
    assert!(
        !work.join("pkg/denied.py").exists(),
        "a write ran without approval"
    );
    let text = ep.results_text();
    assert!(text.contains("approval_denied"), "{text}");
    // Nobody was asked, and the model is told so, with the mode and what would let it run.
    assert!(
        text.contains("no person could be asked")
            && text.contains("--approvals elicit")
            && text.contains("--approvals harness")
            && text.contains("[mcp_servers.toolvisor.tools.write]")
            && text.contains("do not tell the user they declined"),
        "{text}"
    );
    assert!(
        !text.contains("the person answered") && !text.contains("change the plan or ask the user"),
        "a refusal nobody made: {text}"
    );
    assert!(
        audit(&d)
            .iter()
            .any(|r| r["event"] == "approval_denied" && r["tool"] == "write"),
        "the denial is audited"
    );
}

#[test]
fn ask_user_answers_no_human_when_no_person_is_attached() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "ask_user", "args": {"question": "Which greeting should greet() use?",
                "options": [{"label": "hello"}, {"label": "hi"}]}},
            {"final": "asked"}
        ]),
    );
    let run = codex(&d, &ep, &work, &["--questions", "none"], &["ask_user"]);
    played(&run, &ep, "");
    let text = ep.results_text();
    assert!(text.contains("no_human"), "{text}");
    assert!(
        !text.contains("skipped: true"),
        "a skip nobody made: {text}"
    );
}

#[test]
fn code_runs_when_the_operator_delegated_approval() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "bash", "args": {"command": "python3 -c 'import pkg.greet as g; print(g.greet(\"ci\"), 6 * 7)'"}},
            {"final": "ran"}
        ]),
    );
    let run = codex(&d, &ep, &work, &["--approvals", "harness"], &["bash"]);
    played(&run, &ep, "");
    let text = ep.results_text();
    assert!(text.contains("hello, ci 42"), "{text}");
}

const GREETING_QUESTION: &str = "Which greeting should greet() use?";

fn ask_script() -> serde_json::Value {
    json!([
        {"tool": "ask_user", "args": {"question": GREETING_QUESTION,
            "options": [{"label": "hello"}, {"label": "howdy"}]}},
        {"final": "asked"}
    ])
}

#[test]
fn by_default_ask_user_answers_no_human_not_a_skip() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), ask_script());
    let run = codex(&d, &ep, &work, &[], &["ask_user"]);
    played(&run, &ep, "");
    let text = ep.results_text();
    assert!(text.contains("no_human"), "{text}");
    assert!(
        !text.contains("skipped: true") && !text.contains("The person skipped"),
        "a skip nobody made: {text}"
    );
}

#[test]
fn by_default_an_attached_operator_answers_ask_user() {
    let d = TestDaemon::start("");
    let work = project(&d);
    // `toolvisor operator` without --run: a question port for every run.
    let mut op = Client::connect(
        &d.socket,
        ClientOptions {
            codec: Codec::Json,
            client_kind: ClientKind::Operator,
            run_id: String::new(),
            workdir: String::new(),
            surface: Surface {
                max_tier: Tier::Read,
                approvals: false,
                questions: true,
                bridge_tools: vec![],
            },
            ..ClientOptions::default()
        },
    )
    .expect("operator connects");
    op.set_read_timeout(Some(Duration::from_secs(150))).unwrap();
    let operator = std::thread::spawn(move || {
        loop {
            match op.recv().expect("a question for the operator") {
                DaemonFrame::Question(q) => {
                    assert_eq!(q.question, GREETING_QUESTION);
                    op.send(&ClientFrame::QuestionAnswer(QuestionAnswer {
                        question_id: q.question_id,
                        selected: vec!["howdy".into()],
                        text: None,
                        skipped: false,
                        no_person: None,
                    }))
                    .unwrap();
                    return op;
                }
                _ => continue,
            }
        }
    });
    let ep = Endpoint::start(&d.dir.path().join("ep"), ask_script());
    let run = codex(&d, &ep, &work, &[], &["ask_user"]);
    played(&run, &ep, "");
    let _op = operator.join().expect("the operator answered");
    let text = ep.results_text();
    assert!(text.contains("howdy"), "{text}");
    assert!(
        !text.contains("skipped: true") && !text.contains("The person skipped"),
        "the operator's answer, not a skip: {text}"
    );
}

#[test]
fn a_form_declined_faster_than_a_person_reads_answers_no_human() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), ask_script());
    // Asked anyway: Codex declines the form within milliseconds, unseen.
    let run = codex(&d, &ep, &work, &["--questions", "elicit"], &["ask_user"]);
    played(&run, &ep, "");
    let text = ep.results_text();
    assert!(
        text.contains("no_human") && text.contains("no person saw question"),
        "{text}"
    );
    assert!(
        !text.contains("skipped: true") && !text.contains("The person skipped"),
        "a skip nobody made: {text}"
    );
}
