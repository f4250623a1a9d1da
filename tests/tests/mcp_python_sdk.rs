//! The official Python MCP SDK (`mcp` on PyPI) as a client of `toolvisor mcp`, over stdio and
//! over Streamable HTTP: a whole session (tests/mcp/python_session.py) — list, calls, an error,
//! an image, approvals through elicitation, progress, a large result paged through its
//! resource, `ask_user` through elicitation, cancellation, and an eval figure; and a harness
//! that quits in the middle of a call leaves nothing that call started running.

use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;
use toolvisor_tests::mcp::{McpHttp, run_client, script, sdk_python, workdir};
use toolvisor_tests::{TestDaemon, bin, eval};

fn check_session(facts: &Json) {
    let tools: Vec<&str> = facts["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in [
        "read",
        "ast_grep",
        "bash",
        "eval",
        "lsp",
        "tool_result_read",
    ] {
        assert!(tools.contains(&t), "{t} missing from tools/list: {tools:?}");
    }
    assert_eq!(
        facts["read_schema_properties"],
        serde_json::json!(["limit", "offset", "path"])
    );
    assert!(
        facts["read_description"]
            .as_str()
            .unwrap()
            .contains("line numbers")
    );

    assert_eq!(facts["read_is_error"], false, "{facts}");
    assert!(
        facts["read_text"]
            .as_str()
            .unwrap()
            .contains("hello from a file"),
        "{facts}"
    );
    assert_eq!(facts["ast_grep_is_error"], false, "{facts}");
    let ast = facts["ast_grep_text"].as_str().unwrap();
    // The model's rendering: one `path:line: text` per match with its captures; programs get
    // the whole result as structured content.
    assert!(
        ast.contains("lib.py:1: def f(a):")
            && ast.contains("captures={F=f}")
            && ast.contains("captures={F=g}"),
        "{ast}"
    );
    assert_eq!(
        facts["ast_grep_structured"]["matches"][0]["captures"]["F"], "f",
        "{facts}"
    );

    // Errors: isError with the structured {kind, message, hint}.
    assert_eq!(facts["missing_is_error"], true, "{facts}");
    assert_eq!(facts["missing_error"]["kind"], "not_found", "{facts}");
    assert!(
        facts["missing_error"]["message"]
            .as_str()
            .unwrap()
            .contains("no/such/file.txt")
    );
    assert!(!facts["missing_error"]["hint"].as_str().unwrap().is_empty());

    // Images: MCP image content.
    assert_eq!(
        facts["image_types"],
        serde_json::json!(["text", "image"]),
        "{facts}"
    );
    assert_eq!(
        facts["image_mime"],
        serde_json::json!(["image/png"]),
        "{facts}"
    );

    // Approvals through elicitation: yes runs, no is approval_denied and does not run.
    assert_eq!(facts["approved_is_error"], false, "{facts}");
    assert_eq!(facts["approved_ran"], true, "{facts}");
    assert_eq!(
        facts["declined_error"]["kind"], "approval_denied",
        "{facts}"
    );
    assert_eq!(facts["declined_ran"], false, "{facts}");

    // Streamed output as progress notifications, in order.
    let progress = facts["progress"].as_array().unwrap();
    let text: String = progress
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    assert_eq!(text, "line-1\nline-2\nline-3\n", "{facts}");
    let steps: Vec<f64> = progress
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {steps:?}"
    );

    // A large result: a resource link, paged through resources/read to the exact text.
    let links = facts["large_links"].as_array().unwrap();
    assert_eq!(links.len(), 1, "{facts}");
    assert!(
        links[0]
            .as_str()
            .unwrap()
            .starts_with("toolvisor://result/tr_")
    );
    assert!(facts["large_pages"].as_u64().unwrap() > 1, "{facts}");
    assert_eq!(facts["large_text_ok"], true, "{facts}");
    assert!(
        facts["bad_ref_error"]
            .as_str()
            .unwrap()
            .contains("invalid_ref"),
        "{facts}"
    );

    // ask_user through elicitation.
    assert_eq!(
        facts["ask_user"]["selected"],
        serde_json::json!(["sqlite"]),
        "{facts}"
    );
    assert_eq!(facts["ask_user"]["skipped"], false, "{facts}");
    // Outside the options three times: a clear error at once, not the 600 s timeout.
    let outside = &facts["ask_user_outside"];
    assert_eq!(outside["is_error"], true, "{facts}");
    assert_eq!(outside["asked"], 3, "{facts}");
    let text = outside["text"].as_str().unwrap();
    assert!(
        text.contains("invalid_args")
            && text.contains("oracle")
            && text.contains("is not an option"),
        "{text}"
    );
    assert!(
        outside["second_message"]
            .as_str()
            .unwrap()
            .contains("could not be used: \"oracle\" is not an option"),
        "{facts}"
    );

    // Cancellation reaches the daemon and kills what the call started.
    assert_eq!(facts["cancel_killed"], true, "{facts}");

    // eval's matplotlib figure comes back as MCP image content.
    assert_eq!(facts["eval_is_error"], false, "{facts}");
    assert_eq!(facts["eval_text_has_plotted"], true, "{facts}");
    assert!(
        facts["eval_types"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "image"),
        "{facts}"
    );
    assert!(facts["elicitations"].as_u64().unwrap() >= 6, "{facts}");
}

#[test]
fn the_python_sdk_runs_a_whole_session_over_stdio() {
    let d = eval::daemon("");
    let work = workdir(&d);
    let mut cmd = Command::new(sdk_python());
    cmd.arg(script("python_session.py"))
        .arg("stdio")
        .arg(bin())
        .arg(&d.socket)
        .arg(&work);
    let out = run_client(cmd, Duration::from_secs(180));
    let facts: Json = serde_json::from_str(out.trim()).expect("the script prints JSON facts");
    check_session(&facts);
}

#[test]
fn the_python_sdk_runs_a_whole_session_over_streamable_http() {
    let d = eval::daemon("");
    let work = workdir(&d);
    let server = McpHttp::start_with(&d.socket, &work, "127.0.0.1:0", &["--structured"]);
    let mut cmd = Command::new(sdk_python());
    cmd.arg(script("python_session.py"))
        .arg("http")
        .arg(&server.url)
        .arg(&work)
        .env("TOOLVISOR_MCP_TOKEN", server.token.as_deref().unwrap());
    let out = run_client(cmd, Duration::from_secs(180));
    let facts: Json = serde_json::from_str(out.trim()).expect("the script prints JSON facts");
    check_session(&facts);
}

#[test]
fn a_harness_that_quits_mid_call_leaves_nothing_running() {
    let d = TestDaemon::start("");
    let work = workdir(&d);
    let mut cmd = Command::new(sdk_python());
    cmd.arg(script("python_quit.py"))
        .arg(bin())
        .arg(&d.socket)
        .arg(&work);
    let out = run_client(cmd, Duration::from_secs(60));
    assert_eq!(
        out.trim(),
        "dead",
        "the command of a call in flight outlived the MCP session"
    );
}
