//! The tool registry: every tool of the spec with its tier, parallel safety, approval rule,
//! the resource it needs, and its argument schema; plus the argument validator and the
//! rules that decide what a client may see and call.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::value::Value;
use toolvisor_protocol::wire::{Surface, Tier, ToolInfo};

/// Whether the resource behind a tool is attached to this daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attachment {
    Attached,
    /// Registered, but its worker is not part of this build yet.
    NotBuilt(&'static str),
}

/// When a call needs the client's approval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Approval {
    Never,
    Always,
    /// Only calls whose `op` is one of these (state-changing operations).
    Ops(&'static [&'static str]),
}

#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub tier: Tier,
    pub parallel_safe: bool,
    pub approval: Approval,
    pub resource: &'static str,
    pub schema: Json,
    pub attachment: Attachment,
}

impl ToolSpec {
    /// Does this particular call need approval?
    pub fn needs_approval(&self, args: &Json) -> bool {
        match self.approval {
            Approval::Never => false,
            Approval::Always => true,
            Approval::Ops(ops) => args
                .get("op")
                .and_then(Json::as_str)
                .is_none_or(|op| ops.contains(&op)),
        }
    }

    fn info(&self, available: bool, reason: Option<String>) -> ToolInfo {
        ToolInfo {
            name: self.name.to_string(),
            description: self.description.to_string(),
            tier: self.tier,
            parallel_safe: self.parallel_safe,
            requires_approval: self.approval != Approval::Never,
            resource: self.resource.to_string(),
            schema: Value(self.schema.clone()),
            available,
            unavailable_reason: reason,
        }
    }
}

fn obj(props: Json, required: &[&str]) -> Json {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

fn s(desc: &str) -> Json {
    json!({"type": "string", "description": desc})
}
fn int(desc: &str, min: i64, max: i64) -> Json {
    json!({"type": "integer", "description": desc, "minimum": min, "maximum": max})
}
fn boolean(desc: &str) -> Json {
    json!({"type": "boolean", "description": desc})
}
fn one_of(desc: &str, values: &[&str]) -> Json {
    json!({"type": "string", "description": desc, "enum": values})
}

/// All tools of the spec. `probe_tools` adds the two lane-probing test tools.
pub fn all_tools(probe_tools: bool) -> Vec<ToolSpec> {
    use Approval::*;
    use Attachment::*;
    use Tier::*;
    let lsp_pending = NotBuilt(
        "the language-server worker (issue: lsp, lsp_rename and diagnostics-on-write) is not built yet",
    );
    let structural =
        NotBuilt("the structural worker (issue: ast_grep, ast_edit, resolve) is not built yet");
    let files =
        NotBuilt("the file and search tools (issue: core file and search tools) are not built yet");
    let vibe = NotBuilt("vibe workers (issue: ask_user and vibe workers) are not built yet");
    let downloads = NotBuilt("download jobs are not built yet");
    let mut tools = vec![
        ToolSpec {
            name: "bash",
            description: "Run a shell command line in the run's workdir; returns stdout, stderr, exit code and wall time.",
            tier: Exec,
            parallel_safe: true,
            approval: Always,
            resource: "processes",
            schema: obj(
                json!({"command": s("shell command line"), "timeout_s": int("wall-clock limit in seconds (default 120)", 1, 3600)}),
                &["command"],
            ),
            attachment: Attached,
        },
        ToolSpec {
            name: "process",
            description: "Tracked background processes of this conversation: start, list, read output by offset, write stdin, kill.",
            tier: Exec,
            parallel_safe: true,
            approval: Ops(&["start", "write", "kill"]),
            resource: "processes",
            schema: obj(
                json!({
                    "op": one_of("operation", &["start", "list", "read", "write", "kill"]),
                    "command": s("start: shell command line"),
                    "label": s("start: short name shown in lists"),
                    "restart": one_of("start: restart policy (default no)", &["no", "on_failure", "always"]),
                "ttl_s": int("start: stop the process after this many seconds", 1, 30 * 24 * 3600),
                    "id": s("read/write/kill: process id from start"),
                    "offset": int("read: byte offset (default: where the last read stopped)", 0, i64::MAX),
                    "limit": int("read: most bytes to return (default 65536)", 1, 1_048_576),
                    "data": s("write: text for stdin"),
                    "eof": boolean("write: close stdin afterwards"),
                }),
                &["op"],
            ),
            attachment: Attached,
        },
        ToolSpec {
            name: "lsp",
            description: "Language-server queries: diagnostics, definition, type_definition, implementation, references, hover, symbols, code_actions, status, reload. Positions are a 1-based line plus a symbol substring.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "language_servers",
            schema: obj(
                json!({
                    "op": one_of("operation", &["diagnostics", "definition", "type_definition", "implementation", "references", "hover", "symbols", "code_actions", "status", "reload"]),
                    "file": s("file path, or \"*\" for diagnostics of the whole project"),
                    "line": int("1-based line", 1, i64::MAX),
                    "symbol": s("substring naming the symbol on that line"),
                    "query": s("symbols: workspace query"),
                    "occurrence": int("which occurrence of symbol on the line (1-based)", 1, 1000),
                }),
                &["op"],
            ),
            attachment: lsp_pending.clone(),
        },
        ToolSpec {
            name: "lsp_rename",
            description: "Rename a symbol project-wide through the language server; all files or none.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "language_servers",
            schema: obj(
                json!({"file": s("file"), "line": int("1-based line", 1, i64::MAX), "symbol": s("symbol on the line"), "new_name": s("new name")}),
                &["file", "line", "symbol", "new_name"],
            ),
            attachment: lsp_pending.clone(),
        },
        ToolSpec {
            name: "synced_write",
            description: "Tell the language servers a file was written by the harness; returns diagnostics new for this run.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "language_servers",
            schema: obj(json!({"path": s("file that was written")}), &["path"]),
            attachment: lsp_pending,
        },
        ToolSpec {
            name: "ast_grep",
            description: "Structural search by code shape: $NAME one node, $$$NAME a run of nodes, $_ a wildcard.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "structural",
            schema: obj(
                json!({"pattern": s("code pattern"), "path": s("file or directory"), "language": s("grammar id"), "max_results": int("default 50", 1, 10_000)}),
                &["pattern"],
            ),
            attachment: structural.clone(),
        },
        ToolSpec {
            name: "ast_edit",
            description: "Stage a structural rewrite (nothing is written until resolve accepts it).",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "structural",
            schema: obj(
                json!({"pattern": s("code pattern"), "rewrite": s("replacement template"), "path": s("file or directory"), "language": s("grammar id"), "max_results": int("default 50", 1, 10_000)}),
                &["pattern", "rewrite"],
            ),
            attachment: structural.clone(),
        },
        ToolSpec {
            name: "resolve",
            description: "Accept or discard a staged edit; accept writes all files or none.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "structural",
            schema: obj(
                json!({"edit_id": s("id from ast_edit"), "action": one_of("what to do", &["accept", "discard"])}),
                &["edit_id", "action"],
            ),
            attachment: structural,
        },
        ToolSpec {
            name: "debug",
            description: "Drive a debug adapter (DAP): breakpoints, launch, attach, step, stack, scopes, variables, evaluate, output, terminate.",
            tier: Exec,
            parallel_safe: false,
            approval: Ops(&[
                "launch",
                "attach",
                "continue",
                "pause",
                "step_over",
                "step_in",
                "step_out",
                "evaluate",
                "terminate",
            ]),
            resource: "debug_adapters",
            schema: obj(
                json!({
                    "op": one_of("operation", &["adapters", "status", "breakpoints", "launch", "attach", "continue", "pause", "step_over", "step_in", "step_out", "threads", "stack", "scopes", "variables", "evaluate", "output", "terminate"]),
                    "file": s("breakpoints: file"), "lines": {"type": "array", "items": {"type": "integer"}, "description": "breakpoints: lines"},
                    "program": s("launch: program"), "args": {"type": "array", "items": {"type": "string"}, "description": "launch: arguments"},
                    "port": int("attach: port", 1, 65535), "thread_id": int("thread", 0, i64::MAX), "frame_id": int("frame", 0, i64::MAX),
                    "reference": int("variables reference", 0, i64::MAX), "expression": s("evaluate: expression"),
                }),
                &["op"],
            ),
            attachment: NotBuilt("the debug worker (issue: debug, a DAP driver) is not built yet"),
        },
        ToolSpec {
            name: "eval",
            description: "Run a cell in a persistent Python or JavaScript kernel of this conversation.",
            tier: Exec,
            parallel_safe: false,
            approval: Always,
            resource: "kernels",
            schema: obj(
                json!({"code": s("cell source"), "description": s("5-10 words saying what the cell does"), "language": one_of("default python", &["python", "javascript"]), "reset": boolean("start a fresh interpreter first")}),
                &["code", "description"],
            ),
            attachment: NotBuilt("the kernel worker (issue: eval kernels) is not built yet"),
        },
        ToolSpec {
            name: "ask_user",
            description: "Ask the operator a question and wait for the answer, a skip, or a timeout.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "question_port",
            schema: obj(
                json!({
                    "question": s("the question"), "context": s("what the person needs to know"),
                    "options": {"type": "array", "items": {"type": "object", "properties": {"label": {"type": "string"}, "description": {"type": "string"}}, "required": ["label"]}},
                    "allow_free_text": boolean("accept an answer outside the options"), "multi_select": boolean("accept several options"),
                }),
                &["question"],
            ),
            attachment: NotBuilt(
                "the question port (issue: ask_user and vibe workers) is not built yet",
            ),
        },
        ToolSpec {
            name: "vibe_spawn",
            description: "Start a background worker on a brief; returns a worker id at once.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "vibe_roster",
            schema: obj(
                json!({"brief": s("what to do"), "label": s("short name"), "tier": one_of("default fast", &["fast", "good"])}),
                &["brief", "label"],
            ),
            attachment: vibe.clone(),
        },
        ToolSpec {
            name: "vibe_send",
            description: "Append a message to a worker's brief and rerun it.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "vibe_roster",
            schema: obj(
                json!({"worker_id": s("worker"), "message": s("message")}),
                &["worker_id", "message"],
            ),
            attachment: vibe.clone(),
        },
        ToolSpec {
            name: "vibe_wait",
            description: "Wait for a worker to finish (or the timeout) and return its state and last result.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "vibe_roster",
            schema: obj(
                json!({"worker_id": s("worker"), "timeout_seconds": int("how long to wait", 0, 86_400)}),
                &["worker_id"],
            ),
            attachment: vibe.clone(),
        },
        ToolSpec {
            name: "vibe_kill",
            description: "Stop a worker and its whole process group.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "vibe_roster",
            schema: obj(json!({"worker_id": s("worker")}), &["worker_id"]),
            attachment: vibe.clone(),
        },
        ToolSpec {
            name: "vibe_list",
            description: "List workers: tier, state, elapsed, last result.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "vibe_roster",
            schema: obj(json!({}), &[]),
            attachment: vibe,
        },
        ToolSpec {
            name: "download_model",
            description: "Start downloading a model's whole file set in the background; poll with list_downloads.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "downloads",
            schema: obj(
                json!({"model": s("repository id"), "variant": s("file variant"), "revision": s("revision")}),
                &["model"],
            ),
            attachment: downloads.clone(),
        },
        ToolSpec {
            name: "list_downloads",
            description: "Per-model and per-file progress of downloads.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "downloads",
            schema: obj(json!({}), &[]),
            attachment: downloads,
        },
        ToolSpec {
            name: "read",
            description: "Read a text file by line range, or an image resized to the model's limits.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(
                json!({"path": s("file"), "offset": int("first line (1-based)", 1, i64::MAX), "limit": int("number of lines", 1, i64::MAX)}),
                &["path"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "ls",
            description: "List a directory.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(json!({"path": s("directory")}), &[]),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "find",
            description: "Find files by glob, ignore-aware.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(
                json!({"pattern": s("glob"), "path": s("directory"), "hidden": boolean("include hidden files"), "ignored": boolean("include ignored files")}),
                &["pattern"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "grep",
            description: "Search file contents by regex, ignore-aware and parallel.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(
                json!({"pattern": s("regex"), "path": s("file or directory"), "glob": s("file glob"), "case": one_of("case sensitivity", &["sensitive", "insensitive", "smart"]), "context": int("lines of context", 0, 100), "max_results": int("most matches", 1, 100_000)}),
                &["pattern"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "write",
            description: "Write a file atomically.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "files",
            schema: obj(
                json!({"path": s("file"), "content": s("full content")}),
                &["path", "content"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "edit",
            description: "Replace an exact text in a file.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "files",
            schema: obj(
                json!({"path": s("file"), "old_text": s("exact text to replace"), "new_text": s("replacement"), "replace_all": boolean("replace every occurrence")}),
                &["path", "old_text", "new_text"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "apply_patch",
            description: "Apply a unified diff; all hunks or nothing.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "files",
            schema: obj(json!({"patch": s("unified diff")}), &["patch"]),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "tool_result_read",
            description: "Read a stored large result by characters, from a ref.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "result_store",
            schema: obj(
                json!({"ref": s("reference from a projected result"), "offset": int("first character", 0, i64::MAX), "limit": int("characters (default 12000)", 1, 48_000)}),
                &["ref"],
            ),
            attachment: files,
        },
    ];
    if probe_tools {
        for (name, parallel_safe) in [("_probe_serial", false), ("_probe_parallel", true)] {
            tools.push(ToolSpec {
                name,
                description: "Test tool: sleeps, then reports when it started and ended.",
                tier: Read,
                parallel_safe,
                approval: Never,
                resource: "testing",
                schema: obj(
                    json!({"tag": s("label"), "sleep_ms": int("sleep", 0, 60_000)}),
                    &["tag"],
                ),
                attachment: Attached,
            });
        }
    }
    tools
}

/// Tools by name, with the rules of visibility.
pub struct Registry {
    tools: BTreeMap<&'static str, ToolSpec>,
    denied: Vec<String>,
}

impl Registry {
    pub fn new(tools: Vec<ToolSpec>, denied: Vec<String>) -> Self {
        Registry {
            tools: tools.into_iter().map(|t| (t.name, t)).collect(),
            denied,
        }
    }

    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name)
    }

    pub fn is_denied(&self, name: &str) -> bool {
        self.denied.iter().any(|d| d == name)
    }

    /// Why `surface` may not call `spec`, if it may not.
    fn refusal(&self, spec: &ToolSpec, surface: &Surface) -> Option<(ErrorKind, String)> {
        if self.is_denied(spec.name) {
            return Some((
                ErrorKind::PolicyDenied,
                format!("tool `{}` is denied by the operator's policy", spec.name),
            ));
        }
        if spec.tier > surface.max_tier {
            return Some((
                ErrorKind::SurfaceDenied,
                format!(
                    "tool `{}` is {} tier, above this client's surface ({})",
                    spec.name, spec.tier, surface.max_tier
                ),
            ));
        }
        if let Attachment::NotBuilt(why) = &spec.attachment {
            return Some((ErrorKind::NotAvailable, why.to_string()));
        }
        None
    }

    /// The advertised set: what the client may see ∩ what is attached ∩ policy.
    pub fn advertised(&self, surface: &Surface) -> Vec<ToolInfo> {
        self.tools
            .values()
            .filter(|t| self.refusal(t, surface).is_none())
            .map(|t| t.info(true, None))
            .collect()
    }

    /// Every registered tool, each marked with whether this client may call it and why not.
    pub fn everything(&self, surface: &Surface) -> Vec<ToolInfo> {
        self.tools
            .values()
            .map(|t| match self.refusal(t, surface) {
                None => t.info(true, None),
                Some((_, why)) => t.info(false, Some(why)),
            })
            .collect()
    }

    /// The spec of a tool this client may call now, or the structured refusal.
    pub fn check(&self, name: &str, surface: &Surface) -> Result<&ToolSpec, ToolError> {
        let Some(spec) = self.tools.get(name) else {
            let names: Vec<_> = self
                .advertised(surface)
                .into_iter()
                .map(|t| t.name)
                .collect();
            return Err(ToolError::new(
                ErrorKind::UnknownTool,
                format!("no tool named {name:?}"),
                format!("tools available to this client: {}", names.join(", ")),
            ));
        };
        match self.refusal(spec, surface) {
            None => Ok(spec),
            Some((kind, why)) => {
                let hint = match kind {
                    ErrorKind::PolicyDenied => {
                        "do not retry; ask the operator if the tool is needed".to_string()
                    }
                    ErrorKind::SurfaceDenied => format!(
                        "connect with a surface of at least `{}` to use it",
                        spec.tier
                    ),
                    _ => {
                        "use another tool; `toolvisor tools --all` lists what runs here".to_string()
                    }
                };
                Err(ToolError::new(kind, why, hint))
            }
        }
    }
}

/// Check `args` against a tool's schema (the subset the registry uses: object, properties,
/// required, additionalProperties, type, enum, minimum, maximum, items), naming the field.
pub fn validate(tool: &str, schema: &Json, args: &Json) -> Result<(), ToolError> {
    let bad = |msg: String| {
        ToolError::new(
            ErrorKind::InvalidArgs,
            format!("{tool}: {msg}"),
            format!("`toolvisor tools --json` shows the schema of `{tool}`"),
        )
    };
    let Some(map) = args.as_object() else {
        return Err(bad(format!(
            "arguments must be a JSON object, got {}",
            type_name(args)
        )));
    };
    let props = schema.get("properties").and_then(Json::as_object);
    if let Some(required) = schema.get("required").and_then(Json::as_array) {
        for r in required.iter().filter_map(Json::as_str) {
            if map.get(r).is_none_or(Json::is_null) {
                return Err(bad(format!("missing required argument `{r}`")));
            }
        }
    }
    for (key, value) in map {
        let Some(prop) = props.and_then(|p| p.get(key)) else {
            let known: Vec<_> = props
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            return Err(bad(format!(
                "unknown argument `{key}` (known: {})",
                known.join(", ")
            )));
        };
        if value.is_null() {
            continue;
        }
        check_value(key, prop, value).map_err(bad)?;
    }
    Ok(())
}

fn check_value(path: &str, prop: &Json, value: &Json) -> Result<(), String> {
    let ty = prop.get("type").and_then(Json::as_str).unwrap_or("any");
    let ok = match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => true,
    };
    if !ok {
        return Err(format!(
            "argument `{path}` must be {}, got {}",
            article(ty),
            describe(value)
        ));
    }
    if let Some(allowed) = prop.get("enum").and_then(Json::as_array)
        && !allowed.contains(value)
    {
        let names: Vec<_> = allowed.iter().map(|a| a.to_string()).collect();
        return Err(format!(
            "argument `{path}` is {value}, expected one of {}",
            names.join(", ")
        ));
    }
    if let Some(n) = value.as_i64().or_else(|| value.as_u64().map(|_| i64::MAX)) {
        if let Some(min) = prop.get("minimum").and_then(Json::as_i64)
            && n < min
        {
            return Err(format!(
                "argument `{path}` is {value}, below the minimum {min}"
            ));
        }
        if let Some(max) = prop.get("maximum").and_then(Json::as_i64)
            && n > max
        {
            return Err(format!(
                "argument `{path}` is {value}, above the maximum {max}"
            ));
        }
    }
    if let (Some(items), Some(list)) = (prop.get("items"), value.as_array()) {
        for (i, item) in list.iter().enumerate() {
            check_value(&format!("{path}[{i}]"), items, item)?;
        }
    }
    Ok(())
}

fn type_name(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn describe(v: &Json) -> String {
    let mut shown = v.to_string();
    if shown.len() > 40 {
        shown = format!("{}…", shown.chars().take(40).collect::<String>());
    }
    format!("{} ({shown})", type_name(v))
}

fn article(ty: &str) -> String {
    match ty {
        "integer" => "an integer".into(),
        "array" => "an array".into(),
        "object" => "an object".into(),
        other => format!("a {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn surface(tier: Tier) -> Surface {
        Surface {
            max_tier: tier,
            approvals: false,
            questions: false,
            bridge_tools: vec![],
        }
    }

    #[test]
    fn every_spec_tool_is_registered_with_its_tier() {
        let reg = Registry::new(all_tools(false), vec![]);
        let expect = [
            ("lsp", Tier::Read),
            ("ast_grep", Tier::Read),
            ("ask_user", Tier::Read),
            ("vibe_spawn", Tier::Read),
            ("vibe_send", Tier::Read),
            ("vibe_wait", Tier::Read),
            ("vibe_kill", Tier::Read),
            ("vibe_list", Tier::Read),
            ("lsp_rename", Tier::Write),
            ("ast_edit", Tier::Write),
            ("resolve", Tier::Write),
            ("write", Tier::Write),
            ("edit", Tier::Write),
            ("apply_patch", Tier::Write),
            ("debug", Tier::Exec),
            ("eval", Tier::Exec),
            ("bash", Tier::Exec),
            ("process", Tier::Exec),
            ("read", Tier::Read),
            ("ls", Tier::Read),
            ("find", Tier::Read),
            ("grep", Tier::Read),
            ("tool_result_read", Tier::Read),
            ("download_model", Tier::Write),
            ("list_downloads", Tier::Read),
        ];
        for (name, tier) in expect {
            let spec = reg
                .get(name)
                .unwrap_or_else(|| panic!("{name} not registered"));
            assert_eq!(spec.tier, tier, "{name}");
            assert_eq!(
                spec.parallel_safe,
                !matches!(name, "debug" | "eval"),
                "{name}"
            );
            assert_eq!(spec.schema["type"], "object");
        }
    }

    #[test]
    fn surfaces_and_policy_filter_the_advertised_set() {
        let reg = Registry::new(all_tools(false), vec!["process".into()]);
        let names = |t: Tier| {
            reg.advertised(&surface(t))
                .into_iter()
                .map(|i| i.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(Tier::Exec), vec!["bash"]);
        assert!(names(Tier::Read).is_empty());
        assert_eq!(
            reg.check("process", &surface(Tier::Exec)).unwrap_err().kind,
            ErrorKind::PolicyDenied
        );
        assert_eq!(
            reg.check("bash", &surface(Tier::Read)).unwrap_err().kind,
            ErrorKind::SurfaceDenied
        );
        assert_eq!(
            reg.check("lsp", &surface(Tier::Read)).unwrap_err().kind,
            ErrorKind::NotAvailable
        );
        assert_eq!(
            reg.check("nope", &surface(Tier::Exec)).unwrap_err().kind,
            ErrorKind::UnknownTool
        );
        let all = reg.everything(&surface(Tier::Read));
        let bash = all.iter().find(|t| t.name == "bash").unwrap();
        assert!(
            !bash.available
                && bash
                    .unavailable_reason
                    .as_deref()
                    .unwrap()
                    .contains("exec tier")
        );
    }

    #[test]
    fn validation_names_the_field() {
        let reg = Registry::new(all_tools(false), vec![]);
        let schema = &reg.get("bash").unwrap().schema;
        assert!(validate("bash", schema, &json!({"command": "ls", "timeout_s": 5})).is_ok());
        let err = |args: Json| validate("bash", schema, &args).unwrap_err().message;
        assert!(err(json!({"command": 5})).contains("`command` must be a string, got a number"));
        assert!(err(json!({})).contains("missing required argument `command`"));
        assert!(err(json!({"command": "x", "timeout": 1})).contains("unknown argument `timeout`"));
        assert!(err(json!({"command": "x", "timeout_s": 0})).contains("below the minimum 1"));
        assert!(err(json!([1])).contains("must be a JSON object"));
        let schema = &reg.get("process").unwrap().schema;
        assert!(
            validate("process", schema, &json!({"op": "explode"}))
                .unwrap_err()
                .message
                .contains("expected one of")
        );
    }

    #[test]
    fn approval_follows_the_op() {
        let reg = Registry::new(all_tools(false), vec![]);
        let p = reg.get("process").unwrap();
        assert!(!p.needs_approval(&json!({"op": "list"})));
        assert!(!p.needs_approval(&json!({"op": "read", "id": "p1"})));
        assert!(p.needs_approval(&json!({"op": "start", "command": "x"})));
        assert!(
            reg.get("bash")
                .unwrap()
                .needs_approval(&json!({"command": "x"}))
        );
        assert!(
            !reg.get("lsp")
                .unwrap()
                .needs_approval(&json!({"op": "hover"}))
        );
    }
}
