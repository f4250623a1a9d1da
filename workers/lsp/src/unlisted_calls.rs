//! The calls a function makes that its server's outgoing calls leave out.
//!
//! typescript-language-server (the TypeScript LanguageService beneath it) lists a call only
//! where it can name one declaration called: a method called on a union-typed receiver
//! (`shape.area()` with `shape: Circle | Square`), a call of a parameter or a value typed
//! `any`, are not in `callHierarchy/outgoingCalls`, and its list looks whole. The function's
//! own body is parsed (tree-sitter) and each call whose callee no listed call site covers is
//! named, so the answer can say which calls it does not account for. The body is read as the
//! service reads it (`collectCallSites`): a nested declaration of its own — a function or
//! class declaration, a method, a named function expression, a function assigned to a `const`
//! or a class field — is not entered; an anonymous callback or returned arrow is, its calls
//! being the function's.

use std::path::Path;

use ast_grep_core::tree_sitter::StrDoc;
use ast_grep_core::{Language, Node};
use ast_grep_language::{LanguageExt, SupportLang};
use serde_json::Value;

use crate::position::Encoding;

/// Calls named in an answer at most.
pub(crate) const UNLISTED_SHOWN_MAX: usize = 10;
/// Characters of a call's callee shown at most.
const CALLEE_CHARS_MAX: usize = 60;

/// A call in the function's own body that no listed call covers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unlisted {
    /// 1-based.
    pub line: usize,
    /// The callee as written (`shape.area`), shortened.
    pub callee: String,
}

type SgNode<'r> = Node<'r, StrDoc<SupportLang>>;

/// The languages whose servers' gaps this knows: TypeScript and JavaScript.
fn language_of(path: &Path) -> Option<SupportLang> {
    SupportLang::from_path(path).filter(|l| {
        matches!(
            l,
            SupportLang::TypeScript | SupportLang::Tsx | SupportLang::JavaScript
        )
    })
}

/// Nodes a call hierarchy item can be: a function of some kind, or a class.
fn is_function(kind: &str) -> bool {
    matches!(
        kind,
        "function_declaration"
            | "function_expression"
            | "function"
            | "arrow_function"
            | "method_definition"
            | "generator_function"
            | "generator_function_declaration"
            | "class_declaration"
            | "class"
    )
}

/// The calls in the body of the function the call hierarchy item `decl` names (its `range`
/// and `selectionRange`; a bare range stands for both) in `text`, none of whose callee's characters a range of `listed` (the
/// outgoing calls' `fromRanges`, in `enc`) covers; `None` where the language is not one this
/// knows or no function is declared there.
pub(crate) fn unlisted_calls(
    path: &Path,
    text: &str,
    decl: &Value,
    listed: &[Value],
    enc: Encoding,
) -> Option<Vec<Unlisted>> {
    let lang = language_of(path)?;
    let line_of = |v: &Value, end: &str| {
        v.pointer(&format!("/{end}/line"))
            .and_then(Value::as_u64)
            .map(|l| l as usize)
    };
    let range = decl.get("range").unwrap_or(decl);
    let (first, last) = (line_of(range, "start")?, line_of(range, "end")?);
    let lines: Vec<&str> = text.split('\n').collect();
    let tree = lang.ast_grep(text);
    let root = tree.root();
    let function = declared_at(&root, decl, &lines, enc)?;
    if function.start_pos().line() < first || function.end_pos().line() > last {
        return None;
    }
    // Each listed site as (line, start column, end column) in bytes; a range over several
    // lines covers whole lines.
    let sites: Vec<(usize, usize, usize, usize)> = listed
        .iter()
        .filter_map(|r| {
            let (sl, el) = (line_of(r, "start")?, line_of(r, "end")?);
            let col = |end: &str, line: usize| {
                let c = r.pointer(&format!("/{end}/character"))?.as_u64()? as u32;
                Some(enc.byte(lines.get(line).copied().unwrap_or(""), c))
            };
            Some((sl, col("start", sl)?, el, col("end", el)?))
        })
        .collect();
    let covered = |n: &SgNode<'_>| {
        let (line, from) = n.start_pos().byte_point();
        let to = from + n.text().len();
        sites.iter().any(|&(sl, sc, el, ec)| {
            let after_start = line > sl || (line == sl && to > sc);
            let before_end = line < el || (line == el && from < ec);
            after_start && before_end
        })
    };
    let mut out = Vec::new();
    let mut stack: Vec<SgNode<'_>> = function.children().collect();
    while let Some(n) = stack.pop() {
        let kind = n.kind();
        if declares_own(&n) {
            continue;
        }
        let callee = match kind.as_ref() {
            "call_expression" => n.field("function"),
            "new_expression" => n.field("constructor"),
            _ => None,
        };
        if let Some(callee) = callee {
            // The name called: a member call's property, else the expression.
            let name = match callee.kind().as_ref() {
                "member_expression" => callee.field("property").unwrap_or(callee.clone()),
                _ => callee.clone(),
            };
            // `import('x')` and `super(…)` call no declaration of the project.
            let special = matches!(callee.kind().as_ref(), "import" | "super");
            if !special && !covered(&name) {
                let mut shown: String = callee
                    .text()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                if shown.chars().count() > CALLEE_CHARS_MAX {
                    shown = shown.chars().take(CALLEE_CHARS_MAX).collect::<String>() + "…";
                }
                out.push(Unlisted {
                    line: n.start_pos().line() + 1,
                    callee: shown,
                });
            }
        }
        stack.extend(n.children());
    }
    out.sort_by(|a, b| (a.line, &a.callee).cmp(&(b.line, &b.callee)));
    out.dedup();
    Some(out)
}

/// The function the item `decl` names: the innermost function node holding its name (its
/// `selectionRange`: a function's or a method's name is inside it), else the outermost
/// starting on the name's line (an arrow function assigned to a `const`, whose name is the
/// declarator's). Its `range` is no guide to where the node starts: it takes in the comments
/// above the function.
fn declared_at<'r>(
    root: &SgNode<'r>,
    decl: &Value,
    lines: &[&str],
    enc: Encoding,
) -> Option<SgNode<'r>> {
    let at = decl
        .get("selectionRange")
        .or_else(|| decl.get("range"))
        .unwrap_or(decl);
    let line = at.pointer("/start/line")?.as_u64()? as usize;
    let column = at.pointer("/start/character")?.as_u64()? as u32;
    let byte = enc.byte(lines.get(line).copied().unwrap_or(""), column);
    let offset = lines[..line.min(lines.len())]
        .iter()
        .map(|l| l.len() + 1)
        .sum::<usize>()
        + byte;
    let functions = || root.dfs().filter(|n| is_function(&n.kind()));
    functions()
        .filter(|n| n.range().contains(&offset))
        .last()
        .or_else(|| functions().find(|n| n.start_pos().line() == line))
}

/// Whether `n`, met in a function's body, is a declaration of its own whose calls are not
/// the function's (the TypeScript service's `isValidCallHierarchyDeclaration`).
fn declares_own(n: &SgNode<'_>) -> bool {
    match n.kind().as_ref() {
        "function_declaration"
        | "generator_function_declaration"
        | "class_declaration"
        | "abstract_class_declaration"
        | "method_definition"
        | "class_static_block" => true,
        "function_expression" | "function" | "generator_function" => {
            n.field("name").is_some() || assigned(n)
        }
        "arrow_function" | "class" => assigned(n),
        _ => false,
    }
}

/// Whether `n` is the value of a `const` declarator with a plain name, or of a class field.
fn assigned(n: &SgNode<'_>) -> bool {
    let Some(parent) = n.parent() else {
        return false;
    };
    let is_value = parent
        .field("value")
        .is_some_and(|v| v.range() == n.range());
    match parent.kind().as_ref() {
        "variable_declarator" => {
            is_value
                && parent
                    .field("name")
                    .is_some_and(|name| name.kind() == "identifier")
                && parent.parent().is_some_and(|d| {
                    d.kind() == "lexical_declaration" && d.text().starts_with("const")
                })
        }
        "public_field_definition" | "field_definition" => is_value,
        _ => false,
    }
}

/// The answer's line naming the unlisted calls, at most [`UNLISTED_SHOWN_MAX`].
pub(crate) fn unlisted_line(unlisted: &[Unlisted]) -> String {
    let n = unlisted.len();
    let shown: Vec<String> = unlisted
        .iter()
        .take(UNLISTED_SHOWN_MAX)
        .map(|u| format!("`{}(…)` at line {}", u.callee, u.line))
        .collect();
    let more = match n.saturating_sub(UNLISTED_SHOWN_MAX) {
        0 => String::new(),
        k => format!(" and {k} more"),
    };
    let calls = if n == 1 { "call" } else { "calls" };
    format!(
        "{n} {calls} in its body the server does not list (it cannot tell which declaration is called: a union-typed receiver, a parameter, `any`): {}{more}",
        shown.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SRC: &str = "class A { run(): number { return 1; } }
class B { run(): number { return 2; } }
function plain(x: number): number { return x; }
export function f(cb: (x: number) => void, ab: A | B, anyv: any): void {
  cb(1);
  ab.run();
  anyv.go();
  console.log(plain(2));
  const inner = () => cb(3);
  new A();
}
";

    fn range(sl: u64, sc: u64, el: u64, ec: u64) -> Value {
        json!({"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}})
    }

    #[test]
    fn calls_the_server_leaves_out_are_named() {
        // What tsserver lists for `f`: console.log, plain and A (spans as it gives them:
        // a member call's from its receiver).
        let listed = vec![range(7, 2, 7, 13), range(7, 14, 7, 19), range(9, 6, 9, 7)];
        let decl = range(3, 0, 10, 1);
        let got = unlisted_calls(Path::new("a.ts"), SRC, &decl, &listed, Encoding::Utf16).unwrap();
        assert_eq!(
            got,
            vec![
                Unlisted {
                    line: 5,
                    callee: "cb".into()
                },
                Unlisted {
                    line: 6,
                    callee: "ab.run".into()
                },
                Unlisted {
                    line: 7,
                    callee: "anyv.go".into()
                },
            ],
            "the call inside `inner` is inner's"
        );
        let line = unlisted_line(&got);
        assert!(
            line.starts_with("3 calls in its body the server does not list")
                && line.contains("`ab.run(…)` at line 6"),
            "{line}"
        );
        // All listed: nothing to say.
        let all = [
            listed.clone(),
            vec![range(4, 2, 4, 4), range(5, 2, 5, 8), range(6, 2, 6, 9)],
        ]
        .concat();
        let none = unlisted_calls(Path::new("a.ts"), SRC, &decl, &all, Encoding::Utf16).unwrap();
        assert!(none.is_empty(), "{none:?}");
        assert!(
            unlisted_calls(Path::new("a.py"), SRC, &decl, &listed, Encoding::Utf16).is_none(),
            "only the languages whose gaps are known"
        );
    }

    #[test]
    fn a_comment_above_and_anonymous_functions_inside_are_read_as_the_service_reads_them() {
        // An eighth probe (@tanstack/table-core): with a comment above it, the function was
        // not found (its range starts at the comment), and a returned arrow's calls, which
        // tsserver counts as the function's, were never looked at.
        let src = "/** doc */\nexport function mk(f: () => number) {\n  return () => {\n    const t = Date.now();\n    return f() + t;\n  };\n}\nclass K {\n  // run it\n  run(g: () => void) {\n    [1].map((x) => g());\n  }\n}\n";
        let item = |sl, sc, el, ec, nl, nc| json!({"range": range(sl, sc, el, ec), "selectionRange": range(nl, nc, nl, nc + 2)});
        // tsserver lists `Date.now` (spans from the receiver) for mk, `map` for run.
        let got = unlisted_calls(
            Path::new("a.ts"),
            src,
            &item(0, 0, 6, 1, 1, 16),
            &[range(3, 14, 3, 22)],
            Encoding::Utf16,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![Unlisted {
                line: 5,
                callee: "f".into()
            }]
        );
        let got = unlisted_calls(
            Path::new("a.ts"),
            src,
            &item(8, 2, 11, 3, 9, 2),
            &[range(10, 4, 10, 12)],
            Encoding::Utf16,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![Unlisted {
                line: 11,
                callee: "g".into()
            }]
        );
    }
}
