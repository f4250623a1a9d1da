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
    /// Built, but its resource is not attached to this daemon (e.g. vibe mode is off: no
    /// worker command is configured); the reason says what would attach it.
    Detached(String),
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
    /// The tier of this particular call when it is above the tool's: `lsp trust` lets later
    /// read calls run project code, so it needs a write-tier surface (and approval).
    pub fn call_tier(&self, args: &Json) -> Tier {
        match (self.name, args.get("op").and_then(Json::as_str)) {
            ("lsp", Some("trust")) => Tier::Write,
            _ => self.tier,
        }
    }

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
    // Attached: the language-server supervisor is part of every daemon; whether a server can
    // run for a given checkout is `lsp status`'s business, not the surface's.
    let lsp_attached = Attached;
    // Attached: the tree-sitter grammars are linked into the daemon.
    let structural = Attached;
    // Attached: the file tools and the result store are in-process.
    let files = Attached;
    // The daemon replaces this with what its configuration says (`tools::human`).
    let vibe = Detached(
        "vibe mode is off: no worker command is configured ([vibe.tiers.fast] or [vibe.tiers.good] command = [...])".into(),
    );
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
            description: "Language-server queries: diagnostics, definition, type_definition, implementation, references, hover, symbols, code_actions, status, reload; trust (asks the user to let servers and checkers run this project's code for the run). Positions are a 1-based line plus a symbol substring.",
            tier: Read,
            parallel_safe: true,
            approval: Ops(&["trust"]),
            resource: "language_servers",
            schema: obj(
                json!({
                    "op": one_of("operation", &["diagnostics", "definition", "type_definition", "implementation", "references", "hover", "symbols", "code_actions", "status", "reload", "trust"]),
                    "file": s("file path, or \"*\" for diagnostics of the whole project"),
                    "line": int("1-based line", 1, i64::MAX),
                    "symbol": s("substring naming the symbol on that line"),
                    "query": s("symbols: workspace query"),
                    "occurrence": int("which occurrence of symbol on the line (1-based)", 1, 1000),
                }),
                &["op"],
            ),
            attachment: lsp_attached.clone(),
        },
        ToolSpec {
            name: "lsp_rename",
            description: "Rename a symbol project-wide through the language server; all files or none.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "language_servers",
            schema: obj(
                json!({"file": s("file"), "line": int("1-based line", 1, i64::MAX), "symbol": s("symbol on the line"), "new_name": s("new name"), "occurrence": int("which occurrence of symbol on the line (1-based)", 1, 1000)}),
                &["file", "line", "symbol", "new_name"],
            ),
            attachment: lsp_attached.clone(),
        },
        ToolSpec {
            name: "synced_write",
            description: "Tell the language servers a file was written by the harness; returns diagnostics new for this run.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "language_servers",
            schema: obj(json!({"path": s("file that was written")}), &["path"]),
            attachment: lsp_attached,
        },
        ToolSpec {
            name: "ast_grep",
            description: "Structural search by code shape (ast-grep): $NAME matches one node, $$$NAME a run of sibling nodes, $_ any node without binding; a metavariable used twice must match identical code. Returns path:line:col, matched text and captures, the total count and whether the list was cut.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "structural",
            schema: obj(
                json!({"pattern": s("code pattern with metavariables, e.g. `$A.unwrap()`"), "path": s("file or directory, relative to the workdir (default: the workdir)"), "language": s("grammar id: bash, c, cpp, csharp, css, dart, elixir, go, haskell, hcl, html, java, javascript, json, kotlin, lua, markdown, nix, php, python, ruby, rust, scala, solidity, swift, tsx, typescript, yaml, zig; inferred from a file path"), "max_results": int("matches listed (default 50); the total is always counted", 1, 10_000)}),
                &["pattern"],
            ),
            attachment: structural.clone(),
        },
        ToolSpec {
            name: "ast_edit",
            description: "Stage a structural rewrite: every match of `pattern` replaced by `rewrite` with its metavariables substituted. Nothing is written: returns an edit_id and a diff preview; call resolve to accept (all files or none) or discard.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "structural",
            schema: obj(
                json!({"pattern": s("code pattern with metavariables"), "rewrite": s("replacement template; $NAME and $$$NAME are replaced by what the pattern captured"), "path": s("file or directory, relative to the workdir (default: the workdir)"), "language": s("grammar id (see ast_grep); inferred from a file path"), "max_results": int("most replacements to stage (default 50); more is refused, never staged in part", 1, 10_000)}),
                &["pattern", "rewrite"],
            ),
            attachment: structural.clone(),
        },
        ToolSpec {
            name: "resolve",
            description: "Accept or discard an edit staged by ast_edit in this conversation. Accept first checks every file still holds what it held at staging (any change rejects the whole edit), then writes all files or none.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "structural",
            schema: obj(
                json!({"edit_id": s("id returned by ast_edit, e.g. \"edit_1\""), "action": one_of("accept writes the staged change; discard drops it", &["accept", "discard"])}),
                &["edit_id", "action"],
            ),
            attachment: structural,
        },
        ToolSpec {
            name: "debug",
            description: "Debug a program through a real debug adapter (DAP: debugpy for .py, lldb-dap for native executables), one session per conversation: set breakpoints (also before launch), launch (returns once stopped at a breakpoint or the entry, with where) or attach to a debugpy server port, continue/pause/step, threads, stack (<=30 frames), scopes, variables (<=50 children, values cut at 400 chars), evaluate, output (the program's stdout/stderr by offset), terminate. `adapters` says which adapters work here and why not.",
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
                    "file": s("breakpoints: source file, relative to the workdir"), "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}, "description": "breakpoints: 1-based lines; empty clears the file"},
                    "program": s("launch: the program (a .py script, an executable built with debug info)"), "args": {"type": "array", "items": {"type": "string"}, "description": "launch: the program's arguments"},
                    "adapter": s("launch/attach: adapter name (default: chosen from the program; attach: debugpy)"),
                    "port": int("attach: port of a debug server on 127.0.0.1 (python -m debugpy --listen PORT)", 1, 65535), "thread_id": int("continue/pause/step_*/stack: thread (default: the one that stopped)", 0, i64::MAX), "frame_id": int("scopes/evaluate: frame id from stack (default: the top frame)", 0, i64::MAX),
                    "reference": int("variables: reference from scopes, variables or evaluate", 0, i64::MAX), "expression": s("evaluate: expression, in the frame"),
                    "offset": int("output: byte offset (default: where the last read stopped)", 0, i64::MAX), "limit": int("output: most bytes (default 65536)", 1, 1_048_576),
                }),
                &["op"],
            ),
            // Attached: the debug_adapters supervisor is part of every daemon; which adapters
            // can run for a checkout is `adapters`' business, not the surface's.
            attachment: Attached,
        },
        ToolSpec {
            name: "eval",
            description: "Run a cell in a persistent Python or JavaScript kernel of this conversation: variables, imports and loaded data persist between calls; the last expression is echoed; display(), pandas tables and matplotlib figures come back as outputs; %pip, %cd, !cmd, %%bash and %%timeit work; tool(name, args) calls this registry from the cell.",
            tier: Exec,
            parallel_safe: false,
            approval: Always,
            resource: "kernels",
            schema: obj(
                json!({
                    "code": s("cell source"),
                    "description": {"type": "string", "description": "5-10 words saying what the cell does", "minWords": 5, "maxWords": 10},
                    "language": one_of("default python", &["python", "javascript"]),
                    "reset": boolean("discard the interpreter and start clean first"),
                    "timeout_s": int("inactivity budget: seconds the cell may run without output (default 300)", 1, 86_400),
                }),
                &["code", "description"],
            ),
            attachment: Attached,
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
            // A question port can attach to any run; whether a person is attached *now*
            // is decided per call (`no_human`).
            attachment: Attached,
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
            description: "Read a text file by line range with line numbers (`offset` 1-based, negative counts from the end: -100 = the last 100 lines), or an image (PNG, JPEG, GIF, WebP, BMP) fitted to the model's limits. Binary files are refused.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(
                json!({"path": s("file, relative to the workdir"), "offset": int("first line (1-based); negative counts from the end (default 1)", i64::MIN, i64::MAX), "limit": int("number of lines (default 2000; a read also stops at 40000 characters)", 1, i64::MAX)}),
                &["path"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "ls",
            description: "List a directory (hidden entries included): name (directories end in /), type, size, symlink target.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(json!({"path": s("directory (default: the workdir)")}), &[]),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "find",
            description: "Find files and directories by glob, in parallel, skipping .gitignored and hidden ones unless asked. A glob without / matches names (*.rs), one with / the path under `path` (src/**/*.rs). Sorted paths relative to the workdir.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(
                json!({"pattern": s("glob"), "path": s("directory to search (default: the workdir)"), "hidden": boolean("include hidden files"), "ignored": boolean("include files .gitignore and .ignore exclude"), "max_results": int("most paths listed (default 1000); the total is always counted", 1, 1_000_000)}),
                &["pattern"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "grep",
            description: "Search file contents by regex (Rust syntax), in parallel, skipping .gitignored, hidden and binary files. Output as ripgrep prints it: path:line:text, path-line-text for context, files in path order.",
            tier: Read,
            parallel_safe: true,
            approval: Never,
            resource: "files",
            schema: obj(
                json!({"pattern": s("regex"), "path": s("file or directory (default: the workdir)"), "glob": s("only files matching these globs, comma-separated, ! excludes (e.g. \"*.rs,!*_test.rs\")"), "case": one_of("case sensitivity (default sensitive)", &["sensitive", "insensitive", "smart"]), "context": int("lines of context around each match (default 0)", 0, 100), "max_results": int("most matching lines (default 200)", 1, 100_000), "hidden": boolean("include hidden files"), "ignored": boolean("include files .gitignore and .ignore exclude"), "multiline": boolean("a match may span lines, as rg -U: \\n in the pattern matches a line break; each line of a match is shown")}),
                &["pattern"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "write",
            description: "Create or replace a file with `content`, atomically (temp file + rename), keeping its mode; parent directories are created. Paths outside the workdir are refused.",
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
            description: "Replace an exact text in a file (atomic write). old_text must match exactly once unless replace_all; zero or several matches is an error saying how many and at which lines. Returns a unified diff.",
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
            description: "Apply a unified diff (one or more files; /dev/null creates or deletes) or a `*** Begin Patch` patch (Add/Delete/Update File, Move to, `@@` sections). Every hunk of every file applies or nothing is written; a failing hunk is named with its header and context.",
            tier: Write,
            parallel_safe: true,
            approval: Always,
            resource: "files",
            schema: obj(
                json!({"patch": s("unified diff or `*** Begin Patch` patch")}),
                &["patch"],
            ),
            attachment: files.clone(),
        },
        ToolSpec {
            name: "tool_result_read",
            description: "Read a stored large result by characters, from the `ref` its projection named: text, next_offset, total_chars, eof, source_tool, content_type, storage_kind.",
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
        if let Attachment::Detached(why) = &spec.attachment {
            return Some((ErrorKind::NotAvailable, why.clone()));
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
/// required, additionalProperties, type, enum, minimum, maximum, items, and the
/// non-standard `minWords`/`maxWords` of a string), naming the field.
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
    if let Some(text) = value.as_str() {
        let words = text.split_whitespace().count() as u64;
        let min = prop.get("minWords").and_then(Json::as_u64);
        let max = prop.get("maxWords").and_then(Json::as_u64);
        if min.is_some_and(|m| words < m) || max.is_some_and(|m| words > m) {
            return Err(format!(
                "argument `{path}` must be {} to {} words, got {words} ({})",
                min.unwrap_or(0),
                max.map_or("any".to_string(), |m| m.to_string()),
                describe(value)
            ));
        }
    }
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
    // A nested object schema (`ask_user`'s options) is checked like the top level, so what
    // passes here also parses into the handler's type. The recursion follows the schema,
    // which is ours and shallow, never the depth of the value.
    if let Some(map) = value.as_object() {
        if let Some(required) = prop.get("required").and_then(Json::as_array) {
            for r in required.iter().filter_map(Json::as_str) {
                if map.get(r).is_none_or(Json::is_null) {
                    return Err(format!("argument `{path}` misses its required field `{r}`"));
                }
            }
        }
        if let Some(props) = prop.get("properties").and_then(Json::as_object) {
            for (key, sub) in props {
                if let Some(v) = map.get(key).filter(|v| !v.is_null()) {
                    check_value(&format!("{path}.{key}"), sub, v)?;
                }
            }
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
        assert_eq!(
            names(Tier::Exec),
            vec![
                "apply_patch",
                "ask_user",
                "ast_edit",
                "ast_grep",
                "bash",
                "debug",
                "edit",
                "eval",
                "find",
                "grep",
                "ls",
                "lsp",
                "lsp_rename",
                "read",
                "resolve",
                "synced_write",
                "tool_result_read",
                "write"
            ]
        );
        assert_eq!(
            names(Tier::Read),
            vec![
                "ask_user",
                "ast_grep",
                "find",
                "grep",
                "ls",
                "lsp",
                "read",
                "synced_write",
                "tool_result_read"
            ]
        );
        assert_eq!(
            reg.check("process", &surface(Tier::Exec)).unwrap_err().kind,
            ErrorKind::PolicyDenied
        );
        assert_eq!(
            reg.check("bash", &surface(Tier::Read)).unwrap_err().kind,
            ErrorKind::SurfaceDenied
        );
        assert_eq!(
            reg.check("download_model", &surface(Tier::Exec))
                .unwrap_err()
                .kind,
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
        let lsp = reg.get("lsp").unwrap();
        assert!(!lsp.needs_approval(&json!({"op": "hover"})));
        assert!(!lsp.needs_approval(&json!({"op": "diagnostics", "file": "*"})));
        assert!(lsp.needs_approval(&json!({"op": "trust"})));
        assert_eq!(lsp.call_tier(&json!({"op": "hover"})), Tier::Read);
        assert_eq!(lsp.call_tier(&json!({"op": "trust"})), Tier::Write);
    }

    #[test]
    fn eval_description_must_be_five_to_ten_words() {
        let reg = Registry::new(all_tools(false), vec![]);
        let schema = &reg.get("eval").unwrap().schema;
        let check = |d: &str| validate("eval", schema, &json!({"code": "1", "description": d}));
        assert!(check("load the csv and plot totals").is_ok());
        assert!(check("one two three four five six seven eight nine ten").is_ok());
        let err = check("plot it").unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidArgs);
        assert!(
            err.message
                .contains("`description` must be 5 to 10 words, got 2"),
            "{err}"
        );
        assert!(check("a b c d e f g h i j k").is_err());
    }
}
