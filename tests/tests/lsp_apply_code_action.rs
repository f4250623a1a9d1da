//! `lsp_edit apply_code_action` against real servers on multi-file projects: an action listed
//! by `lsp code_actions` applied by its index through the all-or-nothing write, the run's new
//! diagnostics folded in; a file changed since the listing is a `conflict`; an action that is
//! only a command (pyright's "create type stub") is `not_available` naming the command.

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{client_in, err_in, lsp_config, ok_in, project, require, write};

const MAIN: &str =
    "#include \"util.h\"\n\nint main(void) {\n    int a = add(1, 2)\n    return a;\n}\n";

fn index_of(v: &Value, line: u64, title: &str) -> u64 {
    v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["line"] == line && a["title"].as_str().unwrap().contains(title))
        .unwrap_or_else(|| panic!("no `{title}` for line {line}: {v}"))["index"]
        .as_u64()
        .unwrap()
}

#[test]
fn clangd_applies_a_listed_fix_by_index() {
    require("clangd");
    let p = project(&[
        ("compile_commands.json", "[]"),
        ("util.h", "int add(int a, int b);\n"),
        (
            "util.c",
            "#include \"util.h\"\n\nint add(int a, int b) {\n    return a + b;\n}\n",
        ),
        ("main.c", MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // Before any listing in this run: said so.
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "apply_code_action", "index": 0}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("no `lsp code_actions` answer"), "{e}");

    // The missing `;` of line 4 is reported at the start of line 5.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "code_actions", "file": "main.c", "line": 5, "symbol": "return"}),
    );
    let i = index_of(&v, 5, "insert ';'");
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "apply_code_action", "index": 40}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    // The approval names the action the index stands for, not just the index.
    let mut c = client_in(&d, w, "test-run");
    let mut summary = String::new();
    let reply = c
        .call_with(
            "c",
            "lsp_edit",
            json!({"op": "apply_code_action", "index": i}),
            |r| {
                summary = r.summary.clone();
                true
            },
        )
        .unwrap();
    assert!(
        summary.starts_with(&format!(
            "lsp_edit: apply code action [{i}] \"insert ';'\" to "
        )) && summary.ends_with("main.c"),
        "{summary}"
    );
    let Outcome::Ok(v) = reply.outcome else {
        panic!("{:?}", reply.outcome)
    };
    let v = v.0;
    assert_eq!(v["files"], json!([{"path": "main.c", "edits": 1}]), "{v}");
    assert_eq!(
        std::fs::read_to_string(w.join("main.c")).unwrap(),
        MAIN.replace("add(1, 2)\n", "add(1, 2);\n")
    );
    assert!(v["text"].as_str().unwrap().starts_with("applied ["), "{v}");

    // A listing, then the file changes: the index no longer means what was listed.
    write(
        w,
        "main.c",
        "#include \"util.h\"\n\nint main(void) {\n    int b = add(3, 4)\n    return b;\n}\n",
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "code_actions", "file": "main.c", "line": 5, "symbol": "return"}),
    );
    let i = index_of(&v, 5, "insert ';'");
    write(w, "main.c", "int main(void) { return 0; }\n");
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "apply_code_action", "index": i}),
    );
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
    assert!(
        e.message.contains("changed since `code_actions` listed"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("main.c")).unwrap(),
        "int main(void) { return 0; }\n",
        "nothing was written"
    );
}

#[test]
fn typescript_applies_a_spelling_fix_across_an_import() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        (
            "src/util.ts",
            "export function helper(x: number): number {\n    return x * 2;\n}\n",
        ),
        (
            "src/main.ts",
            "import { helper } from \"./util\";\n\nexport const y = helpr(1);\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "code_actions", "file": "src/main.ts", "line": 3, "symbol": "helpr"}),
    );
    let i = index_of(&v, 3, "helper");
    let v = ok_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "apply_code_action", "index": i}),
    );
    assert_eq!(
        std::fs::read_to_string(w.join("src/main.ts")).unwrap(),
        "import { helper } from \"./util\";\n\nexport const y = helper(1);\n",
        "{v}"
    );
    assert_eq!(v["diagnostics"]["new"], json!([]), "{v}");
}

#[test]
fn pyright_command_only_action_is_not_available() {
    require("pyright-langserver");
    let p = project(&[
        (
            "pyproject.toml",
            "[project]\nname = \"demo\"\n\n[tool.pyright]\nvenvPath = \".\"\nvenv = \".venv\"\nreportMissingTypeStubs = \"error\"\n",
        ),
        (".venv/pyvenv.cfg", "home = /usr/bin\nversion = 3.11.2\n"),
        (
            ".venv/lib/python3.11/site-packages/fakepkg/__init__.py",
            "def f():\n    return 1\n",
        ),
        ("app/__init__.py", ""),
        ("app/main.py", "import fakepkg\n\nprint(fakepkg.f())\n"),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "code_actions", "file": "app/main.py", "line": 1, "symbol": "fakepkg"}),
    );
    let a = v["actions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["applies"] == "command")
        .unwrap_or_else(|| panic!("no command-only action: {v}"))
        .clone();
    let e = err_in(
        &d,
        w,
        "lsp_edit",
        json!({"op": "apply_code_action", "index": a["index"]}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("pyright.createtypestub"), "{e}");
    assert!(e.message.contains("command only"), "{e}");
}
