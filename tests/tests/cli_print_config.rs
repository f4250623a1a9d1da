//! `toolvisor mcp --print-config claude|codex [--headless]` prints a config that parses and,
//! headless, allows every tool the daemon registers (compared with `toolvisor tools --all`),
//! with no daemon needed to print it; paths in it are absolute.

use std::collections::BTreeSet;
use std::process::Command;

use toolvisor_tests::{TestDaemon, bin};

fn print_config(args: &[&str]) -> String {
    let out = Command::new(bin())
        .args([
            "mcp",
            "--socket",
            "/nonexistent/toolvisor.sock",
            "--print-config",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Every tool the daemon registers, whether this client may call it or not.
fn registered() -> BTreeSet<String> {
    let d = TestDaemon::start("");
    let out = Command::new(bin())
        .args(["tools", "--all", "--json", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .filter(|n| !n.starts_with("probe"))
        .collect()
}

#[test]
fn the_headless_codex_config_approves_every_registered_tool() {
    let text = print_config(&["codex", "--headless"]);
    let doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let server = doc["mcp_servers"]["toolvisor"].as_table().unwrap();
    assert_eq!(server["command"].as_str(), Some("toolvisor"), "{text}");
    let args: Vec<&str> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "mcp",
            "--socket",
            "/nonexistent/toolvisor.sock",
            "--approvals",
            "harness"
        ],
        "{text}"
    );
    let approved: BTreeSet<String> = server["tools"]
        .as_table()
        .unwrap()
        .iter()
        .filter(|(_, v)| v["approval_mode"].as_str() == Some("approve"))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(approved, registered(), "{text}");
}

#[test]
fn the_headless_claude_lines_allow_every_registered_tool() {
    let text = print_config(&["claude", "--headless"]);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines[0],
        [
            "claude",
            "mcp",
            "add",
            "--scope",
            "user",
            "toolvisor",
            "--",
            "toolvisor",
            "mcp",
            "--socket",
            "/nonexistent/toolvisor.sock",
            "--approvals",
            "harness"
        ],
        "{text}"
    );
    let at = lines[1]
        .iter()
        .position(|w| *w == "--allowedTools")
        .expect(&text);
    let allowed: BTreeSet<String> = lines[1][at + 1]
        .split(',')
        .map(|t| {
            t.strip_prefix("mcp__toolvisor__")
                .unwrap_or_else(|| panic!("{t}"))
                .to_string()
        })
        .collect();
    assert_eq!(allowed, registered(), "{text}");
}

#[test]
fn without_headless_no_allow_list_and_no_delegation() {
    let codex = print_config(&["codex"]);
    assert_eq!(
        codex,
        "[mcp_servers.toolvisor]\ncommand = \"toolvisor\"\nargs = [\"mcp\", \"--socket\", \"/nonexistent/toolvisor.sock\"]\n"
    );
    let claude = print_config(&["claude"]);
    assert_eq!(
        claude,
        "claude mcp add --scope user toolvisor -- toolvisor mcp --socket /nonexistent/toolvisor.sock\n"
    );
}

#[test]
fn paths_go_into_the_config_absolute_and_a_missing_workdir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("proj")).unwrap();
    let out = Command::new(bin())
        .current_dir(dir.path())
        .args([
            "mcp",
            "--socket",
            "tv.sock",
            "--workdir",
            "proj",
            "--print-config",
            "codex",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let args: Vec<&str> = doc["mcp_servers"]["toolvisor"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0..2], ["mcp", "--socket"], "{text}");
    assert_eq!(
        std::path::Path::new(args[2]),
        dir.path().join("tv.sock"),
        "{text}"
    );
    assert_eq!(args[3], "--workdir", "{text}");
    assert_eq!(std::path::Path::new(args[4]), root.join("proj"), "{text}");

    let out = Command::new(bin())
        .current_dir(dir.path())
        .args(["mcp", "--workdir", "nowhere", "--print-config", "claude"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--workdir nowhere") && err.contains("give a directory that exists"),
        "{err}"
    );
}
