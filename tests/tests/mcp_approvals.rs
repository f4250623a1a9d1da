//! `toolvisor mcp --approvals MODE`: who approves is the operator's choice, on the
//! command line or in `[mcp] approvals`, never the model's. Driven by the official Python SDK
//! as a headless harness (no elicitation): `harness` runs `bash` and audits it as approved by
//! that client by name and version; the default (`elicit`) denies it, saying how to delegate;
//! `deny` offers nothing above the read tier. Every tool carries the annotations harnesses
//! classify by, and an unknown mode is refused with the modes listed.

use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;
use toolvisor_tests::mcp::{run_client, script, sdk_python, workdir};
use toolvisor_tests::{TestDaemon, bin};

fn session(d: &TestDaemon, mode: &str, config: Option<&std::path::Path>) -> Json {
    let work = workdir(d);
    let mut cmd = Command::new(sdk_python());
    cmd.arg(script("python_approvals.py"))
        .arg(bin())
        .arg(&d.socket)
        .arg(&work)
        .arg(mode);
    if let Some(c) = config {
        cmd.arg(c);
    }
    let out = run_client(cmd, Duration::from_secs(120));
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn audit(d: &TestDaemon) -> Vec<Json> {
    std::fs::read_to_string(d.state_dir().join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn harness_mode_runs_what_the_harness_called_and_audits_who_approved() {
    let d = TestDaemon::start("");
    let facts = session(&d, "harness", None);
    assert_eq!(facts["bash"]["is_error"], false, "{facts}");
    assert_eq!(facts["ran"], true, "{facts}");
    let approved: Vec<Json> = audit(&d)
        .into_iter()
        .filter(|r| r["event"] == "approved" && r["tool"] == "bash")
        .collect();
    assert_eq!(approved.len(), 1, "{approved:?}");
    let reason = approved[0]["reason"].as_str().unwrap();
    // The Python SDK's client names itself `mcp` with the SDK's version.
    assert!(
        reason.starts_with("approved by the MCP client mcp ")
            && reason.contains("--approvals harness"),
        "{reason}"
    );
}

#[test]
fn the_default_denies_without_elicitation_and_says_how_to_delegate() {
    let d = TestDaemon::start("");
    let facts = session(&d, "-", None);
    assert_eq!(facts["ran"], false, "{facts}");
    let text = facts["bash"]["text"].as_str().unwrap();
    assert!(text.contains("approval_denied"), "{text}");
    assert!(text.contains("--approvals harness"), "{text}");
    assert!(audit(&d).iter().any(|r| r["event"] == "approval_denied"));
}

#[test]
fn the_mode_can_come_from_the_config_and_deny_offers_only_reads() {
    let d = TestDaemon::start("");
    let config = d.dir.path().join("mcp.toml");
    std::fs::write(&config, "[mcp]\napprovals = \"deny\"\n").unwrap();
    let facts = session(&d, "-", Some(&config));
    let tools = facts["tools"].as_object().unwrap();
    assert!(
        tools.contains_key("read") && tools.contains_key("grep"),
        "{facts}"
    );
    for (name, a) in tools {
        assert_eq!(a["readOnlyHint"], true, "{name} offered under deny: {a}");
    }
    assert_eq!(facts["ran"], false);
    // The command line wins over the config.
    let facts = session(&d, "harness", Some(&config));
    assert_eq!(facts["ran"], true, "{facts}");
}

#[test]
fn every_tool_carries_annotations_harnesses_act_on() {
    let d = TestDaemon::start("");
    let facts = session(&d, "harness", None);
    let tools = &facts["tools"];
    let hint = |tool: &str, h: &str| tools[tool][h].clone();
    for read in [
        "read",
        "grep",
        "ls",
        "find",
        "ast_grep",
        "lsp",
        "tool_result_read",
    ] {
        assert_eq!(hint(read, "readOnlyHint"), true, "{read}: {tools}");
        assert_eq!(hint(read, "idempotentHint"), true, "{read}: {tools}");
    }
    for destructive in ["bash", "process", "write", "edit", "apply_patch", "resolve"] {
        assert_eq!(hint(destructive, "readOnlyHint"), false, "{destructive}");
        assert_eq!(hint(destructive, "destructiveHint"), true, "{destructive}");
    }
    assert_eq!(
        hint("ast_edit", "destructiveHint"),
        false,
        "staging only adds"
    );
    for open in [
        "bash",
        "process",
        "eval",
        "download_model",
        "search_huggingface_models",
    ] {
        assert_eq!(hint(open, "openWorldHint"), true, "{open}: {tools}");
    }
    assert_eq!(hint("read", "openWorldHint"), false);
    assert_eq!(hint("write", "idempotentHint"), true);
    assert_eq!(hint("edit", "idempotentHint"), false);
}

#[test]
fn an_unknown_mode_is_refused_naming_the_modes() {
    let out = Command::new(bin())
        .args(["mcp", "--approvals", "yolo"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("yolo")
            && err.contains("elicit")
            && err.contains("harness")
            && err.contains("deny"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "[mcp]\napprovals = \"always\"\n").unwrap();
    let out = Command::new(bin())
        .args(["mcp", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[mcp] approvals") && err.contains("always"),
        "{err}"
    );
}

#[test]
fn a_relative_workdir_is_made_absolute_and_a_missing_one_is_refused() {
    let d = TestDaemon::start("");
    workdir(&d);
    // Relative to where toolvisor mcp starts, not to the daemon's cwd (found by driving
    // the real harnesses).
    let mut cmd = Command::new(sdk_python());
    cmd.arg(script("python_approvals.py"))
        .arg(bin())
        .arg(&d.socket)
        .arg("work")
        .arg("harness")
        .current_dir(d.dir.path());
    let out = run_client(cmd, Duration::from_secs(120));
    let facts: Json = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(facts["ran"], true, "{facts}");
    assert!(d.dir.path().join("work/harness-marker-harness").exists());

    let out = Command::new(bin())
        .args(["mcp", "--workdir", "/no/such/dir"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--workdir /no/such/dir") && err.contains("exists"),
        "{err}"
    );
}
