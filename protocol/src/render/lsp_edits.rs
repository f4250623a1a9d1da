//! The renderings of the lsp write tools' results (`results/lsp_edits.rs`): `lsp_rename`,
//! `lsp_edit`, `synced_write`. Each reads as its own `text` (the edit, the files, the new
//! diagnostics): the files it lists and the diagnostics it holds are not written again.

use super::lsp::{opt_string, server};
use super::{Doc, Outward, Render};
use crate::results::{
    LspEditResult, LspRenamePreview, LspRenameResult, LspRenamed, SyncedWriteResult,
    WriteDiagnostics,
};

/// A write's new diagnostics, their own text under `diagnostics:`, unless the result's `text`
/// already holds it (it does as written: the text ends with them).
fn diagnostics(doc: &mut Doc, text: &str, diagnostics: &WriteDiagnostics) {
    let own = diagnostics.text.trim();
    if own.is_empty() || !text.contains(own) {
        doc.field("diagnostics", diagnostics);
    }
}

/// As the one it holds.
impl Render for LspRenameResult {
    fn write(&self, doc: &mut Doc<'_>, outward: &Outward) {
        match self {
            LspRenameResult::Preview(preview) => preview.write(doc, outward),
            LspRenameResult::Renamed(renamed) => renamed.write(doc, outward),
        }
    }
}

/// `lsp_rename: complete: true · dry_run: true · edits: 6 · written: false`, then the changed
/// lines, old then new; why the rename may miss files under `partial_reason:` when the text
/// does not say it.
impl Render for LspRenamePreview {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("dry_run", self.dry_run);
        doc.fact("written", self.written);
        doc.fact("edits", self.edits);
        doc.count("lines_not_shown", self.lines_not_shown);
        doc.fact("complete", self.complete);
        doc.reason("partial_reason", self.partial_reason.as_deref());
    }
}

/// `lsp_rename: complete: true · edits: 4`, then the rename, the files and the new
/// diagnostics as its text says them.
impl Render for LspRenamed {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("edits", self.edits);
        diagnostics(doc, &self.text, &self.diagnostics);
        doc.fact("complete", self.complete);
        doc.reason("partial_reason", self.partial_reason.as_deref());
    }
}

/// `lsp_edit: edits: 1`, then the edit, the files and the new diagnostics as its text says
/// them; the formatting options sent under `options:`; its server only while starting.
impl Render for LspEditResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.body(&self.text);
        doc.fact("edits", self.edits);
        if let Some(diags) = &self.diagnostics {
            diagnostics(doc, &self.text, diags);
        }
        server(doc, &self.server);
        opt_string(doc, "command_not_run", &self.command_not_run);
        doc.field("options", &self.options);
    }
}

/// `synced_write: path: m.py`, then the file's new diagnostics as their text says them.
impl Render for SyncedWriteResult {
    fn write(&self, doc: &mut Doc<'_>, _: &Outward) {
        doc.string("path", &self.path);
        doc.body(&self.text);
        diagnostics(doc, &self.text, &self.diagnostics);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::as_before;
    use serde_json::{Value as Json, json};

    fn server(state: &str) -> Json {
        json!({"id": "python:/src/demo", "language": "python", "name": "pyright-langserver",
            "pid": 4242, "position_encoding": "utf-16", "root": "/src/demo", "state": state})
    }

    /// No new diagnostics, as every write says it.
    fn none_new() -> Json {
        json!({"dependents": {"checked": [], "max": 20}, "new": [], "notes": [],
            "text": "no new diagnostics\n"})
    }

    #[test]
    fn a_rename_preview_reads_as_its_changed_lines() {
        // As docs/TOOLS.md shows it, whole.
        let text = as_before::<LspRenameResult>(
            "lsp_rename",
            json!({"complete": true, "dry_run": true, "edits": 3,
                "files": [{"edits": 2, "lines": [{"line": 1, "new": "class Crate:", "old": "class Box:"},
                        {"line": 4, "new": "def make() -> Crate:", "old": "def make() -> Box:"}], "path": "shapes.py"},
                    {"edits": 1, "lines": [{"line": 3, "new": "b = Crate()", "old": "b = Box()"}], "path": "use.py"}],
                "lines_not_shown": 0,
                "text": "preview: renaming `Box` to `Crate` would make 3 edits in 2 files; nothing was written\nshapes.py:1: → class Crate:\nshapes.py:4: → def make() -> Crate:\nuse.py:3: → b = Crate()\n",
                "written": false}),
        );
        assert_eq!(
            text,
            "lsp_rename: complete: true · dry_run: true · edits: 3 · written: false\npreview: renaming `Box` to `Crate` would make 3 edits in 2 files; nothing was written\nshapes.py:1: → class Crate:\nshapes.py:4: → def make() -> Crate:\nuse.py:3: → b = Crate()"
        );
        // Cut at 200 lines, from an index known to miss files: the reason, said once (the text
        // holds it).
        let reason = "pylsp (jedi) has no index: it searches at most 30 files that mention `Box` and opens at most 2000 Python files, and this project has more, so some files were not searched; use pyright (the default Python server) for complete references, or grep";
        let text = as_before::<LspRenameResult>(
            "lsp_rename",
            json!({"complete": false, "dry_run": true, "edits": 212,
                "files": [{"edits": 212, "lines": [{"line": 1, "new": "class Crate:", "old": "class Box:"}], "path": "shapes.py"}],
                "lines_not_shown": 12, "partial_reason": reason,
                "text": format!("preview: renaming `Box` to `Crate` would make 212 edits in 1 files; nothing was written\nshapes.py:1: → class Crate:\n(showing 200 changed lines; 12 more not shown)\n(partial: {reason})\n"),
                "written": false}),
        );
        assert!(
            text.starts_with(
                "lsp_rename: complete: false · dry_run: true · edits: 212 · lines_not_shown: 12 · written: false\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(&format!("\n(partial: {reason})")) && text.matches(reason).count() == 1,
            "{text}"
        );
    }

    #[test]
    fn a_rename_written_reads_as_its_text_its_diagnostics_once() {
        // As docs/TOOLS.md shows it, whole.
        let text = as_before::<LspRenameResult>(
            "lsp_rename",
            json!({"complete": true, "diagnostics": none_new(), "edits": 4,
                "files": [{"edits": 2, "path": "main.c"}, {"edits": 1, "path": "util.c"}, {"edits": 1, "path": "util.h"}],
                "text": "renamed `add_numbers` to `sum_two` in 3 files: main.c (2), util.c (1), util.h (1)\nno new diagnostics\n"}),
        );
        assert_eq!(
            text,
            "lsp_rename: complete: true · edits: 4\nrenamed `add_numbers` to `sum_two` in 3 files: main.c (2), util.c (1), util.h (1)\nno new diagnostics"
        );
        // New errors in a dependent, and a gap in the server's index.
        let diag = "app/use.py:7:5: error: \"Box\" is unknown import symbol [reportAttributeAccessIssue] (Pyright)\n(also checked the 1 file that import shapes)\n";
        let text = as_before::<LspRenameResult>(
            "lsp_rename",
            json!({"complete": false, "edits": 2,
                "diagnostics": {"dependents": {"checked": ["app/use.py"], "max": 20},
                    "new": [{"code": "reportAttributeAccessIssue", "column": 5, "line": 7,
                        "message": "\"Box\" is unknown import symbol", "path": "app/use.py",
                        "severity": "error", "source": "Pyright"}],
                    "notes": ["lib/x.py: no diagnostics within 5000 ms"], "text": diag},
                "files": [{"edits": 2, "path": "shapes.py"}],
                "partial_reason": "2 files changed on disk were not re-read",
                "text": format!("renamed `Box` to `Crate` in shapes.py\n{diag}(partial: 2 files changed on disk were not re-read)\n")}),
        );
        assert!(
            text.starts_with("lsp_rename: complete: false · edits: 2\n"),
            "{text}"
        );
        assert_eq!(text.matches("unknown import symbol").count(), 1, "{text}");
    }

    #[test]
    fn an_edit_reads_as_its_text_its_server_only_while_starting() {
        let diag = "main.c:6:1: error: expected ';' after expression (clang)\n";
        let text = as_before::<LspEditResult>(
            "lsp_edit",
            json!({"command_not_run": "clangd.applyTweak",
                "diagnostics": {"dependents": {"checked": [], "max": 20},
                    "new": [{"code": "expected_semi_after_expr", "column": 1, "line": 6,
                        "message": "expected ';' after expression", "path": "main.c",
                        "severity": "error", "source": "clang"}],
                    "notes": [], "text": diag, "checking_off": ["clangd: no compile_commands.json"]},
                "edits": 1, "files": [{"edits": 1, "path": "main.c"}],
                "server": server("ready"),
                "text": format!("applied [0] \"insert ';'\" in main.c\n{diag}")}),
        );
        assert_eq!(
            text,
            format!(
                "lsp_edit: command_not_run: clangd.applyTweak · edits: 1\napplied [0] \"insert ';'\" in main.c\n{}",
                diag.trim_end()
            )
        );
        // Already formatted: nothing written, the options sent; a server not yet ready.
        let mut formatted = json!({"edits": 0, "files": [],
            "options": {"insertFinalNewline": true, "insertSpaces": true, "tabSize": 2,
                "trimFinalNewlines": true, "trimTrailingWhitespace": false},
            "server": server("starting"),
            "text": "src/main.ts is already formatted: nothing written\nindentation: 2 spaces (from .editorconfig)\n"});
        let text = as_before::<LspEditResult>("lsp_edit", formatted.clone());
        assert_eq!(
            text,
            "lsp_edit: edits: 0 · server: pyright-langserver starting\nsrc/main.ts is already formatted: nothing written\nindentation: 2 spaces (from .editorconfig)\noptions:\n  insertFinalNewline: true\n  insertSpaces: true\n  tabSize: 2\n  trimFinalNewlines: true\n  trimTrailingWhitespace: false"
        );
        formatted["server"] = server("indexing");
        formatted["server"]["indexing"] = json!("23 files to analyze");
        let text = as_before::<LspEditResult>("lsp_edit", formatted);
        assert!(text.starts_with("lsp_edit: edits: 0\n"), "{text}");
        // The diagnostics the text does not hold are written under their key.
        as_before::<LspEditResult>(
            "lsp_edit",
            json!({"diagnostics": none_new(), "edits": 3, "files": [{"edits": 3, "path": "app/models.py"}],
                "server": server("ready"), "text": "replaced function `greet` (app/models.py:4-5)\n"}),
        );
    }

    #[test]
    fn a_synced_write_reads_as_its_diagnostics() {
        let diag = "m.py:3:14: error: \"missing_name\" is not defined [reportUndefinedVariable] (Pyright)\n";
        let v = json!({"diagnostics": {"dependents": {"checked": [], "max": 20},
                "new": [{"code": "reportUndefinedVariable", "column": 14, "line": 3,
                    "message": "\"missing_name\" is not defined", "path": "m.py",
                    "severity": "error", "source": "Pyright"}],
                "notes": [], "text": diag},
            "path": "m.py", "text": diag});
        let text = as_before::<SyncedWriteResult>("synced_write", v.clone());
        assert_eq!(
            text,
            format!("synced_write: path: m.py\n{}", diag.trim_end())
        );
        // What the result store adds: `masked` and `projected`, both said.
        let mut stored = v;
        stored["masked"] = json!(["github_token"]);
        stored["projected"] = json!({"text": {"ref": "tr_3", "total_chars": 90000}});
        let text = as_before::<SyncedWriteResult>("synced_write", stored);
        assert!(
            text.ends_with("\nprojected:\n  text:\n    ref: tr_3\n    total_chars: 90000"),
            "{text}"
        );
        assert!(
            text.contains("\nmasked: github_token\nprojected:"),
            "{text}"
        );
        // Diagnostics with nothing to say (as docs/TOOLS.md shortens them) are under their key.
        let text = as_before::<SyncedWriteResult>(
            "synced_write",
            json!({"diagnostics": {"dependents": {"checked": [], "max": 20}, "new": [], "notes": [], "text": "…"},
                "path": "m.py", "text": diag}),
        );
        assert!(text.ends_with("\ndiagnostics:\n  …"), "{text}");
    }
}
