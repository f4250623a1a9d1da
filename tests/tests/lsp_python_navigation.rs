//! `lsp` against a real pyright: definition (with Korean and emoji before the symbol, so the
//! UTF-16 column conversion is exercised), hover, references (cut at 50, with the total),
//! document and workspace symbols, and the position errors that refuse to guess.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

const MODELS: &str = r#"class Greeter:
    """Says hello to people."""

    def greet(self, name: str) -> str:
        return "hi " + name


def make() -> Greeter:
    return Greeter()


VALUE = 42
"#;

const MAIN: &str = r#"from app.models import Greeter, make
s = '한글😀 이모지'; g = make(); h = Greeter()
print(g.greet("x"), s, h)
"#;

#[test]
fn pyright_definition_hover_references_symbols() {
    require("pyright-langserver");
    let mut refs = String::from("from app.models import VALUE\n");
    for i in 0..60 {
        refs.push_str(&format!("v{i} = VALUE + {i}\n"));
    }
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/models.py", MODELS),
        ("app/main.py", MAIN),
        ("app/refs.py", &refs),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));

    // Definition of `make` after non-ASCII text on the same line.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 2, "symbol": "make"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("app/models.py:8: def make() -> Greeter:"),
        "{v}"
    );
    // Every answer names the server's state; a file-local answer may come while pyright
    // still scans the workspace, and says so.
    assert!(
        matches!(v["server"]["state"].as_str(), Some("ready" | "indexing")),
        "{v}"
    );
    assert_eq!(v["server"]["position_encoding"], "utf-16", "{v}");
    assert_eq!(v["locations"][0]["line"], 8);

    // The same line, another symbol after the emoji: Greeter the class, not make.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 2, "symbol": "Greeter"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("app/models.py:1: class Greeter:"),
        "{v}"
    );

    // Hover: signature as markdown.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "app/main.py", "line": 3, "symbol": "greet"}),
    );
    let md = v["markdown"].as_str().unwrap();
    assert!(
        md.contains("greet(self, name: str) -> str") || md.contains("greet(name: str) -> str"),
        "{md}"
    );
    // Every answer says what it rests on.
    assert_eq!(
        (&v["readiness"], &v["complete"]),
        (&json!("ready"), &json!(true)),
        "{v}"
    );

    // References: 61 uses of VALUE plus its definition and the import; 50 a page.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "app/models.py", "line": 12, "symbol": "VALUE"}),
    );
    let total = v["total"].as_u64().unwrap();
    assert!(total >= 62, "total {total}: {v}");
    assert_eq!(v["truncated"], true);
    // A list cut at the bound is not the server's whole answer.
    assert_eq!(
        (&v["readiness"], &v["complete"]),
        (&json!("ready"), &json!(false)),
        "{v}"
    );
    assert_eq!(v["locations"].as_array().unwrap().len(), 50);
    assert!(
        v["text"].as_str().unwrap().contains(&format!(
            "(showing 1–50 of {total} references; `offset: 50` shows the next)"
        )),
        "{v}"
    );
    assert_eq!(v["next_offset"], 50, "{v}");

    // References of the class across files.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "app/models.py", "line": 1, "symbol": "Greeter"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("app/main.py:1:") && text.contains("app/models.py:8:"),
        "{text}"
    );
    assert_eq!(v["truncated"], false);
    assert_eq!(
        (&v["readiness"], &v["complete"]),
        (&json!("ready"), &json!(true)),
        "{v}"
    );

    // Document symbols: the top level by default, a class counting its members, whole while
    // the server may still index the project.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "symbols", "file": "app/models.py"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("1: class Greeter ("), "{text}");
    assert!(!text.contains("method greet"), "{text}");
    assert!(text.contains("8: function make"), "{text}");
    assert!(
        text.contains("`depth: 1`"),
        "says how to see the members: {text}"
    );
    assert_eq!(v["complete"], true, "{v}");
    // One level deeper: the method nested in the class.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "symbols", "file": "app/models.py", "depth": 1}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("1: class Greeter\n"), "{text}");
    assert!(text.contains("  4: method greet"), "{text}");
    assert!(text.contains("8: function make"), "{text}");

    // Workspace symbols.
    let v = ok_in(&d, w, "lsp", json!({"op": "symbols", "query": "Greeter"}));
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("app/models.py:1: class Greeter"),
        "{v}"
    );

    // Positions are never guessed.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 2}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs);
    assert!(e.message.contains("never guessed"), "{e}");
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 3, "symbol": "nothere"}),
    );
    assert!(
        e.message
            .contains("app/main.py:3: print(g.greet(\"x\"), s, h)"),
        "{e}"
    );
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "app/models.py", "line": 5, "symbol": "Greeter"}),
    );
    assert!(e.message.contains("not on"), "{e}");
    // `e` stands on line 2 only inside names: not a name there.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "app/main.py", "line": 2, "symbol": "e"}),
    );
    assert!(
        e.message
            .contains("only inside longer names (`make`, `Greeter`)"),
        "{e}"
    );
    // ` = ` three times: which one?
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "app/main.py", "line": 2, "symbol": " = "}),
    );
    assert!(
        e.message.contains("occurs 3 times") && e.message.contains("1: column"),
        "{e}"
    );
    assert!(e.hint.contains("occurrence"), "{e}");
    // Picking an occurrence explicitly.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 3, "symbol": "greet", "occurrence": 1}),
    );
    assert!(
        v["text"].as_str().unwrap().contains("app/models.py:4:"),
        "{v}"
    );
}

#[test]
fn a_symbol_found_only_inside_a_longer_name_is_refused_naming_it_never_answered_for_that_name() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        (
            "seg.py",
            "class Segment:\n    \"\"\"Segments of text.\"\"\"\n\n\nparts = [Segment(), Segment()]\n\n\ndef test_Segment():\n    return Segment_of(Segment)\n\n\ndef Segment_of(x):\n    return x\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // Line 2 is the docstring: `Segment` there is part of `Segments`. Line 8 defines
    // `test_Segment`: asked there, the server answered about `test_Segment` (one reference,
    // complete), and a rename renamed the test function.
    for (line, longer) in [(2, "`Segments`"), (8, "`test_Segment`")] {
        for (tool, args) in [
            (
                "lsp",
                json!({"op": "references", "file": "seg.py", "line": line, "symbol": "Segment"}),
            ),
            (
                "lsp",
                json!({"op": "definition", "file": "seg.py", "line": line, "symbol": "Segment"}),
            ),
            (
                "lsp_rename",
                json!({"file": "seg.py", "line": line, "symbol": "Segment", "new_name": "Piece", "dry_run": true}),
            ),
        ] {
            let e = err_in(&d, w, tool, args.clone());
            assert_eq!(e.kind, ErrorKind::InvalidArgs, "{args}: {e}");
            assert!(
                e.message
                    .contains(&format!("only inside longer names ({longer})")),
                "{args}: {e}"
            );
            assert!(e.hint.contains("as a name of its own"), "{e}");
        }
    }
    // Line 9 holds `Segment_of` and `Segment`: the one standing alone is the one asked about.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "seg.py", "line": 9, "symbol": "Segment"}),
    );
    assert_eq!(v["total"], 4, "{v}");
    assert_eq!(v["complete"], true, "{v}");
    // On its own line it is found, complete.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "seg.py", "line": 1, "symbol": "Segment"}),
    );
    assert_eq!(v["total"], 4, "{v}");
    assert_eq!(v["complete"], true, "{v}");
}

const PROBE_I18N: &str = "def _gettext(message: str) -> str:\n    return message\n";
const PROBE_NUMBER: &str = "from .i18n import _gettext as _\n\n\ndef intcomma(value: int) -> str:\n    return _(\"n\") + str(value)\n\n\ndef intword(value: int) -> str:\n    \"\"\"Words.\n\n    >>> intword(100)\n    '100'\n    \"\"\"\n    return intcomma(value)\n";
const PROBE_TIME: &str = "from .number import intcomma\n\n\ndef natural(v: int) -> str:\n    return intcomma(v)\n\n\ndef other(v: int) -> str:\n    return intcomma(v + 1)\n";

/// A sixth probe (humanize 4.9): pyright answered three questions as complete that were not.
/// Callers through an import alias (`from .i18n import _gettext as _`, then `_(…)`): "none
/// found". A rename's doctest lines (`>>> intword(100)`): left with the old name. References
/// asked where pyright can no longer resolve the name (its import broke): "no references",
/// complete. Each now says `complete: false` and why.
#[test]
fn aliases_doctests_and_an_unresolved_name_make_pyright_answers_partial() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        ("pkg/i18n.py", PROBE_I18N),
        ("pkg/number.py", PROBE_NUMBER),
        ("pkg/time.py", PROBE_TIME),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "pkg/i18n.py", "line": 1, "symbol": "_gettext"}),
    );
    assert_eq!(
        v["complete"], false,
        "a call through `_` is not counted: {v}"
    );
    let reason = v["partial_reason"].as_str().unwrap();
    assert!(reason.contains("pkg/number.py:5"), "{v}");

    let v = ok_in(
        &d,
        w,
        "lsp_rename",
        json!({"file": "pkg/number.py", "line": 8, "symbol": "intword", "new_name": "int_word", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "the doctest keeps the old name: {v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap()
            .contains("pkg/number.py:11"),
        "{v}"
    );

    // The definition renamed outside the daemon: `intcomma` in time.py resolves to nothing.
    std::fs::write(
        w.join("pkg/number.py"),
        PROBE_NUMBER.replace("def intcomma(", "def intcomma2("),
    )
    .unwrap();
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "pkg/time.py", "line": 5, "symbol": "intcomma"}),
    );
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap()
            .contains("leave out the place asked about"),
        "{v}"
    );
}

/// A seventh probe (packaging 24.1): `tests/requirements.txt` made `tests/` a pyright root of
/// its own, which resolved `import packaging` to an installed copy, not the project's `src/`:
/// a rename's diagnostics and `definition` from a test answered about that copy, complete. A
/// requirements file below a project is no root of its own.
#[test]
fn a_requirements_file_in_tests_makes_no_root_of_its_own() {
    require("pyright-langserver");
    let p = project(&[
        (
            "pyproject.toml",
            "[project]\nname = \"pkg\"\nversion = \"1\"\n",
        ),
        ("src/pkg/__init__.py", ""),
        (
            "src/pkg/util.py",
            "def canonicalize(name: str) -> str:\n    return name.lower()\n",
        ),
        ("tests/requirements.txt", "pytest\n"),
        (
            "tests/test_util.py",
            "from pkg.util import canonicalize\n\n\ndef test_it() -> None:\n    assert canonicalize(\"A\") == \"a\"\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "definition", "file": "tests/test_util.py", "line": 5, "symbol": "canonicalize"}),
    );
    assert_eq!(
        v["locations"][0]["path"], "src/pkg/util.py",
        "the test's root is not the project's: {v}"
    );
    let s = ok_in(&d, p.path(), "lsp", json!({"op": "status"}));
    let roots: Vec<&str> = s["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["root"].as_str())
        .collect();
    assert!(
        roots.iter().all(|r| !r.ends_with("/tests")),
        "a server was started for tests/: {roots:?}"
    );
}
