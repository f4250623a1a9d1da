//! `code_actions` answers that say which line each action is for; the last answer of each run,
//! which `lsp_edit apply_code_action` applies an action of by its index, is kept in [`memory`].
//!
//! The request carries the diagnostics of the asked line and its neighbours (a parser reports
//! a missing token on the next line), so a server answers with fixes for those neighbours too;
//! each action names its range, and one for another line is listed after the asked line's,
//! labelled with its line.

use serde_json::Value;
use toolvisor_files::paths::Access;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{LspActionApplies, LspCodeAction};
use toolvisor_protocol::tools::LspEditArgs;

use crate::answers::show_path;
use crate::call::CallCtx;
use crate::diagnostics::Diagnostics;
use crate::edit::Edits;
use crate::servers::Servers;

pub(crate) mod memory;

/// A bare `Command` (its `command` is the command's name) rather than a `CodeAction`.
pub fn is_bare_command(a: &Value) -> bool {
    a.get("command").is_some_and(Value::is_string)
}

/// The 0-based (start, end) lines an action is for in the document `uri`: its first
/// diagnostic's range, else its first edit's in that document; `None` when it names neither
/// (a refactoring offered at the asked position, or one to be resolved).
pub fn action_lines(a: &Value, uri: &str) -> Option<(u64, u64)> {
    let lines = |r: &Value| {
        Some((
            r.pointer("/start/line")?.as_u64()?,
            r.pointer("/end/line")?.as_u64()?,
        ))
    };
    if let Some(r) = a.pointer("/diagnostics/0/range").and_then(lines) {
        return Some(r);
    }
    let edit = a.get("edit")?;
    if let Some(r) = edit
        .get("changes")
        .and_then(|c| c.get(uri))
        .and_then(|e| e.pointer("/0/range"))
        .and_then(lines)
    {
        return Some(r);
    }
    edit.get("documentChanges")
        .and_then(Value::as_array)?
        .iter()
        .filter(|c| c.pointer("/textDocument/uri").and_then(Value::as_str) == Some(uri))
        .find_map(|c| c.pointer("/edits/0/range").and_then(lines))
}

/// Orders `actions` (the asked line's first, then the neighbours', each group in the server's
/// order), cut at `max`, and renders them: `(ordered raw actions, text, items)`. `line` is the
/// asked 1-based line; `here` names it for the empty answer.
pub fn render(
    actions: Vec<Value>,
    uri: &str,
    line: u64,
    max: usize,
    here: &str,
) -> (Vec<Value>, String, Vec<LspCodeAction>) {
    let asked = line - 1;
    let (mut on, mut off): (Vec<_>, Vec<_>) = (Vec::new(), Vec::new());
    for a in actions {
        let lines = action_lines(&a, uri);
        match lines {
            Some((s, e)) if !(s <= asked && asked <= e) => off.push((a, lines)),
            _ => on.push((a, lines)),
        }
    }
    let total_on = on.len();
    let ordered: Vec<(Value, Option<(u64, u64)>)> = on.into_iter().chain(off).take(max).collect();
    let mut text = String::new();
    let mut items = Vec::new();
    for (i, (a, lines)) in ordered.iter().enumerate() {
        let title = a.get("title").and_then(Value::as_str).unwrap_or("");
        let kind = a.get("kind").and_then(Value::as_str);
        let preferred = a
            .get("isPreferred")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (start, end) = lines.map_or((line, line), |(s, e)| (s + 1, e + 1));
        let on_line = i < total_on;
        let applies = if is_bare_command(a) {
            LspActionApplies::Command
        } else if a.get("edit").is_some() {
            LspActionApplies::Edit
        } else if a.get("command").is_some() {
            LspActionApplies::Command
        } else {
            LspActionApplies::Resolve
        };
        let item = LspCodeAction {
            index: i as u64,
            title: title.to_string(),
            kind: kind.map(str::to_string),
            preferred,
            line: start,
            end_line: end,
            on_line,
            applies,
        };
        text.push_str(&item.line(line));
        text.push('\n');
        items.push(item);
    }
    if ordered.is_empty() {
        text = format!("no code actions offered for {here}\n");
    }
    (ordered.into_iter().map(|(a, _)| a).collect(), text, items)
}

impl Edits {
    /// The file and the action titles of `run`'s last `code_actions` answer, in index order
    /// (for the approval line of `lsp_edit apply_code_action`).
    pub fn actions_of(&self, run: &str) -> Option<(String, Vec<String>)> {
        let listed = self.actions().get(run)?;
        let titles = listed
            .actions
            .iter()
            .map(|a| {
                a.get("title")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            })
            .collect();
        Some((listed.path.display().to_string(), titles))
    }
}

fn stale(what: String) -> ToolError {
    ToolError::new(
        ErrorKind::Conflict,
        what,
        "nothing was written; call `lsp code_actions` again and apply an index from that answer",
    )
}

impl Edits {
    /// `lsp_edit apply_code_action {index}`: the action `index` of the run's last
    /// `code_actions` answer, resolved (`codeAction/resolve`) when it came without its edit
    /// and the server resolves actions, then written all or nothing like `lsp_rename`.
    /// An action that is only a command is `not_available`: its edits would come back as a
    /// `workspace/applyEdit` request, outside the all-or-nothing write.
    pub(crate) async fn apply_code_action(
        &self,
        servers: &Servers,
        diagnostics: &Diagnostics,
        ctx: &CallCtx,
        args: &LspEditArgs,
    ) -> Result<toolvisor_protocol::results::LspEditResult, ToolError> {
        let index = args.index.ok_or_else(|| {
            ToolError::new(
                ErrorKind::InvalidArgs,
                "lsp_edit apply_code_action: missing required argument `index`",
                "give the `[index]` of an action from this run's last `lsp code_actions` answer",
            )
        })? as usize;
        let listed = self.actions().get(&ctx.run).ok_or_else(|| {
            ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "run {} has no `lsp code_actions` answer to apply from",
                    ctx.run
                ),
                "call `lsp code_actions` first (file, line, symbol), then apply one of its indexes",
            )
        })?;
        let shown = show_path(&listed.path, &ctx.workdir);
        let Some(action) = listed.actions.get(index).cloned() else {
            return Err(ToolError::new(
                ErrorKind::InvalidArgs,
                format!(
                    "this run's last code_actions answer ({shown}) listed {} actions; there is no index {index}",
                    listed.actions.len()
                ),
                "give an index that answer listed, or call `lsp code_actions` again",
            ));
        };
        let title = action
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let file = listed.path.to_str().unwrap_or_default().to_string();
        let path = ctx.resolve("lsp_edit", &file, Access::Write)?;
        let mut opened = servers.open(&path, &ctx.run).await?;
        if opened.shared.id != listed.server || opened.version != listed.version {
            return Err(stale(format!(
                "{shown} changed since `code_actions` listed [{index}] \"{title}\" (version {} then, {} now)",
                listed.version, opened.version
            )));
        }
        let mut action = action;
        let resolves = opened
            .conn
            .caps
            .pointer("/codeActionProvider/resolveProvider")
            == Some(&Value::Bool(true));
        if !is_bare_command(&action) && action.get("edit").is_none() && resolves {
            action = servers
                .request(&mut opened, "codeAction/resolve", action)
                .await?;
        }
        let command = if is_bare_command(&action) {
            action.get("command").and_then(Value::as_str)
        } else {
            action.pointer("/command/command").and_then(Value::as_str)
        }
        .map(str::to_string);
        let Some(edit) = action.get("edit").filter(|e| !e.is_null()).cloned() else {
            return Err(ToolError::new(
                ErrorKind::NotAvailable,
                match &command {
                    Some(c) => format!(
                        "[{index}] \"{title}\" from {} is a command only (`{c}`), with no edit to write: toolvisor does not run server commands (their edits would come back outside the all-or-nothing write)",
                        opened.conn.name
                    ),
                    None => format!(
                        "{} gave no edit for [{index}] \"{title}\"{}",
                        opened.conn.name,
                        if resolves {
                            " even when resolved"
                        } else {
                            " (and does not resolve actions)"
                        }
                    ),
                },
                "apply the change by hand (edit, or lsp_edit's symbol edits)",
            ));
        };
        let mut out = self
            .write_edit(
                servers,
                diagnostics,
                ctx,
                &opened,
                edit,
                format!("applied [{index}] \"{title}\""),
            )
            .await?;
        if let Some(c) = command {
            let note = format!(
                "the action's command `{c}` was not run (toolvisor runs no server commands)\n"
            );
            out.text.push_str(&note);
            out.command_not_run = Some(c);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn range(l: u64) -> Value {
        json!({"start": {"line": l, "character": 0}, "end": {"line": l, "character": 1}})
    }

    #[test]
    fn actions_name_their_lines_and_neighbours_come_last_labelled() {
        let uri = "file:///w/a.c";
        let actions = vec![
            json!({"title": "fix next", "diagnostics": [{"range": range(2)}]}),
            json!({"title": "fix here", "diagnostics": [{"range": range(1)}], "isPreferred": true}),
            json!({"title": "by edit", "edit": {"changes": {uri: [{"range": range(3), "newText": ""}]}}}),
            json!({"title": "refactor", "kind": "refactor"}),
            json!({"title": "cmd", "command": "do.it"}),
        ];
        let (ordered, text, items) = render(actions, uri, 2, 50, "x");
        let titles: Vec<_> = ordered
            .iter()
            .map(|a| a["title"].as_str().unwrap())
            .collect();
        assert_eq!(
            titles,
            ["fix here", "refactor", "cmd", "fix next", "by edit"]
        );
        assert_eq!((items[0].line, items[0].on_line), (2, true));
        assert_eq!((items[3].line, items[3].on_line), (3, false));
        assert_eq!(items[4].line, 4);
        assert_eq!(items[2].applies, LspActionApplies::Command);
        assert_eq!(items[1].applies, LspActionApplies::Resolve);
        assert!(text.contains("[0] line 2: fix here [preferred]"), "{text}");
        assert!(text.contains("[3] line 3 (not line 2"), "{text}");
        // Cut at max, indexes stay the listing's.
        let (ordered, _, items) = render(vec![json!({"title": "a"}); 5], uri, 1, 3, "x");
        assert_eq!(ordered.len(), 3);
        assert_eq!(items[2].index, 2);
    }
}
