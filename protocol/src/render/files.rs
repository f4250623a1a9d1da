//! The renderings of the files tools' results (`results/files.rs`): `read`, `find`, `grep`.

use serde_json::{Map, Value as Json};

use super::{Doc, ImageFate, Outward, Render};
use crate::results::{FindResult, GrepResult, ReadImage, ReadImageOmitted, ReadResult, ReadText};

/// As the one it holds.
impl Render for ReadResult {
    fn render(&self, tool: &str, extra: &Map<String, Json>, outward: &Outward) -> String {
        match self {
            ReadResult::Text(text) => text.render(tool, extra, outward),
            ReadResult::Image(image) => image.render(tool, extra, outward),
            ReadResult::ImageOmitted(omitted) => omitted.render(tool, extra, outward),
        }
    }
}

/// `read: eof: false · kind: text · lines: 1 · next_offset: 3 · …`, then the lines verbatim.
impl Render for ReadText {
    fn render(&self, tool: &str, extra: &Map<String, Json>, _: &Outward) -> String {
        let mut doc = Doc::new(tool);
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
        doc.extra(extra);
        doc.finish()
    }
}

/// Its size and format, and where the image went (`shown: as image content`, `file: …`),
/// never its bytes.
impl Render for ReadImage {
    fn render(&self, tool: &str, extra: &Map<String, Json>, outward: &Outward) -> String {
        let mut doc = Doc::new(tool);
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
        doc.extra(extra);
        doc.finish()
    }
}

/// Why the image was left out, and the file's own image.
impl Render for ReadImageOmitted {
    fn render(&self, tool: &str, extra: &Map<String, Json>, _: &Outward) -> String {
        let mut doc = Doc::new(tool);
        doc.field("kind", &self.kind);
        doc.field("source", &self.source);
        if let Some(note) = &self.note {
            doc.string("note", note);
        }
        doc.extra(extra);
        doc.finish()
    }
}

/// `find: path: . · pattern: *.rs · total: 1 · paths: src/main.rs`: the paths on one line
/// when short, one per line when not.
impl Render for FindResult {
    fn render(&self, tool: &str, extra: &Map<String, Json>, _: &Outward) -> String {
        let mut doc = Doc::new(tool);
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
        doc.extra(extra);
        doc.finish()
    }
}

/// The counts in the header, then ripgrep's lines verbatim.
impl Render for GrepResult {
    fn render(&self, tool: &str, extra: &Map<String, Json>, _: &Outward) -> String {
        let mut doc = Doc::new(tool);
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
        doc.extra(extra);
        doc.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{generic, render_as};
    use serde::de::DeserializeOwned;
    use serde_json::json;

    /// `value` is an `R`, and its rendering as one reads as its JSON always has.
    fn as_before<R: Render + DeserializeOwned>(tool: &str, value: Json) -> String {
        assert!(R::deserialize(&value).is_ok(), "{value}");
        let text = render_as::<R>(tool, &value, &Outward::default());
        assert_eq!(text, generic(tool, &value));
        text
    }

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
