//! The rendering of the eval tool's result (`results/eval.rs`): `eval`.

use serde_json::Value as Json;

use super::{Doc, Outward, Render};
use crate::results::{EvalImage, EvalResult};

/// `eval: cell: 1 · language: python · status: ok`, then what the cell wrote verbatim, its
/// outputs among it; its figures one a line saying where each went, its error, its kernel.
impl Render for EvalResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        doc.fact("cell", self.cell);
        doc.field("language", &self.language);
        doc.field("status", &self.status);
        doc.flag("truncated", self.truncated);
        doc.body(&self.text);
        doc.json("images", &figures(&self.images, outward));
        doc.field("error", &self.error);
        if let Some(note) = &self.note {
            doc.string("note", note);
        }
        doc.field("kernel", &self.kernel);
    }
}

/// The figures, each with where it went (`shown`, `file` and `file_bytes`, `not_shown`) in
/// place of its `data`, as [`Outward::show`] writes them.
fn figures(images: &[EvalImage], outward: &Outward) -> Json {
    let mut figures = serde_json::to_value(images).unwrap_or_default();
    for (at, fate) in &outward.images {
        if let Some(figure) = at
            .and_then(|i| figures.get_mut(i))
            .and_then(Json::as_object_mut)
        {
            fate.show(figure);
        }
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{ImageFate, as_before, generic, render_as};
    use serde::Deserialize;
    use serde_json::json;

    /// As docs/TOOLS.md shows it.
    fn printed() -> Json {
        json!({"cell":1,"error":null,"images":[],"kernel":{"cells":1,"executable":"/usr/bin/python3","fresh":true,"pid":4242,"version":"3.11.2"},
            "language":"python","outputs":[{"at":3,"data":{"text/plain":"42"},"type":"result"}],
            "status":"ok","text":"hi\n42\n","truncated":false,"wall_ms":41})
    }

    #[test]
    fn a_cell_reads_as_before() {
        let text = as_before::<EvalResult>("eval", printed());
        assert_eq!(
            text,
            "eval: cell: 1 · language: python · status: ok\nhi\n42\nkernel:\n  cells: 1\n  executable: /usr/bin/python3\n  fresh: true\n  version: 3.11.2"
        );
    }

    #[test]
    fn a_cell_that_raised_or_was_cut_reads_as_before() {
        let traceback = "Traceback (most recent call last):\n  File \"<cell 2>\", line 1, in <module>\n    1/0\nZeroDivisionError: division by zero\n";
        let text = as_before::<EvalResult>(
            "eval",
            json!({"cell":2,"images":[],"language":"python","status":"error","truncated":true,
                "error":{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":traceback},
                "kernel":{"cells":2,"executable":"/usr/bin/python3","fresh":false,"pid":4242,"version":"3.11.2"},
                "note":"the kernel was restarted: the last one was idle for 30 min; its state is lost",
                "outputs":[{"at":0,"ename":"ZeroDivisionError","evalue":"division by zero","type":"error"}],
                "text":traceback,"wall_ms":7}),
        );
        assert!(
            text.starts_with("eval: cell: 2 · language: python · note: the kernel was restarted"),
            "{text}"
        );
        assert!(text.contains("\nerror:\n  ename: ZeroDivisionError\n  evalue: division by zero\n  traceback:\n    Traceback"), "{text}");
        // A JavaScript cell's display, and a long note under its key.
        let text = as_before::<EvalResult>(
            "eval",
            json!({"cell":3,"error":null,"images":[],"language":"javascript","status":"ok","truncated":false,
                "kernel":{"cells":3,"executable":"/usr/bin/node","fresh":false,"pid":77,"version":"v22.14.0"},
                "note":"the output was bounded: kernels.output_bytes (1048576) of text per cell, its first and last halves kept, and the middle of it left out of this answer (read it whole with tool_result_read)",
                "outputs":[{"at":0,"data":{"text/html":"<b>x</b>","text/plain":"x"},"type":"display"},
                    {"at":2,"data":{"text/plain":"{ a: 1 }"},"type":"result"}],
                "text":"x\n{ a: 1 }\n","wall_ms":3}),
        );
        assert!(text.contains("\nnote:\nthe output was bounded"), "{text}");
    }

    #[test]
    fn what_the_store_did_is_said_as_before() {
        // The text stored whole and shortened in place; the kinds of secret masked, beside
        // the `text` too (the generic rules once left every list beside a `text` out).
        let mut v = printed();
        v["masked"] = json!(["github_token"]);
        v["projected"] = json!({"text": {"content_type": "text/plain", "ref": "tr_3", "shown_chars": 4000, "total_chars": 120000}});
        let text = as_before::<EvalResult>("eval", v);
        assert!(
            text.ends_with("version: 3.11.2\nmasked: github_token\nprojected:\n  text:\n    content_type: text/plain\n    ref: tr_3\n    shown_chars: 4000\n    total_chars: 120000"),
            "{text}"
        );
    }

    #[test]
    fn a_figure_says_where_it_went_in_place_of_its_data() {
        let chart = json!({"axes": [{"series": [{"label": "y", "points": 3, "type": "line", "x": [0, 1, 2], "y": [3, 2, 1]}],
            "title": "", "xlabel": "", "xscale": "linear", "ylabel": "", "yscale": "linear", "xlim": [0, 2], "ylim": [1, 3]}], "title": "falling"});
        let mut v = printed();
        v["text"] = json!(
            "[image 1: image/png 640x480, 23 KiB, chart falling: y]\nbetween\n[image 2: image/jpeg, 2 KiB]\n"
        );
        v["images"] = json!([
            {"bytes": 23000, "chart": chart, "data": "iVBORw0KGgo=", "height": 480, "mime": "image/png", "width": 640},
            {"bytes": 2100, "data": "/9j/4AAQ", "height": null, "mime": "image/jpeg", "width": null},
            {"bytes": 70, "data": "iVBORw0KGgo=", "height": 1, "mime": "image/png", "width": 1}]);
        v["outputs"] = json!([{"at": 0, "image": 0, "type": "image"}, {"at": 64, "image": 1, "type": "image"},
            {"at": 90, "image": 2, "type": "image"}]);
        // Unsaid, the data reads as it is.
        as_before::<EvalResult>("eval", v.clone());
        let outward = Outward {
            images: vec![
                (Some(0), ImageFate::Shown),
                (
                    Some(1),
                    ImageFate::Written(".toolvisor/images/eval-1.jpg".into(), 2100),
                ),
                (Some(2), ImageFate::NotShown("no room".into())),
            ],
        };
        outward.note(&mut v);
        assert!(EvalResult::deserialize(&v).is_ok(), "the typed shape");
        let text = render_as::<EvalResult>("eval", &v, &outward);
        assert!(
            text.contains("\nimages (3):\n  bytes=23000 chart={\"axes\":"),
            "{text}"
        );
        assert!(
            text.contains("\n  bytes=2100 file=.toolvisor/images/eval-1.jpg file_bytes=2100 mime=image/jpeg\n  bytes=70 height=1 mime=image/png not_shown=no room width=1\n"),
            "{text}"
        );
        assert!(!text.contains("data") && !text.contains("iVBO"), "{text}");
        outward.show(&mut v);
        assert_eq!(text, generic("eval", &v));
    }
}
