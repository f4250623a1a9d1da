//! `lsp type_hierarchy` against real servers: clangd shows a class's supertypes and subtypes
//! across files (its own protocol in clangd 14, the standard one after); servers without
//! `typeHierarchyProvider` (pyright, typescript-language-server) are `not_available` naming
//! the server and the capability (rust-analyzer's refusal is in `lsp_inlay_hints.rs`).

use serde_json::{Value, json};
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

fn names(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key}: {v}"))
        .iter()
        .map(|t| {
            format!(
                "{}@{}:{}",
                t["name"].as_str().unwrap(),
                t["path"].as_str().unwrap(),
                t["line"]
            )
        })
        .collect()
}

#[test]
fn clangd_supertypes_and_subtypes_across_files() {
    require("clangd");
    let p = project(&[
        ("compile_flags.txt", "-std=c++17\n"),
        (
            "shapes.hpp",
            "struct Shape {\n    virtual ~Shape();\n    virtual double area() const = 0;\n};\nstruct Circle : Shape {\n    double r;\n    double area() const override;\n};\n",
        ),
        (
            "square.cpp",
            "#include \"shapes.hpp\"\n\nstruct Square : Shape {\n    double s;\n    double area() const override { return s * s; }\n};\n",
        ),
        (
            "main.cpp",
            "#include \"shapes.hpp\"\n\nint main() {\n    Circle c;\n    return 0;\n}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    // clangd knows a subtype in another file once that file is open (or indexed).
    ok_in(&d, w, "lsp", json!({"op": "symbols", "file": "square.cpp"}));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "type_hierarchy", "file": "shapes.hpp", "line": 1, "symbol": "Shape"}),
    );
    assert_eq!(v["symbol"], "Shape", "{v}");
    let subs = names(&v, "subtypes");
    for want in ["Circle@shapes.hpp:5", "Square@square.cpp:3"] {
        assert!(subs.contains(&want.to_string()), "missing {want}: {v}");
    }
    assert_eq!(v["supertypes_total"], 0, "{v}");
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("subtypes of Shape (2):"), "{text}");
    assert!(
        text.contains("struct Square (square.cpp:3) — struct Square : Shape {"),
        "{text}"
    );
    assert!(
        text.contains("supertypes of Shape (0):\n  none found"),
        "{text}"
    );
    // From a use in another file: the supertype of Circle.
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "type_hierarchy", "file": "main.cpp", "line": 4, "symbol": "Circle"}),
    );
    assert_eq!(names(&v, "supertypes"), ["Shape@shapes.hpp:1"], "{v}");
    assert_eq!(v["subtypes_total"], 0, "{v}");
    assert_eq!(v["server"]["name"], "clangd", "{v}");
    // Not a type: said so, not an empty hierarchy.
    let e = err_in(
        &d,
        w,
        "lsp",
        json!({"op": "type_hierarchy", "file": "main.cpp", "line": 5, "symbol": "return"}),
    );
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.message.contains("is not a type"), "{e}");
}

#[test]
fn servers_without_type_hierarchy_are_not_available_naming_server_and_capability() {
    require("pyright-langserver");
    require("typescript-language-server");
    let p = project(&[
        ("pyproject.toml", "[project]\nname = \"demo\"\n"),
        (
            "app/shapes.py",
            "class Shape:\n    pass\n\n\nclass Circle(Shape):\n    pass\n",
        ),
        ("web/tsconfig.json", "{}\n"),
        (
            "web/shapes.ts",
            "export class Shape {}\nexport class Circle extends Shape {}\n",
        ),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    for (file, line, symbol, server) in [
        ("app/shapes.py", 5, "Circle", "pyright"),
        ("web/shapes.ts", 2, "Circle", "typescript"),
    ] {
        let e = err_in(
            &d,
            w,
            "lsp",
            json!({"op": "type_hierarchy", "file": file, "line": line, "symbol": symbol}),
        );
        assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
        assert!(e.message.contains(server), "{e}");
        assert!(e.message.contains("typeHierarchyProvider"), "{e}");
    }
}
