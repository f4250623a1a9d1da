//! What the model behind a real harness reads of toolvisor's results: Claude Code (`claude -p`)
//! and Codex (`codex exec`) against the scripted endpoint, which records every request they send
//! to the model. A result reaches the model as the rendering (no JSON, no absolute paths beside
//! relative ones), an error as its kind, message and hint in text, and an eval figure as an
//! image block for Claude Code and, for Codex (which drops image content), as a PNG written
//! under the workdir whose path and size the text names.

use std::path::Path;

use serde_json::{Value as Json, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::eval;
use toolvisor_tests::harness::{Endpoint, claude, codex, played, project};

/// Each tool result the model got, in order: its text, and whether it carried an image.
fn results(summary: &Json) -> Vec<(String, bool)> {
    fn walk(v: &Json, text: &mut String, image: &mut bool) {
        match v {
            Json::String(s) => text.push_str(s),
            Json::Array(items) => items.iter().for_each(|i| walk(i, text, image)),
            Json::Object(o) => {
                let kind = o.get("type").and_then(Json::as_str).unwrap_or("");
                if kind == "image" || kind == "input_image" {
                    *image = true;
                } else if let Some(t) = o.get("text") {
                    walk(t, text, image);
                }
            }
            _ => {}
        }
    }
    summary["tool_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let body = r
                .get("content")
                .or_else(|| r.get("output"))
                .unwrap_or(&Json::Null);
            let (mut text, mut image) = (String::new(), false);
            walk(body, &mut text, &mut image);
            (text, image)
        })
        .collect()
}

fn reads() -> Json {
    json!([
        {"tool": "grep", "args": {"pattern": "def greet", "path": "pkg"}},
        {"tool": "read", "args": {"path": "pkg/missing.py"}},
        {"final": "done"}
    ])
}

fn check_reads(summary: &Json) {
    let got = results(summary);
    assert_eq!(got.len(), 2, "{summary}");
    let (grep, _) = &got[0];
    assert!(grep.contains("greet.py:6:def greet"), "{grep}");
    assert!(
        serde_json::from_str::<Json>(grep).is_err()
            && !grep.contains("\"matches\"")
            && !grep.contains("abs_path")
            && !grep.contains("structuredContent"),
        "the model got JSON, not the rendering: {grep}"
    );
    let (missing, _) = &got[1];
    assert!(
        missing.contains("error not_found: ")
            && missing.contains("pkg/missing.py")
            && missing.contains("hint: "),
        "{missing}"
    );
    assert!(
        !missing.contains('{'),
        "the error reached the model as JSON: {missing}"
    );
}

#[test]
fn claude_code_gives_the_model_the_rendering_and_errors_as_text() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), reads());
    let run = claude(&d, &ep, &work, &[], &["grep", "read"]);
    check_reads(&played(&run, &ep, ""));
    // The server instructions reach the model, whole.
    let prompted = ep.requests().iter().any(|r| {
        r["body"]
            .to_string()
            .contains("call tool_result_read with that ref")
    });
    assert!(prompted, "no request carried the server instructions");
}

#[test]
fn codex_gives_the_model_the_rendering_and_errors_as_text() {
    let d = TestDaemon::start("");
    let work = project(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), reads());
    let run = codex(&d, &ep, &work, &[], &["grep", "read"]);
    check_reads(&played(&run, &ep, ""));
}

fn plot() -> Json {
    json!([
        {"tool": "eval", "args": {
            "code": "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\nprint('plotted')",
            "description": "plot a small line chart for the test"}},
        {"final": "plotted"}
    ])
}

#[test]
fn claude_code_gets_an_eval_figure_as_an_image_block() {
    let d = eval::daemon("");
    let work = project(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), plot());
    let run = claude(&d, &ep, &work, &["--approvals", "harness"], &["eval"]);
    let got = results(&played(&run, &ep, ""));
    let (text, image) = &got[0];
    assert!(image, "no image block reached the model: {text}");
    assert!(
        text.contains("plotted") && text.contains("shown=as image content"),
        "{text}"
    );
    assert!(
        !work.join(".toolvisor").exists(),
        "nothing is written for a client that shows images"
    );
}

#[test]
fn codex_gets_an_eval_figure_as_a_file_the_text_names() {
    let d = eval::daemon("");
    let work = project(&d);
    let ep = Endpoint::start(&d.dir.path().join("ep"), plot());
    let run = codex(&d, &ep, &work, &["--approvals", "harness"], &["eval"]);
    let got = results(&played(&run, &ep, ""));
    let (text, image) = &got[0];
    assert!(!image, "{text}");
    assert!(
        !text.contains("sent as") && !text.contains("shown="),
        "a claim that the image was sent: {text}"
    );
    let word = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in what the model got: {text}"))
            .to_string()
    };
    let rel = word("file=");
    let size: u64 = word("file_bytes=").parse().unwrap();
    assert!(
        rel.starts_with(".toolvisor/images/") && rel.ends_with(".png"),
        "{text}"
    );
    let bytes = std::fs::read(work.join(Path::new(&rel))).unwrap();
    assert_eq!(bytes.len() as u64, size);
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}
