//! `toolvisor mcp --print-config claude|codex [--headless]`: a harness's config for
//! `toolvisor mcp`, generated from the tool registry in this binary (no daemon asked), so the
//! per-tool allow lists a headless run needs name every tool this build has and never drift.

use toolvisor_protocol::wire::Tier;

/// The harness a config is printed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Harness {
    /// Claude Code: a `claude mcp add` command line (and with --headless the `claude -p`
    /// line with `--allowedTools` naming every tool).
    Claude,
    /// Codex: the `[mcp_servers.toolvisor]` block of `~/.codex/config.toml` (and with
    /// --headless `approval_mode = "approve"` for every tool).
    Codex,
}

/// The tools a harness sees from `toolvisor mcp` with this surface (`--approvals deny`
/// offers read tools only), in registry order: every tool this build registers.
pub fn tool_names(surface: Tier, deny: bool) -> Vec<&'static str> {
    let top = if deny { Tier::Read } else { surface };
    let mut names: Vec<&'static str> = crate::tools::all(false)
        .into_iter()
        .filter(|t| t.tier <= top)
        .map(|t| t.name)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// A word of a shell command line, quoted when it needs to be.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A TOML basic string (a JSON string is one).
fn toml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// The config text: `mcp_args` are `toolvisor mcp`'s arguments after `mcp` (the caller adds
/// `--approvals harness` for a headless run), `tools` what a headless run must allow.
pub fn render(harness: Harness, headless: bool, mcp_args: &[String], tools: &[&str]) -> String {
    match harness {
        Harness::Claude => {
            let mut line = String::from("claude mcp add --scope user toolvisor -- toolvisor mcp");
            for a in mcp_args {
                line.push(' ');
                line.push_str(&shell_word(a));
            }
            line.push('\n');
            if headless {
                let allowed: Vec<String> = tools
                    .iter()
                    .map(|t| format!("mcp__toolvisor__{t}"))
                    .collect();
                line.push_str(&format!(
                    "claude -p \"$TASK\" --allowedTools {}\n",
                    allowed.join(",")
                ));
            }
            line
        }
        Harness::Codex => {
            let args: Vec<String> = std::iter::once("mcp".to_string())
                .chain(mcp_args.iter().cloned())
                .map(|a| toml_str(&a))
                .collect();
            let mut text = format!(
                "[mcp_servers.toolvisor]\ncommand = \"toolvisor\"\nargs = [{}]\n",
                args.join(", ")
            );
            if headless {
                for t in tools {
                    text.push_str(&format!(
                        "\n[mcp_servers.toolvisor.tools.{t}]\napproval_mode = \"approve\"\n"
                    ));
                }
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_tool_is_allowed_in_a_headless_config() {
        let names = tool_names(Tier::Exec, false);
        let registry: Vec<&str> = crate::tools::all(false).iter().map(|t| t.name).collect();
        assert!(names.len() > 20, "{names:?}");
        for t in &registry {
            assert!(names.contains(t), "{t} is missing from {names:?}");
        }
        let args = vec!["--approvals".to_string(), "harness".to_string()];
        let codex = render(Harness::Codex, true, &args, &names);
        let doc: toml::Table = toml::from_str(&codex).expect(&codex);
        let server = &doc["mcp_servers"]["toolvisor"];
        assert_eq!(server["command"].as_str(), Some("toolvisor"));
        let tools = server["tools"].as_table().unwrap();
        for t in &registry {
            assert_eq!(
                tools[*t]["approval_mode"].as_str(),
                Some("approve"),
                "{t}: {codex}"
            );
        }
        let claude = render(Harness::Claude, true, &args, &names);
        let allowed = claude
            .lines()
            .nth(1)
            .and_then(|l| l.split("--allowedTools ").nth(1))
            .expect(&claude);
        let allowed: Vec<&str> = allowed.split(',').collect();
        for t in &registry {
            assert!(
                allowed.contains(&format!("mcp__toolvisor__{t}").as_str()),
                "{t}: {claude}"
            );
        }
    }

    #[test]
    fn deny_and_a_read_surface_allow_read_tools_only() {
        let read = tool_names(Tier::Read, false);
        assert_eq!(read, tool_names(Tier::Exec, true));
        assert!(read.contains(&"read") && !read.contains(&"write") && !read.contains(&"bash"));
    }

    #[test]
    fn words_that_need_quoting_are_quoted() {
        assert_eq!(shell_word("/tmp/a b"), "'/tmp/a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("--socket"), "--socket");
    }
}
