//! Question ports: the connected clients that answer `ask_user` questions (a harness UI, or
//! `toolvisor operator`), the questions pending on each, and the rules an answer must follow.
//!
//! A client is a question port when its `Hello` declares `surface.questions`. A question of
//! run R goes to one port: the most recently connected port whose `run_id` is R, else the
//! most recently connected *operator* (client kind `operator`) that gave no run id, which
//! answers every run. The asking call's run is the `run_id` of the asking client's `Hello`.
//! Only the port a question was sent to may answer it; an invalid answer is refused back to
//! that port with an `error` frame and the question stays pending, up to
//! [`MAX_REFUSED_ANSWERS`]: then the question ends and the asking call fails with
//! `invalid_args` naming the last refusal (a client that cannot produce a valid answer must
//! not leave the model waiting for the timeout). When a port disconnects,
//! every question pending on it fails at once.
//!
//! A question is pending on exactly one port and always ends: by its answer, a skip, its timeout
//! (`ask_user`'s handler), its caller's cancellation (dropping `Asked` withdraws it and tells the
//! port), or at once when its port leaves. A port is attached before its session's `Welcome` is
//! written (`session/serve.rs`), so a client holding a Welcome never misses a question, and
//! `ask_user` never waits where no port exists: it answers `no_human`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::oneshot;
pub use toolvisor_protocol::answer::{MAX_REFUSED_ANSWERS, check_answer};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{ClientKind, DaemonFrame, Question, QuestionAnswer};

/// How a pending question ended, as its asker sees it.
#[derive(Debug)]
pub enum Resolution {
    /// A valid answer or skip, normalised (labels in option order, empty text dropped).
    Answered(QuestionAnswer),
    /// The port it was sent to disconnected.
    PortGone,
    /// The port sent [`MAX_REFUSED_ANSWERS`] answers that break the question's rules; the
    /// last one's refusal.
    Refused(String),
    /// The port's client could not show the question to a person, and why.
    NoPerson(String),
}

struct Port {
    run_id: String,
    /// An operator without a run id: takes questions of every run.
    any_run: bool,
    out: crate::outbox::Outbox,
}

struct Pending {
    port: u64,
    question: Question,
    tx: oneshot::Sender<Resolution>,
    /// Answers refused so far.
    refused: u32,
}

#[derive(Default)]
struct Board {
    /// By session id; session ids grow, so the last match is the most recent.
    ports: BTreeMap<u64, Port>,
    pending: HashMap<u64, Pending>,
}

/// Every question port and every pending question of the daemon.
#[derive(Default)]
pub struct QuestionPorts {
    board: Mutex<Board>,
    next_id: AtomicU64,
}

/// A question sent to a port and not yet resolved. Dropping it withdraws the question: the
/// port is told, and a late answer gets `not_found`.
pub struct Asked<'a> {
    ports: &'a QuestionPorts,
    pub question_id: u64,
    pub port: u64,
    pub rx: oneshot::Receiver<Resolution>,
    withdraw_reason: String,
}

impl Asked<'_> {
    /// Say why the question is withdrawn when this handle drops unresolved.
    pub fn set_withdraw_reason(&mut self, reason: impl Into<String>) {
        self.withdraw_reason = reason.into();
    }
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        let removed = self.ports.lock().pending.remove(&self.question_id);
        if let Some(p) = removed {
            let out = self.ports.lock().ports.get(&p.port).map(|p| p.out.clone());
            if let Some(out) = out {
                let _ = out.try_send(DaemonFrame::Error(withdrawn(
                    self.question_id,
                    &self.withdraw_reason,
                )));
            }
        }
    }
}

/// The `error` frame a port gets when a question it shows is no longer pending. Its message
/// starts with `question <id> was withdrawn` (documented in docs/PROTOCOL.md, read by
/// `toolvisor operator`).
pub fn withdrawn(question_id: u64, reason: &str) -> ToolError {
    ToolError::new(
        ErrorKind::Cancelled,
        format!("question {question_id} was withdrawn: {reason}"),
        "drop it from the screen; an answer to it would be refused",
    )
}

impl QuestionPorts {
    fn lock(&self) -> MutexGuard<'_, Board> {
        self.board.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make session `session` a question port.
    pub fn attach(&self, session: u64, kind: ClientKind, run_id: &str, out: crate::outbox::Outbox) {
        let any_run = kind == ClientKind::Operator && run_id.is_empty();
        tracing::info!(session, run = run_id, any_run, "question port attached");
        self.lock().ports.insert(
            session,
            Port {
                run_id: run_id.to_string(),
                any_run,
                out,
            },
        );
    }

    /// The session left: it is no port any more, and its pending questions fail at once.
    pub fn detach(&self, session: u64) {
        let failed: Vec<Pending> = {
            let mut board = self.lock();
            if board.ports.remove(&session).is_none() {
                return;
            }
            let ids: Vec<u64> = board
                .pending
                .iter()
                .filter(|(_, p)| p.port == session)
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .filter_map(|id| board.pending.remove(id))
                .collect()
        };
        tracing::info!(session, pending = failed.len(), "question port detached");
        for p in failed {
            let _ = p.tx.send(Resolution::PortGone);
        }
    }

    /// Whether run `run_id` has a question port now.
    pub fn has_port(&self, run_id: &str) -> bool {
        self.pick(&self.lock(), run_id).is_some()
    }

    fn pick(&self, board: &Board, run_id: &str) -> Option<u64> {
        let exact = board
            .ports
            .iter()
            .rev()
            .find(|(_, p)| p.run_id == run_id && !p.any_run);
        let any = || board.ports.iter().rev().find(|(_, p)| p.any_run);
        exact.or_else(any).map(|(id, _)| *id)
    }

    /// Register `question` (its id is assigned here) with the port of its run and send it.
    /// Fails with `no_human` when the run has no port, or the port is already gone.
    pub async fn ask(&self, mut question: Question) -> Result<Asked<'_>, ToolError> {
        let no_port = no_human(&question.run_id);
        let question_id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        question.question_id = question_id;
        let (tx, rx) = oneshot::channel();
        let (port, out) = {
            let mut board = self.lock();
            let Some(port) = self.pick(&board, &question.run_id) else {
                return Err(no_port);
            };
            let out = board.ports[&port].out.clone();
            board.pending.insert(
                question_id,
                Pending {
                    port,
                    question: question.clone(),
                    tx,
                    refused: 0,
                },
            );
            (port, out)
        };
        let mut asked = Asked {
            ports: self,
            question_id,
            port,
            rx,
            withdraw_reason: "the asking call ended".into(),
        };
        if out.send(DaemonFrame::Question(question)).await.is_err() {
            asked.set_withdraw_reason("the port went away");
            return Err(ToolError::new(
                ErrorKind::NoHuman,
                "the person's client disconnected before the question reached it",
                "proceed on the assumptions you stated and do not ask again",
            ));
        }
        Ok(asked)
    }

    /// An answer from session `session`. Valid: the asker gets it. Invalid: the error goes
    /// back to the answering client and the question stays pending.
    pub fn answer(&self, session: u64, answer: QuestionAnswer) -> Result<(), ToolError> {
        let mut board = self.lock();
        let Some(pending) = board.pending.get(&answer.question_id) else {
            return Err(ToolError::new(
                ErrorKind::NotFound,
                format!(
                    "no question {} is pending (already answered, withdrawn, timed out, or never asked)",
                    answer.question_id
                ),
                "answer only questions this connection received, once",
            ));
        };
        if pending.port != session {
            return Err(ToolError::new(
                ErrorKind::OutOfScope,
                format!("question {} was sent to another client", answer.question_id),
                "answer only questions this connection received",
            ));
        }
        let question_id = answer.question_id;
        if let Some(why) = answer.no_person {
            let pending = board.pending.remove(&question_id).expect("checked above");
            drop(board);
            tracing::info!(question = question_id, session, %why, "question reached no person");
            let _ = pending.tx.send(Resolution::NoPerson(why));
            return Ok(());
        }
        let normalized = match check_answer(&pending.question, answer) {
            Ok(a) => a,
            Err(why) => {
                let pending = board.pending.get_mut(&question_id).expect("checked above");
                pending.refused += 1;
                if pending.refused < MAX_REFUSED_ANSWERS {
                    return Err(ToolError::new(
                        ErrorKind::InvalidArgs,
                        format!("answer to question {question_id} refused: {why}"),
                        format!(
                            "send a corrected question_answer; the question is still pending ({} more refused answers end it)",
                            MAX_REFUSED_ANSWERS - pending.refused
                        ),
                    ));
                }
                let pending = board.pending.remove(&question_id).expect("checked above");
                drop(board);
                tracing::info!(question = question_id, session, %why, "question ended: too many refused answers");
                let _ = pending.tx.send(Resolution::Refused(why.clone()));
                return Err(ToolError::new(
                    ErrorKind::InvalidArgs,
                    format!(
                        "answer to question {question_id} refused: {why}; that was refused answer {MAX_REFUSED_ANSWERS} of {MAX_REFUSED_ANSWERS}, so the question has ended and the asking call was told"
                    ),
                    "nothing more to send for this question",
                ));
            }
        };
        let pending = board
            .pending
            .remove(&normalized.question_id)
            .expect("checked above");
        drop(board);
        tracing::info!(
            question = normalized.question_id,
            session,
            skipped = normalized.skipped,
            "question answered"
        );
        let _ = pending.tx.send(Resolution::Answered(normalized));
        Ok(())
    }
}

/// The `no_human` error of a run without a question port.
pub fn no_human(run_id: &str) -> ToolError {
    let run = if run_id.is_empty() {
        "this run (no run_id)".to_string()
    } else {
        format!("run {run_id:?}")
    };
    ToolError::new(
        ErrorKind::NoHuman,
        format!("no person is attached to answer questions for {run}"),
        format!(
            "proceed on the assumptions you stated and do not ask again; a person can attach with `toolvisor operator{}`",
            if run_id.is_empty() {
                String::new()
            } else {
                format!(" --run {run_id}")
            }
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolvisor_protocol::codec::Codec;
    use toolvisor_protocol::wire::QuestionOption;

    fn q(multi: bool, free: bool) -> Question {
        Question {
            question_id: 7,
            run_id: "r".into(),
            conversation: "c".into(),
            question: "which?".into(),
            context: None,
            options: ["a", "b", "c"]
                .iter()
                .map(|l| QuestionOption {
                    label: l.to_string(),
                    description: None,
                })
                .collect(),
            allow_free_text: free,
            multi_select: multi,
        }
    }

    fn a(selected: &[&str], text: Option<&str>, skipped: bool) -> QuestionAnswer {
        QuestionAnswer {
            question_id: 7,
            selected: selected.iter().map(|s| s.to_string()).collect(),
            text: text.map(str::to_string),
            skipped,
            no_person: None,
        }
    }

    #[test]
    fn answers_follow_the_questions_rules() {
        let single = q(false, false);
        assert_eq!(
            check_answer(&single, a(&["b"], None, false))
                .unwrap()
                .selected,
            ["b"]
        );
        assert!(
            check_answer(&single, a(&["a", "b"], None, false))
                .unwrap_err()
                .contains("takes one")
        );
        assert!(
            check_answer(&single, a(&["z"], None, false))
                .unwrap_err()
                .contains("not an option")
        );
        assert!(
            check_answer(&single, a(&[], Some("mine"), false))
                .unwrap_err()
                .contains("free text is not accepted")
        );
        assert!(
            check_answer(&single, a(&[], Some("  "), false))
                .unwrap_err()
                .contains("empty")
        );
        assert!(check_answer(&single, a(&[], None, true)).unwrap().skipped);
        assert!(check_answer(&single, a(&["a"], None, true)).is_err());
        let multi = q(true, true);
        let got = check_answer(&multi, a(&["c", "a"], Some("note"), false)).unwrap();
        assert_eq!(got.selected, ["a", "c"], "normalised to option order");
        assert_eq!(got.text.as_deref(), Some("note"));
        assert!(
            check_answer(&multi, a(&["a", "a"], None, false))
                .unwrap_err()
                .contains("2 times")
        );
    }

    #[tokio::test]
    async fn a_question_goes_to_the_runs_latest_port_and_fails_when_it_leaves() {
        let ports = QuestionPorts::default();
        let queue = || crate::outbox::outbox(Codec::Json, 1 << 20, 1 << 20);
        let (tx1, mut rx1) = queue();
        let (tx2, mut rx2) = queue();
        let (tx3, _rx3) = queue();
        ports.attach(1, ClientKind::Harness, "r", tx1);
        ports.attach(2, ClientKind::Operator, "", tx2);
        ports.attach(3, ClientKind::Harness, "other", tx3);
        let mut asked = ports.ask(q(false, false)).await.unwrap();
        assert_eq!(
            asked.port, 1,
            "the run's own port wins over an any-run operator"
        );
        assert!(matches!(
            rx1.next_frame().await,
            Some(DaemonFrame::Question(_))
        ));
        let id = asked.question_id;
        assert_eq!(
            ports.answer(2, a(&["a"], None, false)).map_err(|e| e.kind),
            Err(ErrorKind::NotFound),
            "question 7 is not the id that was assigned"
        );
        let mut wrong = a(&["a"], None, false);
        wrong.question_id = id;
        assert_eq!(
            ports.answer(2, wrong).unwrap_err().kind,
            ErrorKind::OutOfScope
        );
        ports.detach(1);
        assert!(matches!((&mut asked.rx).await, Ok(Resolution::PortGone)));
        let mut q2 = q(false, false);
        q2.run_id = "elsewhere".into();
        let asked = ports.ask(q2).await.unwrap();
        assert_eq!(asked.port, 2, "an operator without a run id takes any run");
        assert!(matches!(
            rx2.next_frame().await,
            Some(DaemonFrame::Question(_))
        ));
        let id = asked.question_id;
        drop(asked);
        match rx2.next_frame().await {
            Some(DaemonFrame::Error(e)) => {
                assert!(
                    e.message
                        .starts_with(&format!("question {id} was withdrawn"))
                )
            }
            other => panic!("expected a withdrawal notice, got {other:?}"),
        }
        ports.detach(2);
        let mut q3 = q(false, false);
        q3.run_id = "nobody".into();
        assert_eq!(
            ports.ask(q3).await.err().map(|e| e.kind),
            Some(ErrorKind::NoHuman)
        );
    }
}
