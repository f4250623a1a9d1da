//! MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`) against `toolvisor mcp` over
//! stdio: tools/list (schemas portable by its `--strict` check), and tools/call of `read`,
//! `ast_grep`, `lsp status` and `eval`. The CLI declares no elicitation capability, so
//! `eval`'s approval is denied, and the denial says why; `ask_user` answers `no_human`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value as Json;
use toolvisor_tests::mcp::{node_modules, workdir};
use toolvisor_tests::{TestDaemon, bin, eval, wait_for};

/// Run the Inspector CLI once against a fresh `toolvisor mcp`; (exit code, stdout, stderr).
fn inspector(d: &TestDaemon, work: &Path, args: &[&str]) -> (i32, String, String) {
    let mut child = Command::new(node_modules().join(".bin/mcp-inspector"))
        .arg("--cli")
        .arg(bin())
        .arg("mcp")
        .arg("--socket")
        .arg(&d.socket)
        .arg("--workdir")
        .arg(work)
        .args(args)
        // The Inspector keeps a catalog and secrets under $HOME: keep them in the test's dir.
        .env("HOME", d.dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the MCP Inspector CLI");
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || std::io::read_to_string(out).unwrap_or_default());
    let err = std::thread::spawn(move || std::io::read_to_string(err).unwrap_or_default());
    let status = wait_for(
        "the Inspector CLI to finish",
        Duration::from_secs(120),
        || child.try_wait().ok().flatten(),
    );
    (
        status.code().unwrap_or(-1),
        out.join().unwrap(),
        err.join().unwrap(),
    )
}

fn call(d: &TestDaemon, work: &Path, tool: &str, args: &[&str]) -> (i32, Json) {
    let mut all = vec!["--method", "tools/call", "--tool-name", tool];
    for a in args {
        all.push("--tool-arg");
        all.push(a);
    }
    let (code, out, err) = inspector(d, work, &all);
    // The result is the first JSON document on stdout (an isError result is followed by a
    // one-line summary).
    let mut docs = serde_json::Deserializer::from_str(&out).into_iter::<Json>();
    let result = docs
        .next()
        .unwrap_or_else(|| panic!("no JSON from the Inspector: {out}\n{err}"))
        .unwrap_or_else(|e| panic!("bad JSON from the Inspector ({e}): {out}\n{err}"));
    (code, result)
}

fn text(result: &Json) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

#[test]
fn the_inspector_cli_lists_and_calls_tools_over_stdio() {
    let d = eval::daemon("");
    let work = workdir(&d);

    let (code, out, err) = inspector(&d, &work, &["--method", "tools/list", "--strict"]);
    assert_eq!(code, 0, "tools/list --strict failed: {out}\n{err}");
    let list: Json = serde_json::from_str(&out).expect("tools/list prints JSON");
    let tools = list["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for t in ["read", "ast_grep", "lsp", "eval", "bash"] {
        assert!(names.contains(&t), "{t} missing: {names:?}");
    }
    let read = tools.iter().find(|t| t["name"] == "read").unwrap();
    assert_eq!(read["inputSchema"]["required"], serde_json::json!(["path"]));
    assert_eq!(read["annotations"]["readOnlyHint"], true);

    let (code, r) = call(&d, &work, "read", &["path=hello.txt"]);
    assert_eq!(code, 0, "{r}");
    assert!(text(&r).contains("hello from a file"), "{r}");

    let (code, r) = call(
        &d,
        &work,
        "ast_grep",
        &["pattern=def $F($$$): $$$", "path=lib.py"],
    );
    assert_eq!(code, 0, "{r}");
    // The rendering alone, as a model reads it (structured content only with --structured).
    assert!(text(&r).contains("total: 2"), "{r}");
    assert!(r.get("structuredContent").is_none(), "{r}");

    let (code, r) = call(&d, &work, "lsp", &["op=status"]);
    assert_eq!(code, 0, "{r}");
    // Every language the daemon knows is named (those with no root marker here on one line).
    assert!(
        text(&r).contains("no root marker here for:") && text(&r).contains("python"),
        "{r}"
    );

    // eval needs approval; the CLI cannot be asked (no elicitation), so it is denied and the
    // cell never runs.
    let marker = work.join("eval-ran");
    let code_arg = format!(
        "code=open({:?}, 'w').write('x')",
        marker.display().to_string()
    );
    let (code, r) = call(
        &d,
        &work,
        "eval",
        &[&code_arg, "description=write a marker file for the test"],
    );
    assert_ne!(code, 0, "an isError result exits non-zero: {r}");
    assert_eq!(r["isError"], true, "{r}");
    // An error is text too: kind, message, hint.
    let e = text(&r);
    assert!(
        e.starts_with("error approval_denied: ")
            && e.contains("elicitation")
            && e.contains("\nhint: "),
        "{r}"
    );
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert!(!marker.exists(), "a denied eval must not run");

    // ask_user without elicitation: no person can be reached through this client.
    let (_, r) = call(
        &d,
        &work,
        "ask_user",
        &["question=Which port should the server use?"],
    );
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).starts_with("error no_human: "), "{r}");
}
