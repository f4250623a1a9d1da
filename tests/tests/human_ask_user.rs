//! `ask_user` through a question port: a scripted operator client (a protocol client that
//! declares `questions`) answers, multi-selects, gets invalid answers refused, skips, times
//! out, disconnects mid-question; and without any port the call fails at once with `no_human`.

use std::thread;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::{CallReply, Client, ClientOptions};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{
    ClientFrame, ClientKind, DaemonFrame, Question, QuestionAnswer, Surface, Tier,
};
use toolvisor_tests::{TestDaemon, err_of, ok_of};

/// A question port for `run`, as a harness UI or `toolvisor operator` would connect.
fn operator(d: &TestDaemon, run: &str) -> Client {
    let c = Client::connect(
        &d.socket,
        ClientOptions {
            codec: Codec::Json,
            client_kind: ClientKind::Operator,
            run_id: run.into(),
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
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

/// Call `ask_user` from a harness of run `test-run` in a thread; join to get the reply.
fn ask(d: &TestDaemon, args: Json) -> thread::JoinHandle<CallReply> {
    let mut harness = d.client(Codec::Bincode, Tier::Read, false);
    harness
        .set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    thread::spawn(move || {
        harness
            .call("conv-1", "ask_user", args)
            .expect("ask_user call")
    })
}

/// The next question the operator receives (other frames are unexpected).
fn next_question(op: &mut Client) -> Question {
    match op.recv().expect("a frame for the operator") {
        DaemonFrame::Question(q) => q,
        other => panic!("expected a question, got {other:?}"),
    }
}

fn answer(op: &mut Client, q: &Question, selected: &[&str], text: Option<&str>, skipped: bool) {
    op.send(&ClientFrame::QuestionAnswer(QuestionAnswer {
        question_id: q.question_id,
        selected: selected.iter().map(|s| s.to_string()).collect(),
        text: text.map(str::to_string),
        skipped,
        no_person: None,
    }))
    .unwrap();
}

/// The error frame an invalid answer gets back.
fn refusal(op: &mut Client) -> toolvisor_protocol::ToolError {
    match op.recv().expect("a frame for the operator") {
        DaemonFrame::Error(e) => e,
        other => panic!("expected an error frame, got {other:?}"),
    }
}

fn db_question(multi: bool, free: Option<bool>) -> Json {
    let mut args = json!({
        "question": "Which database should the tests use?",
        "context": "CI runs postgres 16",
        "options": [
            {"label": "postgres", "description": "the CI default"},
            {"label": "sqlite"},
            {"label": "mysql"}
        ],
        "multi_select": multi,
    });
    if let Some(free) = free {
        args["allow_free_text"] = json!(free);
    }
    args
}

#[test]
fn an_operator_answers_and_invalid_answers_are_refused_back_to_it() {
    let d = TestDaemon::start("");
    let mut op = operator(&d, "test-run");
    let call = ask(&d, db_question(false, None));
    let q = next_question(&mut op);
    assert_eq!(q.run_id, "test-run");
    assert_eq!(q.conversation, "conv-1");
    assert_eq!(q.question, "Which database should the tests use?");
    assert_eq!(q.context.as_deref(), Some("CI runs postgres 16"));
    assert_eq!(q.options.len(), 3);
    assert_eq!(q.options[0].description.as_deref(), Some("the CI default"));
    assert!(!q.multi_select);
    assert!(
        !q.allow_free_text,
        "with options, free text is off unless asked for"
    );

    // Refused back to the operator; the question stays pending.
    answer(&mut op, &q, &["postgres", "sqlite"], None, false);
    let e = refusal(&mut op);
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.message.contains("takes one"), "{}", e.message);
    answer(&mut op, &q, &["oracle"], None, false);
    let e = refusal(&mut op);
    assert!(
        e.message.contains("\"oracle\" is not an option"),
        "{}",
        e.message
    );
    assert!(e.hint.contains("still pending"), "{}", e.hint);

    answer(&mut op, &q, &["sqlite"], None, false);
    let reply = call.join().unwrap();
    let v = ok_of(&reply);
    assert_eq!(v["selected"], json!(["sqlite"]));
    assert_eq!(v["skipped"], false);
    assert_eq!(v["text"], Json::Null);
    assert_eq!(v["question_id"], q.question_id);

    // Answered once: a second answer finds nothing pending.
    answer(&mut op, &q, &["mysql"], None, false);
    assert_eq!(refusal(&mut op).kind, ErrorKind::NotFound);
}

#[test]
fn the_third_refused_answer_ends_the_question_with_a_clear_error() {
    let d = TestDaemon::start("");
    let mut op = operator(&d, "test-run");
    let call = ask(&d, db_question(false, None));
    let q = next_question(&mut op);
    for n in 1..=3 {
        answer(&mut op, &q, &["oracle"], None, false);
        let e = refusal(&mut op);
        assert_eq!(e.kind, ErrorKind::InvalidArgs);
        if n < 3 {
            assert!(e.hint.contains("still pending"), "{}", e.hint);
        } else {
            assert!(e.message.contains("has ended"), "{}", e.message);
        }
    }
    // The asking call gets its answer now, not at its timeout.
    let reply = call.join().unwrap();
    let e = err_of(&reply);
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message.contains("3 answers") && e.message.contains("\"oracle\" is not an option"),
        "{}",
        e.message
    );
    assert!(e.hint.contains("allow_free_text"), "{}", e.hint);
    answer(&mut op, &q, &["sqlite"], None, false);
    assert_eq!(refusal(&mut op).kind, ErrorKind::NotFound);
}

#[test]
fn multi_select_returns_every_chosen_label_in_option_order() {
    let d = TestDaemon::start("");
    let mut op = operator(&d, "test-run");
    let call = ask(&d, db_question(true, Some(true)));
    let q = next_question(&mut op);
    assert!(q.multi_select && q.allow_free_text);
    answer(
        &mut op,
        &q,
        &["mysql", "postgres"],
        Some("  and keep sqlite for unit tests "),
        false,
    );
    let reply = call.join().unwrap();
    let v = ok_of(&reply);
    assert_eq!(v["selected"], json!(["postgres", "mysql"]));
    assert_eq!(v["text"], "  and keep sqlite for unit tests ");
}

#[test]
fn free_text_is_refused_where_not_allowed_and_a_skip_is_success_with_guidance() {
    let d = TestDaemon::start("");
    let mut op = operator(&d, "test-run");
    let call = ask(&d, db_question(false, Some(false)));
    let q = next_question(&mut op);
    answer(&mut op, &q, &[], Some("use duckdb"), false);
    let e = refusal(&mut op);
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(
        e.message.contains("free text is not accepted"),
        "{}",
        e.message
    );
    answer(&mut op, &q, &[], None, true);
    let reply = call.join().unwrap();
    let v = ok_of(&reply);
    assert_eq!(v["skipped"], true);
    assert_eq!(v["selected"], json!([]));
    let guidance = v["guidance"].as_str().unwrap();
    assert!(
        guidance.contains("proceed on the assumptions you stated")
            && guidance.contains("do not ask this again"),
        "{guidance}"
    );

    // Without options, free text is the default way to answer.
    let call = ask(
        &d,
        json!({"question": "What should the release be called?"}),
    );
    let q = next_question(&mut op);
    assert!(q.allow_free_text && q.options.is_empty());
    answer(&mut op, &q, &[], Some("Aurora"), false);
    assert_eq!(ok_of(&call.join().unwrap())["text"], "Aurora");

    // A question nothing could answer is refused before it reaches anyone.
    let mut harness = d.client(Codec::Json, Tier::Read, false);
    let reply = harness
        .call(
            "conv-1",
            "ask_user",
            json!({"question": "?", "allow_free_text": false}),
        )
        .unwrap();
    assert_eq!(err_of(&reply).kind, ErrorKind::InvalidArgs);
    let reply = harness
        .call(
            "conv-1",
            "ask_user",
            json!({"question": "pick", "options": [{"label": "a"}, {"label": "a"}]}),
        )
        .unwrap();
    assert!(
        err_of(&reply)
            .message
            .contains("two options are labelled \"a\"")
    );
}

#[test]
fn an_unanswered_question_times_out_with_guidance_and_is_withdrawn_from_the_port() {
    let d = TestDaemon::start("ask_user_timeout_s = 1\n");
    let mut op = operator(&d, "test-run");
    let call = ask(&d, db_question(false, None));
    let q = next_question(&mut op);
    let reply = call.join().unwrap();
    let e = err_of(&reply);
    assert_eq!(e.kind, ErrorKind::Timeout);
    assert!(e.message.contains("within 1 s"), "{}", e.message);
    assert!(
        e.hint.contains("proceed on the assumptions you stated"),
        "{}",
        e.hint
    );
    let notice = refusal(&mut op);
    assert!(
        notice
            .message
            .starts_with(&format!("question {} was withdrawn", q.question_id)),
        "{}",
        notice.message
    );
    answer(&mut op, &q, &["sqlite"], None, false);
    assert_eq!(refusal(&mut op).kind, ErrorKind::NotFound);
}

#[test]
fn without_a_question_port_for_the_run_the_call_fails_at_once_with_no_human() {
    // The default timeout is 10 minutes: an answer now proves the call did not wait for it.
    let d = TestDaemon::start("");
    let mut harness = d.client(Codec::Json, Tier::Read, false);
    let reply = harness
        .call("conv-1", "ask_user", db_question(false, None))
        .unwrap();
    let e = err_of(&reply);
    assert_eq!(e.kind, ErrorKind::NoHuman);
    assert!(e.message.contains("run \"test-run\""), "{}", e.message);
    assert!(
        e.hint.contains("toolvisor operator --run test-run"),
        "{}",
        e.hint
    );

    // A port of another run does not count.
    let _other = operator(&d, "another-run");
    let reply = harness
        .call("conv-1", "ask_user", db_question(false, None))
        .unwrap();
    assert_eq!(err_of(&reply).kind, ErrorKind::NoHuman);

    // ask_user is advertised to a read surface all the same: a port can attach any time.
    let tools: Vec<_> = harness
        .welcome()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert!(tools.contains(&"ask_user".to_string()), "{tools:?}");
}

#[test]
fn an_operator_that_disconnects_mid_question_fails_the_call_at_once() {
    let d = TestDaemon::start("");
    let mut op = operator(&d, "test-run");
    let call = ask(&d, db_question(false, None));
    let _q = next_question(&mut op);
    drop(op);
    let reply = call.join().unwrap();
    let e = err_of(&reply);
    assert_eq!(e.kind, ErrorKind::NoHuman);
    assert!(e.message.contains("disconnected"), "{}", e.message);
}

#[test]
fn an_operator_without_a_run_id_answers_every_run() {
    let d = TestDaemon::start("");
    let mut op = operator(&d, "");
    let call = ask(&d, db_question(false, None));
    let q = next_question(&mut op);
    assert_eq!(q.run_id, "test-run");
    answer(&mut op, &q, &["postgres"], None, false);
    assert_eq!(
        ok_of(&call.join().unwrap())["selected"],
        json!(["postgres"])
    );
}
