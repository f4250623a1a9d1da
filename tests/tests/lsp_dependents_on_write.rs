//! An edit that broke five importing files reported "no new diagnostics":
//! only the edited file was looked at. A write now also checks its dependents — the files
//! that import it (found by their import lines; pyright and clangd check only the files open
//! in them), or every file the server published for after the write (rust-analyzer's
//! `cargo check`) — at most 20, saying how many; what a dependent already had before the
//! write is not news.

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

fn new_paths(v: &Value) -> Vec<String> {
    let mut paths: Vec<String> = v["diagnostics"]["new"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics in {v}"))
        .iter()
        .map(|d| d["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

fn broken_importers(d: &TestDaemon, w: &Path, edit: Value, want: &[&str]) -> Value {
    let v = ok_in(d, w, "edit", edit);
    assert_eq!(
        new_paths(&v),
        want,
        "the write did not report what it broke in its importers: {v}"
    );
    let text = v["diagnostics"]["text"].as_str().unwrap();
    assert!(text.contains("(also checked "), "{v}");
    v
}

#[test]
fn pyright_reports_the_importers_a_signature_change_breaks() {
    require("pyright-langserver");
    let mut files = vec![
        ("pyproject.toml".to_string(), String::new()),
        ("pkg/__init__.py".to_string(), String::new()),
        (
            "pkg/core.py".to_string(),
            "def enlist(name: str) -> str:\n    return name\n".to_string(),
        ),
        // An error that was there before the write: not news.
        (
            "pkg/old.py".to_string(),
            "from pkg.core import enlist\n\nOLD: int = \"text\"\nY = enlist(\"x\")\n".to_string(),
        ),
        (
            "pkg/unrelated.py".to_string(),
            "import os\n\nX = os.sep\n".to_string(),
        ),
    ];
    for i in 0..5 {
        files.push((
            format!("pkg/mod{i}.py"),
            format!("from pkg.core import enlist\n\nX{i} = enlist(\"m{i}\")\n"),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let p = project(&refs);
    let d = TestDaemon::start(&lsp_config(""));
    let v = broken_importers(
        &d,
        p.path(),
        json!({"path": "pkg/core.py", "old_text": "def enlist(name: str)", "new_text": "def enlist(name: str, count: int)"}),
        &[
            "pkg/mod0.py",
            "pkg/mod1.py",
            "pkg/mod2.py",
            "pkg/mod3.py",
            "pkg/mod4.py",
            "pkg/old.py",
        ],
    );
    let messages: Vec<&str> = v["diagnostics"]["new"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["message"].as_str().unwrap())
        .collect();
    assert!(
        messages.iter().all(|m| m.contains("count")),
        "old.py's earlier error reported as new: {v}"
    );
    let checked = v["diagnostics"]["dependents"]["checked"]
        .as_array()
        .unwrap();
    assert_eq!(checked.len(), 6, "{v}");
    // Fixed: nothing new anywhere.
    let v = ok_in(
        &d,
        p.path(),
        "edit",
        json!({"path": "pkg/core.py", "old_text": "def enlist(name: str, count: int)", "new_text": "def enlist(name: str, count: int = 1)"}),
    );
    assert!(new_paths(&v).is_empty(), "{v}");
}

#[test]
fn clangd_reports_the_files_a_header_change_breaks() {
    require("clangd");
    let mut files = vec![
        ("compile_flags.txt".to_string(), "-std=c11\n".to_string()),
        ("core.h".to_string(), "int enlist(int x);\n".to_string()),
    ];
    for i in 0..5 {
        files.push((
            format!("mod{i}.c"),
            format!("#include \"core.h\"\n\nint m{i}(void) {{ return enlist({i}); }}\n"),
        ));
    }
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let p = project(&refs);
    let d = TestDaemon::start(&lsp_config(""));
    broken_importers(
        &d,
        p.path(),
        json!({"path": "core.h", "old_text": "int enlist(int x);", "new_text": "int enlist(int x, int y);"}),
        &["mod0.c", "mod1.c", "mod2.c", "mod3.c", "mod4.c"],
    );
}

#[test]
fn rust_analyzer_reports_what_cargo_check_finds_in_other_files() {
    require("rust-analyzer");
    let mut files = vec![
        (
            "Cargo.toml".to_string(),
            "[package]\nname = \"deps\"\nversion = \"0.1.0\"\nedition = \"2021\"\n".to_string(),
        ),
        (
            "src/core.rs".to_string(),
            "pub fn enlist(x: u32) -> u32 {\n    x\n}\n".to_string(),
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
    files.push(("src/lib.rs".to_string(), lib));
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    let p = project(&refs);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(&format!(
        "\n[trust]\nroots = [{:?}]\n",
        root.display().to_string()
    )));
    broken_importers(
        &d,
        &root,
        json!({"path": "src/core.rs", "old_text": "pub fn enlist(x: u32)", "new_text": "pub fn enlist(x: u32, y: u32)"}),
        // core.rs itself: `y` is unused now.
        &[
            "src/core.rs",
            "src/mod0.rs",
            "src/mod1.rs",
            "src/mod2.rs",
            "src/mod3.rs",
            "src/mod4.rs",
        ],
    );
}

/// A fresh probe (marshmallow, google/uuid): importers written as `from pkg import (\n …,
/// core,\n)` were not found (only an import's first line was read), and a Go write checked no
/// dependent at all (the files of its package import nothing; an `import ( … )` block was not
/// read either). Both are dependents now.
#[test]
fn multi_line_imports_and_a_go_package_are_dependents() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        (
            "pkg/core.py",
            "def enlist(name: str) -> str:\n    return name\n",
        ),
        (
            "pkg/user.py",
            "from pkg import (\n    core,\n)\n\nX = core.enlist(\"x\")\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    broken_importers(
        &d,
        p.path(),
        json!({"path": "pkg/core.py", "old_text": "def enlist(name: str)", "new_text": "def enlist(name: str, count: int)"}),
        &["pkg/user.py"],
    );

    toolvisor_tests::debug::require_go();
    require("gopls");
    let g = project(&[
        ("go.mod", "module example.com/calc\n\ngo 1.19\n"),
        (
            "calc.go",
            "package calc\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n",
        ),
        (
            "twice.go",
            "package calc\n\nfunc Twice(a int) int {\n\treturn Add(a, a)\n}\n",
        ),
        (
            "cmd/main.go",
            "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/calc\"\n)\n\nfunc main() {\n\tfmt.Println(calc.Add(1, 2))\n}\n",
        ),
    ]);
    let d = TestDaemon::start(&format!(
        "{}{}",
        toolvisor_tests::debug::go_env(),
        lsp_config("")
    ));
    broken_importers(
        &d,
        g.path(),
        json!({"path": "calc.go", "old_text": "func Add(a, b int) int", "new_text": "func Add(a, b, c int) int"}),
        &["cmd/main.go", "twice.go"],
    );
}

/// A fifth probe (@tanstack/query-core, neverthrow): a signature change in `queryCache.ts`
/// reported the errors of the files importing it, not those of `queryObserver.ts`, which
/// reaches it through `queryClient.ts`, nor those of the files importing a barrel (`from
/// './'`) that re-exports it. Both are dependents now, counted as reached through others.
#[test]
fn importers_of_importers_and_of_a_barrel_are_checked_too() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
        ),
        (
            "src/queryCache.ts",
            "export class QueryCache {\n  build(key: string): number {\n    return key.length;\n  }\n}\n",
        ),
        (
            "src/queryClient.ts",
            "import { QueryCache } from './queryCache';\n\nexport class QueryClient {\n  cache: QueryCache = new QueryCache();\n}\n",
        ),
        (
            "src/queryObserver.ts",
            "import { QueryClient } from './queryClient';\n\nexport function observe(client: QueryClient): number {\n  return client.cache.build('q');\n}\n",
        ),
        ("src/index.ts", "export * from './queryCache';\n"),
        (
            "src/app/main.ts",
            "import { QueryCache } from '..';\n\nexport const n: number = new QueryCache().build('m');\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = broken_importers(
        &d,
        p.path(),
        json!({"path": "src/queryCache.ts", "old_text": "build(key: string)", "new_text": "build(key: string, depth: number)"}),
        &["src/app/main.ts", "src/queryObserver.ts"],
    );
    let text = v["diagnostics"]["text"].as_str().unwrap();
    assert!(
        text.contains(" indirectly)"),
        "the files reached through others are not counted: {v}"
    );
}

/// A sixth probe (humanize 4.9, immer 10): an `apply_patch` that deleted a module, or moved
/// it (`*** Move to:`), reported nothing of the files importing it — a delete gave no
/// `diagnostics` at all, a move "no new diagnostics" — while pyright and tsc said their
/// imports no longer resolve. The importers of a deleted or moved-away file are dependents.
#[test]
fn a_deleted_or_moved_module_breaks_its_importers_and_the_write_says_so() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", ""),
        ("pkg/__init__.py", ""),
        (
            "pkg/filesize.py",
            "def naturalsize(n: int) -> str:\n    return str(n)\n",
        ),
        ("pkg/util.py", "def clamp(n: int) -> int:\n    return n\n"),
        (
            "pkg/api.py",
            "from pkg.filesize import naturalsize\nfrom pkg.util import clamp\n\nX = naturalsize(clamp(1))\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let w = p.path();
    // Read once, so the importer is open in pyright as an agent's session would have it.
    ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "pkg/api.py"}),
    );
    let v = ok_in(
        &d,
        w,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Update File: pkg/filesize.py\n*** Move to: pkg/filesz.py\n*** End Patch\n"}),
    );
    assert_eq!(
        new_paths(&v),
        ["pkg/api.py"],
        "a move did not report the importer it broke: {v}"
    );
    let v = ok_in(
        &d,
        w,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Delete File: pkg/util.py\n*** End Patch\n"}),
    );
    assert_eq!(
        new_paths(&v),
        ["pkg/api.py"],
        "a delete did not report the importer it broke: {v}"
    );

    require("typescript-language-server");
    let t = project(&[
        (
            "tsconfig.json",
            r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
        ),
        (
            "src/utils/errors.ts",
            "export function die(msg: string): never {\n  throw new Error(msg);\n}\n",
        ),
        ("src/internal.ts", "export * from './utils/errors';\n"),
        (
            "src/main.ts",
            "import { die } from './utils/errors';\n\nexport function run(): void {\n  die('x');\n}\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    ok_in(
        &d,
        t.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "src/main.ts"}),
    );
    let v = ok_in(
        &d,
        t.path(),
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Update File: src/utils/errors.ts\n*** Move to: src/utils/errs.ts\n*** End Patch\n"}),
    );
    assert_eq!(
        new_paths(&v),
        ["src/internal.ts", "src/main.ts"],
        "a move did not report the importers it broke: {v}"
    );
}

/// A seventh probe (go-cmp 0.5.9): deleting a package's only non-test file with
/// `apply_patch` answered "no new diagnostics" though every importer now fails to import it:
/// gopls diagnosed them only after its `diagnosticsDelay`, silently, and the dependents'
/// lists were taken at the first quiet. The race did not come back on this small module with
/// the build before the fix (the mechanism's test that fails there is
/// `lsp_go_navigation::a_callers_diagnostics_follow_a_change_in_the_package_it_imports`);
/// this one keeps the Go delete's answer right.
#[test]
fn deleting_a_go_package_reports_its_importers() {
    toolvisor_tests::debug::require_go();
    require("gopls");
    let p = project(&[
        ("go.mod", "module example.com/gocmp\n\ngo 1.19\n"),
        (
            "internal/function/func.go",
            "package function\n\nfunc NameOf() string { return \"f\" }\n",
        ),
        (
            "cmp/compare.go",
            "package cmp\n\nimport \"example.com/gocmp/internal/function\"\n\nfunc Name() string { return function.NameOf() }\n",
        ),
    ]);
    let w = p.path();
    // Weight, as go-cmp's: gopls takes longer than `settle_ms` to diagnose the importer.
    for i in 0..120 {
        let funcs: String = (0..40)
            .map(|j| format!("func F{i}x{j}(a, b int) int {{\n\tif a > b {{\n\t\treturn a - b\n\t}}\n\treturn b - a\n}}\n\n"))
            .collect();
        std::fs::write(
            w.join(format!("cmp/gen{i}.go")),
            format!("package cmp\n\n{funcs}"),
        )
        .unwrap();
    }
    let d = TestDaemon::start(&format!(
        "{}{}",
        toolvisor_tests::debug::go_env(),
        lsp_config("")
    ));
    ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "diagnostics", "file": "cmp/compare.go"}),
    );
    let v = ok_in(
        &d,
        w,
        "apply_patch",
        json!({"patch": "*** Begin Patch\n*** Delete File: internal/function/func.go\n*** End Patch\n"}),
    );
    assert!(
        new_paths(&v).contains(&"cmp/compare.go".to_string()),
        "the delete did not report the importer it broke: {v}"
    );
}
