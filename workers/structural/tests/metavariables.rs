//! Metavariable semantics in Python, Rust, TypeScript, C, Dart and Go: `$NAME` binds one
//! node, `$$$NAME` a run of siblings (possibly empty), `$_` matches without binding (two of
//! them need not agree), and a metavariable repeated in one pattern must capture identical
//! code — the guard that disposes what it tested matches, the one that disposes something
//! else does not.

use std::collections::BTreeMap;
use std::path::Path;

use toolvisor_structural::search::{SearchRequest, search};

/// Matches of `pattern` in a file `name` holding `source`: (text, captures) in order.
fn find(name: &str, source: &str, pattern: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, source).unwrap();
    let result = search(&SearchRequest {
        pattern,
        language: None,
        path: &path,
        scope: &toolvisor_files::Scope::new(dir.path(), &[], false).unwrap(),
        max_results: 100,
        prefilter: true,
        threads: 1,
        cancel: None,
        limits: Default::default(),
    })
    .unwrap_or_else(|e| panic!("{name}: {pattern}: {e}"));
    assert_eq!(result.total, result.matches.len());
    result
        .matches
        .into_iter()
        .map(|m| (m.text, m.captures))
        .collect()
}

fn texts(found: &[(String, BTreeMap<String, String>)]) -> Vec<&str> {
    found.iter().map(|(t, _)| t.as_str()).collect()
}

fn caps<'a>(found: &'a [(String, BTreeMap<String, String>)], var: &str) -> Vec<&'a str> {
    found.iter().map(|(_, c)| c[var].as_str()).collect()
}

/// One language's cases.
struct Case {
    file: &'static str,
    source: &'static str,
    /// A guard that disposes what it tested (must match, once) and its pattern.
    guard: &'static str,
    guard_match_starts: &'static str,
    /// A call with a run of arguments: pattern `NAME($$$ARGS)`; the captured runs.
    multi: &'static str,
    multi_runs: &'static [&'static str],
    /// Two-argument calls: `$A, $A` matches only the identical pair; `$_, $_` both.
    same: &'static str,
    wild: &'static str,
    pairs: &'static [&'static str],
    identical_pair: &'static str,
}

fn check(case: &Case) {
    let name = case.file;
    // Repeated metavariable: the guard of the same variable only.
    let found = find(name, case.source, case.guard);
    assert_eq!(
        found.len(),
        1,
        "{name}: {} → {:?}",
        case.guard,
        texts(&found)
    );
    assert!(
        found[0].0.starts_with(case.guard_match_starts),
        "{name}: matched {:?}",
        found[0].0
    );
    assert_eq!(found[0].1["X"], "a", "{name}: $X");

    // Multi: every run, the empty one included, keeps its text.
    let found = find(name, case.source, case.multi);
    assert_eq!(
        caps(&found, "ARGS"),
        case.multi_runs,
        "{name}: {}",
        case.multi
    );

    // Single, repeated: `$A, $A` only where both arguments are the same.
    let found = find(name, case.source, case.same);
    assert_eq!(
        texts(&found),
        vec![case.identical_pair],
        "{name}: {}",
        case.same
    );

    // Wildcard: binds nothing, and two wildcards need not agree.
    let found = find(name, case.source, case.wild);
    assert_eq!(texts(&found), case.pairs, "{name}: {}", case.wild);
    assert!(
        found.iter().all(|(_, c)| c.is_empty()),
        "{name}: wildcard bound something"
    );
}

#[test]
fn python() {
    check(&Case {
        file: "m.py",
        source: "if a is not None:\n    a.close()\nif a is not None:\n    b.close()\nf(1, 2, 3)\nf()\ng(a, a)\ng(a, b)\n",
        guard: "if $X is not None:\n    $X.close()",
        guard_match_starts: "if a is not None:\n    a.close()",
        multi: "f($$$ARGS)",
        multi_runs: &["1, 2, 3", ""],
        same: "g($A, $A)",
        wild: "g($_, $_)",
        pairs: &["g(a, a)", "g(a, b)"],
        identical_pair: "g(a, a)",
    });
}

#[test]
fn rust() {
    check(&Case {
        file: "m.rs",
        source: "fn main() {\n    if a.is_some() { a.take(); }\n    if a.is_some() { b.take(); }\n    f(1, 2, 3);\n    f();\n    g(a, a);\n    g(a, b);\n}\n",
        guard: "if $X.is_some() { $X.take(); }",
        guard_match_starts: "if a.is_some() { a.take(); }",
        multi: "f($$$ARGS)",
        multi_runs: &["1, 2, 3", ""],
        same: "g($A, $A)",
        wild: "g($_, $_)",
        pairs: &["g(a, a)", "g(a, b)"],
        identical_pair: "g(a, a)",
    });
}

#[test]
fn typescript() {
    check(&Case {
        file: "m.ts",
        source: "if (a != null) a.dispose();\nif (a != null) b.dispose();\nf(1, 2, 3);\nf();\ng(a, a);\ng(a, b);\n",
        guard: "if ($X != null) $X.dispose()",
        guard_match_starts: "if (a != null) a.dispose()",
        multi: "f($$$ARGS)",
        multi_runs: &["1, 2, 3", ""],
        same: "g($A, $A)",
        wild: "g($_, $_)",
        pairs: &["g(a, a)", "g(a, b)"],
        identical_pair: "g(a, a)",
    });
}

#[test]
fn c() {
    check(&Case {
        file: "m.c",
        source: "void m(void) {\n    if (a != NULL) free(a);\n    if (a != NULL) free(b);\n    f(1, 2, 3);\n    f();\n    g(a, a);\n    g(a, b);\n}\n",
        guard: "if ($X != NULL) free($X);",
        guard_match_starts: "if (a != NULL) free(a);",
        multi: "f($$$ARGS)",
        multi_runs: &["1, 2, 3", ""],
        same: "g($A, $A)",
        wild: "g($_, $_)",
        pairs: &["g(a, a)", "g(a, b)"],
        identical_pair: "g(a, a)",
    });
}

#[test]
fn dart() {
    check(&Case {
        file: "m.dart",
        source: "void m() {\n  if (a != null) a.dispose();\n  if (a != null) b.dispose();\n  f(1, 2, 3);\n  f();\n  g(a, a);\n  g(a, b);\n}\n",
        // The spec's own example: no `;`, no enclosing function — wrapped automatically.
        guard: "if ($X != null) $X.dispose()",
        guard_match_starts: "if (a != null) a.dispose()",
        multi: "f($$$ARGS)",
        multi_runs: &["1, 2, 3", ""],
        same: "g($A, $A)",
        wild: "g($_, $_)",
        pairs: &["g(a, a)", "g(a, b)"],
        identical_pair: "g(a, a)",
    });
}

#[test]
fn go() {
    check(&Case {
        file: "m.go",
        source: "package m\n\nfunc m() {\n\tif a != nil {\n\t\ta.Close()\n\t}\n\tif a != nil {\n\t\tb.Close()\n\t}\n\tf(1, 2, 3)\n\tf()\n\tg(a, a)\n\tg(a, b)\n}\n",
        guard: "if $X != nil { $X.Close() }",
        guard_match_starts: "if a != nil {\n\t\ta.Close()\n\t}",
        multi: "f($$$ARGS)",
        multi_runs: &["1, 2, 3", ""],
        same: "g($A, $A)",
        wild: "g($_, $_)",
        pairs: &["g(a, a)", "g(a, b)"],
        identical_pair: "g(a, a)",
    });
}

#[test]
fn repeated_metavariable_compares_code_not_just_the_first_token() {
    // `a.b` and `a.c` share a prefix; only the identical pair matches.
    let found = find("r.py", "g(a.b, a.b)\ng(a.b, a.c)\n", "g($A, $A)");
    assert_eq!(texts(&found), vec!["g(a.b, a.b)"]);
}

#[test]
fn the_dart_context_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.dart");
    std::fs::write(&path, "void main() {\n  print('hi');\n  print(x);\n}\n").unwrap();
    let result = search(&SearchRequest {
        pattern: "print($A)",
        language: Some("dart"),
        path: Path::new(&path),
        scope: &toolvisor_files::Scope::new(dir.path(), &[], false).unwrap(),
        max_results: 10,
        prefilter: true,
        threads: 1,
        cancel: None,
        limits: Default::default(),
    })
    .unwrap();
    assert_eq!(result.total, 2);
    assert_eq!(result.matches[0].captures["A"], "'hi'");
    assert_eq!((result.matches[1].line, result.matches[1].column), (3, 3));
    let context = result.pattern_context.unwrap();
    assert!(context.contains("call_expression"), "{context}");
}
