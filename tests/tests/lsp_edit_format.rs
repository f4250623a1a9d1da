//! `lsp_edit format` against real servers: clangd and typescript-language-server format a
//! file through the all-or-nothing write (a formatted file says so and writes nothing);
//! pyright has no formatter and says so, naming itself and `documentFormattingProvider`.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

#[test]
fn clangd_formats_a_file() {
    require("clangd");
    let p = project(&[
        ("compile_commands.json", "[]"),
        ("util.h", "int add(int a, int b);\n"),
        (
            "main.c",
            "#include \"util.h\"\nint main(void){return add(1,2);}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(&d, w, "lsp_edit", json!({"op": "format", "file": "main.c"}));
    let main = std::fs::read_to_string(w.join("main.c")).unwrap();
    assert!(
        main.contains("int main(void) { return add(1, 2); }"),
        "{main}\n{v}"
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .starts_with("formatted main.c\n"),
        "{v}"
    );
    let v = ok_in(&d, w, "lsp_edit", json!({"op": "format", "file": "main.c"}));
    assert_eq!(v["edits"], 0, "{v}");
    assert!(
        v["text"].as_str().unwrap().contains("already formatted"),
        "{v}"
    );
    assert_eq!(std::fs::read_to_string(w.join("main.c")).unwrap(), main);
}

#[test]
fn typescript_formats_a_file() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        (
            "src/util.ts",
            "export function helper(x:number):number{return x*2}\n",
        ),
        (
            "src/main.ts",
            "import {helper} from \"./util\";\nexport const y=helper(1);\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "format", "file": "src/util.ts"}),
    );
    let util = std::fs::read_to_string(w.join("src/util.ts")).unwrap();
    assert!(
        util.contains("export function helper(x: number): number {"),
        "{util}"
    );
    assert!(util.contains("return x * 2"), "{util}");
    assert_eq!(
        std::fs::read_to_string(w.join("src/main.ts")).unwrap(),
        "import {helper} from \"./util\";\nexport const y=helper(1);\n",
        "only the named file is formatted"
    );
}

#[test]
fn pyright_has_no_formatter_and_says_so() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/main.py", "x=1\n"),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "format", "file": "app/main.py"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("pyright"), "{e}");
    assert!(e.message.contains("documentFormattingProvider"), "{e}");
    assert_eq!(
        std::fs::read_to_string(w.join("app/main.py")).unwrap(),
        "x=1\n"
    );
}

#[test]
fn rust_analyzer_formats_a_file() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"fmt\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        (
            "src/lib.rs",
            "pub mod util;\npub fn run()->i32{util::helper(1)}\n",
        ),
        (
            "src/util.rs",
            "pub fn helper(x: i32) -> i32 {\n    x * 2\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "format", "file": "src/lib.rs"}),
    );
    let lib = std::fs::read_to_string(w.join("src/lib.rs")).unwrap();
    assert_eq!(
        lib, "pub mod util;\npub fn run() -> i32 {\n    util::helper(1)\n}\n",
        "{v}"
    );
}

/// `format` asked every server for 4 spaces, so a 2-space TypeScript file
/// came back re-indented to 4 in every line. The file's own indentation is kept, and an
/// `.editorconfig` beside it wins (here tabs).
#[test]
fn typescript_format_keeps_the_files_indentation_and_honours_editorconfig() {
    require("typescript-language-server");
    let two = "export function helper(x: number): number {\n  if (x > 1) {\n    return x*2;\n  }\n  return x;\n}\n";
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        ("src/two.ts", two),
        (
            "tabbed/.editorconfig",
            "[*.ts]\nindent_style = tab\ntab_width = 4\n",
        ),
        ("tabbed/t.ts", two),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "format", "file": "src/two.ts"}),
    );
    let after = std::fs::read_to_string(w.join("src/two.ts")).unwrap();
    assert!(after.contains("\n    return x * 2;\n"), "{after}\n{v}");
    assert!(
        after.contains("\n  if (x > 1) {\n"),
        "re-indented: {after}\n{v}"
    );
    assert_eq!(v["options"]["tabSize"], 2, "{v}");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("indentation: 2 spaces (from the file's own indentation)"),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "format", "file": "tabbed/t.ts"}),
    );
    let after = std::fs::read_to_string(w.join("tabbed/t.ts")).unwrap();
    assert!(
        after.contains("\n\tif (x > 1) {\n\t\treturn x * 2;\n"),
        "{after}\n{v}"
    );
    assert_eq!(v["options"]["insertSpaces"], false, "{v}");
}
