//! Arguments and results of The language-server tools: `lsp`, `lsp_rename`, `lsp_edit`, `synced_write`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Operations of the `lsp` tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspOp {
    Diagnostics,
    Definition,
    TypeDefinition,
    Implementation,
    References,
    Hover,
    Symbols,
    CodeActions,
    /// Incoming and outgoing calls of the function at line + symbol.
    CallHierarchy,
    /// The diagnostics a proposed edit would produce; nothing is written.
    CheckEdit,
    /// Supertypes and subtypes of the type at line + symbol.
    TypeHierarchy,
    /// The signatures of the call whose callee is at line + symbol, and the active parameter.
    SignatureHelp,
    /// What the server would complete at the end of `symbol` on the line (e.g. `obj.`).
    Completions,
    /// Inferred types and parameter names the server shows inline, for `line`..`end_line`
    /// or the whole file.
    InlayHints,
    /// The whole project's diagnostics: the server's workspace pull where it offers one,
    /// else the project checker.
    WorkspaceDiagnostics,
    Status,
    Reload,
    /// Let servers and checkers run this project's code for the run (asks the user).
    Trust,
}

impl LspOp {
    /// The op's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            LspOp::Diagnostics => "diagnostics",
            LspOp::Definition => "definition",
            LspOp::TypeDefinition => "type_definition",
            LspOp::Implementation => "implementation",
            LspOp::References => "references",
            LspOp::Hover => "hover",
            LspOp::Symbols => "symbols",
            LspOp::CodeActions => "code_actions",
            LspOp::CallHierarchy => "call_hierarchy",
            LspOp::CheckEdit => "check_edit",
            LspOp::TypeHierarchy => "type_hierarchy",
            LspOp::SignatureHelp => "signature_help",
            LspOp::Completions => "completions",
            LspOp::InlayHints => "inlay_hints",
            LspOp::WorkspaceDiagnostics => "workspace_diagnostics",
            LspOp::Status => "status",
            LspOp::Reload => "reload",
            LspOp::Trust => "trust",
        }
    }
}

impl std::fmt::Display for LspOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `lsp {op, file?, line?, end_line?, symbol?, query?, occurrence?, old_text?, new_text?, offset?, depth?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspArgs {
    /// Operation.
    pub op: LspOp,
    /// File, or "*" for the whole project.
    pub file: Option<String>,
    /// 1-based line.
    #[schemars(range(min = 1, max = i64::MAX))]
    pub line: Option<u64>,
    /// inlay_hints: last line (default: line).
    #[schemars(range(min = 1, max = i64::MAX))]
    pub end_line: Option<u64>,
    /// Symbol substring (completions: the typed prefix).
    pub symbol: Option<String>,
    /// symbols: workspace query.
    pub query: Option<String>,
    /// Nth match on the line.
    #[schemars(range(min = 1, max = 1000))]
    pub occurrence: Option<u64>,
    /// check_edit: text replaced; absent: new_text is the file.
    pub old_text: Option<String>,
    /// check_edit: replacement.
    pub new_text: Option<String>,
    /// Skip this many (next_offset).
    #[schemars(range(min = 0, max = 1_000_000))]
    pub offset: Option<u64>,
    /// symbols outline: levels shown (default 0).
    #[schemars(range(min = 0, max = 16))]
    pub depth: Option<u64>,
}

/// `lsp_rename {file, line, symbol, new_name, occurrence?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspRenameArgs {
    pub file: String,
    /// 1-based line.
    #[schemars(range(min = 1, max = i64::MAX))]
    pub line: u64,
    pub symbol: String,
    pub new_name: String,
    /// Nth match on the line.
    #[schemars(range(min = 1, max = 1000))]
    pub occurrence: Option<u64>,
    /// Preview; write nothing.
    pub dry_run: Option<bool>,
}

/// Operations of the `lsp_edit` tool (write tier): edits computed by the language server or
/// addressed by its document symbols, written all or nothing like `lsp_rename`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspEditOp {
    /// Apply the action `index` of this run's last `lsp code_actions` answer.
    ApplyCodeAction,
    /// Replace the whole definition at `symbol_path` (signature and body) with `text`.
    ReplaceSymbolBody,
    /// Insert `text` as whole lines before the definition at `symbol_path`.
    InsertBeforeSymbol,
    /// Insert `text` as whole lines after the definition at `symbol_path`.
    InsertAfterSymbol,
    /// Format `file` with the server's formatter.
    Format,
}

impl LspEditOp {
    /// The op's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            LspEditOp::ApplyCodeAction => "apply_code_action",
            LspEditOp::ReplaceSymbolBody => "replace_symbol_body",
            LspEditOp::InsertBeforeSymbol => "insert_before_symbol",
            LspEditOp::InsertAfterSymbol => "insert_after_symbol",
            LspEditOp::Format => "format",
        }
    }
}

impl std::fmt::Display for LspEditOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `lsp_edit {op, file?, symbol_path?, text?, index?}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LspEditArgs {
    /// Operation.
    pub op: LspEditOp,
    pub file: Option<String>,
    /// Outline path, e.g. Greeter/greet.
    pub symbol_path: Option<String>,
    /// New definition (replace) or lines (insert).
    pub text: Option<String>,
    /// From lsp code_actions.
    #[schemars(range(min = 0, max = 1000))]
    pub index: Option<u64>,
}

/// `synced_write {path}`: the harness wrote `path` itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncedWriteArgs {
    pub path: String,
}
