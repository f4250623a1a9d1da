//! The renderings of the structural tools' results (`results/structural.rs`): `ast_grep`,
//! `ast_edit`, `resolve`.

use super::{Doc, Outward, Render};
use crate::results::{AstEditResult, AstGrepResult, ResolveResult};

/// The counts and the summary, then one match a line (`path:line: text  [captures=…]`); how
/// many files were parsed or cached is no model's business.
impl Render for AstGrepResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("summary", &self.summary);
        doc.string("language", &self.language);
        if let Some(note) = &self.language_note {
            doc.string("language_note", note);
        }
        if let Some(context) = &self.pattern_context {
            doc.string("pattern_context", context);
        }
        doc.field("matches", &self.matches);
        doc.fact("total", self.total);
        doc.fact("shown", self.shown);
        doc.flag("truncated", self.truncated);
        doc.fact("files_searched", self.files_searched);
        doc.fact("files_matched", self.files_matched);
        doc.field("skipped", &self.skipped);
        doc.count("skipped_total", self.skipped_total);
    }
}

/// The summary and counts, the files, the preview of the staged edit.
impl Render for AstEditResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.opt("edit_id", self.edit_id.as_deref());
        doc.string("summary", &self.summary);
        doc.fact("replacements", self.replacements);
        doc.field("files", &self.files);
        if let Some(preview) = &self.preview {
            doc.string("preview", preview);
        }
        doc.flag("preview_truncated", self.preview_truncated == Some(true));
        doc.string("language", &self.language);
        if let Some(note) = &self.language_note {
            doc.string("language_note", note);
        }
        if let Some(context) = &self.pattern_context {
            doc.string("pattern_context", context);
        }
        doc.field("notes", &self.notes);
        doc.fact("files_searched", self.files_searched);
        doc.field("skipped", &self.skipped);
        doc.count("skipped_total", self.skipped_total);
    }
}

/// What became of the staged edit, and the new diagnostics.
impl Render for ResolveResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("edit_id", &self.edit_id);
        doc.field("action", &self.action);
        doc.string("summary", &self.summary);
        doc.field("files", &self.files);
        doc.field("written", &self.written);
        doc.opt("replacements", self.replacements);
        doc.field("diagnostics", &self.diagnostics);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::as_before;
    use serde_json::json;

    #[test]
    fn matches_edits_and_resolutions_read_as_before() {
        let grep = as_before::<AstGrepResult>(
            "ast_grep",
            json!({"files_cached":0,"files_matched":1,"files_parsed":1,"files_searched":2,"language":"dart",
                "language_note":"language inferred: dart","pattern_context":null,
                "matches":[{"captures":{"X":"c"},"column":3,"end_column":8,"end_line":2,"line":2,
                    "location":"lib/a.dart:2:3","path":"lib/a.dart","text":"c.dispose()"}],
                "shown":1,"skipped":[],"skipped_total":0,"summary":"1 match in 1 file","total":1,"truncated":false}),
        );
        assert!(!grep.contains("files_parsed"), "{grep}");
        as_before::<AstEditResult>(
            "ast_edit",
            json!({"edit_id":"edit_1","files":[{"path":"lib/a.dart","replacements":1}],
                "preview":"--- a/lib/a.dart\n+++ b/lib/a.dart\n","preview_truncated":false,"replacements":1,
                "language":"dart","language_note":null,"pattern_context":null,"notes":["staged"],
                "files_searched":2,"skipped":[{"path":"x.dart","why":"unparsable"}],"skipped_total":1,
                "summary":"staged edit_1: 1 replacement in 1 file"}),
        );
        as_before::<ResolveResult>(
            "resolve",
            json!({"action":"accept","diagnostics":{"dependents":{"checked":[],"max":20},"new":[],"notes":["lib/a.dart: …"],"text":"…"},
                "edit_id":"edit_1","replacements":2,"summary":"accepted edit_1: wrote 2 replacements in 2 files",
                "written":["lib/a.dart","lib/b.dart"]}),
        );
    }
}
