//! `lsp call_hierarchy` against real servers on multi-file projects: who calls a function
//! (each call site, across files) and what it calls; a server without the capability is
//! `not_available` naming it and `callHierarchyProvider`.

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

fn callers(v: &Value) -> Vec<String> {
    v["incoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}:{}:{}",
                c["path"].as_str().unwrap(),
                c["line"],
                c["caller"].as_str().unwrap()
            )
        })
        .collect()
}

fn callees(v: &Value) -> Vec<String> {
    v["outgoing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["callee"].as_str().unwrap().to_string())
        .collect()
}

const PY_UTIL: &str = "def helper(x: int) -> int:\n    return x * 2\n\n\ndef scale(x: int) -> int:\n    return helper(x) + helper(1)\n";
const PY_MAIN: &str =
    "from app.util import helper, scale\n\n\ndef run() -> int:\n    return helper(3) + scale(4)\n";

#[test]
fn pyright_incoming_and_outgoing_calls_across_files() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("app/__init__.py", ""),
        ("app/util.py", PY_UTIL),
        ("app/main.py", PY_MAIN),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "app/util.py", "line": 1, "symbol": "helper"}),
    );
    let got = callers(&v);
    for want in ["app/main.py:5:run", "app/util.py:6:scale"] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
    assert_eq!(
        v["incoming_total"], 3,
        "two calls in scale, one in run: {v}"
    );
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("app/main.py:5: in function run — return helper(3) + scale(4)"),
        "{text}"
    );
    // Outgoing from scale: helper, called twice.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "app/util.py", "line": 5, "symbol": "scale"}),
    );
    assert_eq!(callees(&v), ["helper"], "{v}");
    assert_eq!(v["outgoing"][0]["calls"], 2, "{v}");
    assert_eq!(v["outgoing"][0]["line"], 1, "{v}");
    // Not a function: said so, not an empty list.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "app/main.py", "line": 1, "symbol": "from"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
}

#[test]
fn clangd_incoming_calls_across_files() {
    require("clangd");
    let p = project(&[
        ("compile_commands.json", "[]"),
        ("util.h", "int add(int a, int b);\nint twice(int a);\n"),
        (
            "util.c",
            "#include \"util.h\"\n\nint add(int a, int b) {\n    return a + b;\n}\n\nint twice(int a) {\n    return add(a, a);\n}\n",
        ),
        (
            "main.c",
            "#include \"util.h\"\n\nint main(void) {\n    return add(1, 2) + twice(3);\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // clangd indexes the other files in the background; open them so they are known.
    ok_in(&d, w, "lsp", json!({"op": "symbols", "file": "main.c"}));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "util.c", "line": 3, "symbol": "add"}),
    );
    let got = callers(&v);
    for want in ["main.c:4:main", "util.c:8:twice"] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "util.c", "line": 7, "symbol": "twice"}),
    );
    // Outgoing calls: clangd answers them, or the answer says it does not.
    if v["outgoing_note"].is_null() {
        assert_eq!(callees(&v), ["add"], "{v}");
    } else {
        assert!(
            v["text"]
                .as_str()
                .unwrap()
                .contains("outgoing calls: not offered"),
            "{v}"
        );
    }
}

/// A ninth probe's leftover (lz4.c, whole inside `#ifndef LZ4_COMMONDEFS_ONLY`): asked from
/// the header's prototype, the call hierarchy named the function's own definition in the
/// source file as a call clangd might miss (the scan names every use inside a conditional
/// branch the server did not list). A definition or declaration is no call: the answer is
/// complete.
#[test]
fn clangd_callers_asked_from_a_prototype_do_not_count_the_definition_as_a_missed_call() {
    require("clangd");
    let p = project(&[
        ("lz.h", "int lz_pack(int n);\n"),
        (
            "lz.c",
            "#ifndef LZ_COMMONDEFS_ONLY\n#include \"lz.h\"\n\nint lz_pack(int n) {\n    return n + 1;\n}\n\nint lz_twice(int n) {\n    return lz_pack(lz_pack(n));\n}\n#endif\n",
        ),
        (
            "main.c",
            "#include \"lz.h\"\n\nint main(void) {\n    return lz_pack(1);\n}\n",
        ),
    ]);
    let w = p.path();
    // A compilation database, as lz4's build has: clangd indexes both sources (and takes
    // the header for C, as the sources that include it).
    let entries: Vec<Value> = ["lz.c", "main.c"]
        .iter()
        .map(|f| json!({"directory": w, "file": f, "arguments": ["cc", "-c", f]}))
        .collect();
    std::fs::write(
        w.join("compile_commands.json"),
        serde_json::to_string(&entries).unwrap(),
    )
    .unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    // clangd indexes in the background: ask until its index has both callers.
    let ask = || {
        ok_in(
            &d,
            w,
            "lsp",
            json!({"op": "call_hierarchy", "file": "lz.h", "line": 1, "symbol": "lz_pack"}),
        )
    };
    let mut v = ask();
    for _ in 0..50 {
        if callers(&v).len() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
        v = ask();
    }
    let got = callers(&v);
    for want in ["main.c:4:main", "lz.c:9:lz_twice"] {
        assert!(got.contains(&want.to_string()), "missing {want}: {v}");
    }
    assert_eq!(v["complete"], true, "the definition is no missed call: {v}");
}

#[test]
fn typescript_incoming_and_outgoing_calls() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        (
            "src/util.ts",
            "export function helper(x: number): number {\n    return x * 2;\n}\n\nexport class Box {\n    put(x: number): number {\n        return x;\n    }\n}\n",
        ),
        (
            "src/main.ts",
            "import { Box, helper } from \"./util\";\n\nexport function run(): number {\n    const box = new Box();\n    box.put(1);\n    return helper(1) + helper(2);\n}\n",
        ),
        (
            "src/shapes.ts",
            "import { helper } from \"./util\";\nclass Circle { area(): number { return 3; } }\nclass Square { area(): number { return 4; } }\n/** The total. */\nexport function total(shape: Circle | Square, report: (n: number) => void): number {\n    const n = shape.area();\n    report(n);\n    return helper(n);\n}\nexport function mk(f: () => number): () => number {\n    return () => f() + helper(1);\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "symbols", "file": "src/main.ts"}),
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/util.ts", "line": 1, "symbol": "helper"}),
    );
    assert!(
        callers(&v).contains(&"src/main.ts:6:run".to_string()),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/main.ts", "line": 3, "symbol": "run"}),
    );
    // Each call site once: tsserver gives a method call's span twice (`put` was counted 2×).
    let counted = |name: &str| {
        v["outgoing"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["callee"] == name)
            .unwrap_or_else(|| panic!("no callee {name}: {v}"))["calls"]
            .clone()
    };
    assert_eq!(counted("helper"), 2, "{v}");
    assert_eq!(counted("put"), 1, "{v}");
    assert_eq!(
        v["complete"], true,
        "every call in run's body is listed: {v}"
    );
    assert!(v.get("outgoing_unlisted").is_none(), "{v}");

    // A fifth probe (@tanstack/query-core): a method called on a union-typed receiver is not
    // in tsserver's outgoing calls, nor is a parameter's call, and the list said complete.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/shapes.ts", "line": 5, "symbol": "total"}),
    );
    assert_eq!(callees(&v), ["helper"], "{v}");
    assert_eq!(v["complete"], false, "{v}");
    let unlisted = |v: &Value| -> Vec<String> {
        v["outgoing_unlisted"]
            .as_array()
            .unwrap_or_else(|| panic!("no unlisted calls named: {v}"))
            .iter()
            .map(|u| format!("{}:{}", u["line"], u["callee"].as_str().unwrap()))
            .collect()
    };
    // An eighth probe (@tanstack/table-core): a comment above the function hid it.
    assert_eq!(unlisted(&v), ["6:shape.area", "7:report"], "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.contains("`shape.area(…)` at line 6"),
        "the text does not name the unlisted call: {v}"
    );
    // A returned arrow's calls are the function's (tsserver lists `helper` there), `f()` too.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/shapes.ts", "line": 10, "symbol": "mk"}),
    );
    assert_eq!(callees(&v), ["helper"], "{v}");
    assert_eq!(v["complete"], false, "{v}");
    assert_eq!(unlisted(&v), ["11:f"], "{v}");
}

#[test]
fn pylsp_has_no_call_hierarchy_and_says_so() {
    require("pylsp");
    let p = project(&[("pyproject.toml", ""), ("app/util.py", PY_UTIL)]);
    let d = TestDaemon::start(&lsp_config(
        "[lsp.languages.python]\nextensions = [\"py\"]\nmarkers = [\"pyproject.toml\"]\nservers = [[\"pylsp\"]]\n",
    ));
    let e = err_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "call_hierarchy", "file": "app/util.py", "line": 1, "symbol": "helper"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(e.message.contains("pylsp"), "{e}");
    assert!(e.message.contains("callHierarchyProvider"), "{e}");
}

#[test]
fn rust_analyzer_incoming_and_outgoing_calls_across_modules() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"calls\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        (
            "src/lib.rs",
            "pub mod util;\n\npub fn run() -> i32 {\n    util::helper(1) + util::helper(2)\n}\n",
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
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/util.rs", "line": 1, "symbol": "helper"}),
    );
    // Two calls on one line: one line of the answer, two call sites.
    assert_eq!(callers(&v), ["src/lib.rs:4:run"], "{v}");
    assert_eq!(
        (&v["incoming"][0]["calls"], &v["incoming_total"]),
        (&json!(2), &json!(2)),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/lib.rs", "line": 3, "symbol": "run"}),
    );
    assert_eq!(callees(&v), ["helper"], "{v}");
    assert_eq!(v["outgoing"][0]["path"], "src/util.rs", "{v}");
}

/// pyright lists each call of a method twice (it finds the call and the
/// member access, `REGISTRY.register(...)`), so "register (4)" stood for 2 call sites. Each
/// site is listed once; two calls on one line are one line that says so.
#[test]
fn pyright_method_calls_are_listed_once_each() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        ("pkg/__init__.py", ""),
        (
            "pkg/registry.py",
            "class Registry:\n    def __init__(self) -> None:\n        self.seen: list[str] = []\n\n    def register(self, name: str) -> str:\n        self.seen.append(name)\n        return name\n\n\nREGISTRY = Registry()\n",
        ),
        (
            "pkg/a.py",
            "from pkg.registry import REGISTRY\n\n\ndef one() -> str:\n    return REGISTRY.register(\"one\")\n\n\ndef two() -> str:\n    return REGISTRY.register(\"two\") + REGISTRY.register(\"2\")\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "call_hierarchy", "file": "pkg/registry.py", "line": 5, "symbol": "register"}),
    );
    assert_eq!(v["incoming_total"], 3, "three call sites: {v}");
    assert_eq!(callers(&v), ["pkg/a.py:5:one", "pkg/a.py:9:two"], "{v}");
    assert_eq!(v["incoming"][1]["calls"], 2, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(
        text.starts_with("incoming calls of register (3):\n"),
        "{text}"
    );
    assert!(
        text.contains("pkg/a.py:9: in function two (2 calls) — "),
        "{text}"
    );
}

/// pyright answers each `@overload` declaration of a called function as a callee of its own:
/// the outgoing calls of a function that calls `parse` once listed `parse` three times.
#[test]
fn pyright_outgoing_calls_count_an_overloaded_function_once() {
    require("pyright-langserver");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        (
            "over.py",
            "from typing import overload\n\n\n@overload\ndef parse(x: int) -> int: ...\n\n\n@overload\ndef parse(x: str) -> str: ...\n\n\ndef parse(x):\n    return x\n\n\ndef caller() -> int:\n    return parse(1)\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "call_hierarchy", "file": "over.py", "line": 16, "symbol": "caller"}),
    );
    let parses: Vec<&serde_json::Value> = v["outgoing"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["callee"] == "parse")
        .collect();
    assert_eq!(parses.len(), 1, "one callee for the overloads: {v}");
    assert_eq!(parses[0]["calls"], 1, "{v}");
}
