//! rust-analyzer: readiness comes from `experimental/serverStatus` (quiescent), so the first
//! call after start waits for the workspace to load instead of answering "nothing found";
//! then `implementation` and `type_definition` across the crate.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const LIB: &str = r#"pub trait Shape {
    fn area(&self) -> f64;
}

pub struct Square {
    pub side: f64,
}

impl Shape for Square {
    fn area(&self) -> f64 {
        self.side * self.side
    }
}

pub fn unit() -> f64 {
    let sq = Square { side: 1.0 };
    sq.area()
}
"#;

#[test]
fn rust_analyzer_implementation_and_type_definition() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"shapes\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
        ),
        ("src/lib.rs", LIB),
    ]);
    let w = p.path();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "implementation", "file": "src/lib.rs", "line": 1, "symbol": "Shape"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("src/lib.rs:9: impl Shape for Square {"),
        "{v}"
    );
    assert!(
        matches!(v["server"]["state"].as_str(), Some("ready" | "indexing")),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "type_definition", "file": "src/lib.rs", "line": 17, "symbol": "sq"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("src/lib.rs:5: pub struct Square {"),
        "{v}"
    );
    let v = ok_in(
        &d,
        w,
        "lsp",
        json!({"op": "hover", "file": "src/lib.rs", "line": 17, "symbol": "area"}),
    );
    assert!(
        v["markdown"]
            .as_str()
            .unwrap()
            .contains("fn area(&self) -> f64"),
        "{v}"
    );
}
