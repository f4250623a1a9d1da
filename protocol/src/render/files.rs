//! The renderings of the files tools' results (`results/files.rs`): `read`, `ls`, `find`,
//! `grep`, `write`, `edit`, `apply_patch`, `tool_result_read`.

use super::{Doc, ImageFate, Outward, Render};
use crate::results::{
    ApplyPatchResult, EditResult, FindResult, GrepResult, LsResult, ReadImage, ReadImageOmitted,
    ReadResult, ReadText, ToolResultReadResult, WriteResult,
};

/// As the one it holds.
impl Render for ReadResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        match self {
            ReadResult::Text(text) => text.write(doc, outward),
            ReadResult::Image(image) => image.write(doc, outward),
            ReadResult::ImageOmitted(omitted) => omitted.write(doc, outward),
        }
    }
}

/// `read: eof: false · kind: text · lines: 1 · next_offset: 3 · …`, then the lines verbatim.
impl Render for ReadText {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.field("kind", &self.kind);
        doc.body(&self.content);
        doc.fact("offset", self.offset);
        doc.fact("lines", self.lines);
        doc.opt("total_lines", self.total_lines);
        doc.opt("next_offset", self.next_offset);
        doc.fact("eof", self.eof);
        doc.fact("size_bytes", self.size_bytes);
        doc.opt("cut_lines", self.cut_lines);
        doc.opt("invalid_utf8", self.invalid_utf8);
        doc.field("line_endings", &self.line_endings);
        doc.field("notes", &self.notes);
    }
}

/// Its size and format, and where the image went (`shown: as image content`, `file: …`),
/// never its bytes.
impl Render for ReadImage {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        doc.field("kind", &self.kind);
        doc.string("mime_type", &self.mime_type);
        match outward.images.iter().find(|(at, _)| at.is_none()) {
            Some((_, ImageFate::Shown)) => doc.string("shown", "as image content"),
            Some((_, ImageFate::Written(path, bytes))) => {
                doc.string("file", path);
                doc.fact("file_bytes", bytes);
            }
            Some((_, ImageFate::NotShown(why))) => doc.string("not_shown", why),
            None => doc.string("data", &self.data),
        }
        doc.fact("width", self.width);
        doc.fact("height", self.height);
        doc.fact("transformed", self.transformed);
        doc.field("source", &self.source);
        if let Some(note) = &self.note {
            doc.string("note", note);
        }
    }
}

/// Why the image was left out, and the file's own image.
impl Render for ReadImageOmitted {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("kind", &self.kind);
        doc.field("source", &self.source);
        if let Some(note) = &self.note {
            doc.string("note", note);
        }
    }
}

/// `find: path: . · pattern: *.rs · total: 1 · paths: src/main.rs`: the paths on one line
/// when short, one per line when not.
impl Render for FindResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.string("pattern", &self.pattern);
        doc.field("paths", &self.paths);
        doc.fact("total", self.total);
        doc.flag("truncated", self.truncated);
        doc.flag("timed_out", self.timed_out);
        doc.field("errors", &self.errors);
        doc.count("skipped_protected", self.skipped_protected);
        doc.field("notes", &self.notes);
        if let Some(note) = &self.note {
            doc.string("note", note);
        }
    }
}

/// The counts in the header, then ripgrep's lines verbatim.
impl Render for GrepResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.string("pattern", &self.pattern);
        doc.body(&self.output);
        doc.fact("matches", self.matches);
        doc.fact("files_with_matches", self.files_with_matches);
        doc.fact("files_searched", self.files_searched);
        doc.count("skipped_binary", self.skipped_binary);
        doc.flag("truncated", self.truncated);
        doc.flag("timed_out", self.timed_out);
        doc.field("errors", &self.errors);
        doc.field("notes", &self.notes);
        doc.count("skipped_protected", self.skipped_protected);
    }
}

/// `ls: path: . · total: 2`, then one entry a line (`name  size`, `dir/`).
impl Render for LsResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.field("entries", &self.entries);
        doc.fact("total", self.total);
        doc.flag("truncated", self.truncated);
        doc.count("skipped_protected", self.skipped_protected);
        doc.field("notes", &self.notes);
    }
}

/// What was written, and the new diagnostics as their own text.
impl Render for WriteResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.field("status", &self.status);
        doc.fact("bytes", self.bytes);
        doc.fact("lines", self.lines);
        doc.opt("previous_bytes", self.previous_bytes);
        doc.field("diagnostics", &self.diagnostics);
    }
}

/// What was replaced, the diff, the new diagnostics.
impl Render for EditResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.fact("replacements", self.replacements);
        doc.field("lines", &self.lines);
        doc.string("diff", &self.diff);
        doc.field("notes", &self.notes);
        doc.field("diagnostics", &self.diagnostics);
    }
}

/// The files changed, one a line, and the new diagnostics.
impl Render for ApplyPatchResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.field("files", &self.files);
        doc.field("notes", &self.notes);
        doc.field("diagnostics", &self.diagnostics);
    }
}

/// Where the page is in the stored result, then the page verbatim.
impl Render for ToolResultReadResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("ref", &self.reference);
        doc.body(&self.text);
        doc.fact("offset", self.offset);
        doc.fact("next_offset", self.next_offset);
        doc.fact("total_chars", self.total_chars);
        doc.fact("eof", self.eof);
        doc.string("source_tool", &self.source_tool);
        doc.string("content_type", &self.content_type);
        doc.string("storage_kind", &self.storage_kind);
        doc.field("masked", &self.masked);
        doc.fact("envelope_clamped", self.envelope_clamped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{as_before, render_as};
    use serde_json::json;

    #[test]
    fn read_find_and_grep_read_as_before() {
        // As docs/TOOLS.md shows them.
        let read = as_before::<ReadResult>(
            "read",
            json!({"content":"2\t    println!(\"hi\");\n","eof":false,"kind":"text","lines":1,"next_offset":3,"offset":2,"path":"src/main.rs","size_bytes":34,"total_lines":3}),
        );
        assert_eq!(
            read,
            "read: eof: false · kind: text · lines: 1 · next_offset: 3 · offset: 2 · path: src/main.rs · size_bytes: 34 · total_lines: 3\n2\t    println!(\"hi\");"
        );
        let find = as_before::<FindResult>(
            "find",
            json!({"path":".","paths":["src/main.rs"],"pattern":"*.rs","timed_out":false,"total":1,"truncated":false}),
        );
        assert_eq!(
            find,
            "find: path: . · pattern: *.rs · total: 1\npaths: src/main.rs"
        );
        let grep = as_before::<GrepResult>(
            "grep",
            json!({"files_searched":1,"files_with_matches":1,"matches":1,"output":"src/main.rs:2:    println!(\"hi\");\n","path":".","pattern":"println","skipped_binary":0,"skipped_protected":0,"timed_out":true,"truncated":false,"errors":[]}),
        );
        assert_eq!(
            grep,
            "grep: files_searched: 1 · files_with_matches: 1 · matches: 1 · path: . · pattern: println · timed_out: true\nsrc/main.rs:2:    println!(\"hi\");"
        );
    }

    #[test]
    fn ls_write_edit_patch_and_pages_read_as_before() {
        as_before::<LsResult>(
            "ls",
            json!({"entries":[{"name":".gitignore","size":8,"type":"file"},{"name":"src/","type":"dir"}],"path":".","total":2,"truncated":false}),
        );
        as_before::<WriteResult>(
            "write",
            json!({"bytes":48,"lines":3,"path":"src/lib.rs","previous_bytes":null,"status":"created",
                "diagnostics":{"dependents":{"checked":[],"max":20},"new":[],"notes":[],"text":"no new diagnostics\n"}}),
        );
        as_before::<EditResult>(
            "edit",
            json!({"diff":"--- a/m.py\n+++ b/m.py\n","lines":[2],"path":"m.py","replacements":1}),
        );
        as_before::<ApplyPatchResult>(
            "apply_patch",
            json!({"files":[{"added":1,"hunks":1,"path":"src/lib.rs","removed":1,"status":"modified"}]}),
        );
        let page = as_before::<ToolResultReadResult>(
            "tool_result_read",
            json!({"content_type":"text/plain","envelope_clamped":false,"eof":true,"masked":{"aws":1},
                "next_offset":20,"offset":10,"ref":"tr_1","source_tool":"bash","storage_kind":"inspectable",
                "text":"0123456789","total_chars":20}),
        );
        assert!(page.ends_with("0123456789\nmasked:\n  aws: 1"), "{page}");
    }

    #[test]
    fn an_image_says_where_it_went_never_its_bytes() {
        let v = json!({"kind": "image", "mime_type": "image/png", "data": "(written to a.png, 70 bytes)",
            "width": 1, "height": 1, "transformed": false, "note": null,
            "source": {"format": "png", "width": 1, "height": 1, "bytes": 70}});
        let outward = Outward {
            images: vec![(None, ImageFate::Written("a.png".into(), 70))],
        };
        assert_eq!(
            render_as::<ReadResult>("read", &v, &outward),
            "read: file: a.png · file_bytes: 70 · height: 1 · kind: image · mime_type: image/png · transformed: false · width: 1\nsource:\n  bytes: 70\n  format: png\n  height: 1\n  width: 1"
        );
    }
}
