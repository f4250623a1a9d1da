//! Files changed on disk outside the daemon (a `git checkout`, `sed`
//! through `bash`, a new module) were invisible to pyright and clangd (references stayed at
//! the old count until `lsp reload`), and typescript-language-server missed a new file on the
//! first query: no `workspace/didChangeWatchedFiles` was ever sent. The very next
//! `references` after the change must equal what a word count of the files (`rg -w`) finds.
//!
//! Each project has a function defined once and called from five modules; a `feature` branch
//! adds a call in one module and a new module that calls it. On the old code the pyright,
//! clangd and typescript cases fail (11 of 14, 7 of 9, 12 of 14); rust-analyzer watched for
//! itself then and is here because it now relies on toolvisor's watcher.

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{git, lsp_config, ok_in, project, require, word_count, write};

struct Case {
    files: Vec<(String, String)>,
    /// The feature branch: (path, content) written over or added.
    feature: Vec<(String, String)>,
    query: Value,
    extensions: &'static [&'static str],
}

fn python() -> Case {
    let mut files = vec![
        ("pyproject.toml".into(), String::new()),
        ("pkg/__init__.py".into(), String::new()),
        (
            "pkg/core.py".into(),
            "def enlist(name: str) -> str:\n    return name\n".into(),
        ),
    ];
    for i in 0..5 {
        files.push((
            format!("pkg/mod{i}.py"),
            format!("from pkg.core import enlist\n\nX{i} = enlist(\"m{i}\")\n"),
        ));
    }
    Case {
        files,
        feature: vec![
            (
                "pkg/mod0.py".into(),
                "from pkg.core import enlist\n\nX0 = enlist(\"m0\")\nY0 = enlist(\"again\")\n"
                    .into(),
            ),
            (
                "pkg/extra.py".into(),
                "from pkg.core import enlist\n\nZ = enlist(\"new\")\n".into(),
            ),
        ],
        query: json!({"op": "references", "file": "pkg/core.py", "line": 1, "symbol": "enlist"}),
        extensions: &["py"],
    }
}

fn typescript() -> Case {
    let mut files = vec![
        (
            "tsconfig.json".into(),
            "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}, \"include\": [\"src\"]}\n".into(),
        ),
        (
            "src/core.ts".into(),
            "export function enlist(name: string): string {\n    return name;\n}\n".into(),
        ),
    ];
    for i in 0..5 {
        files.push((
            format!("src/mod{i}.ts"),
            format!(
                "import {{ enlist }} from \"./core\";\n\nexport const x{i} = enlist(\"m{i}\");\n"
            ),
        ));
    }
    Case {
        files,
        feature: vec![
            (
                "src/mod0.ts".into(),
                "import { enlist } from \"./core\";\n\nexport const x0 = enlist(\"m0\");\nexport const y0 = enlist(\"again\");\n".into(),
            ),
            (
                "src/extra.ts".into(),
                "import { enlist } from \"./core\";\n\nexport const z = enlist(\"new\");\n".into(),
            ),
        ],
        query: json!({"op": "references", "file": "src/core.ts", "line": 1, "symbol": "enlist"}),
        extensions: &["ts"],
    }
}

fn c(root: &Path) -> Case {
    let mut files = vec![
        ("core.h".into(), "int enlist(int x);\n".into()),
        (
            "core.c".into(),
            "#include \"core.h\"\n\nint enlist(int x) { return x; }\n".into(),
        ),
    ];
    let mut units = vec!["core.c".to_string()];
    for i in 0..5 {
        files.push((
            format!("mod{i}.c"),
            format!("#include \"core.h\"\n\nint m{i}(void) {{ return enlist({i}); }}\n"),
        ));
        units.push(format!("mod{i}.c"));
    }
    units.push("extra.c".into());
    let dir = root.display().to_string();
    let db: Vec<Value> = units
        .iter()
        .map(|f| json!({"directory": dir, "file": format!("{dir}/{f}"), "arguments": ["cc", "-c", f]}))
        .collect();
    files.push((
        "compile_commands.json".into(),
        serde_json::to_string(&db).unwrap(),
    ));
    Case {
        files,
        feature: vec![
            (
                "mod0.c".into(),
                "#include \"core.h\"\n\nint m0(void) { return enlist(0) + enlist(10); }\n".into(),
            ),
            (
                "extra.c".into(),
                "#include \"core.h\"\n\nint extra(void) { return enlist(7); }\n".into(),
            ),
        ],
        query: json!({"op": "references", "file": "core.c", "line": 3, "symbol": "enlist"}),
        extensions: &["c", "h"],
    }
}

fn rust() -> Case {
    let mut files = vec![
        (
            "Cargo.toml".into(),
            "[package]\nname = \"outside\"\nversion = \"0.1.0\"\nedition = \"2021\"\n".into(),
        ),
        (
            "src/core.rs".into(),
            "pub fn enlist(x: u32) -> u32 {\n    x\n}\n".into(),
        ),
    ];
    let mut lib = String::from("pub mod core;\n");
    for i in 0..5 {
        lib.push_str(&format!("pub mod mod{i};\n"));
        files.push((
            format!("src/mod{i}.rs"),
            format!("pub fn m{i}() -> u32 {{\n    crate::core::enlist({i})\n}}\n"),
        ));
    }
    files.push(("src/lib.rs".into(), lib.clone()));
    Case {
        files,
        feature: vec![
            (
                "src/mod0.rs".into(),
                "pub fn m0() -> u32 {\n    crate::core::enlist(0) + crate::core::enlist(10)\n}\n"
                    .into(),
            ),
            (
                "src/extra.rs".into(),
                "pub fn extra() -> u32 {\n    crate::core::enlist(7)\n}\n".into(),
            ),
            ("src/lib.rs".into(), format!("{lib}pub mod extra;\n")),
        ],
        query: json!({"op": "references", "file": "src/core.rs", "line": 1, "symbol": "enlist"}),
        extensions: &["rs"],
    }
}

fn total(d: &TestDaemon, root: &Path, case: &Case) -> (usize, Value) {
    let v = ok_in(d, root, "lsp", case.query.clone());
    (v["total"].as_u64().unwrap() as usize, v)
}

/// On `main`, then after `git checkout feature`, then after `git checkout main` again: the
/// first `references` after each checkout equals the word count of the checked-out files.
fn checkouts(case: Case, root: &Path) -> (TestDaemon, Case) {
    for (path, content) in &case.files {
        write(root, path, content);
    }
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "main"]);
    git(root, &["checkout", "-qb", "feature"]);
    for (path, content) in &case.feature {
        write(root, path, content);
    }
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "feature"]);
    git(root, &["checkout", "-q", "main"]);
    let d = TestDaemon::start(&lsp_config(""));
    let main = word_count(root, "enlist", case.extensions);
    let (n, v) = total(&d, root, &case);
    assert_eq!(n, main, "on main, before any change: {v}");
    assert_eq!(v["complete"], true, "{v}");

    git(root, &["checkout", "-q", "feature"]);
    let feature = word_count(root, "enlist", case.extensions);
    assert!(feature > main, "the fixture's feature branch adds calls");
    let (n, v) = total(&d, root, &case);
    assert_eq!(
        n, feature,
        "the first references after `git checkout feature` (rg counts {feature}): {v}"
    );
    assert!(
        v["locations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["path"].as_str().unwrap().contains("extra.")),
        "the new module is not among them: {v}"
    );

    git(root, &["checkout", "-q", "main"]);
    let (n, v) = total(&d, root, &case);
    assert_eq!(
        n, main,
        "the first references after `git checkout main` (rg counts {main}): {v}"
    );
    (d, case)
}

#[test]
fn pyright_sees_a_git_checkout_and_a_sed_through_bash() {
    require("pyright-langserver");
    let p = project(&[]);
    let root = p.path().canonicalize().unwrap();
    let (d, case) = checkouts(python(), &root);
    // `sed` through the daemon's own `bash`: a call added to a module no query opened.
    let v = ok_in(
        &d,
        &root,
        "bash",
        json!({"command": "sed -i 's/^X1 = enlist(\"m1\")$/X1 = enlist(\"m1\")\\nW1 = enlist(\"sed\")/' pkg/mod1.py"}),
    );
    assert_eq!(v["exit_code"], 0, "{v}");
    let want = word_count(&root, "enlist", case.extensions);
    let (n, v) = total(&d, &root, &case);
    assert_eq!(
        n, want,
        "the first references after a sed (rg counts {want}): {v}"
    );
}

#[test]
fn clangd_sees_a_git_checkout_and_a_deleted_file() {
    require("clangd");
    let p = project(&[]);
    let root = p.path().canonicalize().unwrap();
    let (d, case) = checkouts(c(&root), &root);
    // A file clangd's background index holds, never opened, removed outside the daemon: its
    // references go with it (closing it would bring the index's back).
    let v = ok_in(&d, &root, "bash", json!({"command": "rm mod4.c"}));
    assert_eq!(v["exit_code"], 0, "{v}");
    let want = word_count(&root, "enlist", case.extensions);
    let (n, v) = total(&d, &root, &case);
    assert_eq!(
        n, want,
        "the first references after `rm mod4.c` (rg counts {want}): {v}"
    );
    assert!(!v["text"].as_str().unwrap().contains("mod4.c"), "{v}");
}

/// rust-analyzer watches files itself unless the client offers to; toolvisor now does, so
/// it relies on toolvisor's watcher: the same checkouts must reach it.
#[test]
fn rust_analyzer_sees_a_git_checkout() {
    require("rust-analyzer");
    let p = project(&[]);
    let root = p.path().canonicalize().unwrap();
    checkouts(rust(), &root);
}

#[test]
fn typescript_sees_a_new_module_on_the_first_query() {
    require("typescript-language-server");
    let p = project(&[]);
    let root = p.path().canonicalize().unwrap();
    checkouts(typescript(), &root);
}

/// A ninth probe (lz4 from python-lz4 4.4.5): a line added at the top of `lz4.c` by `sed`,
/// then `definition` of a function it defines, asked from `main.c` — another translation
/// unit — answered the old line, complete (5 of 7 tries) while `lz4.c` was open: clangd
/// answers across units from its index, which takes the unit's new text once it rebuilt it.
/// Each answer of five such edits in a row is now the new line.
#[test]
fn clangd_definition_in_another_unit_follows_an_edit_on_disk() {
    require("clangd");
    let p = toolvisor_tests::lsp::project(&[
        ("lib.h", "int compress_default(int n);\n"),
        (
            "lib.c",
            "#include \"lib.h\"\n\nstatic int helper(int n) { return n * 2; }\n\nint compress_default(int n) {\n  return helper(n);\n}\n",
        ),
        (
            "main.c",
            "#include \"lib.h\"\n\nint main(void) {\n  return compress_default(1);\n}\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let dir = root.display().to_string();
    let db = json!([
        {"directory": dir, "file": format!("{dir}/lib.c"), "arguments": ["cc", "-c", "lib.c"]},
        {"directory": dir, "file": format!("{dir}/main.c"), "arguments": ["cc", "-c", "main.c"]},
    ]);
    std::fs::write(root.join("compile_commands.json"), db.to_string()).unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    // lib.c open in clangd, as after any question asked from it.
    ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "lib.c", "line": 5, "symbol": "compress_default"}),
    );
    let mut text = std::fs::read_to_string(root.join("lib.c")).unwrap();
    for round in 1..=5 {
        text = format!("/* {round} */\n{text}");
        std::fs::write(root.join("lib.c"), &text).unwrap();
        let v = ok_in(
            &d,
            &root,
            "lsp",
            json!({"op": "definition", "file": "main.c", "line": 4, "symbol": "compress_default"}),
        );
        let at: Vec<String> = v["locations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| format!("{}:{}", l["path"].as_str().unwrap(), l["line"]))
            .collect();
        assert!(
            at.contains(&format!("lib.c:{}", 5 + round)),
            "round {round}: the definition's old line: {at:?} {v}"
        );
    }
}
