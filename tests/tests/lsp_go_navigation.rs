//! gopls (Debian's) on a Go module made here: definition across files, references in every
//! file, hover with the signature and doc comment, a type error reported by diagnostics, and
//! `lsp_rename` renaming a function in every file of the package (the module still builds).

use std::process::Command;

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::debug::{go_env, go_vars, require_go};
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require, says_cut_at};

const GO_MOD: &str = "module example.com/calc\n\ngo 1.19\n";

const CALC: &str = "package main

// Add returns the sum of a and b.
func Add(a, b int) int {
\treturn a + b
}
";

const MAIN: &str = "package main

import \"fmt\"

func main() {
\tx := Add(1, 2)
\ty := Add(x, 3)
\tfmt.Println(x, y, label())
}
";

const LABEL: &str = "package main

func label() string {
\treturn Add(4, 5)
}
";

#[test]
fn gopls_navigates_hovers_diagnoses_and_renames_a_go_module() {
    require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", GO_MOD),
        ("calc.go", CALC),
        ("main.go", MAIN),
        ("label.go", LABEL),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));

    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "definition", "file": "main.go", "line": 6, "symbol": "Add"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("calc.go:4: func Add(a, b int) int {"),
        "{v}"
    );

    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "calc.go", "line": 4, "symbol": "Add"}),
    );
    let mut sites: Vec<(String, u64)> = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap().to_string(),
                l["line"].as_u64().unwrap(),
            )
        })
        .collect();
    sites.sort();
    let want = [
        ("calc.go", 4),
        ("label.go", 4),
        ("main.go", 6),
        ("main.go", 7),
    ]
    .map(|(f, l)| (f.to_string(), l));
    assert_eq!(sites, want, "{v}");
    assert_eq!(v["complete"], true, "{v}");

    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "main.go", "line": 7, "symbol": "Add"}),
    );
    let hover = v["markdown"].as_str().unwrap();
    assert!(
        hover.contains("func Add(a int, b int) int")
            && hover.contains("Add returns the sum of a and b"),
        "{v}"
    );

    // label() returns an int where a string is declared: the one error, on its line.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "label.go"}),
    );
    let diags = v["diagnostics"].as_array().unwrap();
    let errors: Vec<_> = diags.iter().filter(|d| d["severity"] == "error").collect();
    assert_eq!(errors.len(), 1, "{v}");
    assert_eq!(errors[0]["line"], 4, "{v}");
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("cannot use"),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "main.go"}),
    );
    assert_eq!(v["diagnostics"], json!([]), "{v}");

    let v = ok_in(
        &d,
        w,
        "lsp_rename",
        json!({"file": "main.go", "line": 6, "symbol": "Add", "new_name": "Sum"}),
    );
    // The declaration and its doc comment, and each call.
    assert_eq!(
        v["files"],
        json!([{"edits": 2, "path": "calc.go"}, {"edits": 1, "path": "label.go"},
               {"edits": 2, "path": "main.go"}]),
        "{v}"
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("renamed `Add` to `Sum`"),
        "{v}"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("calc.go")).unwrap(),
        CALC.replace("Add", "Sum")
    );
    assert_eq!(
        std::fs::read_to_string(w.join("main.go")).unwrap(),
        MAIN.replace("Add", "Sum")
    );
    assert_eq!(
        std::fs::read_to_string(w.join("label.go")).unwrap(),
        LABEL.replace("Add", "Sum")
    );
    // The renamed package type-checks as before: only label.go's own error remains.
    let vet = Command::new("go")
        .args(["vet", "./..."])
        .current_dir(w)
        .envs(go_vars())
        .output()
        .expect("go vet");
    let said = String::from_utf8_lossy(&vet.stderr);
    assert!(
        said.contains("label.go:4") && !said.contains("undefined"),
        "{said}"
    );
}

/// A fresh probe on pflag: `diagnostics "*"` answered `resource_failed` ("it did not check
/// the project") whenever `go vet` found anything, since vet prints no severity and writes to
/// stderr; and gopls cuts workspace symbols at 100 without a word, so a list of exactly 100
/// said complete. Both now answer right.
#[test]
fn go_vet_findings_are_diagnostics_and_a_symbol_list_gopls_cut_says_so() {
    require_go();
    require("gopls");
    let values: String = (0..120)
        .map(|i| format!("func Value{i}() int {{ return {i} }}\n\n"))
        .collect();
    let p = project(&[
        ("go.mod", GO_MOD),
        (
            "main.go",
            "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"done\\n\")\n}\n",
        ),
        ("values.go", &format!("package main\n\n{values}")),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "*"}));
    let diags = v["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1, "{v}");
    assert_eq!(diags[0]["path"], "main.go", "{v}");
    assert_eq!(diags[0]["line"], 6, "{v}");
    assert_eq!(diags[0]["severity"], "warning", "{v}");
    assert!(
        diags[0]["message"]
            .as_str()
            .unwrap()
            .contains("redundant newline"),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "symbols", "query": "Value", "file": "main.go"}),
    );
    says_cut_at(&v, 100);
}

/// A fresh probe on creack/pty: gopls loads only this machine's GOOS and GOARCH, so the
/// calls in `pty_darwin.go` (and a file behind a custom build tag) were neither listed nor
/// renamed, and a rename said complete while breaking the darwin build. They are named now.
#[test]
fn uses_in_files_another_build_takes_make_references_and_renames_partial() {
    require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", "module example.com/pty\n\ngo 1.19\n"),
        (
            "ioctl.go",
            "//go:build !windows\n\npackage pty\n\nfunc ioctl(fd, cmd uintptr) error {\n\treturn nil\n}\n",
        ),
        (
            "pty_linux.go",
            "package pty\n\nfunc open() error {\n\treturn ioctl(0, 1)\n}\n",
        ),
        (
            "pty_darwin.go",
            "package pty\n\nfunc open() error {\n\t// ioctl in a comment is no use\n\treturn ioctl(0, 2)\n}\n",
        ),
        (
            "tagged.go",
            "//go:build integration\n\npackage pty\n\nvar probe = ioctl\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "references", "file": "ioctl.go", "line": 5, "symbol": "ioctl"}),
    );
    assert_eq!(v["total"], 2, "the definition and the linux call: {v}");
    assert_eq!(v["complete"], false, "{v}");
    let why = v["partial_reason"].as_str().unwrap();
    assert!(
        why.contains("pty_darwin.go:5") && why.contains("tagged.go:5"),
        "{v}"
    );
    assert!(!why.contains("pty_darwin.go:4"), "a comment: {v}");
    let v = ok_in(
        &d,
        w,
        "lsp_rename",
        json!({"file": "ioctl.go", "line": 5, "symbol": "ioctl", "new_name": "ioctlCall", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap()
            .contains("pty_darwin.go:5"),
        "{v}"
    );
}

/// A fresh probe on google/uuid: `go vet` stops at the first type error of a package, so
/// `diagnostics "*"` gave 1 of 6 (and cut the error's `have`/`want` lines) with no sign of a
/// gap. The answer now says it may miss more and how to list them.
#[test]
fn go_vets_first_type_error_is_said_to_be_maybe_not_the_only_one() {
    require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", GO_MOD),
        (
            "calc.go",
            "package main\n\nfunc Must(a, b, c int) int {\n\treturn a + b + c\n}\n",
        ),
        (
            "main.go",
            "package main\n\nfunc main() {\n\t_ = Must(1, 2)\n\t_ = Must(3, 4)\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": "*"}));
    assert!(v["total"].as_u64().unwrap() >= 1, "{v}");
    let first = v["diagnostics"][0]["message"].as_str().unwrap();
    assert!(
        first.contains("not enough arguments") && first.contains("want (int, int, int)"),
        "the message with its have/want lines: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap()
            .contains("go build -gcflags=-e ./..."),
        "{v}"
    );
}

/// A fresh probe on google/uuid: a write to `node_js.go` (left out of this build) said "no
/// new diagnostics" with no note, though it no longer compiled for js. The write now says the
/// server does not check that file here.
#[test]
fn a_write_to_a_file_another_build_takes_says_it_is_not_checked_here() {
    require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", "module example.com/pty\n\ngo 1.19\n"),
        (
            "pty.go",
            "package pty\n\nfunc Open() int {\n\treturn 1\n}\n",
        ),
        (
            "pty_darwin.go",
            "package pty\n\nfunc darwinOnly() int {\n\treturn 2\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "pty_darwin.go", "old_text": "return 2", "new_text": "return undefinedThing"}),
    );
    let notes = v["diagnostics"]["notes"].to_string();
    assert!(
        notes.contains("pty_darwin.go") && notes.contains("build constraint"),
        "{v}"
    );
    // A file this build takes: no such note.
    let v = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "pty.go", "old_text": "return 1", "new_text": "return 3"}),
    );
    assert!(
        !v["diagnostics"]["notes"]
            .to_string()
            .contains("build constraint"),
        "{v}"
    );
}

const VALUE_GO: &str = "package value\n\nfunc TypeString(n int, qualified bool) string {\n\tif qualified {\n\t\treturn \"q\"\n\t}\n\treturn \"\"\n}\n";
const PATH_GO: &str = "package cmp\n\nimport \"example.com/gocmp/internal/value\"\n\nfunc Name() string {\n\treturn value.TypeString(1, true)\n}\n";

/// A seventh probe (go-cmp 0.5.9): right after a package's signature changed on disk, the
/// `diagnostics` of a file calling it — open in gopls, itself unchanged — answered its list
/// from before the change, complete (3 of 16 answers in a loop): gopls diagnoses the packages
/// that depend on a change only after its `diagnosticsDelay`, with no progress meanwhile, and
/// the answer took the list once the server had been quiet for `settle_ms`. Now such a list
/// counts as current only past that delay; each answer of a loop of changes is right.
#[test]
fn a_callers_diagnostics_follow_a_change_in_the_package_it_imports() {
    toolvisor_tests::debug::require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", "module example.com/gocmp\n\ngo 1.19\n"),
        ("internal/value/name.go", VALUE_GO),
        ("cmp/path.go", PATH_GO),
    ]);
    let w = p.path();
    // A package with some weight, as go-cmp's: gopls takes longer than `settle_ms` to
    // diagnose it again.
    for i in 0..120 {
        let funcs: String = (0..40)
            .map(|j| {
                format!("func F{i}x{j}(a, b int) int {{\n\tif a > b {{\n\t\treturn a - b + len(value.TypeString(a, true))\n\t}}\n\treturn b - a\n}}\n\n")
            })
            .collect();
        std::fs::write(
            w.join(format!("cmp/gen{i}.go")),
            format!("package cmp\n\nimport \"example.com/gocmp/internal/value\"\n\n{funcs}"),
        )
        .unwrap();
    }
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let errors = |d: &TestDaemon| {
        let v = ok_in(
            d,
            w,
            "lsp",
            json!({"op": "diagnostics", "file": "cmp/path.go"}),
        );
        assert_eq!(v["complete"], true, "{v}");
        v["diagnostics"]
            .as_array()
            .unwrap_or_else(|| panic!("no diagnostics list: {v}"))
            .iter()
            .filter(|x| x["severity"] == "error")
            .count()
    };
    assert_eq!(errors(&d), 0);
    let broken = VALUE_GO.replace("qualified bool)", "qualified bool, depth int)");
    for round in 0..5 {
        std::fs::write(w.join("internal/value/name.go"), &broken).unwrap();
        assert_eq!(errors(&d), 1, "round {round}: the old list after the break");
        std::fs::write(w.join("internal/value/name.go"), VALUE_GO).unwrap();
        assert_eq!(errors(&d), 0, "round {round}: the old list after the fix");
    }
}

/// A seventh probe (go-cmp 0.5.9): renaming an interface method (`PathStep.Values`) renamed
/// its declaration and the calls through it, not the 7 methods implementing it, and said
/// complete; the build broke. Such a rename now names the implementations it leaves.
#[test]
fn renaming_an_interface_method_names_the_implementations_it_leaves() {
    toolvisor_tests::debug::require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", "module example.com/steps\n\ngo 1.19\n"),
        (
            "path.go",
            "package steps\n\ntype PathStep interface {\n\tValues() int\n}\n\ntype Index struct{}\n\nfunc (Index) Values() int { return 1 }\n\ntype Field struct{}\n\nfunc (Field) Values() int { return 2 }\n\nfunc Sum(steps []PathStep) int {\n\tn := 0\n\tfor _, s := range steps {\n\t\tn += s.Values()\n\t}\n\treturn n\n}\n",
        ),
    ]);
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let v = ok_in(
        &d,
        p.path(),
        "lsp_rename",
        json!({"file": "path.go", "line": 4, "symbol": "Values", "new_name": "ValuePair", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "{v}");
    let reason = v["partial_reason"].as_str().unwrap();
    assert!(
        reason.contains("path.go:9") && reason.contains("path.go:13"),
        "the implementations are not named: {v}"
    );
    // Renaming a type leaves the interfaces it implements alone, rightly: no gap.
    let v = ok_in(
        &d,
        p.path(),
        "lsp_rename",
        json!({"file": "path.go", "line": 7, "symbol": "Index", "new_name": "Position", "dry_run": true}),
    );
    assert_eq!(v["complete"], true, "{v}");
}

const VETTED_A: &str = "package main

import \"fmt\"

func label() int {
\tfmt.Sprintf(\"unused %d\", 1)
\treturn Add(4, 5)
}
";

const VETTED_B: &str = "package main

import \"fmt\"

func show() {
\tfmt.Printf(\"%d\\n\", \"not a number\")
}
";

/// A tenth probe's leftover (kr/text): gopls runs no analyzer on a package with type errors,
/// so the write that broke the package made its vet warnings go, and the write that fixed it
/// reported them back as new though the run had been told of them before the break. A
/// warning that went while an error was there is not news when the fix brings it back.
#[test]
fn the_fix_of_a_type_error_does_not_report_the_packages_old_warnings_as_new() {
    require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", GO_MOD),
        ("calc.go", CALC),
        ("label.go", VETTED_A),
        ("show.go", VETTED_B),
        ("main.go", MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&format!("{}{}", go_env(), lsp_config("")));
    let warnings = |file: &str| {
        let v = ok_in(&d, w, "lsp", json!({"op": "diagnostics", "file": file}));
        v["diagnostics"]
            .as_array()
            .unwrap_or_else(|| panic!("no diagnostics list: {v}"))
            .iter()
            .filter(|x| x["severity"] == "warning")
            .count()
    };
    // The analyzers' warnings, as the run first sees them.
    assert!(warnings("label.go") >= 1 && warnings("show.go") >= 1);
    let new_of = |v: &serde_json::Value| {
        v["diagnostics"]["new"]
            .as_array()
            .unwrap_or_else(|| panic!("no new diagnostics list: {v}"))
            .iter()
            .map(|x| format!("{}:{}: {}", x["path"], x["line"], x["message"]))
            .collect::<Vec<_>>()
    };
    for round in 0..2 {
        let broke = ok_in(
            &d,
            w,
            "edit",
            json!({"path": "label.go", "old_text": "Add(4, 5)", "new_text": "Add(\"4\", 5)"}),
        );
        let new = new_of(&broke);
        assert!(
            new.len() == 1 && new[0].contains("label.go"),
            "round {round}: the break's one error: {new:?}"
        );
        let fixed = ok_in(
            &d,
            w,
            "edit",
            json!({"path": "label.go", "old_text": "Add(\"4\", 5)", "new_text": "Add(4, 5)"}),
        );
        assert!(
            new_of(&fixed).is_empty(),
            "round {round}: the warnings from before the break came back as new: {fixed}"
        );
    }
    // A warning the fix did not bring back, added later, is news again.
    let added = ok_in(
        &d,
        w,
        "edit",
        json!({"path": "show.go", "old_text": "func show() {", "new_text": "func show() {\n\tfmt.Printf(\"%s\\n\", 3)"}),
    );
    assert!(
        new_of(&added).iter().any(|m| m.contains("show.go")),
        "a new warning is news: {added}"
    );
}
