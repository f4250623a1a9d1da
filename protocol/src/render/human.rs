//! The renderings of the human tools' results (`results/human.rs`, `tools/human.rs`):
//! `ask_user`'s answer and the `vibe_*` background workers.

use super::{Doc, Outward, Render};
use crate::results::VibeListResult;
use crate::tools::{AskUserOutput, VibeInfo};

/// The person's free-text answer verbatim after the question's id (the labels chosen beside
/// it are not repeated, as the generic rules never wrote a list beside a `text`); without
/// one, the labels chosen, or that the question was skipped and what to do now.
impl Render for AskUserOutput {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.fact("question_id", self.question_id);
        doc.fact("skipped", self.skipped);
        if let Some(guidance) = &self.guidance {
            doc.string("guidance", guidance);
        }
        match &self.text {
            Some(text) => doc.body(text),
            None => doc.field("selected", &self.selected),
        }
    }
}

/// A worker's state and counts, its result or error under their keys when long; how long it
/// has run and its process id are no model's business.
impl Render for VibeInfo {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("worker_id", &self.worker_id);
        doc.string("label", &self.label);
        doc.field("tier", &self.tier);
        doc.field("state", &self.state);
        doc.fact("attempts", self.attempts);
        doc.fact("messages", self.messages);
        doc.opt("exit_code", self.exit_code);
        doc.opt("signal", self.signal);
        for (key, text) in [
            ("error", &self.error),
            ("stderr_tail", &self.stderr_tail),
            ("result", &self.result),
            ("note", &self.note),
        ] {
            if let Some(text) = text {
                doc.string(key, text);
            }
        }
        doc.fact("result_chars", self.result_chars);
        doc.flag("result_truncated", self.result_truncated);
        doc.flag("timed_out", self.timed_out);
    }
}

/// One worker a line.
impl Render for VibeListResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("workers", &self.workers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{generic, render_as};
    use serde_json::json;

    #[test]
    fn workers_read_as_before() {
        // As docs/TOOLS.md shows one.
        let info = json!({"attempts":1,"elapsed_ms":3,"error":null,"exit_code":null,"label":"rename",
            "messages":0,"note":null,"pid":51234,"result":"renamed 14 call sites\nin 6 files\n","result_chars":0,
            "result_truncated":true,"signal":null,"state":"running","stderr_tail":null,"tier":"fast",
            "timed_out":false,"worker_id":"w1"});
        let text = render_as::<VibeInfo>("vibe_wait", &info, &Outward::default());
        assert_eq!(text, generic("vibe_wait", &info));
        assert!(
            !text.contains("51234") && text.contains("result:\nrenamed"),
            "{text}"
        );
        let list = json!({"workers": [info]});
        assert_eq!(
            render_as::<VibeListResult>("vibe_list", &list, &Outward::default()),
            generic("vibe_list", &list)
        );
    }

    #[test]
    fn answers_read_as_before() {
        use crate::render::as_before;
        let text = as_before::<AskUserOutput>(
            "ask_user",
            json!({"question_id":7,"selected":["postgres"],"text":null,"skipped":false,"guidance":null}),
        );
        assert_eq!(
            text,
            "ask_user: question_id: 7 · skipped: false\nselected: postgres"
        );
        let text = as_before::<AskUserOutput>(
            "ask_user",
            json!({"question_id":8,"selected":["postgres","sqlite"],"skipped":false,"guidance":null,
                "text":"postgres for prod,\nsqlite for the tests"}),
        );
        assert!(!text.contains("selected"), "{text}");
        as_before::<AskUserOutput>(
            "ask_user",
            json!({"question_id":9,"selected":[],"text":"","skipped":false,"guidance":null,"masked":["github_token"]}),
        );
        as_before::<AskUserOutput>(
            "ask_user",
            json!({"question_id":10,"selected":[],"text":null,"skipped":true,
                "guidance":"the person skipped this question: proceed on your stated assumptions","masked":["github_token"]}),
        );
    }
}
