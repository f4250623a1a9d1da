//! Languages and patterns: grammar ids, inference from paths, and compiling a pattern into an
//! ast-grep matcher — wrapped in a natural context where the language has no top-level
//! expressions — plus the literal texts the prefilter looks for.
//!
//! Prose, markup and data formats are searched only when named, never inferred from a directory. A
//! pattern is compiled on its own first; a context tried after the top level (a fallback, such as a
//! class body) may only read it as the node kind it makes on its own, and a run metavariable
//! (`$$$`) that is a syntax error is let stand only when no parse is error-free. The prefilter's
//! literals are the pattern's named leaves and its anonymous tokens of two or more ASCII
//! punctuation characters whose text is their kind's name (`==`, `::`).

use std::path::Path;

use ast_grep_core::matcher::{Pattern, PatternNode, kind_utils};
use ast_grep_core::meta_var::MetaVariable;
use ast_grep_core::tree_sitter::StrDoc;
use ast_grep_core::{Language, Node};
use ast_grep_language::{LanguageExt, SupportLang};

use crate::{Error, Result};

/// A parsed tree of one source text in one language.
pub(crate) type Tree = ast_grep_core::AstGrep<StrDoc<SupportLang>>;
type SgNode<'r> = Node<'r, StrDoc<SupportLang>>;

/// Every language this build supports, with its canonical id (the one results report).
pub const LANGUAGES: &[(SupportLang, &str)] = &[
    (SupportLang::Bash, "bash"),
    (SupportLang::C, "c"),
    (SupportLang::Cpp, "cpp"),
    (SupportLang::CSharp, "csharp"),
    (SupportLang::Css, "css"),
    (SupportLang::Dart, "dart"),
    (SupportLang::Elixir, "elixir"),
    (SupportLang::Go, "go"),
    (SupportLang::Haskell, "haskell"),
    (SupportLang::Hcl, "hcl"),
    (SupportLang::Html, "html"),
    (SupportLang::Java, "java"),
    (SupportLang::JavaScript, "javascript"),
    (SupportLang::Json, "json"),
    (SupportLang::Kotlin, "kotlin"),
    (SupportLang::Lua, "lua"),
    (SupportLang::Markdown, "markdown"),
    (SupportLang::Nix, "nix"),
    (SupportLang::Php, "php"),
    (SupportLang::Python, "python"),
    (SupportLang::Ruby, "ruby"),
    (SupportLang::Rust, "rust"),
    (SupportLang::Scala, "scala"),
    (SupportLang::Solidity, "solidity"),
    (SupportLang::Swift, "swift"),
    (SupportLang::Tsx, "tsx"),
    (SupportLang::TypeScript, "typescript"),
    (SupportLang::Yaml, "yaml"),
    (SupportLang::Zig, "zig"),
];

/// The canonical ids of every supported language.
pub fn supported_ids() -> Vec<&'static str> {
    LANGUAGES.iter().map(|(_, id)| *id).collect()
}

/// The canonical id of a language (`rust`, `typescript`, …).
pub fn id(lang: SupportLang) -> &'static str {
    LANGUAGES
        .iter()
        .find(|(l, _)| *l == lang)
        .map(|(_, id)| *id)
        .unwrap_or("unknown")
}

/// A language from its id or one of ast-grep's aliases (`rs`, `py`, `ts`, `golang`, …),
/// case-insensitive.
pub fn parse_language(given: &str) -> Result<SupportLang> {
    given
        .trim()
        .parse::<SupportLang>()
        .map_err(|_| Error::UnknownLanguage {
            given: given.to_string(),
            supported: supported_ids(),
        })
}

/// Prose, markup and data formats: nearly any text parses in them (a README makes any
/// pattern "valid Markdown"), so they are searched only when `language` names them, or
/// `path` is such a file — never inferred from a directory.
pub fn is_prose_or_data(lang: SupportLang) -> bool {
    matches!(
        lang,
        SupportLang::Markdown | SupportLang::Json | SupportLang::Yaml | SupportLang::Html
    )
}

/// The language of a file, from its extension.
pub fn from_path(path: &Path) -> Option<SupportLang> {
    SupportLang::from_path(path)
}

/// Where a pattern is tried, in order. `None` is the pattern on its own (top level);
/// `Some((before, after))` wraps it. Languages whose statements live only inside functions
/// try the function body first, because some of their top-level parses of an expression
/// are valid but mean something else (Go reads `fmt.Println($A)` as a type conversion, C
/// reads `printf($A)` as a macro type), and such a pattern would never match a call.
fn contexts(lang: SupportLang) -> &'static [Option<(&'static str, &'static str)>] {
    use SupportLang as L;
    match lang {
        L::C | L::Cpp => &[
            Some(("void __toolvisor(void) {\n", ";\n}")),
            Some(("void __toolvisor(void) {\n", "\n}")),
            None,
        ],
        L::Go => &[Some(("func __toolvisor() {\n", "\n}")), None],
        L::Dart => &[
            Some(("void __toolvisor() {\n", ";\n}")),
            Some(("void __toolvisor() {\n", "\n}")),
            None,
            Some(("class __Toolvisor {\n", "\n}")),
        ],
        L::Java | L::CSharp => &[
            Some(("class __Toolvisor { void __toolvisor() {\n", ";\n} }")),
            Some(("class __Toolvisor { void __toolvisor() {\n", "\n} }")),
            None,
            Some(("class __Toolvisor {\n", "\n}")),
        ],
        L::Kotlin => &[
            Some(("fun __toolvisor() {\n", "\n}")),
            None,
            Some(("class __Toolvisor {\n", "\n}")),
        ],
        L::Solidity => &[
            Some((
                "contract __Toolvisor { function __toolvisor() public {\n",
                ";\n} }",
            )),
            Some((
                "contract __Toolvisor { function __toolvisor() public {\n",
                "\n} }",
            )),
            None,
            Some(("contract __Toolvisor {\n", "\n}")),
        ],
        L::Php => &[
            None,
            Some(("<?php\n", ";")),
            Some(("<?php\nfunction __toolvisor() {\n", ";\n}")),
            Some(("<?php\nclass __Toolvisor {\n", "\n}")),
        ],
        L::Zig => &[
            None,
            Some(("fn __toolvisor() void {\n", ";\n}")),
            Some(("fn __toolvisor() void {\n", "\n}")),
        ],
        L::Rust => &[
            None,
            Some(("fn __toolvisor() {\n", "\n}")),
            Some(("impl __Toolvisor {\n", "\n}")),
        ],
        L::Swift => &[
            None,
            Some(("func __toolvisor() {\n", "\n}")),
            Some(("class __Toolvisor {\n", "\n}")),
        ],
        L::Scala => &[
            None,
            Some(("object __Toolvisor {\ndef __toolvisor() = {\n", "\n}\n}")),
            Some(("object __Toolvisor {\n", "\n}")),
        ],
        L::JavaScript | L::TypeScript | L::Tsx => &[
            None,
            Some(("function __toolvisor() {\n", "\n}")),
            Some(("class __Toolvisor {\n", "\n}")),
        ],
        _ => &[None],
    }
}

/// A pattern ready to match, with what the prefilter needs.
pub struct CompiledPattern {
    pub lang: SupportLang,
    pub pattern: Pattern,
    /// Texts every match must contain verbatim (the pattern's named leaf tokens and its
    /// multi-character operators, see `collect_literals`): a file lacking any of them cannot
    /// match, so it need not be parsed.
    pub literals: Vec<String>,
    /// How the pattern was wrapped to parse, when it was (shown to the caller).
    pub context: Option<String>,
    /// The tree-sitter kind of the pattern's root node (`call_expression`, …).
    pub kind: String,
    /// The metavariables the pattern binds (`A` for `$A` and `$$$A`).
    pub vars: Vec<String>,
}

impl std::fmt::Debug for CompiledPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledPattern")
            .field("lang", &self.lang)
            .field("kind", &self.kind)
            .field("literals", &self.literals)
            .field("context", &self.context)
            .field("vars", &self.vars)
            .finish_non_exhaustive()
    }
}

/// Compile `source` as a pattern of `lang`. The pattern must parse, without syntax errors,
/// as one node: on its own, or inside the language's natural context (see [`contexts`]).
pub fn compile(source: &str, lang: SupportLang) -> Result<CompiledPattern> {
    let text = source.trim();
    // ast-grep spells `$` as the language's expando character (`µ` in Rust, Go, C, …) before
    // parsing; messages speak of what the caller wrote.
    let expando = lang.expando_char();
    let shown = |reason: String| {
        if expando != '$' && !text.contains(expando) {
            reason.replace(expando, "$")
        } else {
            reason
        }
    };
    let invalid = |reason: String| Error::PatternInvalid {
        pattern: source.to_string(),
        language: id(lang),
        reason: shown(reason),
    };
    if text.is_empty() {
        return Err(invalid("the pattern is empty".into()));
    }
    let processed = lang.pre_process_pattern(text).into_owned();
    // The pattern on its own: its failure is the clearest error, and its kind tells whether a
    // context changed the reading.
    let strict_top = top_level(&processed, lang, false);
    // What the pattern means on its own to ast-grep (a run metavariable standing where the
    // grammar wants items let be): a context tried after the top level (a fallback, such as
    // a class body) may only read it as that same kind, or JavaScript's `switch ($X) { $$$ }`
    // would become a method named `switch`.
    let lenient_top = top_level(&processed, lang, true);
    let meant = lenient_top.as_ref().ok().map(|(_, kind)| kind.clone());
    let mut first_failure: Option<String> = None;
    // First every context without any syntax error; then again letting a metavariable stand
    // where the grammar wants something else (`impl $T { $$$ }`), as ast-grep does. A parse
    // without errors is preferred: Go's `func $F() { $$$ }` inside a function body would
    // otherwise read as a function literal whose name is an error.
    for lenient in [false, true] {
        let top = if lenient {
            lenient_top.clone()
        } else {
            strict_top.clone()
        };
        let mut fallback = false;
        for context in contexts(lang) {
            let attempt = match context {
                None => {
                    fallback = true;
                    match &top {
                        Ok((pattern, kind)) => Ok((pattern.clone(), kind.clone())),
                        Err(e) => Err(e.clone()),
                    }
                }
                Some((before, after)) => wrapped(&processed, before, after, lang, lenient),
            };
            let (pattern, kind) = match attempt {
                Ok(found) => found,
                Err(reason) => {
                    first_failure.get_or_insert(reason);
                    continue;
                }
            };
            if let (true, Some(_), Some(meant)) = (fallback, context, &meant)
                && *meant != kind
            {
                first_failure.get_or_insert(format!(
                    "on its own it reads as `{meant}`; inside `{}…` it would read as `{kind}`, which is not what it says",
                    context
                        .map(|(b, _)| b.replace('\n', " ").trim_end().to_string())
                        .unwrap_or_default()
                ));
                continue;
            }
            let context = context.and_then(|(before, after)| {
                let alone = match &top {
                    Ok((_, alone)) if *alone == kind => return None,
                    Ok((_, alone)) => format!("on its own it would read as `{alone}`"),
                    Err(e) => format!("on its own it is not valid {}: {e}", id(lang)),
                };
                Some(shown(format!(
                    "parsed inside `{}…{}`, where such code lives ({alone}); it matches `{kind}` nodes",
                    before.replace('\n', " ").trim_end(),
                    after.replace('\n', " ").trim_start(),
                )))
            });
            let mut literals = Vec::new();
            collect_literals(&pattern.node, lang, &mut literals);
            literals.sort();
            literals.dedup();
            let mut vars: Vec<String> = pattern
                .defined_vars()
                .into_iter()
                .map(String::from)
                .collect();
            vars.sort();
            return Ok(CompiledPattern {
                lang,
                pattern,
                literals,
                context,
                kind,
                vars,
            });
        }
    }
    let top_failure = strict_top.err();
    // The top-level failure says most about the pattern itself.
    let first_failure = top_failure.or(first_failure);
    Err(invalid(
        first_failure.unwrap_or_else(|| "it does not parse".into()),
    ))
}

/// The first syntax error of a tree (an `ERROR` node), described with its 1-based line
/// and column in `src`. Tokens the parser invented (a missing `;` after `$A.unwrap()`) are
/// not errors: ast-grep leaves them out of the pattern. When `lenient`, nor is an `ERROR`
/// node that is exactly a run metavariable (`$$$` or `$$$NAME` where the grammar wants
/// items, fields, match arms or cases: `impl $T { $$$ }`, `switch ($X) { $$$ }`): ast-grep
/// turns it into that metavariable, which matches whatever run stands there. A single `$X`
/// in the wrong place stays an error: a natural context usually reads it right
/// (TypeScript's `private $X: $T` is a class field, not a label).
fn syntax_error(
    root: &SgNode<'_>,
    src: &str,
    offset: usize,
    lang: SupportLang,
    lenient: bool,
) -> Option<String> {
    let is_run = |n: &SgNode<'_>| {
        matches!(
            lang.extract_meta_var(&n.text()),
            Some(MetaVariable::Multiple | MetaVariable::MultiCapture(_))
        )
    };
    let node = root
        .dfs()
        .find(|n| n.is_error() && !(lenient && is_run(n)))?;
    let start = floor_char(
        src,
        node.range().start.saturating_sub(offset).min(src.len()),
    );
    let before = &src[..start];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let near: String = src[start..].chars().take(30).collect();
    Some(format!("a syntax error at {line}:{col}, near {near:?}"))
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i.min(s.len())
}

/// The pattern on its own: the root must reduce to one node.
fn top_level(
    processed: &str,
    lang: SupportLang,
    lenient: bool,
) -> std::result::Result<(Pattern, String), String> {
    let tree = lang.ast_grep(processed);
    let root = tree.root();
    if let Some(err) = syntax_error(&root, processed, 0, lang, lenient) {
        return Err(err);
    }
    let top: Vec<_> = root
        .children()
        .filter(|c| !c.is_missing() && !c.kind().is_empty())
        .collect();
    match top.len() {
        0 => return Err("it contains no code".into()),
        1 => {}
        n => {
            return Err(format!(
                "it parses as {n} nodes ({}), not one",
                top.iter()
                    .map(|c| format!("`{}`", c.kind()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    let node = descend_single(top[0].clone());
    let kind = node.kind().to_string();
    Ok((Pattern::from(node), kind))
}

/// The pattern inside `before … after`: the node that spans exactly the pattern (or the
/// pattern plus the statement's `;`), descending through single-child wrappers.
fn wrapped(
    processed: &str,
    before: &str,
    after: &str,
    lang: SupportLang,
    lenient: bool,
) -> std::result::Result<(Pattern, String), String> {
    let src = format!("{before}{processed}{after}");
    let tree = lang.ast_grep(&src);
    let root = tree.root();
    if let Some(err) = syntax_error(&root, processed, before.len(), lang, lenient) {
        return Err(err);
    }
    let (start, end) = (before.len(), before.len() + processed.len());
    let exact = root
        .dfs()
        .find(|n| n.range().start == start && n.range().end == end && !n.kind().is_empty());
    let node = exact.or_else(|| {
        // `if (c) x.dispose()` needs its `;` in C-like languages: accept a node that ends
        // with the statement terminator right after the pattern, and nothing else.
        root.dfs()
            .filter(|n| {
                let r = n.range();
                r.start == start && r.end > end && src[end..r.end].trim() == ";"
            })
            .min_by_key(|n| n.range().end)
    });
    let Some(node) = node else {
        return Err("no single node spans the whole pattern".into());
    };
    let node = descend_single(node);
    let kind = node.kind().to_string();
    Ok((Pattern::from(node), kind))
}

/// Like ast-grep's own pattern root: go down while a node has exactly one child (ignoring
/// an invented or empty trailing one), so `f(x)` is a call, not a statement holding a call.
fn descend_single(mut node: SgNode<'_>) -> SgNode<'_> {
    loop {
        let children: Vec<_> = node.children().collect();
        let single = match children.len() {
            1 => Some(children[0].clone()),
            2 if children[1].is_missing() || children[1].kind().is_empty() => {
                Some(children[0].clone())
            }
            _ => None,
        };
        match single {
            Some(child) if child.range().start == node.range().start => node = child,
            _ => return node,
        }
    }
}

/// Texts every match contains verbatim: the pattern's named leaves, its multi-character
/// operator tokens, and its keywords in the grammars whose keywords are made only from their
/// text ([`is_verbatim_keyword`]).
///
/// ast-grep matches a named leaf only against a node with the same text. Anonymous tokens are
/// compared by kind only (its default, "smart" strictness never skips one of the pattern's),
/// and some kinds have nodes whose text is not the kind's: zero-width tokens a scanner
/// inserts (JavaScript's automatic `;`), keywords of case-insensitive grammars (PHP's `IF`),
/// spans tree-sitter-typescript gets wrong. So only an anonymous token whose text is its kind's
/// name and is two or more ASCII punctuation characters (`==`, `!=`, `=>`, `::`, `&&`) is used:
/// a lexer consumes those characters to make the token, and no grammar inserts one. This
/// gives `$X == $X` a prefilter, where the named leaves give none. Keywords are used in the
/// grammars listed by [`is_verbatim_keyword`] (a wrong span still came from those characters).
fn collect_literals(node: &PatternNode, lang: SupportLang, out: &mut Vec<String>) {
    match node {
        PatternNode::Terminal {
            text,
            is_named: true,
            kind_id,
        } if !text.is_empty() && !kind_utils::is_error_kind(*kind_id) => out.push(text.clone()),
        PatternNode::Terminal {
            text,
            is_named: false,
            kind_id,
        } if (is_operator_token(text) || is_verbatim_keyword(text, lang))
            && !kind_utils::is_error_kind(*kind_id)
            && lang.get_ts_language().node_kind_for_id(*kind_id) == Some(text.as_str()) =>
        {
            out.push(text.clone())
        }
        PatternNode::Internal { children, .. } => {
            for child in children {
                collect_literals(child, lang, out);
            }
        }
        _ => {}
    }
}

/// Two or more ASCII punctuation characters, nothing else.
fn is_operator_token(text: &str) -> bool {
    text.len() >= 2 && text.bytes().all(|b| b.is_ascii_punctuation())
}

/// A keyword (`def`, `fn`, `return`) of a grammar whose lexer makes that token only from its
/// own text: a file without the text cannot hold the token (`def $F($$$): $$$` has
/// no named leaf, and a module without a `def` need not be parsed).
///
/// Only grammars read for it (their `grammar.json`): every keyword is an exact string rule
/// (no case-insensitive pattern), none is an anonymous alias of another token's text, and
/// none is an external token a scanner makes as it likes, except Python's `except` (left out).
/// PHP (keywords in any case, by alias), Swift and Scala (keyword aliases), HTML, Lua and the
/// rest are not on the list, so their keywords give no literal.
fn is_verbatim_keyword(text: &str, lang: SupportLang) -> bool {
    use SupportLang as L;
    let verbatim = matches!(
        lang,
        L::C | L::Cpp
            | L::CSharp
            | L::Go
            | L::Java
            | L::JavaScript
            | L::TypeScript
            | L::Tsx
            | L::Python
            | L::Rust
    );
    verbatim
        && text.len() >= 2
        && text.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !(lang == L::Python && text == "except")
}

/// Parse `src` as `lang`.
pub(crate) fn parse(src: &str, lang: SupportLang) -> Tree {
    lang.ast_grep(src)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grammar_loads_under_the_workspace_tree_sitter() {
        // One tree-sitter for the whole workspace: every grammar must speak an ABI this
        // tree-sitter accepts, or parsing would fail at run time.
        for (lang, name) in LANGUAGES {
            let ts: tree_sitter::Language = lang.get_ts_language();
            let abi = ts.abi_version();
            assert!(
                (tree_sitter::MIN_COMPATIBLE_LANGUAGE_VERSION..=tree_sitter::LANGUAGE_VERSION)
                    .contains(&abi),
                "{name}: grammar ABI {abi} is outside what tree-sitter accepts"
            );
            let mut parser = tree_sitter::Parser::new();
            parser.set_language(&ts).expect(name);
        }
        assert_eq!(LANGUAGES.len(), SupportLang::all_langs().len());
    }

    #[test]
    fn the_lock_file_has_one_tree_sitter() {
        let lock =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock"))
                .expect("Cargo.lock at the workspace root");
        let versions: Vec<&str> = lock
            .split("[[package]]")
            .filter(|p| p.contains("\nname = \"tree-sitter\"\n"))
            .collect();
        assert_eq!(
            versions.len(),
            1,
            "tree-sitter versions in Cargo.lock: {versions:?}"
        );
    }

    #[test]
    fn ids_and_aliases_parse() {
        for id in supported_ids() {
            assert_eq!(super::id(parse_language(id).unwrap()), id);
        }
        assert_eq!(parse_language("RS").unwrap(), SupportLang::Rust);
        assert_eq!(parse_language("golang").unwrap(), SupportLang::Go);
        let err = parse_language("klingon").unwrap_err().to_string();
        assert!(
            err.contains("klingon") && err.contains("dart") && err.contains("rust"),
            "{err}"
        );
    }

    #[test]
    fn dart_call_is_wrapped_and_selects_the_call() {
        let p = compile("print($A)", SupportLang::Dart).unwrap();
        assert_eq!(p.kind, "call_expression");
        assert!(p.context.as_deref().unwrap().contains("void __toolvisor()"));
        assert_eq!(p.literals, vec!["print"]);
    }

    #[test]
    fn go_and_c_calls_are_calls() {
        assert_eq!(
            compile("fmt.Println($A)", SupportLang::Go).unwrap().kind,
            "call_expression"
        );
        assert_eq!(
            compile("printf($A)", SupportLang::C).unwrap().kind,
            "call_expression"
        );
        // Declarations still parse at the top level.
        assert_eq!(
            compile("func $F($$$P) error { $$$B }", SupportLang::Go)
                .unwrap()
                .kind,
            "function_declaration"
        );
    }

    #[test]
    fn rust_literals() {
        let p = compile("$A.unwrap()", SupportLang::Rust).unwrap();
        assert_eq!(p.literals, vec!["unwrap"]);
        assert!(p.context.is_none());
        let p = compile("println!($$$A)", SupportLang::Rust).unwrap();
        assert_eq!(p.literals, vec!["println"]);
        assert_eq!(p.vars, vec!["A"]);
    }

    #[test]
    fn multi_character_operators_are_literals_single_characters_not_keywords_where_verbatim() {
        let p = compile("$X == $X", SupportLang::Rust).unwrap();
        assert_eq!(p.literals, vec!["=="]);
        let p = compile("$A::new()", SupportLang::Rust).unwrap();
        assert_eq!(p.literals, vec!["::", "new"]);
        // `+`, `?` and `;` are one character: none (a scanner may insert a `;`).
        assert!(
            compile("$A + $B", SupportLang::Rust)
                .unwrap()
                .literals
                .is_empty()
        );
        assert!(
            compile("$A?", SupportLang::Rust)
                .unwrap()
                .literals
                .is_empty()
        );
        assert_eq!(
            compile("foo($A);", SupportLang::JavaScript)
                .unwrap()
                .literals,
            vec!["foo"]
        );
        // Keywords are anonymous tokens too, compared by kind: PHP's `if` (any case, by alias)
        // is no literal; Python's `def` is (made only from its text), its `except` not (its
        // scanner makes it).
        let p = compile("if ($A) { $$$B }", SupportLang::Php).unwrap();
        assert!(!p.literals.iter().any(|l| l == "if"), "{:?}", p.literals);
        let p = compile("def $F($$$): $$$", SupportLang::Python).unwrap();
        assert_eq!(p.literals, vec!["def"]);
        let p = compile("try:\n    $$$A\nexcept $E:\n    $$$B", SupportLang::Python).unwrap();
        assert_eq!(p.literals, vec!["try"]);
        let p = compile("fn $F($$$) -> $R { $$$ }", SupportLang::Rust).unwrap();
        assert!(p.literals.iter().any(|l| l == "fn"), "{:?}", p.literals);
        let p = compile("$A === $B", SupportLang::JavaScript).unwrap();
        assert_eq!(p.literals, vec!["==="]);
    }

    #[test]
    fn bad_patterns_are_named() {
        let err = compile("fn (", SupportLang::Rust).unwrap_err().to_string();
        assert!(
            err.contains("does not parse") && err.contains("1:"),
            "{err}"
        );
        let err = compile("a = 1\nb = 2", SupportLang::Python)
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 nodes"), "{err}");
        let err = compile("   ", SupportLang::Python).unwrap_err().to_string();
        assert!(err.contains("empty"), "{err}");
    }
}
