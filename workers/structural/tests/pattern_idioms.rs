//! Patterns people write every day and the ast-grep CLI accepts: `$$$` standing for items,
//! fields, match arms or cases (`impl $T for $U { $$$ }`, `match $E { $$$ }`, Go's
//! `switch $X { $$$ }`), a JavaScript `switch` that must match switch statements and never
//! a class method named `switch`, error messages that show `$` as written, and language
//! inference that ignores prose and data files (a README) unless they are named.

use std::collections::BTreeMap;
use std::path::Path;

use toolvisor_structural::Error;
use toolvisor_structural::search::{SearchRequest, search};

/// Search `path` (a file or a directory) with `pattern`, confined to the directory that holds
/// it, as the tool is.
fn run(
    pattern: &str,
    language: Option<&str>,
    path: &Path,
) -> Result<toolvisor_structural::search::SearchResult, Error> {
    let root = if path.is_dir() {
        path
    } else {
        path.parent().unwrap()
    };
    let scope = toolvisor_files::Scope::new(root, &[], false).unwrap();
    search(&SearchRequest {
        pattern,
        language,
        path,
        scope: &scope,
        max_results: 100,
        prefilter: true,
        threads: 1,
        cancel: None,
        limits: Default::default(),
    })
}

/// (1-based start line, captures) of each match of `pattern` in a file `name` with `source`.
fn find(name: &str, source: &str, pattern: &str) -> Vec<(usize, BTreeMap<String, String>)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, source).unwrap();
    let result = run(pattern, None, &path).unwrap_or_else(|e| panic!("{name}: {pattern}: {e}"));
    result
        .matches
        .into_iter()
        .map(|m| (m.line, m.captures))
        .collect()
}

fn lines(found: &[(usize, BTreeMap<String, String>)]) -> Vec<usize> {
    found.iter().map(|(l, _)| *l).collect()
}

const RUST: &str = r#"mod inner {
    struct Point {
        x: i32,
        y: i32,
    }
    pub struct Unit;
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.x {
            0 => write!(f, "origin"),
            _ => write!(f, "{}", self.x),
        }
    }
}

impl Point {
    fn new() -> Self {
        Point { x: 0, y: 0 }
    }
}

fn main() {
    let v = match Some(1) {
        Some(n) => n,
        None => 0,
    };
}
"#;

#[test]
fn rust_multi_metavariables_stand_for_items_fields_and_arms() {
    for (pattern, want) in [
        ("impl $T for $U { $$$ }", vec![9]),
        ("impl $T { $$$ }", vec![18]),
        ("match $E { $$$ }", vec![11, 25]),
        ("struct $S { $$$ }", vec![2]),
        ("mod $M { $$$ }", vec![1]),
    ] {
        assert_eq!(lines(&find("lib.rs", RUST, pattern)), want, "{pattern}");
    }
    // A named run binds what it stands for.
    let found = find("lib.rs", RUST, "match $E { $$$ARMS }");
    assert_eq!(found[1].1["E"], "Some(1)");
    assert_eq!(found[1].1["ARMS"], "Some(n) => n,\n        None => 0,");
    let found = find("lib.rs", RUST, "impl $T { $$$B }");
    assert!(found[0].1["B"].starts_with("fn new() -> Self"), "{found:?}");
}

#[test]
fn go_switch_with_a_run_of_cases() {
    let go = "package main\n\nfunc f(x int) int {\n\tswitch x {\n\tcase 1:\n\t\treturn 2\n\tdefault:\n\t\treturn 0\n\t}\n}\n";
    let found = find("main.go", go, "switch $X { $$$ }");
    assert_eq!(lines(&found), vec![4]);
    assert_eq!(found[0].1["X"], "x");
}

#[test]
fn javascript_switch_matches_switch_statements_not_methods_named_switch() {
    let js = "class Router {\n  switch(route) {\n    return route;\n  }\n}\n\nfunction f(x) {\n  switch (x) {\n    case 1:\n      return 'one';\n    default:\n      return 'many';\n  }\n}\n";
    let found = find("a.js", js, "switch ($X) { $$$ }");
    assert_eq!(lines(&found), vec![8], "{found:?}");
    assert_eq!(found[0].1["X"], "x");
    let found = find("a.ts", js, "switch ($X) { $$$ }");
    assert_eq!(lines(&found), vec![8], "{found:?}");
    // A class member pattern still finds the method through the class context.
    assert_eq!(lines(&find("a.js", js, "switch($R) { $$$ }")), vec![8]);
    assert_eq!(
        lines(&find("a.js", js, "class $C { switch($R) { $$$ } }")),
        vec![1]
    );
}

#[test]
fn pattern_errors_show_the_dollar_the_caller_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib.rs");
    std::fs::write(&path, RUST).unwrap();
    for (pattern, lang) in [
        ("fn $F( { $$$B", "rust"),
        ("let $A = ;", "rust"),
        ("func $F( {", "go"),
        ("int $X = ;;;; }", "c"),
    ] {
        let e = run(pattern, Some(lang), &path).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::PatternInvalid { .. }), "{msg}");
        assert!(!msg.contains('µ'), "{pattern} ({lang}): {msg}");
    }
    let e = run("fn $F( { $$$B", Some("rust"), &path).unwrap_err();
    assert!(e.to_string().contains("$"), "{e}");
}

#[test]
fn inference_ignores_prose_and_data_unless_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("README.md"), "# Demo\n\nCall `print(x)`.\n").unwrap();
    std::fs::write(root.join("config.yaml"), "name: demo\n").unwrap();
    std::fs::write(root.join("package.json"), "{\"name\": \"demo\"}\n").unwrap();
    std::fs::write(root.join("index.html"), "<p>hi</p>\n").unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    std::fs::write(root.join("src/app.py"), "print(1)\nprint(2)\n").unwrap();

    let r = run("print($A)", None, root).unwrap();
    assert_eq!(r.language, "python");
    assert_eq!(r.total, 2);
    let note = r.language_note.unwrap();
    assert!(
        note.contains("python") && !note.contains("markdown"),
        "{note}"
    );

    // Asked for by name, Markdown is searched.
    let r = run("# $T", Some("markdown"), root).unwrap();
    assert_eq!(r.language, "markdown");
    assert_eq!(r.files_searched, 1);

    // Only prose and data: the error says they are searched when named.
    let prose = tempfile::tempdir().unwrap();
    std::fs::write(prose.path().join("README.md"), "# Demo\n").unwrap();
    let e = run("print($A)", None, prose.path()).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(e, Error::LanguageRequired { .. })
            && msg.contains("markdown (1)")
            && msg.contains("named"),
        "{msg}"
    );
}

#[test]
fn class_member_patterns_keep_their_class_context() {
    use toolvisor_structural::SupportLang as L;
    use toolvisor_structural::lang::compile;
    // Only a run metavariable may stand where the grammar wants something else: a single
    // `$X` there would make these a label and an assignment at the top level.
    for (pattern, lang, kind) in [
        ("private $X: $T", L::TypeScript, "public_field_definition"),
        ("static $X = $V", L::JavaScript, "field_definition"),
        (
            "constructor($$$) { $$$ }",
            L::JavaScript,
            "method_definition",
        ),
        ("async $M($$$) { $$$ }", L::JavaScript, "method_definition"),
        (
            "public $T $N { get; set; }",
            L::CSharp,
            "property_declaration",
        ),
        // Declarations a run made invalid before now compile where they stand.
        (
            "function $F() public { $$$ }",
            L::Solidity,
            "function_definition",
        ),
        (
            "override fun $F($$$P) { $$$B }",
            L::Kotlin,
            "function_declaration",
        ),
    ] {
        let c = compile(pattern, lang).unwrap_or_else(|e| panic!("{pattern}: {e}"));
        assert_eq!(c.kind, kind, "{pattern} ({lang:?})");
    }
}
