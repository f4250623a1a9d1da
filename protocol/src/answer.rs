//! The rule an answer to an `ask_user` question must follow, shared by the daemon (which
//! enforces it) and the clients that collect answers from a person (which check before they
//! send, so they can ask the person again saying what was wrong).

use crate::wire::{Question, QuestionAnswer};

/// Refused answers a question takes from its port before it ends: the asking call then fails
/// with `invalid_args` naming the last refusal, instead of waiting for its timeout.
pub const MAX_REFUSED_ANSWERS: u32 = 3;

/// Check an answer against its question; return it normalised (selected labels in option
/// order, blank text dropped) or say what is wrong.
pub fn check_answer(q: &Question, mut a: QuestionAnswer) -> Result<QuestionAnswer, String> {
    if a.text.as_deref().is_some_and(|t| t.trim().is_empty()) {
        a.text = None;
    }
    if a.skipped {
        if !a.selected.is_empty() || a.text.is_some() {
            return Err("a skip carries no selection and no text".into());
        }
        return Ok(a);
    }
    for label in &a.selected {
        if !q.options.iter().any(|o| &o.label == label) {
            let labels: Vec<_> = q.options.iter().map(|o| format!("{:?}", o.label)).collect();
            return Err(if labels.is_empty() {
                format!("{label:?} is not an option: this question has no options")
            } else {
                format!(
                    "{label:?} is not an option (options: {})",
                    labels.join(", ")
                )
            });
        }
    }
    let mut selected = Vec::new();
    for o in &q.options {
        let n = a.selected.iter().filter(|l| **l == o.label).count();
        if n > 1 {
            return Err(format!("{:?} is selected {n} times", o.label));
        }
        if n == 1 {
            selected.push(o.label.clone());
        }
    }
    if selected.len() > 1 && !q.multi_select {
        return Err(format!(
            "{} options selected, but this question takes one",
            selected.len()
        ));
    }
    if a.text.is_some() && !q.allow_free_text {
        return Err(
            "free text is not accepted for this question: choose among the options, or skip".into(),
        );
    }
    if selected.is_empty() && a.text.is_none() {
        return Err(if q.allow_free_text && q.options.is_empty() {
            "the answer is empty: type an answer, or skip".into()
        } else if q.allow_free_text {
            "the answer is empty: choose an option, type an answer, or skip".into()
        } else {
            "the answer is empty: choose an option, or skip".into()
        });
    }
    a.selected = selected;
    Ok(a)
}
