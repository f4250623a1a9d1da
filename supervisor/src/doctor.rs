//! `toolvisor doctor`: what this machine and project lack, on one screen — the binary on
//! `PATH`, the daemon (started if none answers, as `toolvisor mcp` would), the language servers
//! and debug adapters of the languages found in the project (asked of the daemon, which
//! resolves them exactly as a call would), and the harness configs that name toolvisor.
//! Every line that is not right says what to run.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::wire::{ClientFrame, ClientKind, DaemonFrame, Outcome, Surface, Tier};

use crate::autostart::{Daemon, ensure_daemon};

/// One line of the report: a label, what was found, and whether it is fine.
struct Line {
    label: &'static str,
    text: String,
    ok: bool,
}

/// The report, and whether every line is fine.
pub struct Report {
    pub text: String,
    pub ok: bool,
}

/// Look at everything for a project at `workdir`, with the daemon on `socket`.
pub fn run(socket: &Path, config: Option<&Path>, workdir: &Path, home: Option<&Path>) -> Report {
    let mut lines = vec![binary_line()];
    match ensure_daemon(socket, config) {
        Ok(started) => {
            let how = match started {
                Daemon::Running => String::new(),
                Daemon::Started(_) => {
                    " (none answered: started now, as `toolvisor mcp` does)".into()
                }
            };
            match ask_daemon(socket, workdir) {
                Ok((status, languages, adapters)) => {
                    lines.push(Line {
                        label: "daemon",
                        text: format!("{status}{how}"),
                        ok: true,
                    });
                    lines.extend(languages);
                    lines.extend(adapters);
                }
                Err(e) => lines.push(Line {
                    label: "daemon",
                    text: format!(
                        "{} answers but could not be asked: {e}; see `toolvisor status`",
                        socket.display()
                    ),
                    ok: false,
                }),
            }
        }
        Err(e) => lines.push(Line {
            label: "daemon",
            text: format!(
                "none answers on {} and none could be started: {e}",
                socket.display()
            ),
            ok: false,
        }),
    }
    lines.extend(harness_lines(home, workdir));
    let mut text = format!("toolvisor doctor — {}\n", workdir.display());
    for l in &lines {
        text.push_str(&format!(
            "{} {:<10} {}\n",
            if l.ok { "ok " } else { "!! " },
            l.label,
            l.text
        ));
    }
    let ok = lines.iter().all(|l| l.ok);
    if !ok {
        text.push_str("(each !! line says what to do)\n");
    }
    Report { text, ok }
}

/// This executable, and whether `toolvisor` on `PATH` is it (harness configs run `toolvisor`).
fn binary_line() -> Line {
    let me = std::env::current_exe().ok();
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("toolvisor"))
            .find(|p| p.is_file())
    });
    let version = env!("CARGO_PKG_VERSION");
    let same = |a: &Path, b: &Path| {
        std::fs::canonicalize(a)
            .ok()
            .is_some_and(|a| std::fs::canonicalize(b).ok() == Some(a))
    };
    match (on_path, me) {
        (Some(p), Some(me)) if same(&p, &me) => Line {
            label: "binary",
            text: format!("{} {version}, on PATH", p.display()),
            ok: true,
        },
        (Some(p), me) => Line {
            label: "binary",
            text: format!(
                "PATH finds {}, not this {} {version}: harness configs run the one on PATH; reinstall with `cargo install --locked --path supervisor`",
                p.display(),
                me.map_or("binary".into(), |m| m.display().to_string())
            ),
            ok: false,
        },
        (None, me) => Line {
            label: "binary",
            text: format!(
                "no `toolvisor` on PATH (this is {} {version}): harness configs run `toolvisor`; install it with `cargo install --locked --path supervisor`",
                me.map_or("?".into(), |m| m.display().to_string())
            ),
            ok: false,
        },
    }
}

type Answers = (String, Vec<Line>, Vec<Line>);

/// The daemon's status line, and the language servers and debug adapters for `workdir`.
fn ask_daemon(socket: &Path, workdir: &Path) -> Result<Answers, String> {
    let mut client = Client::connect(
        socket,
        ClientOptions {
            client_kind: ClientKind::Ops,
            workdir: workdir.display().to_string(),
            surface: Surface {
                max_tier: Tier::Exec,
                approvals: false,
                questions: false,
                bridge_tools: vec![],
            },
            ..ClientOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let status = match client
        .request(&ClientFrame::Status)
        .map_err(|e| e.to_string())?
    {
        DaemonFrame::Status(s) => format!(
            "{} {}, pid {}, up {} s, on {}",
            "toolvisor",
            s.daemon_version,
            s.pid,
            s.uptime_ms / 1000,
            s.socket
        ),
        other => return Err(format!("answered {other:?} to status")),
    };
    let mut call = |tool: &str, args: Value| -> Result<Value, String> {
        let reply = client
            .call("doctor", tool, args)
            .map_err(|e| e.to_string())?;
        match reply.outcome {
            Outcome::Ok(v) => Ok(v.0),
            Outcome::Err(e) => Err(format!("{tool}: {} ({})", e.message, e.hint)),
        }
    };
    let languages = match call("lsp", json!({"op": "status"})) {
        Ok(v) => language_lines(&v),
        Err(e) => vec![Line {
            label: "languages",
            text: e,
            ok: false,
        }],
    };
    let adapters = match call("debug", json!({"op": "adapters"})) {
        Ok(v) => adapter_lines(&v),
        Err(e) => vec![Line {
            label: "debuggers",
            text: e,
            ok: false,
        }],
    };
    let _ = client.send(&ClientFrame::EndConversation {
        conversation: "doctor".into(),
    });
    Ok((status, languages, adapters))
}

/// One line per language whose root marker is here: its server, or what is missing.
fn language_lines(status: &Value) -> Vec<Line> {
    let here: Vec<&Value> = status["languages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["state"] != "no root")
        .collect();
    if here.is_empty() {
        return vec![Line {
            label: "languages",
            text: "no root marker of any configured language here or above (`lsp status` lists what each looks for)".into(),
            ok: true,
        }];
    }
    here.into_iter()
        .map(|l| {
            let state = l["state"].as_str().unwrap_or("?");
            let language = l["language"].as_str().unwrap_or("?");
            let fine = !matches!(state, "binary not found" | "unavailable" | "failed");
            let install = match (state, install_hint(language)) {
                ("binary not found", Some(how)) => format!("; install: {how}"),
                _ => String::new(),
            };
            Line {
                label: "language",
                text: format!(
                    "{language}: {state} — {}{install}",
                    l["reason"].as_str().unwrap_or("")
                ),
                ok: fine,
            }
        })
        .collect()
}

/// How the default server of a built-in language is installed (what scripts/install-test-deps
/// does, for one user).
fn install_hint(language: &str) -> Option<&'static str> {
    Some(match language {
        "python" => "`npm install -g pyright` (or `pip install python-lsp-server`)",
        "typescript" => "`npm install -g typescript-language-server typescript`",
        "rust" => "`rustup component add rust-analyzer`",
        "c" => "`apt install clangd` (and a compile_commands.json for the project)",
        "go" => "`apt install gopls` (or `go install golang.org/x/tools/gopls@latest`)",
        "dart" => "the Dart SDK (https://dart.dev/get-dart)",
        _ => return None,
    })
}

/// One line per debug adapter whose root marker is here (or, with none, the available ones).
fn adapter_lines(report: &Value) -> Vec<Line> {
    let all: Vec<&Value> = report["adapters"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let here: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|a| !a["root"].is_null())
        .collect();
    let line = |a: &Value| {
        let available = a["available"] == true;
        Line {
            label: "debugger",
            text: format!(
                "{}: {}",
                a["name"].as_str().unwrap_or("?"),
                if available {
                    format!("available — {}", a["command"].as_str().unwrap_or(""))
                } else {
                    format!(
                        "not available — {}",
                        a["reason"].as_str().unwrap_or("no reason given")
                    )
                }
            ),
            ok: available,
        }
    };
    if here.is_empty() {
        let names: Vec<&str> = all
            .iter()
            .filter(|a| a["available"] == true)
            .filter_map(|a| a["name"].as_str())
            .collect();
        return vec![Line {
            label: "debuggers",
            text: format!(
                "no project marker of any adapter here; available for programs launched directly: {}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
            ok: true,
        }];
    }
    here.into_iter().map(line).collect()
}

/// Whether Claude Code and Codex are configured to run `toolvisor mcp`.
fn harness_lines(home: Option<&Path>, workdir: &Path) -> Vec<Line> {
    let home = home.map(Path::to_path_buf);
    let claude_files: Vec<PathBuf> = home
        .iter()
        .map(|h| h.join(".claude.json"))
        .chain([workdir.join(".mcp.json")])
        .collect();
    let claude = claude_files
        .iter()
        .find(|f| claude_names_toolvisor(f, workdir));
    let codex_home = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".codex")));
    let codex_file = codex_home.map(|c| c.join("config.toml"));
    let codex = codex_file.as_ref().filter(|f| codex_names_toolvisor(f));
    vec![
        match claude {
            Some(f) => Line {
                label: "claude",
                text: format!("Claude Code runs toolvisor ({})", f.display()),
                ok: true,
            },
            None => Line {
                label: "claude",
                text: "Claude Code is not configured (no toolvisor in ~/.claude.json or .mcp.json): `claude mcp add --scope user toolvisor -- toolvisor mcp`".into(),
                ok: false,
            },
        },
        match codex {
            Some(f) => Line {
                label: "codex",
                text: format!("Codex runs toolvisor ({})", f.display()),
                ok: true,
            },
            None => Line {
                label: "codex",
                text: format!(
                    "Codex is not configured (no [mcp_servers.toolvisor] in {}): `toolvisor mcp --print-config codex >> {}`",
                    codex_file
                        .as_ref()
                        .map_or("~/.codex/config.toml".into(), |f| f.display().to_string()),
                    codex_file
                        .as_ref()
                        .map_or("~/.codex/config.toml".into(), |f| f.display().to_string()),
                ),
                ok: false,
            },
        },
    ]
}

/// An `mcpServers` entry whose command is toolvisor, in a Claude Code config: user scope,
/// this project's local scope (`projects[<workdir>]`), or a project's `.mcp.json`.
fn claude_names_toolvisor(file: &Path, workdir: &Path) -> bool {
    let Some(doc) = std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return false;
    };
    let runs = |servers: &Value| {
        servers.as_object().is_some_and(|m| {
            m.values().any(|s| {
                s["command"]
                    .as_str()
                    .is_some_and(|c| Path::new(c).file_name() == Some("toolvisor".as_ref()))
            })
        })
    };
    runs(&doc["mcpServers"])
        || doc["projects"]
            .as_object()
            .and_then(|p| p.get(&workdir.display().to_string()))
            .is_some_and(|p| runs(&p["mcpServers"]))
}

/// A `[mcp_servers.*]` table whose command is toolvisor, in a Codex config.
fn codex_names_toolvisor(file: &Path) -> bool {
    let Some(doc) = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
    else {
        return false;
    };
    doc.get("mcp_servers")
        .and_then(|s| s.as_table())
        .is_some_and(|servers| {
            servers.values().any(|s| {
                s.get("command")
                    .and_then(|c| c.as_str())
                    .is_some_and(|c| Path::new(c).file_name() == Some("toolvisor".as_ref()))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_configs_are_found_by_their_command() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        // Claude Code: a local-scope entry for this project only.
        std::fs::write(
            home.join(".claude.json"),
            json!({"projects": {project.display().to_string(): {"mcpServers": {"tv": {"command": "/usr/local/bin/toolvisor", "args": ["mcp"]}}}},
                   "mcpServers": {"other": {"command": "npx"}}})
            .to_string(),
        )
        .unwrap();
        assert!(claude_names_toolvisor(&home.join(".claude.json"), &project));
        assert!(!claude_names_toolvisor(&home.join(".claude.json"), &home));
        std::fs::write(
            home.join(".codex/config.toml"),
            "[mcp_servers.other]\ncommand = \"npx\"\n",
        )
        .unwrap();
        assert!(!codex_names_toolvisor(&home.join(".codex/config.toml")));
        std::fs::write(
            home.join(".codex/config.toml"),
            "[mcp_servers.toolvisor]\ncommand = \"toolvisor\"\nargs = [\"mcp\"]\n",
        )
        .unwrap();
        assert!(codex_names_toolvisor(&home.join(".codex/config.toml")));
    }
}
