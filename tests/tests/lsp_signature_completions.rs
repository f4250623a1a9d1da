//! `lsp signature_help` and `lsp completions` against real servers on multi-file projects:
//! the signature of a call to a function defined in another file (with its docs and active
//! parameter), and the members of an imported type after `obj.` or a typed prefix; bad
//! positions are `invalid_args` saying what to give.

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

fn labels(v: &Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {v}"))
        .iter()
        .map(|i| i["label"].as_str().unwrap().to_string())
        .collect()
}

fn kind_of<'a>(v: &'a Value, label: &str) -> &'a str {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["label"] == label)
        .and_then(|i| i["kind"].as_str())
        .unwrap_or_else(|| panic!("no item {label}: {v}"))
}

const PY_MODELS: &str = "class Greeter:\n    \"\"\"Greets people.\"\"\"\n\n    def greet(self, name: str, excited: bool = False) -> str:\n        \"\"\"Say hello to someone.\"\"\"\n        return \"hi \" + name\n\n    def wave(self) -> None:\n        pass\n\n\ndef make() -> Greeter:\n    return Greeter()\n";
const PY_MAIN: &str = "from app.models import make\n\ng = make()\nprint(g.greet(\"x\", True))\n";

#[test]
fn pyright_signature_and_member_completions_across_files() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/models.py", PY_MODELS),
        ("app/main.py", PY_MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "signature_help", "file": "app/main.py", "line": 4, "symbol": "greet"}),
    );
    let sig = &v["signatures"][0];
    assert!(
        sig["label"]
            .as_str()
            .unwrap()
            .contains("name: str, excited: bool = False"),
        "{v}"
    );
    assert_eq!(sig["parameters"][0], "name: str", "{v}");
    assert_eq!(sig["active_parameter"], 0, "just inside the `(`: {v}");
    assert!(
        sig["documentation"]
            .as_str()
            .unwrap()
            .contains("Say hello to someone."),
        "{v}"
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("active parameter 1 of 2: name: str"),
        "{text}"
    );
    // Members after `g.`: the methods of the imported class.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "app/main.py", "line": 4, "symbol": "g."}),
    );
    let got = labels(&v);
    for want in ["greet", "wave"] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
    assert_eq!(kind_of(&v, "greet"), "method", "{v}");
    assert!(
        v["text"].as_str().unwrap().contains("greet (method)"),
        "{v}"
    );
    // A typed prefix narrows the list to what starts with it.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "app/main.py", "line": 4, "symbol": "g.gr"}),
    );
    assert_eq!(labels(&v), ["greet"], "{v}");
    assert_eq!(v["truncated"], 0, "{v}");
    // Bad positions say what to give.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "signature_help", "file": "app/main.py", "line": 1, "symbol": "make"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("no `(` after `make`"), "{e}");
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "app/main.py", "line": 4}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("`symbol`"), "{e}");
}

#[test]
fn pyright_completions_of_a_bare_prefix_are_bounded_and_say_so() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("main.py", "import os\n\nos.path\n"),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // Every member of `os` is far more than 50.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "main.py", "line": 3, "symbol": "os."}),
    );
    assert_eq!(labels(&v).len(), 50, "{v}");
    assert!(v["truncated"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("completions; the list was cut)"),
        "{v}"
    );
}

const TS_UTIL: &str = "/** Adds two numbers. */\nexport function add(left: number, right: number): number {\n  return left + right;\n}\n\nexport class Point {\n  constructor(public x: number, public y: number) {}\n  norm(): number {\n    return Math.hypot(this.x, this.y);\n  }\n}\n";
const TS_MAIN: &str = "import { add, Point } from \"./util\";\n\nconst p = new Point(1, 2);\nexport const total = add(p.x, p.norm());\n";

#[test]
fn typescript_signature_and_member_completions_across_files() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        ("src/util.ts", TS_UTIL),
        ("src/main.ts", TS_MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "signature_help", "file": "src/main.ts", "line": 4, "symbol": "add"}),
    );
    let sig = &v["signatures"][0];
    assert_eq!(
        sig["label"], "add(left: number, right: number): number",
        "{v}"
    );
    assert_eq!(
        sig["parameters"],
        json!(["left: number", "right: number"]),
        "{v}"
    );
    assert!(
        sig["documentation"]
            .as_str()
            .unwrap()
            .contains("Adds two numbers."),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "src/main.ts", "line": 4, "symbol": "p.no"}),
    );
    assert_eq!(labels(&v), ["norm"], "{v}");
    assert_eq!(kind_of(&v, "norm"), "method", "{v}");
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "src/main.ts", "line": 4, "symbol": "p.", "occurrence": 1}),
    );
    let got = labels(&v);
    for want in ["norm", "x", "y"] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
}

#[test]
fn clangd_signature_help_and_completions() {
    require("clangd");
    let p = project(&[
        ("compile_flags.txt", "-std=c++17\n"),
        (
            "util.hpp",
            "struct Acc {\n    int total;\n    int add(int amount);\n};\n// Scales by factor, then shifts by offset.\nint scale(int factor, int offset);\n",
        ),
        (
            "main.cpp",
            "#include \"util.hpp\"\n\nint main() {\n    Acc a{0};\n    a.add(1);\n    return scale(2, 3);\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "signature_help", "file": "main.cpp", "line": 6, "symbol": "scale"}),
    );
    let sig = &v["signatures"][0];
    assert!(
        sig["label"]
            .as_str()
            .unwrap()
            .starts_with("scale(int factor, int offset)"),
        "{v}"
    );
    assert_eq!(
        sig["parameters"],
        json!(["int factor", "int offset"]),
        "{v}"
    );
    assert_eq!(sig["active_parameter"], 0, "{v}");
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "completions", "file": "main.cpp", "line": 5, "symbol": "a."}),
    );
    let got = labels(&v);
    assert!(got.iter().any(|l| l.starts_with("add(")), "{v}");
    assert!(got.contains(&"total".to_string()), "{v}");
    assert_eq!(kind_of(&v, "total"), "field", "{v}");
}
