//! The literal prefilter changes how many files are parsed, never what matches: the same
//! searches with and without it give identical totals and identical matches, on this
//! workspace's own sources and on files built to trip a text-level filter (tokens split by
//! comments and line breaks, the literal only inside strings or comments).

use std::path::Path;

use toolvisor_structural::search::{SearchRequest, SearchResult, search};

/// The file scope of a call made from `path`'s directory (or `path` when it is one).
fn scope_of(path: &Path) -> toolvisor_files::Scope {
    let root = if path.is_dir() {
        path
    } else {
        path.parent().unwrap()
    };
    toolvisor_files::Scope::new(root, &[], false).unwrap()
}

fn run(path: &Path, pattern: &str, language: &str, prefilter: bool) -> SearchResult {
    search(&SearchRequest {
        pattern,
        language: Some(language),
        path,
        scope: &scope_of(path),
        max_results: 100_000,
        prefilter,
        threads: 2,
        cancel: None,
        limits: Default::default(),
    })
    .unwrap_or_else(|e| panic!("{pattern}: {e}"))
}

fn same_with_and_without(
    path: &Path,
    pattern: &str,
    language: &str,
) -> (SearchResult, SearchResult) {
    let with = run(path, pattern, language, true);
    let without = run(path, pattern, language, false);
    assert_eq!(with.total, without.total, "{pattern}: totals differ");
    let key = |r: &SearchResult| {
        r.matches
            .iter()
            .map(|m| (m.path.clone(), m.line, m.column, m.text.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&with), key(&without), "{pattern}: matches differ");
    assert_eq!(with.files_searched, without.files_searched);
    assert_eq!(
        without.files_parsed,
        without.files_searched - without.skipped_total
    );
    (with, without)
}

/// Copy the files with extension `ext` under `from` to `to`, keeping their relative paths,
/// skipping the directories named `skip` (a build's output, a bytecode cache).
fn copy_sources(from: &Path, to: &Path, ext: &str, skip: &str) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != skip {
            copy_sources(&path, &to.join(&name), ext, skip);
        } else if path.extension().is_some_and(|e| e == ext) {
            std::fs::create_dir_all(to).unwrap();
            let _ = std::fs::copy(&path, to.join(&name));
        }
    }
}

#[test]
fn identical_matches_on_this_workspace() {
    // A snapshot of the workspace's Rust sources, so edits made while the test runs cannot
    // make the two searches see different files.
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let snapshot = tempfile::tempdir().unwrap();
    for top in ["protocol", "workers", "supervisor", "tests", "chaos"] {
        copy_sources(
            &workspace.join(top),
            &snapshot.path().join(top),
            "rs",
            "target",
        );
    }
    let root = snapshot.path().to_path_buf();
    let mut parsed_less = 0;
    for pattern in [
        "$A.unwrap()",
        "println!($$$A)",
        "Ok($A)",
        "let $A = $B;",
        "$A?",
        "format!($$$)",
        "Some($_)",
        "$A.lock()",
        "$X == $X",
        "$A != $B",
        "$A::$B($$$C)",
        "$A += $B",
        "$A && $B",
    ] {
        let (with, without) = same_with_and_without(&root, pattern, "rust");
        assert!(without.files_searched > 20, "the workspace has Rust files");
        if with.files_parsed < without.files_parsed {
            parsed_less += 1;
        }
    }
    // Patterns with a literal parse fewer files; `$A?` has none and parses all.
    assert!(
        parsed_less >= 11,
        "the prefilter skipped files for {parsed_less} patterns"
    );
}

#[test]
fn identical_matches_on_files_built_to_fool_a_text_filter() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        // Tokens split by a comment and by line breaks: still a match.
        (
            "split.rs",
            "fn a() { x /* why */ . unwrap ( ); y\n    .\n    unwrap(); }\n",
        ),
        // The literal only in a string and a comment: no match, but the file is parsed.
        (
            "strings.rs",
            "fn b() { let s = \"x.unwrap()\"; // z.unwrap()\n}\n",
        ),
        // No literal at all: skipped unparsed.
        ("none.rs", "fn c() { let v = 1; }\n"),
        // Nested: the outer and the inner call are both matches.
        ("nested.rs", "fn d() { a.unwrap().b.unwrap(); }\n"),
        // Inside a macro's token tree there are tokens, not expressions: no match either
        // way (tree-sitter does not parse macro bodies).
        (
            "macro.rs",
            "fn e() { println!(\"{}\", r#unwrap.unwrap()); }\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let (with, without) = same_with_and_without(dir.path(), "$A.unwrap()", "rust");
    assert_eq!(with.total, 4, "{:#?}", with.matches);
    assert_eq!(without.files_parsed, 5);
    assert_eq!(with.files_parsed, 4, "none.rs needs no parse");

    std::fs::write(
        dir.path().join("p.py"),
        "print(1)\nprint (\n  2)\n# print(3)\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("q.py"), "log(1)\n").unwrap();
    let (with, _) = same_with_and_without(dir.path(), "print($A)", "python");
    assert_eq!(with.total, 2);
    assert_eq!(with.files_parsed, 1);
}

#[test]
fn operator_tokens_filter_without_changing_a_match() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        // The operator split from its operands by comments and line breaks: a match.
        ("split.rs", "fn a() { x /* c */ ==\n  x; b == c; }\n"),
        // `==` only in a string and a comment: parsed, no match.
        ("strings.rs", "fn b() { let s = \"a == a\"; // z == z\n}\n"),
        // No `==` at all (`=` and `!=` are other tokens): skipped unparsed.
        ("none.rs", "fn c() { let v = 1; let w = v != v; }\n"),
        // `===` is not a Rust token, but it contains `==`: parsed, whatever it reads as.
        ("triple.rs", "fn d() { if y == y { } }\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let (with, without) = same_with_and_without(dir.path(), "$X == $X", "rust");
    assert_eq!(with.total, 2, "{:#?}", with.matches);
    assert_eq!(without.files_parsed, 4);
    assert_eq!(with.files_parsed, 3, "none.rs needs no parse");

    // JavaScript: automatic semicolons and `===` / `==` are told apart by kind.
    std::fs::write(dir.path().join("a.js"), "if (a === a) f(1)\nf(2)\nx == x\n").unwrap();
    std::fs::write(dir.path().join("b.js"), "g(3)\n").unwrap();
    let (with, _) = same_with_and_without(dir.path(), "$A === $A", "javascript");
    assert_eq!(with.total, 1, "{:#?}", with.matches);
    assert_eq!(with.files_parsed, 1);
    let (with, _) = same_with_and_without(dir.path(), "f($A)", "javascript");
    assert_eq!(with.total, 2, "{:#?}", with.matches);
}

/// Keywords of the grammars that make them only from their text are literals too, so
/// `def $F($$$): $$$` skips a module without `def` unparsed, and no match changes.
#[test]
fn keywords_filter_without_changing_a_match() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        // Functions, a method, a nested and an async one: all matches.
        (
            "funcs.py",
            "def a(x):\n    def inner():\n        return 1\n    return inner\n\nclass C:\n    def m(self): pass\n\nasync def b(): pass\n",
        ),
        // `def` only in a string, a comment and a longer name: parsed, no match.
        (
            "strings.py",
            "s = 'def f(): pass'\n# def g(): pass\nundefined = 1\n",
        ),
        // No `def` at all: skipped unparsed.
        ("none.py", "import os\nX = [1, 2]\n"),
    ];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let (with, without) = same_with_and_without(dir.path(), "def $F($$$): $$$", "python");
    assert_eq!(with.total, 4, "{:#?}", with.matches);
    assert_eq!(without.files_parsed, 3);
    assert_eq!(with.files_parsed, 2, "none.py needs no parse");
    // `except` is made by Python's scanner, not only from its text: no literal, all parsed.
    std::fs::write(
        dir.path().join("try.py"),
        "try:\n    f()\nexcept E:\n    pass\n",
    )
    .unwrap();
    let (with, without) =
        same_with_and_without(dir.path(), "try:\n    $$$A\nexcept $E:\n    $$$B", "python");
    assert_eq!(with.total, 1, "{:#?}", with.matches);
    assert_eq!(with.files_parsed, 1, "only try.py has `try`");
    assert_eq!(without.files_parsed, 4);
}

/// The keyword literals on real code: part of Python's standard library, patterns whose only
/// fixed text is keywords, with and without the prefilter.
#[test]
fn keywords_give_identical_matches_on_pythons_standard_library() {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        ])
        .output()
        .expect("python3 runs (the machine's own)");
    let stdlib = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let snapshot = tempfile::tempdir().unwrap();
    for package in ["json", "email", "asyncio", "importlib", "logging"] {
        copy_sources(
            &stdlib.join(package),
            &snapshot.path().join(package),
            "py",
            "__pycache__",
        );
    }
    let root = snapshot.path();
    let mut parsed_less = 0;
    for pattern in [
        "def $F($$$): $$$",
        "return $A",
        "lambda $$$: $B",
        "with $A as $B: $$$",
        "raise $E from $C",
        "yield $A",
        "await $A",
        "while $C: $$$",
    ] {
        let (with, without) = same_with_and_without(root, pattern, "python");
        assert!(without.files_searched > 50, "the snapshot has Python files");
        assert!(
            with.total > 0,
            "{pattern} matched nothing in the standard library"
        );
        if with.files_parsed < without.files_parsed {
            parsed_less += 1;
        }
    }
    assert!(
        parsed_less >= 5,
        "the keyword literals skipped files for {parsed_less} patterns"
    );
}
