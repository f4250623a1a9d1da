//! The results of `lsp` (one shape per op), and the shapes the lsp write tools share with it
//! (`LspServer`, `WriteDiagnostics`; those tools' own results are in `lsp_edits.rs`).
//!
//! Every `lsp` answer from a server carries `server`, `readiness` and `complete`, set where
//! the worker builds it ([`LspServed::of`]); `status`, `reload`, `trust` and a project
//! checker's run (`diagnostics "*"`, `workspace_diagnostics` from the checker) carry none.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// ---- shared shapes ----

/// The server that answered, as it was when it answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspServer {
    /// The server's id: `language:root`, with ` (restricted)` for its restricted mode.
    pub id: String,
    /// Its language.
    pub language: String,
    /// Its project root (absolute).
    pub root: String,
    /// The server's program name (as it calls itself).
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// Its state when the request was sent.
    pub state: LspServerState,
    /// The negotiated position encoding.
    pub position_encoding: LspEncoding,
    /// What it was doing while indexing (its `$/progress`), when `state` is `indexing`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexing: Option<String>,
    /// The server's own share of the call in ms (request sent → answer parsed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_ms: Option<f64>,
}

/// A server's readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspServerState {
    /// No live connection (starting or restarting).
    Starting,
    /// Connected but busy indexing.
    Indexing,
    /// Ready and settled.
    Ready,
}

/// What an answer rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspReadiness {
    /// The server had no live connection.
    Starting,
    /// The server was still indexing (a file-local answer that did not wait).
    Indexing,
    /// The server was ready.
    Ready,
    /// The answer is known to cover less than the project (`partial_reason`).
    Partial,
}

/// The server that answered an `lsp` op, and what its answer rests on: set where the answer
/// is built ([`LspServed::of`]), so a caller can tell "none" from "none yet".
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspServed {
    /// The server that answered.
    pub server: LspServer,
    /// What the answer rests on.
    pub readiness: LspReadiness,
    /// The server's whole answer from a ready server: nothing cut, no gap known (an outline:
    /// nothing cut).
    pub complete: bool,
}

impl LspServed {
    /// `server`'s answer, `partial` when a gap is known (the answer carries its
    /// `partial_reason`), `cut` when toolvisor's bound or the server left some out.
    pub fn of(server: LspServer, partial: bool, cut: bool) -> LspServed {
        let readiness = match (partial, server.state) {
            (true, _) => LspReadiness::Partial,
            (false, LspServerState::Starting) => LspReadiness::Starting,
            (false, LspServerState::Indexing) => LspReadiness::Indexing,
            (false, LspServerState::Ready) => LspReadiness::Ready,
        };
        let complete = !partial && !cut && server.state == LspServerState::Ready;
        LspServed {
            server,
            readiness,
            complete,
        }
    }
}

/// Where a paged list stands: how many there are, and the page shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LspPage {
    /// Found, listed or not.
    pub total: u64,
    /// Not every entry is on this page (cut at the op's bound, or a page after the first).
    pub truncated: bool,
    /// The entries skipped before this page (absent when the list is whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Where the next page starts (absent on the last page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
}

/// A position encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum LspEncoding {
    #[serde(rename = "utf-8")]
    Utf8,
    #[serde(rename = "utf-16")]
    Utf16,
    #[serde(rename = "utf-32")]
    Utf32,
}

/// A location in a file, with its source line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspLocation {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// The file's absolute path.
    pub abs_path: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column in characters (outside the scope: the server's unit count plus one).
    pub column: u64,
    /// The source line (cut around the match when long); empty when `outside`.
    pub text: String,
    /// Outside the caller's file scope: named, its text not read.
    pub outside: bool,
    /// The line was longer than 200 characters and is cut around the match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_cut: Option<bool>,
    /// The cut line's length in characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_chars: Option<u64>,
}

/// One diagnostic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspDiagnostic {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column.
    pub column: u64,
    /// Severity.
    pub severity: LspSeverity,
    /// The diagnostic's code (empty when none).
    pub code: String,
    /// The message.
    pub message: String,
    /// What reported it (empty when unnamed).
    pub source: String,
}

/// A diagnostic's severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspSeverity {
    Error,
    Warning,
    Info,
    Hint,
}

/// A diagnostic of `check_edit`, with whether the edit brings it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCheckedDiagnostic {
    #[serde(flatten)]
    pub diagnostic: LspDiagnostic,
    /// The disk text does not have it (same severity, code and message): the edit brings it.
    pub new: bool,
}

/// The diagnostics new for the run after a write, folded into every writing tool's result
/// (`write`, `edit`, `apply_patch`, `resolve`, `lsp_rename`, `synced_write`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WriteDiagnostics {
    /// The new diagnostics, the notes and what else was checked, as lines.
    pub text: String,
    /// Diagnostics new for this run, in the written files and their dependents (no hints).
    pub new: Vec<LspDiagnostic>,
    /// Why a file has no diagnostics (no server covers it, none within the wait).
    pub notes: Vec<String>,
    /// The dependents of the write that were checked too.
    pub dependents: LspDependents,
    /// Why a server's type checking is off (rust-analyzer untrusted or without check on save).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checking_off: Option<Vec<String>>,
}

/// The dependents of a write.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspDependents {
    /// The files checked besides the written ones.
    pub checked: Vec<String>,
    /// Dependent files checked per write at most.
    pub max: u64,
}

/// One file of a written edit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspEditedFile {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// Text edits in it.
    pub edits: u64,
}

// ---- lsp ----

/// The result of `lsp`: one shape per op.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum LspResult {
    Locations(LspLocations),
    Hover(LspHover),
    CodeActions(LspCodeActions),
    // Before the outline, which holds all of an empty workspace answer but its
    // `partial_reason`: an empty outline parses as this, losing nothing.
    WorkspaceSymbols(LspWorkspaceSymbols),
    DocumentSymbols(LspDocumentSymbols),
    Diagnostics(LspFileDiagnostics),
    ProjectCheck(LspProjectCheck),
    WorkspacePull(LspWorkspacePull),
    CallHierarchy(LspCallHierarchy),
    TypeHierarchy(LspTypeHierarchy),
    SignatureHelp(LspSignatureHelp),
    Completions(LspCompletions),
    InlayHints(LspInlayHints),
    CheckEdit(LspCheckEdit),
    Status(LspStatus),
    Reload(LspReload),
    Trust(LspTrust),
}

/// The result of `lsp definition`, `type_definition`, `implementation` and `references`:
/// the locations found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspLocations {
    /// One `path:line: source line` per location, and notes.
    pub text: String,
    /// The locations (references: at most 50, from `offset`).
    pub locations: Vec<LspLocation>,
    /// How many there are, and the page shown.
    #[serde(flatten)]
    pub page: LspPage,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
    /// references, implementation: why the answer may cover less than the project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    /// references, implementation: the roots whose servers' answers were merged, innermost first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roots: Option<Vec<String>>,
    /// references, implementation: the answers of enclosing roots' servers were merged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<bool>,
}

/// The result of `lsp hover`: the server's hover as markdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspHover {
    /// The markdown, or a line saying there is none.
    pub text: String,
    /// The hover contents as markdown (empty when none).
    pub markdown: String,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// The result of `lsp code_actions`: the actions offered, by index for `lsp_edit
/// apply_code_action`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCodeActions {
    /// One `[index] line N: title (kind) [preferred]` per action.
    pub text: String,
    /// The actions (at most 50), the asked line's first.
    pub actions: Vec<LspCodeAction>,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// One code action offered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCodeAction {
    /// Its index, for `lsp_edit apply_code_action`.
    pub index: u64,
    /// Its title.
    pub title: String,
    /// Its kind (`quickfix`, `refactor`, …), when the server names one.
    pub kind: Option<String>,
    /// The server marks it preferred.
    pub preferred: bool,
    /// The first line it is for (1-based).
    pub line: u64,
    /// The last line it is for (1-based).
    pub end_line: u64,
    /// It is for the asked line (else a neighbouring line's diagnostic).
    pub on_line: bool,
    /// How it applies.
    pub applies: LspActionApplies,
}

/// How a code action applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspActionApplies {
    /// It carries its edit.
    Edit,
    /// It is a server command only.
    Command,
    /// Its edit comes by `codeAction/resolve`.
    Resolve,
}

/// The result of `lsp symbols` with `file`: the document outline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspDocumentSymbols {
    /// One indented `line: kind name` per symbol.
    pub text: String,
    /// The symbols, depth-first (at most 200).
    pub symbols: Vec<LspOutlineSymbol>,
    /// How many there are, and the page shown.
    #[serde(flatten)]
    pub page: LspPage,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// One symbol of a document outline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspOutlineSymbol {
    /// Its name.
    pub name: String,
    /// Its kind (`class`, `method`, `function`, …).
    pub kind: String,
    /// 1-based line.
    pub line: u64,
    /// Nesting depth (0: top level).
    pub depth: u64,
    /// Its members below the asked depth (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<u64>,
}

/// The result of `lsp symbols` with `query`: the workspace symbols matching it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspWorkspaceSymbols {
    /// One `path:line: kind name (in container) — source line` per symbol.
    pub text: String,
    /// The symbols (at most 100).
    pub symbols: Vec<LspWorkspaceSymbol>,
    /// How many there are, and the page shown.
    #[serde(flatten)]
    pub page: LspPage,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
    /// Why the answer may cover less than the project.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
}

/// One workspace symbol.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspWorkspaceSymbol {
    /// Its name.
    pub name: String,
    /// Its kind (`class`, `method`, `function`, …).
    pub kind: String,
    /// Its file, relative to the workdir when under it (empty when the server named none).
    pub path: String,
    /// 1-based line (0 when the server gave none).
    pub line: u64,
    /// The symbol it is in, when the server names one.
    pub container: Option<String>,
    /// Outside the caller's file scope: its text not read.
    pub outside: bool,
}

/// The result of `lsp diagnostics` of one file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspFileDiagnostics {
    /// One `path:line:col: severity: message [code] (source)` per diagnostic.
    pub text: String,
    /// Every diagnostic of the file.
    pub diagnostics: Vec<LspDiagnostic>,
    /// Whether the server's type checking is on.
    pub checking: LspChecking,
    /// Why type checking is off, when it is.
    pub checking_off: Option<String>,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// Whether a server's type checking is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspChecking {
    On,
    Off,
}

/// Where whole-project diagnostics come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspDiagnosticsSource {
    /// The server's `workspace/diagnostic` pull.
    Server,
    /// The project checker.
    Checker,
}

/// The result of `lsp diagnostics` with `file: "*"`, and of `workspace_diagnostics` answered
/// by the project checker: the checker's findings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspProjectCheck {
    /// One line per diagnostic shown, and notes.
    pub text: String,
    /// The checker command as run.
    pub checker: String,
    /// The root it ran in, relative to the workdir (`.` for the workdir).
    pub root: String,
    /// How the checker exited (`exit status: 1`, `unknown exit`).
    pub exit: String,
    /// Diagnostics found, shown or not.
    pub total: u64,
    /// The checker's output was longer than 32 MiB and the rest not read.
    pub output_truncated: bool,
    /// The diagnostics (at most 200).
    pub diagnostics: Vec<LspDiagnostic>,
    /// False when the checker is known to stop early (`go vet` at a package's first type
    /// error; `partial_reason` says so); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,
    /// Why the checker's list may be incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    /// workspace_diagnostics: `checker`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<LspDiagnosticsSource>,
    /// workspace_diagnostics: why the checker answered rather than a server's pull.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_reason: Option<String>,
}

/// The result of `lsp workspace_diagnostics` answered by the server's workspace pull.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspWorkspacePull {
    /// One line per diagnostic shown, and notes.
    pub text: String,
    /// `server`.
    pub source: LspDiagnosticsSource,
    /// Diagnostics found, shown or not.
    pub total: u64,
    /// The diagnostics (at most 200).
    pub diagnostics: Vec<LspDiagnostic>,
    /// More were found than are shown (then `complete` is false).
    pub truncated: bool,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// The result of `lsp call_hierarchy`: who calls the function and what it calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCallHierarchy {
    /// The callers and callees, one line each.
    pub text: String,
    /// The function's name, as the server names it.
    pub symbol: String,
    /// One entry per caller and source line with calls (at most 50).
    pub incoming: Vec<LspIncomingCall>,
    /// Call sites, listed or not.
    pub incoming_total: u64,
    /// The incoming list was cut.
    pub incoming_truncated: bool,
    /// The callees (at most 50).
    pub outgoing: Vec<LspOutgoingCall>,
    /// Callees, listed or not.
    pub outgoing_total: u64,
    /// The outgoing list was cut.
    pub outgoing_truncated: bool,
    /// Why outgoing calls are not offered, when the server answers only incoming ones.
    pub outgoing_note: Option<String>,
    /// Calls in the function's own body the outgoing list leaves out (TypeScript and
    /// JavaScript: the server cannot tell which declaration a union-typed receiver's method,
    /// a parameter or an `any` value calls), at most 10; absent when there are none. They
    /// make the answer `complete: false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outgoing_unlisted: Option<Vec<LspUnlistedCall>>,
    /// Unlisted calls in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outgoing_unlisted_total: Option<u64>,
    /// Why the answer is known to cover less (callers the index may miss, unlisted calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reason: Option<String>,
    /// The entries of each list skipped before this page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// Where the next page of either list starts (absent when both are whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// A call the outgoing list leaves out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspUnlistedCall {
    /// 1-based.
    pub line: u64,
    /// The callee as written (`shape.area`).
    pub callee: String,
}

/// A line with calls of the function.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspIncomingCall {
    /// The file, relative to the workdir when under it.
    pub path: String,
    /// 1-based line of the calls.
    pub line: u64,
    /// The calling function.
    pub caller: String,
    /// Call sites on that line.
    pub calls: u64,
    /// The caller's kind (`function`, `method`, …).
    pub kind: String,
    /// The source line (empty when `outside`).
    pub text: String,
    /// Outside the caller's file scope: its text not read.
    pub outside: bool,
}

/// A function the function calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspOutgoingCall {
    /// The called function.
    pub callee: String,
    /// Its kind (`function`, `method`, …).
    pub kind: String,
    /// Its definition's file, relative to the workdir when under it.
    pub path: String,
    /// Its definition's 1-based line.
    pub line: u64,
    /// How often it is called.
    pub calls: u64,
    /// The definition's source line (empty when `outside`).
    pub text: String,
    /// Outside the caller's file scope: its text not read.
    pub outside: bool,
}

/// The result of `lsp type_hierarchy`: the type's direct supertypes and subtypes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspTypeHierarchy {
    /// The supertypes and subtypes, one line each.
    pub text: String,
    /// The type's name, as the server names it.
    pub symbol: String,
    /// The direct supertypes (at most 50).
    pub supertypes: Vec<LspHierarchyType>,
    /// Supertypes, listed or not.
    pub supertypes_total: u64,
    /// The supertypes list was cut.
    pub supertypes_truncated: bool,
    /// The direct subtypes (at most 50).
    pub subtypes: Vec<LspHierarchyType>,
    /// Subtypes, listed or not.
    pub subtypes_total: u64,
    /// The subtypes list was cut.
    pub subtypes_truncated: bool,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// A type of a type hierarchy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspHierarchyType {
    /// Its name.
    pub name: String,
    /// Its kind (`class`, `struct`, `interface`, …).
    pub kind: String,
    /// Its file, relative to the workdir when under it.
    pub path: String,
    /// 1-based line.
    pub line: u64,
    /// The source line (empty when `outside`).
    pub text: String,
    /// Outside the caller's file scope: its text not read.
    pub outside: bool,
}

/// The result of `lsp signature_help`: the signatures of the call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspSignatureHelp {
    /// The signatures, the active parameter and the documentation.
    pub text: String,
    /// The signatures (at most 20).
    pub signatures: Vec<LspSignature>,
    /// Signatures offered, listed or not.
    pub total: u64,
    /// The index of the active signature (null when none).
    pub active_signature: Option<u64>,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// One signature of a call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspSignature {
    /// The signature's label.
    pub label: String,
    /// Its parameters' labels.
    pub parameters: Vec<String>,
    /// It is the active signature.
    pub active: bool,
    /// The 0-based index of the active parameter (null when none).
    pub active_parameter: Option<u64>,
    /// Its documentation as text (empty when none).
    pub documentation: String,
    /// The active parameter's documentation (empty when none).
    pub parameter_documentation: String,
}

/// The result of `lsp completions`: what the server completes there.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCompletions {
    /// One `label (kind) — detail` per item.
    pub text: String,
    /// The items, ranked as the server ranks them (at most 50).
    pub items: Vec<LspCompletion>,
    /// Matching items, listed or not.
    pub total: u64,
    /// How many items were left out.
    pub truncated: u64,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
    /// The server says the list is incomplete (`isIncomplete`).
    pub server_incomplete: bool,
}

/// One completion item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCompletion {
    /// Its label.
    pub label: String,
    /// Its kind (`method`, `function`, …; empty when none).
    pub kind: String,
    /// Its detail (empty when none).
    pub detail: String,
}

/// The result of `lsp inlay_hints`: the hints in the line range.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspInlayHints {
    /// Each line with hints, the hints inserted as `⟨label⟩`.
    pub text: String,
    /// The hints (at most 200).
    pub hints: Vec<LspInlayHint>,
    /// Hints found, listed or not.
    pub total: u64,
    /// How many hints were left out.
    pub truncated: u64,
    /// The first line of the range (1-based).
    pub line: u64,
    /// The last line of the range (1-based, inclusive).
    pub end_line: u64,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// One inlay hint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspInlayHint {
    /// 1-based line.
    pub line: u64,
    /// 1-based column in characters.
    pub column: u64,
    /// What it shows.
    pub kind: LspHintKind,
    /// Its label.
    pub label: String,
}

/// What an inlay hint shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspHintKind {
    /// An inferred type.
    Type,
    /// A parameter name.
    Parameter,
    /// The server did not say.
    #[serde(rename = "")]
    Other,
}

/// The result of `lsp check_edit`: the diagnostics the edit would bring; nothing written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspCheckEdit {
    /// The new diagnostics, as lines.
    pub text: String,
    /// Every diagnostic of the proposed text.
    pub diagnostics: Vec<LspCheckedDiagnostic>,
    /// Diagnostics the edit brings.
    pub new: u64,
    /// Current diagnostics the edit clears.
    pub cleared: u64,
    /// The server that answered, and what the answer rests on.
    #[serde(flatten)]
    pub served: LspServed,
}

/// The result of `lsp status`: the servers running, and for the workdir (or file) every
/// configured language.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspStatus {
    /// The servers, languages and trust, as lines.
    pub text: String,
    /// Every known server.
    pub servers: Vec<LspServerStatus>,
    /// Every configured language, as it would start here.
    pub languages: Vec<LspLanguageStatus>,
    /// Every root seen, and whether the calling run trusts it.
    pub trust: Vec<LspRootTrust>,
}

/// A known server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspServerStatus {
    /// What it writes into its root that cannot be kept out (`.cache/clangd/`).
    pub writes: Vec<String>,
    /// Its language.
    pub language: String,
    /// Its project root (absolute).
    pub root: String,
    /// Its command line.
    pub command: Vec<String>,
    /// Its mode.
    pub mode: LspMode,
    /// Its state: `ready`, `indexing`, `starting`, `restarting`, `failed`, `stopped`,
    /// `not started` or `unknown`.
    pub state: String,
    /// More on the state (what it indexes, the last error), when there is more.
    pub detail: Option<String>,
    /// Its process id, when connected.
    pub pid: Option<u32>,
    /// Seconds since it started, when running.
    pub uptime_s: Option<u64>,
    /// Restarts so far.
    pub restarts: u32,
    /// Its last error, when it had one.
    pub last_error: Option<String>,
    /// The negotiated position encoding, when connected.
    pub position_encoding: Option<LspEncoding>,
    /// The server's program name (as it calls itself), when connected.
    pub server_name: Option<String>,
}

/// A server's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspMode {
    /// Full: the root is trusted, or the language has no restricted mode.
    Full,
    /// Restricted: the root is untrusted.
    Restricted,
}

/// A configured language, as it would start from the workdir (or file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspLanguageStatus {
    /// The language.
    pub language: String,
    /// `available` (starts on first use), a running server's state, `no root`,
    /// `binary not found`, `untrusted` or `unavailable`.
    pub state: String,
    /// Why, in words: the root and program, or what is missing.
    pub reason: String,
    /// Its root, when found.
    pub root: Option<String>,
    /// The calling run trusts the root (null without a root).
    pub trusted: Option<bool>,
    /// How the root is trusted, in words (null without a root).
    pub trust: Option<String>,
    /// What an untrusted root withholds, one phrase each (empty when trusted).
    pub untrusted_changes: Vec<String>,
}

/// A root and the calling run's trust in it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspRootTrust {
    /// The root (absolute).
    pub root: String,
    /// The calling run trusts it.
    pub trusted: bool,
    /// What trusts it.
    pub by: LspTrustedBy,
    /// How it is trusted, in words.
    pub detail: String,
    /// The runs an approval trusted it for.
    pub approved_runs: Vec<String>,
}

/// What trusts a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LspTrustedBy {
    /// The daemon config's `[trust] roots`.
    Config,
    /// The user's approval of `lsp trust` for the run.
    Approval,
    /// Nothing: untrusted.
    No,
}

/// The result of `lsp reload`: the servers restarted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspReload {
    /// The servers restarted, or that there was none.
    pub text: String,
    /// The ids of the servers restarted.
    pub reloaded: Vec<String>,
}

/// The result of `lsp trust`: the roots trusted for the calling run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspTrust {
    /// One line per root trusted.
    pub text: String,
    /// The run they are trusted for.
    pub run: String,
    /// The roots.
    pub trusted: Vec<LspTrustedRoot>,
}

/// A root `lsp trust` trusted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LspTrustedRoot {
    /// The root (absolute).
    pub root: String,
    /// The languages it is the root of.
    pub languages: Vec<String>,
    /// Trusted by this call (false: it was already trusted).
    pub newly: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(state: LspServerState) -> LspServer {
        LspServer {
            id: "python:/w".into(),
            language: "python".into(),
            root: "/w".into(),
            name: "pyright".into(),
            pid: 1,
            state,
            position_encoding: LspEncoding::Utf16,
            indexing: None,
            request_ms: None,
        }
    }

    fn rests(state: LspServerState, partial: bool, cut: bool) -> (LspReadiness, bool) {
        let served = LspServed::of(server(state), partial, cut);
        (served.readiness, served.complete)
    }

    #[test]
    fn an_answer_says_what_it_rests_on() {
        use LspServerState::{Indexing, Ready, Starting};
        assert_eq!(rests(Ready, false, false), (LspReadiness::Ready, true));
        // A list cut at toolvisor's bound (or one of a call hierarchy's lists) is not complete.
        assert_eq!(rests(Ready, false, true), (LspReadiness::Ready, false));
        assert_eq!(
            rests(Indexing, false, false),
            (LspReadiness::Indexing, false)
        );
        assert_eq!(
            rests(Starting, false, false),
            (LspReadiness::Starting, false)
        );
        // Known to cover less than the project: partial, whatever the server's state.
        assert_eq!(rests(Ready, true, false), (LspReadiness::Partial, false));
    }

    #[test]
    fn an_empty_workspace_symbols_answer_keeps_its_reason() {
        let served = LspServed::of(server(LspServerState::Ready), true, false);
        let none = LspResult::WorkspaceSymbols(LspWorkspaceSymbols {
            text: "no symbols match `Zed`\n(partial: …)\n".into(),
            symbols: vec![],
            page: LspPage {
                total: 0,
                truncated: false,
                offset: None,
                next_offset: None,
            },
            served,
            partial_reason: Some("the index is partial".into()),
        });
        let json = serde_json::to_value(&none).unwrap();
        let back: LspResult = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json, "nothing lost");
    }

    #[test]
    fn what_an_answer_rests_on_reads_as_its_own_fields() {
        let served = LspServed::of(server(LspServerState::Ready), false, false);
        let hover = LspHover {
            text: "x\n".into(),
            markdown: "x".into(),
            served,
        };
        let json = serde_json::to_value(&hover).unwrap();
        assert_eq!(json["readiness"], "ready");
        assert_eq!(json["complete"], true);
        assert_eq!(json["server"]["state"], "ready");
        let back: LspHover = serde_json::from_value(json).unwrap();
        assert_eq!(back, hover);
    }
}
