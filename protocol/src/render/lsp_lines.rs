//! The line of each item of an `lsp` result (`results/lsp.rs`) that is written from the item
//! alone, here once: the lsp worker builds an answer's `text` from its items through these
//! (`LspLocation::line`, `LspDiagnostic::line`, …), so what a model reads of an item is its
//! line and the item holds what the line shows. Each line comes without its `\n` and without
//! the indent of the list it is in (an outline symbol's depth is its own). The lines that need
//! what their item does not hold stay in the worker: a workspace symbol's (its source line), a
//! signature's (the called name), an inlay hint line's and a rename preview's (the source
//! text).

use crate::results::{
    LspCodeAction, LspCompletion, LspDiagnostic, LspHierarchyType, LspIncomingCall, LspLocation,
    LspOutgoingCall, LspOutlineSymbol, LspSeverity, LspWorkspaceSymbol,
};

/// Shown in place of the source line of a place outside the caller's file scope (its file is
/// named, its text never read).
pub const OUTSIDE_NOTE: &str = "(outside the workdir: text not read)";

/// Characters of a source line an answer shows at most (a minified bundle's line is
/// megabytes); a longer one is cut around the match, `…` marking each cut end.
pub const LINE_SHOWN_MAX: usize = 200;

/// A source line as a line shows it: [`OUTSIDE_NOTE`] for a place outside the scope.
fn source(text: &str, outside: bool) -> &str {
    match outside {
        true => OUTSIDE_NOTE,
        false => text,
    }
}

impl LspLocation {
    /// `path:line: source line`, the line trimmed (a cut line as cut, `…` at its cut ends),
    /// or `path:line: (outside the workdir: text not read)`.
    pub fn line(&self) -> String {
        let text = source(self.text.trim(), self.outside);
        format!("{}:{}: {text}", self.path, self.line)
    }

    /// The line an answer ends with when it cut a location's line.
    pub fn cut_note() -> String {
        format!("(lines longer than {LINE_SHOWN_MAX} characters are cut around the match: …)")
    }
}

impl LspSeverity {
    /// The severity's name, as results spell it (`error`, `warning`, `info`, `hint`).
    pub fn word(self) -> &'static str {
        match self {
            LspSeverity::Error => "error",
            LspSeverity::Warning => "warning",
            LspSeverity::Info => "info",
            LspSeverity::Hint => "hint",
        }
    }
}

impl LspDiagnostic {
    /// `path:line:col: severity: message [code] (source)`, the message on one line; no
    /// `[code]` or `(source)` when it has none.
    pub fn line(&self) -> String {
        let code = match self.code.is_empty() {
            true => String::new(),
            false => format!(" [{}]", self.code),
        };
        let source = match self.source.is_empty() {
            true => String::new(),
            false => format!(" ({})", self.source),
        };
        format!(
            "{}:{}:{}: {}: {}{code}{source}",
            self.path,
            self.line,
            self.column,
            self.severity.word(),
            self.message.replace('\n', " "),
        )
    }
}

impl LspOutlineSymbol {
    /// `line: kind name`, indented two spaces a level of depth, with ` (N members)` when its
    /// members are below the depth shown.
    pub fn line(&self) -> String {
        let members = match self.members {
            None | Some(0) => String::new(),
            Some(1) => " (1 member)".to_string(),
            Some(n) => format!(" ({n} members)"),
        };
        format!(
            "{}{}: {} {}{members}",
            "  ".repeat(self.depth as usize),
            self.line,
            self.kind,
            self.name
        )
    }
}

impl LspWorkspaceSymbol {
    /// `path:line: kind name (in container) — source line`, the source line (trimmed, cut
    /// when long) given by the caller, who read it; the outside note in its place when the
    /// symbol is outside the scope.
    pub fn line(&self, source: &str) -> String {
        let container = match &self.container {
            Some(c) => format!(" (in {c})"),
            None => String::new(),
        };
        let source = if self.outside { OUTSIDE_NOTE } else { source };
        format!(
            "{}:{}: {} {}{container} — {source}",
            self.path, self.line, self.kind, self.name
        )
    }
}

impl LspCodeAction {
    /// `[index] line N: title (kind) [preferred]` (`lines N-M` for a span), one for another
    /// line than `asked` (1-based: the line the actions were asked for) saying so; no
    /// `(kind)` or `[preferred]` when it has none.
    pub fn line(&self, asked: u64) -> String {
        let span = match self.end_line > self.line {
            true => format!("lines {}-{}", self.line, self.end_line),
            false => format!("line {}", self.line),
        };
        let elsewhere = match self.on_line {
            true => String::new(),
            false => format!(" (not line {asked}: a fix for a neighbouring line's diagnostic)"),
        };
        let kind = self
            .kind
            .as_ref()
            .map(|k| format!(" ({k})"))
            .unwrap_or_default();
        let preferred = if self.preferred { " [preferred]" } else { "" };
        format!(
            "[{}] {span}{elsewhere}: {}{kind}{preferred}",
            self.index, self.title
        )
    }
}

impl LspCompletion {
    /// `label (kind) — detail`, the detail on one line; no `(kind)` or `— detail` when it has
    /// none.
    pub fn line(&self) -> String {
        let kind = match self.kind.is_empty() {
            true => String::new(),
            false => format!(" ({})", self.kind),
        };
        let detail = match self.detail.is_empty() {
            true => String::new(),
            false => format!(" — {}", self.detail.replace('\n', " ")),
        };
        format!("{}{kind}{detail}", self.label)
    }
}

impl LspIncomingCall {
    /// `path:line: in kind caller (N calls) — source line` (no count for one call).
    pub fn line(&self) -> String {
        let times = match self.calls > 1 {
            true => format!(" ({} calls)", self.calls),
            false => String::new(),
        };
        format!(
            "{}:{}: in {} {}{times} — {}",
            self.path,
            self.line,
            self.kind,
            self.caller,
            source(&self.text, self.outside)
        )
    }
}

impl LspOutgoingCall {
    /// `kind callee (path:line, called N×) — its definition's source line`.
    pub fn line(&self) -> String {
        format!(
            "{} {} ({}:{}, called {}×) — {}",
            self.kind,
            self.callee,
            self.path,
            self.line,
            self.calls,
            source(&self.text, self.outside)
        )
    }
}

impl LspHierarchyType {
    /// `kind name (path:line) — source line`.
    pub fn line(&self) -> String {
        format!(
            "{} {} ({}:{}) — {}",
            self.kind,
            self.name,
            self.path,
            self.line,
            source(&self.text, self.outside)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(text: &str, outside: bool) -> LspLocation {
        LspLocation {
            path: "src/a.py".into(),
            abs_path: "/w/src/a.py".into(),
            line: 3,
            column: 5,
            text: text.into(),
            outside,
            text_cut: None,
            line_chars: None,
        }
    }

    #[test]
    fn a_location_reads_as_its_trimmed_line_or_says_it_was_not_read() {
        assert_eq!(
            location("    x = f(1)  ", false).line(),
            "src/a.py:3: x = f(1)"
        );
        assert_eq!(location("", false).line(), "src/a.py:3: ");
        assert_eq!(
            location("", true).line(),
            "src/a.py:3: (outside the workdir: text not read)"
        );
        // A cut line is shown as cut, its ends marked.
        let cut = LspLocation {
            text_cut: Some(true),
            line_chars: Some(9000),
            ..location("…aaa enlist(7) bbb…", false)
        };
        assert_eq!(cut.line(), "src/a.py:3: …aaa enlist(7) bbb…");
        assert_eq!(
            LspLocation::cut_note(),
            "(lines longer than 200 characters are cut around the match: …)"
        );
    }

    fn diagnostic(code: &str, source: &str) -> LspDiagnostic {
        LspDiagnostic {
            path: "a.rs".into(),
            line: 2,
            column: 7,
            severity: LspSeverity::Warning,
            code: code.into(),
            message: "unused\nvariable".into(),
            source: source.into(),
        }
    }

    #[test]
    fn a_diagnostic_reads_on_one_line_with_its_code_and_source_when_it_has_them() {
        assert_eq!(
            diagnostic("E1", "rustc").line(),
            "a.rs:2:7: warning: unused variable [E1] (rustc)"
        );
        assert_eq!(
            diagnostic("", "").line(),
            "a.rs:2:7: warning: unused variable"
        );
        assert_eq!(
            diagnostic("E1", "").line(),
            "a.rs:2:7: warning: unused variable [E1]"
        );
        assert_eq!(
            diagnostic("", "rustc").line(),
            "a.rs:2:7: warning: unused variable (rustc)"
        );
    }

    #[test]
    fn a_severity_reads_as_results_spell_it() {
        use LspSeverity::*;
        for s in [Error, Warning, Info, Hint] {
            assert_eq!(
                serde_json::json!(s.word()),
                serde_json::to_value(s).unwrap()
            );
        }
    }

    #[test]
    fn a_workspace_symbol_names_its_container_and_its_source_line() {
        let mut sym = LspWorkspaceSymbol {
            name: "greet".into(),
            kind: "method".into(),
            path: "app/models.py".into(),
            line: 12,
            container: Some("Greeter".into()),
            outside: false,
        };
        assert_eq!(
            sym.line("def greet(self, name: str) -> str:"),
            "app/models.py:12: method greet (in Greeter) — def greet(self, name: str) -> str:"
        );
        (sym.container, sym.outside) = (None, true);
        assert_eq!(
            sym.line(""),
            format!("app/models.py:12: method greet — {OUTSIDE_NOTE}")
        );
    }

    #[test]
    fn an_outline_symbol_is_indented_by_its_depth_and_counts_its_members() {
        let symbol = |depth, members| LspOutlineSymbol {
            name: "Shape".into(),
            kind: "class".into(),
            line: 12,
            depth,
            members,
        };
        assert_eq!(symbol(0, None).line(), "12: class Shape");
        assert_eq!(symbol(2, None).line(), "    12: class Shape");
        assert_eq!(symbol(0, Some(1)).line(), "12: class Shape (1 member)");
        assert_eq!(symbol(1, Some(4)).line(), "  12: class Shape (4 members)");
    }

    #[test]
    fn a_code_action_names_its_lines_kind_and_preference() {
        let action = LspCodeAction {
            index: 0,
            title: "Import os".into(),
            kind: Some("quickfix".into()),
            preferred: true,
            line: 4,
            end_line: 4,
            on_line: true,
            applies: crate::results::LspActionApplies::Edit,
        };
        assert_eq!(
            action.line(4),
            "[0] line 4: Import os (quickfix) [preferred]"
        );
        let neighbour = LspCodeAction {
            index: 1,
            kind: None,
            preferred: false,
            line: 5,
            end_line: 6,
            on_line: false,
            ..action
        };
        assert_eq!(
            neighbour.line(4),
            "[1] lines 5-6 (not line 4: a fix for a neighbouring line's diagnostic): Import os"
        );
    }

    #[test]
    fn a_completion_reads_as_label_kind_and_detail() {
        let item = |kind: &str, detail: &str| LspCompletion {
            label: "append".into(),
            kind: kind.into(),
            detail: detail.into(),
        };
        assert_eq!(
            item("method", "(x)\n-> None").line(),
            "append (method) — (x) -> None"
        );
        assert_eq!(item("", "").line(), "append");
        assert_eq!(item("", "d").line(), "append — d");
    }

    #[test]
    fn a_call_or_type_names_its_place_and_line_or_says_it_was_not_read() {
        let incoming = LspIncomingCall {
            path: "b.py".into(),
            line: 9,
            caller: "main".into(),
            calls: 2,
            kind: "function".into(),
            text: "run(); run()".into(),
            outside: false,
        };
        assert_eq!(
            incoming.line(),
            "b.py:9: in function main (2 calls) — run(); run()"
        );
        let once = LspIncomingCall {
            calls: 1,
            text: String::new(),
            outside: true,
            ..incoming
        };
        assert_eq!(
            once.line(),
            "b.py:9: in function main — (outside the workdir: text not read)"
        );
        let outgoing = LspOutgoingCall {
            callee: "run".into(),
            kind: "function".into(),
            path: "c.py".into(),
            line: 1,
            calls: 3,
            text: "def run():".into(),
            outside: false,
        };
        assert_eq!(
            outgoing.line(),
            "function run (c.py:1, called 3×) — def run():"
        );
        let outside = LspOutgoingCall {
            text: String::new(),
            outside: true,
            ..outgoing
        };
        assert!(
            outside
                .line()
                .ends_with("— (outside the workdir: text not read)")
        );
        let ty = LspHierarchyType {
            name: "Circle".into(),
            kind: "class".into(),
            path: "s.py".into(),
            line: 20,
            text: "class Circle(Shape):".into(),
            outside: false,
        };
        assert_eq!(ty.line(), "class Circle (s.py:20) — class Circle(Shape):");
        let outside = LspHierarchyType {
            text: String::new(),
            outside: true,
            ..ty
        };
        assert_eq!(
            outside.line(),
            "class Circle (s.py:20) — (outside the workdir: text not read)"
        );
    }
}
