//! `implementation` and `type_definition` with a real typescript-language-server (on
//! TypeScript 5), and hover with its markdown.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const SRC: &str = r#"export interface Shape {
    area(): number;
}

export class Square implements Shape {
    constructor(public side: number) {}
    area(): number {
        return this.side * this.side;
    }
}

export type Point = { x: number; y: number };

export const origin: Point = { x: 0, y: 0 };
export const unit: Shape = new Square(1);
"#;

#[test]
fn typescript_implementation_and_type_definition() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
        ("src/shapes.ts", SRC),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "implementation", "file": "src/shapes.ts", "line": 1, "symbol": "Shape"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("src/shapes.ts:5: export class Square implements Shape {"),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "type_definition", "file": "src/shapes.ts", "line": 14, "symbol": "origin"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("src/shapes.ts:12: export type Point"),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "src/shapes.ts", "line": 15, "symbol": "unit"}),
    );
    assert!(
        v["markdown"]
            .as_str()
            .unwrap()
            .contains("const unit: Shape"),
        "{v}"
    );
}
