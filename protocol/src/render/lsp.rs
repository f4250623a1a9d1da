//! The renderings of `lsp`'s results (`results/lsp.rs`, one shape per op), and what the lsp
//! tools' renderings share (the write tools' own are in `lsp_edits.rs`). Every lsp result
//! has its own `text` (the server's answer as `path:line: text` lines, an edit and its new
//! diagnostics) and reads as it: the lists that text renders (locations, diagnostics,
//! symbols…) and a hover's markdown are not written again. What a served answer rests on
//! reads in one place ([`served`]); which server answered is no model's business.

use serde::Serialize;
use serde_json::Value as Json;

use super::generic::readiness;
use super::{Doc, Outward, Render};
use crate::results::{
    LspCallHierarchy, LspCheckEdit, LspCodeActions, LspCompletions, LspDocumentSymbols,
    LspFileDiagnostics, LspHover, LspInlayHints, LspLocations, LspPage, LspProjectCheck, LspReload,
    LspResult, LspServed, LspServer, LspServerState, LspSignatureHelp, LspStatus, LspTrust,
    LspTypeHierarchy, LspWorkspacePull, LspWorkspaceSymbols,
};

/// What a served answer rests on, in its header: `complete`, and `readiness` as
/// [`readiness`] reads it; its server, whatever its state, is not shown (an answer that says
/// its readiness says it).
fn served(doc: &mut Doc, served: &LspServed) {
    doc.fact("complete", served.complete);
    let indexing = served.server.indexing.as_deref();
    if let Some(reads) = readiness(&word(&served.readiness), indexing, served.complete) {
        doc.fact("readiness", reads);
    }
}

/// The server of an answer that says no `readiness` (an edit's): only one still starting
/// shows, as `server: NAME starting`.
pub(super) fn server(doc: &mut Doc, server: &LspServer) {
    if server.state == LspServerState::Starting {
        doc.fact("server", format!("{} starting", server.name));
    }
}

/// Where a page of a list stands: `total`, `truncated` when cut, `offset` and `next_offset`
/// when the list is paged.
fn page(doc: &mut Doc, page: &LspPage) {
    doc.fact("total", page.total);
    doc.flag("truncated", page.truncated);
    doc.opt("offset", page.offset);
    doc.opt("next_offset", page.next_offset);
}

/// A string field when there is one (a fact, or a block when long: a `partial_reason`).
pub(super) fn opt_string(doc: &mut Doc, key: &str, value: &Option<String>) {
    if let Some(value) = value {
        doc.string(key, value);
    }
}

/// An enum's name as its JSON spells it (`indexing`).
fn word(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Json::String(s)) => s,
        _ => String::new(),
    }
}

/// As the one it holds, each op's shape its own.
impl Render for LspResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        match self {
            LspResult::Locations(r) => r.write(doc, outward),
            LspResult::Hover(r) => r.write(doc, outward),
            LspResult::CodeActions(r) => r.write(doc, outward),
            LspResult::DocumentSymbols(r) => r.write(doc, outward),
            LspResult::WorkspaceSymbols(r) => r.write(doc, outward),
            LspResult::Diagnostics(r) => r.write(doc, outward),
            LspResult::ProjectCheck(r) => r.write(doc, outward),
            LspResult::WorkspacePull(r) => r.write(doc, outward),
            LspResult::CallHierarchy(r) => r.write(doc, outward),
            LspResult::TypeHierarchy(r) => r.write(doc, outward),
            LspResult::SignatureHelp(r) => r.write(doc, outward),
            LspResult::Completions(r) => r.write(doc, outward),
            LspResult::InlayHints(r) => r.write(doc, outward),
            LspResult::CheckEdit(r) => r.write(doc, outward),
            LspResult::Status(r) => r.write(doc, outward),
            LspResult::Reload(r) => r.write(doc, outward),
            LspResult::Trust(r) => r.write(doc, outward),
        }
    }
}

/// `lsp: complete: true · total: 1`, then one `path:line: source line` a location; why the
/// answer may cover less under `partial_reason:` when the text does not say it.
impl Render for LspLocations {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        page(doc, &self.page);
        served(doc, &self.served);
        doc.reason("partial_reason", self.partial_reason.as_deref());
        doc.opt("merged", self.merged);
    }
}

/// `lsp: complete: true`, then the hover's markdown.
impl Render for LspHover {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        served(doc, &self.served);
    }
}

/// `lsp: complete: true`, then one `[index] line N: title (kind)` an action.
impl Render for LspCodeActions {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        served(doc, &self.served);
    }
}

/// `lsp: complete: true · total: 189`, then the outline, one indented `line: kind name` a
/// symbol.
impl Render for LspDocumentSymbols {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        page(doc, &self.page);
        served(doc, &self.served);
    }
}

/// `lsp: complete: true · total: 2`, then one `path:line: kind name` a symbol; why the answer
/// may cover less under `partial_reason:` when the text does not say it.
impl Render for LspWorkspaceSymbols {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        page(doc, &self.page);
        served(doc, &self.served);
        doc.reason("partial_reason", self.partial_reason.as_deref());
    }
}

/// `lsp: checking: on · complete: true`, then one `path:line:col: severity: message` a
/// diagnostic; why checking is off when it is.
impl Render for LspFileDiagnostics {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.field("checking", &self.checking);
        opt_string(doc, "checking_off", &self.checking_off);
        served(doc, &self.served);
    }
}

/// `lsp: checker: pyright --outputjson · exit: exit code 1 · root: . · total: 1`, then the
/// checker's diagnostics and notes; long reasons under their keys.
impl Render for LspProjectCheck {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.string("checker", &self.checker);
        doc.string("root", &self.root);
        doc.string("exit", &self.exit);
        doc.fact("total", self.total);
        doc.flag("output_truncated", self.output_truncated);
        doc.opt("complete", self.complete);
        doc.reason("partial_reason", self.partial_reason.as_deref());
        doc.field("source", &self.source);
        doc.reason("source_reason", self.source_reason.as_deref());
    }
}

/// `lsp: complete: true · source: server · total: 3`, then one diagnostic a line.
impl Render for LspWorkspacePull {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.field("source", &self.source);
        doc.fact("total", self.total);
        doc.flag("truncated", self.truncated);
        served(doc, &self.served);
    }
}

/// `lsp: complete: true · incoming_total: 2 · outgoing_total: 1 · symbol: area`, then the
/// callers and callees one a line; why the answer may cover less under `partial_reason:` when
/// the text does not say it.
impl Render for LspCallHierarchy {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.string("symbol", &self.symbol);
        doc.fact("incoming_total", self.incoming_total);
        doc.flag("incoming_truncated", self.incoming_truncated);
        doc.fact("outgoing_total", self.outgoing_total);
        doc.flag("outgoing_truncated", self.outgoing_truncated);
        opt_string(doc, "outgoing_note", &self.outgoing_note);
        doc.opt("outgoing_unlisted_total", self.outgoing_unlisted_total);
        doc.reason("partial_reason", self.partial_reason.as_deref());
        doc.opt("offset", self.offset);
        doc.opt("next_offset", self.next_offset);
        served(doc, &self.served);
    }
}

/// `lsp: complete: true · subtypes_total: 2 · supertypes_total: 0 · symbol: Shape`, then the
/// supertypes and subtypes one a line.
impl Render for LspTypeHierarchy {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.string("symbol", &self.symbol);
        doc.fact("supertypes_total", self.supertypes_total);
        doc.flag("supertypes_truncated", self.supertypes_truncated);
        doc.fact("subtypes_total", self.subtypes_total);
        doc.flag("subtypes_truncated", self.subtypes_truncated);
        served(doc, &self.served);
    }
}

/// `lsp: active_signature: 0 · complete: true · total: 1`, then the signatures, the active
/// parameter and the documentation.
impl Render for LspSignatureHelp {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("total", self.total);
        doc.opt("active_signature", self.active_signature);
        served(doc, &self.served);
    }
}

/// `lsp: complete: false · server_incomplete: true · total: 1`, then one `label (kind) —
/// detail` an item (`truncated` a count here: how many were left out, when some were).
impl Render for LspCompletions {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("total", self.total);
        doc.count("truncated", self.truncated);
        served(doc, &self.served);
        doc.fact("server_incomplete", self.server_incomplete);
    }
}

/// `lsp: complete: true · end_line: 19 · line: 18 · total: 3`, then each line with its hints
/// inserted as `⟨label⟩` (`truncated`: how many were left out, when some were).
impl Render for LspInlayHints {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("total", self.total);
        doc.count("truncated", self.truncated);
        doc.fact("line", self.line);
        doc.fact("end_line", self.end_line);
        served(doc, &self.served);
    }
}

/// `lsp: complete: true · new: 1`, then the diagnostics the edit would bring; `cleared` only
/// when it clears some.
impl Render for LspCheckEdit {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("new", self.new);
        doc.count("cleared", self.cleared);
        served(doc, &self.served);
    }
}

/// Its text alone: the servers, the languages and the trust, as lines.
impl Render for LspStatus {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
    }
}

/// Its text alone: the servers restarted.
impl Render for LspReload {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
    }
}

/// `lsp: run: conversation:cli`, then one line a root trusted.
impl Render for LspTrust {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.string("run", &self.run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::as_before;
    use serde::Deserialize;
    use serde_json::json;

    /// The server block of an answer, as the worker sends it.
    fn server(state: &str, indexing: Option<&str>) -> Json {
        let mut s = json!({"id": "python:/src/demo", "language": "python",
            "name": "pyright-langserver", "pid": 4242, "position_encoding": "utf-16",
            "request_ms": 1.9, "root": "/src/demo", "state": state});
        if let Some(doing) = indexing {
            s["indexing"] = json!(doing);
        }
        s
    }

    /// `v` is an `lsp` answer of the shape `is` says, and reads as before.
    fn reads(v: Json, is: fn(&LspResult) -> bool) -> String {
        let typed = LspResult::deserialize(&v).unwrap();
        assert!(is(&typed), "{v}\nas {typed:?}");
        as_before::<LspResult>("lsp", v)
    }

    fn location(path: &str, line: u64, text: &str) -> Json {
        json!({"abs_path": format!("/src/demo/{path}"), "column": 5, "line": line,
            "outside": false, "path": path, "text": text})
    }

    #[test]
    fn locations_read_as_their_lines_what_they_rest_on_in_the_header() {
        let is = |r: &LspResult| matches!(r, LspResult::Locations(_));
        // As docs/TOOLS.md shows it.
        let text = reads(
            json!({"complete": true, "locations": [location("app/models.py", 8, "def make() -> Greeter:")],
                "readiness": "ready", "server": server("ready", None),
                "text": "app/models.py:8: def make() -> Greeter:\n", "total": 1, "truncated": false}),
            is,
        );
        assert_eq!(
            text,
            "lsp: complete: true · total: 1\napp/models.py:8: def make() -> Greeter:"
        );
        // A page cut: where it is and where the next one starts.
        let text = reads(
            json!({"complete": false, "locations": [location("a.py", 3, "x = f()")],
                "next_offset": 50, "offset": 0, "readiness": "ready", "server": server("ready", None),
                "text": "a.py:3: x = f()\n(showing 50 of 126 references; the list was cut)\n",
                "total": 126, "truncated": true}),
            is,
        );
        assert!(
            text.starts_with(
                "lsp: complete: false · next_offset: 50 · offset: 0 · total: 126 · truncated: true\n"
            ),
            "{text}"
        );
        // A server still indexing says how far along it is, when it gives a count.
        let text = reads(
            json!({"complete": false, "locations": [], "readiness": "indexing",
                "server": server("indexing", Some("23 files to analyze")),
                "text": "no references found\n", "total": 0, "truncated": false}),
            is,
        );
        assert_eq!(
            text,
            "lsp: complete: false · readiness: indexing (23 files to analyze) · total: 0\nno references found"
        );
        let text = reads(
            json!({"complete": false, "locations": [location("a.py", 3, "def f():")], "readiness": "indexing",
                "server": server("indexing", Some("scanning the workspace for source files")),
                "text": "a.py:3: def f():\n", "total": 1, "truncated": false}),
            is,
        );
        assert!(text.starts_with("lsp: complete: false · readiness: indexing · total: 1\n"));
        let text = reads(
            json!({"complete": false, "locations": [], "readiness": "starting",
                "server": server("starting", None), "text": "no definition found\n",
                "total": 0, "truncated": false}),
            is,
        );
        assert_eq!(
            text,
            "lsp: complete: false · readiness: starting · total: 0\nno definition found"
        );
    }

    #[test]
    fn a_partial_answer_says_why_under_its_key_and_what_was_merged() {
        let reason = "the server's root lib is nested inside another python root, .: it searched lib only, not the rest of .; ask from a file outside lib for that root's answer, or grep";
        let v = json!({"complete": false, "locations": [location("lib/a.py", 3, "x = f()")],
            "merged": true, "partial_reason": reason, "readiness": "partial",
            "roots": ["/src/demo/lib", "/src/demo"], "server": server("ready", None),
            "text": format!("lib/a.py:3: x = f()\n(partial: {reason})\n"), "total": 1, "truncated": false});
        let text = reads(v.clone(), |r| matches!(r, LspResult::Locations(_)));
        assert_eq!(
            text,
            format!(
                "lsp: complete: false · merged: true · readiness: partial · total: 1\nlib/a.py:3: x = f()\n(partial: {reason})"
            )
        );
        // What the result store adds: `masked` and `projected`, both said.
        let mut stored = v;
        stored["masked"] = json!(["aws_key"]);
        stored["projected"] = json!({"text": {"ref": "tr_4", "total_chars": 90000}});
        let text = reads(stored, |r| matches!(r, LspResult::Locations(_)));
        assert!(
            text.ends_with("\nprojected:\n  text:\n    ref: tr_4\n    total_chars: 90000"),
            "{text}"
        );
        assert!(text.contains("\nmasked: aws_key\nprojected:"), "{text}");
    }

    #[test]
    fn hovers_actions_and_outlines_read_as_their_text() {
        let markdown = "```python\nclass Version(version: str)\n```\n---\nA version.";
        let text = reads(
            json!({"complete": true, "markdown": markdown, "readiness": "ready",
                "server": server("ready", None), "text": format!("{markdown}\n")}),
            |r| matches!(r, LspResult::Hover(_)),
        );
        assert_eq!(text, format!("lsp: complete: true\n{markdown}"));
        reads(
            json!({"actions": [{"applies": "edit", "end_line": 5, "index": 0, "kind": "quickfix",
                    "line": 5, "on_line": true, "preferred": true, "title": "insert ';'"}],
                "complete": true, "readiness": "ready", "server": server("ready", None),
                "text": "[0] line 5: insert ';' (quickfix) [preferred]\n"}),
            |r| matches!(r, LspResult::CodeActions(_)),
        );
        let text = reads(
            json!({"complete": false, "next_offset": 200, "readiness": "indexing",
                "server": server("indexing", Some("indexing 3/40")),
                "symbols": [{"depth": 0, "kind": "class", "line": 355, "name": "Version"},
                    {"depth": 1, "kind": "method", "line": 423, "members": 3, "name": "__init__"}],
                "text": "355: class Version\n  423: method __init__ (3 members)\n", "total": 412, "truncated": true}),
            |r| matches!(r, LspResult::DocumentSymbols(_)),
        );
        assert!(
            text.starts_with("lsp: complete: false · next_offset: 200 · readiness: indexing (indexing 3/40) · total: 412 · truncated: true\n355: class Version"),
            "{text}"
        );
        reads(
            json!({"complete": false, "partial_reason": "2 files changed on disk were not re-read",
                "readiness": "partial", "server": server("ready", None),
                "symbols": [{"container": "Greeter", "kind": "method", "line": 4, "name": "greet",
                    "outside": false, "path": "app/models.py"}],
                "text": "app/models.py:4: method greet (in Greeter) — def greet(self):\n(partial: 2 files changed on disk were not re-read)\n",
                "total": 1, "truncated": false}),
            |r| matches!(r, LspResult::WorkspaceSymbols(_)),
        );
    }

    #[test]
    fn diagnostics_read_as_their_lines_whoever_found_them() {
        let diag = json!({"code": "reportAssignmentType", "column": 10, "line": 3,
            "message": "Type \"Greeter\" is not assignable to declared type \"int\"\n  \"Greeter\" is not assignable to \"int\"",
            "path": "app/bad.py", "severity": "error", "source": "pyright"});
        let line = "app/bad.py:3:10: error: Type \"Greeter\" is not assignable to declared type \"int\"   \"Greeter\" is not assignable to \"int\" [reportAssignmentType] (pyright)\n";
        let text = reads(
            json!({"checking": "off", "checking_off": "rust-analyzer: the root is untrusted, so `cargo check` does not run on save",
                "complete": true, "diagnostics": [], "readiness": "ready",
                "server": server("ready", None), "text": "no diagnostics\n"}),
            |r| matches!(r, LspResult::Diagnostics(_)),
        );
        assert!(
            text.starts_with("lsp: checking: off · checking_off: rust-analyzer"),
            "{text}"
        );
        // As docs/TOOLS.md shows it: the checker's, its reason (short enough) a fact.
        let reason = "pyright-langserver (python:/src/demo) offers no workspace pull: it does not advertise `diagnosticProvider.workspaceDiagnostics`";
        let text = reads(
            json!({"checker": "pyright --outputjson", "diagnostics": [diag.clone()], "exit": "exit code 1",
                "output_truncated": false, "root": ".", "source": "checker", "source_reason": reason,
                "text": format!("{line}(source: the project checker `pyright --outputjson`; {reason})\n"), "total": 1}),
            |r| matches!(r, LspResult::ProjectCheck(_)),
        );
        assert!(
            text.starts_with("lsp: checker: pyright --outputjson · exit: exit code 1 · root: . · source: checker · total: 1\n"),
            "{text}"
        );
        reads(
            json!({"checker": "go vet ./...", "complete": false, "diagnostics": [diag.clone()], "exit": "exit status: 1",
                "output_truncated": true, "partial_reason": "go vet stops at a package's first type error",
                "root": ".", "text": line, "total": 1}),
            |r| matches!(r, LspResult::ProjectCheck(_)),
        );
        let text = reads(
            json!({"complete": false, "diagnostics": [diag], "readiness": "ready",
                "server": server("ready", None), "source": "server",
                "text": format!("{line}(showing 1 of 3 diagnostics)\n"), "total": 3, "truncated": true}),
            |r| matches!(r, LspResult::WorkspacePull(_)),
        );
        assert!(
            text.starts_with(
                "lsp: complete: false · source: server · total: 3 · truncated: true\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn hierarchies_read_as_their_callers_and_types() {
        let text = reads(
            json!({"complete": false, "incoming": [{"caller": "main", "calls": 2, "kind": "function",
                    "line": 9, "outside": false, "path": "app/main.ts", "text": "total += area(s) + area(t);"}],
                "incoming_total": 2, "incoming_truncated": false, "next_offset": 50, "offset": 0,
                "outgoing": [{"callee": "width", "calls": 1, "kind": "method", "line": 3,
                    "outside": false, "path": "app/shape.ts", "text": "width(): number {"}],
                "outgoing_note": null, "outgoing_total": 1, "outgoing_truncated": true,
                "outgoing_unlisted": [{"callee": "shape.area", "line": 5}], "outgoing_unlisted_total": 1,
                "partial_reason": "outgoing: 1 call in its body the server does not list",
                "readiness": "ready", "server": server("ready", None), "symbol": "area",
                "text": "incoming calls of area (2):\n  app/main.ts:9: in function main (2 calls) — total += area(s) + area(t);\noutgoing calls of area (1):\n  app/shape.ts:3: method width — width(): number {\n(partial: outgoing: 1 call in its body the server does not list)\n"}),
            |r| matches!(r, LspResult::CallHierarchy(_)),
        );
        assert!(
            text.starts_with("lsp: complete: false · incoming_total: 2 · next_offset: 50 · offset: 0 · outgoing_total: 1 · outgoing_truncated: true · outgoing_unlisted_total: 1 · symbol: area\n"),
            "{text}"
        );
        reads(
            json!({"complete": true, "incoming": [], "incoming_total": 0, "incoming_truncated": false,
                "outgoing": [], "outgoing_note": "outgoing calls: not offered (clangd answers incoming calls only)",
                "outgoing_total": 0, "outgoing_truncated": false, "readiness": "ready",
                "server": server("ready", None), "symbol": "add",
                "text": "incoming calls of add (0):\n  none found\noutgoing calls: not offered (clangd answers incoming calls only)\n"}),
            |r| matches!(r, LspResult::CallHierarchy(_)),
        );
        // As docs/TOOLS.md shows it, its server whole.
        let text = reads(
            json!({"complete": true, "readiness": "ready", "server": server("ready", None),
                "subtypes": [{"kind": "struct", "line": 5, "name": "Circle", "outside": false, "path": "c/shapes.hpp", "text": "struct Circle : Shape {"}],
                "subtypes_total": 1, "subtypes_truncated": false, "supertypes": [], "supertypes_total": 0,
                "supertypes_truncated": false, "symbol": "Shape",
                "text": "supertypes of Shape (0):\n  none found\nsubtypes of Shape (1):\n  struct Circle (c/shapes.hpp:5) — struct Circle : Shape {\n"}),
            |r| matches!(r, LspResult::TypeHierarchy(_)),
        );
        assert!(
            text.starts_with(
                "lsp: complete: true · subtypes_total: 1 · supertypes_total: 0 · symbol: Shape\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn signatures_completions_hints_and_checks_read_as_their_text() {
        let text = reads(
            json!({"active_signature": null, "complete": true, "readiness": "ready", "server": server("ready", None),
                "signatures": [{"active": true, "active_parameter": 0, "documentation": "Say hello to someone.",
                    "label": "(name: str, excited: bool = False) -> str", "parameter_documentation": "",
                    "parameters": ["name: str", "excited: bool = False"]}],
                "text": "greet(name: str, excited: bool = False) -> str\n  active parameter 1 of 2: name: str\n  Say hello to someone.\n",
                "total": 1}),
            |r| matches!(r, LspResult::SignatureHelp(_)),
        );
        assert!(
            text.starts_with("lsp: complete: true · total: 1\ngreet("),
            "{text}"
        );
        let text = reads(
            json!({"complete": false, "items": [{"detail": "fn(&mut self, u32) -> u32", "kind": "method", "label": "bump"}],
                "readiness": "ready", "server": server("ready", None), "server_incomplete": true,
                "text": "bump (method) — fn(&mut self, u32) -> u32\n(the server says this list is incomplete: type more of the name and ask again)\n",
                "total": 1, "truncated": 0}),
            |r| matches!(r, LspResult::Completions(_)),
        );
        assert!(
            text.starts_with("lsp: complete: false · server_incomplete: true · total: 1\n"),
            "{text}"
        );
        let text = reads(
            json!({"complete": true, "end_line": 19, "hints": [{"column": 14, "kind": "type", "label": ": Counter", "line": 18},
                    {"column": 12, "kind": "", "label": "by:", "line": 19}],
                "line": 18, "readiness": "ready", "server": server("ready", None),
                "text": "18: let mut c⟨: Counter⟩ = make(1);\n19: c.bump(⟨by: ⟩2)\n", "total": 2, "truncated": 0}),
            |r| matches!(r, LspResult::InlayHints(_)),
        );
        assert!(
            text.starts_with("lsp: complete: true · end_line: 19 · line: 18 · total: 2\n"),
            "{text}"
        );
        let check = |cleared: u64| {
            json!({"cleared": cleared, "complete": true,
                "diagnostics": [{"code": "reportArgumentType", "column": 19, "line": 5, "message": "Argument of type \"Literal['three']\" cannot be assigned",
                    "new": true, "path": "app/main.py", "severity": "error", "source": "Pyright"}],
                "new": 1, "readiness": "ready", "server": server("ready", None),
                "text": "the edit would bring 1 new diagnostics to app/main.py:\napp/main.py:5:19: error: Argument of type \"Literal['three']\" cannot be assigned [reportArgumentType] (Pyright)\n(nothing was written; the server has the disk text again)\n"})
        };
        let text = reads(check(0), |r| matches!(r, LspResult::CheckEdit(_)));
        assert!(text.starts_with("lsp: complete: true · new: 1\n"), "{text}");
        let text = reads(check(2), |r| matches!(r, LspResult::CheckEdit(_)));
        assert!(
            text.starts_with("lsp: cleared: 2 · complete: true · new: 1\n"),
            "{text}"
        );
    }

    #[test]
    fn status_reload_and_trust_read_as_their_text_alone() {
        let text = reads(
            json!({"languages": [{"language": "python", "reason": "root /src/demo (pyproject.toml), pyright-langserver",
                    "root": "/src/demo", "state": "ready", "trust": "trusted by the daemon config",
                    "trusted": true, "untrusted_changes": []},
                    {"language": "go", "reason": "no go.mod above app/main.py", "root": null, "state": "no root",
                    "trust": null, "trusted": null, "untrusted_changes": []}],
                "servers": [{"command": ["pyright-langserver", "--stdio"], "detail": null, "language": "python",
                    "last_error": null, "mode": "full", "pid": 4242, "position_encoding": "utf-16",
                    "restarts": 0, "root": "/src/demo", "server_name": "pyright-langserver",
                    "state": "ready", "uptime_s": 12, "writes": []}],
                "text": "servers:\n  python:/src/demo (full): ready, up 12s\nfor . (run conversation:cli):\n  python: ready — root /src/demo (pyproject.toml), pyright-langserver\n    trusted by the daemon config: project code may run\n  no root marker here for: go (`languages` in the answer says what each looks for)\n",
                "trust": [{"approved_runs": [], "by": "config", "detail": "trusted by the daemon config",
                    "root": "/src/demo", "trusted": true}]}),
            |r| matches!(r, LspResult::Status(_)),
        );
        assert!(text.starts_with("servers:\n"), "{text}");
        let text = reads(
            json!({"reloaded": ["python:/src/demo"], "text": "restarted: python:/src/demo\n"}),
            |r| matches!(r, LspResult::Reload(_)),
        );
        assert_eq!(text, "restarted: python:/src/demo");
        let text = reads(
            json!({"run": "conversation:cli", "text": "trusted /src/demo for run conversation:cli (rust)\n",
                "trusted": [{"languages": ["rust"], "newly": true, "root": "/src/demo"}]}),
            |r| matches!(r, LspResult::Trust(_)),
        );
        assert_eq!(
            text,
            "lsp: run: conversation:cli\ntrusted /src/demo for run conversation:cli (rust)"
        );
    }
}
