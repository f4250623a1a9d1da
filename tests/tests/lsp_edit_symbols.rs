//! `lsp_edit` symbol edits against real servers on multi-file projects: a whole method
//! replaced by its symbol path (`Greeter/greet`) without quoting its old text, lines inserted
//! before and after a definition, the diagnostics the edit brings folded in (a caller in
//! another file, as a dependent of the edit), and the errors that name what exists.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

const MODELS: &str = "class Greeter:\n    \"\"\"Says hello.\"\"\"\n\n    def greet(self, name: str) -> str:\n        return \"hi \" + name\n\n    def bye(self) -> str:\n        return \"bye\"\n\n\ndef make() -> Greeter:\n    return Greeter()\n";
const MAIN: &str = "from app.models import make\n\nprint(make().greet(\"x\").upper())\n";

#[test]
fn pyright_replaces_and_inserts_by_symbol_path() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/models.py", MODELS),
        ("app/main.py", MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // The method's new definition, written as it reads at the top level: indented as a
    // block to the method's column.
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "app/models.py", "symbol_path": "Greeter/greet",
               "text": "def greet(self, name: str) -> int:\n    return len(name)\n"}),
    );
    let models = std::fs::read_to_string(w.join("app/models.py")).unwrap();
    assert_eq!(
        models,
        MODELS.replace(
            "    def greet(self, name: str) -> str:\n        return \"hi \" + name\n",
            "    def greet(self, name: str) -> int:\n        return len(name)\n"
        ),
        "{v}"
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .starts_with("replaced method `Greeter/greet` (app/models.py:4-5)\n"),
        "{v}"
    );
    // The caller in the other file imports the edited one: the edit reports its new error
    // (the write's dependents are checked), and the run has been told of it.
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("app/main.py:3:") && text.contains("upper"),
        "main.py's call of .upper() on an int is reported: {v}"
    );
    let v2 = ok_in(&d, w, "synced_write", json!({"path": "app/main.py"}));
    assert!(
        !v2["text"].as_str().unwrap().contains("upper"),
        "told twice: {v2}"
    );

    // Insert after the class's last method and before a top-level function.
    ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "insert_after_symbol", "file": "app/models.py", "symbol_path": "Greeter/bye",
               "text": "\n    def wave(self) -> str:\n        return \"o/\"\n"}),
    );
    ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "insert_before_symbol", "file": "app/models.py", "symbol_path": "make",
               "text": "VERSION = 2\n\n\n"}),
    );
    let models = std::fs::read_to_string(w.join("app/models.py")).unwrap();
    assert!(
        models.contains("        return \"bye\"\n\n    def wave(self) -> str:\n        return \"o/\"\n\n\nVERSION = 2\n\n\ndef make() -> Greeter:"),
        "{models}"
    );
    // The outline now has the inserted method; a write that breaks the file is reported.
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "app/models.py", "symbol_path": "Greeter/wave",
               "text": "def wave(self) -> str:\n    return undefined_name\n"}),
    );
    assert!(
        v["diagnostics"]["text"]
            .as_str()
            .unwrap()
            .contains("undefined_name"),
        "{v}"
    );

    // A path that is not in the outline names what is.
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "app/models.py", "symbol_path": "Greeter/nope",
               "text": "x = 1\n"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(
        e.message.contains("Greeter/greet (method at line 4)"),
        "{e}"
    );
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "app/models.py", "symbol_path": "make"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("`text`"), "{e}");
}

const TS: &str = "export class Greeter {\n    greet(name: string): string {\n        return \"hi \" + name;\n    }\n}\n\nexport function make(): Greeter {\n    return new Greeter();\n}\n";

#[test]
fn typescript_replaces_a_method_by_symbol_path() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        ("src/greeter.ts", TS),
        (
            "src/main.ts",
            "import { make } from \"./greeter\";\n\nconsole.log(make().greet(\"x\"));\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "src/greeter.ts", "symbol_path": "Greeter/greet",
               "text": "greet(name: string): string {\n    return `hello ${name}`;\n}"}),
    );
    let src = std::fs::read_to_string(w.join("src/greeter.ts")).unwrap();
    assert_eq!(
        src,
        TS.replace(
            "    greet(name: string): string {\n        return \"hi \" + name;\n    }\n",
            "    greet(name: string): string {\n        return `hello ${name}`;\n    }\n"
        ),
        "{v}"
    );
    ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "insert_after_symbol", "file": "src/greeter.ts", "symbol_path": "make",
               "text": "\nexport const unit = make();\n"}),
    );
    let src = std::fs::read_to_string(w.join("src/greeter.ts")).unwrap();
    assert!(src.ends_with("}\n\nexport const unit = make();\n"), "{src}");
}

#[test]
fn clangd_replaces_a_function_and_inserts_after_it() {
    require("clangd");
    let util = "#include \"util.h\"\n\nint add(int a, int b) {\n    return a + b;\n}\n";
    let p = project(&[
        ("compile_commands.json", "[]"),
        ("util.h", "int add(int a, int b);\nint twice(int a);\n"),
        ("util.c", util),
        (
            "main.c",
            "#include \"util.h\"\n\nint main(void) {\n    return add(1, 2) + twice(3);\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "util.c", "symbol_path": "add",
               "text": "int add(int a, int b) {\n    return b + a;\n}\n"}),
    );
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "insert_after_symbol", "file": "util.c", "symbol_path": "add",
               "text": "\nint twice(int a) {\n    return add(a, a);\n}\n"}),
    );
    assert_eq!(
        std::fs::read_to_string(w.join("util.c")).unwrap(),
        "#include \"util.h\"\n\nint add(int a, int b) {\n    return b + a;\n}\n\nint twice(int a) {\n    return add(a, a);\n}\n",
        "{v}"
    );
}

#[test]
fn rust_analyzer_replaces_a_method_inside_an_impl() {
    require("rust-analyzer");
    let lib = "pub struct Square {\n    pub side: f64,\n}\n\nimpl Square {\n    pub fn area(&self) -> f64 {\n        self.side * self.side\n    }\n}\n";
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"sym\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        ("src/lib.rs", lib),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(&d, w, "lsp", json!({"op": "symbols", "file": "src/lib.rs"}));
    let impl_name = v["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str().unwrap().starts_with("impl"))
        .unwrap_or_else(|| panic!("no impl in the outline: {v}"))["name"]
        .as_str()
        .unwrap()
        .to_string();
    ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "replace_symbol_body", "file": "src/lib.rs",
               "symbol_path": format!("{impl_name}/area"),
               "text": "pub fn area(&self) -> f64 {\n    self.side.powi(2)\n}\n"}),
    );
    assert_eq!(
        std::fs::read_to_string(w.join("src/lib.rs")).unwrap(),
        lib.replace("self.side * self.side", "self.side.powi(2)")
    );
}
