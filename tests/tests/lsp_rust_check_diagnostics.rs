//! Rust-analyzer's compile errors (`cargo check` on save, pushed with
//! `publishDiagnostics`) never appeared in `lsp diagnostics FILE` or in a write's result:
//! only the pulled list (rust-analyzer's own diagnostics) was read, so an edit adding
//! `return undefined_thing;` said "no new diagnostics" while `diagnostics "*"` showed E0425.
//! Pushed and pulled diagnostics are merged, the check after the save waited for; in an
//! untrusted root, where `cargo check` does not run, the answer says type checking is off.

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

const LIB: &str = "pub fn answer() -> u32 {\n    42\n}\n";

fn crate_project() -> tempfile::TempDir {
    project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"checked\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        ("src/lib.rs", LIB),
    ])
}

fn codes(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn cargo_check_errors_reach_a_write_and_lsp_diagnostics() {
    require("rust-analyzer");
    let p = crate_project();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(&format!(
        "\n[trust]\nroots = [{:?}]\n",
        root.display().to_string()
    )));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/lib.rs"}),
    );
    assert!(codes(&v["diagnostics"]).is_empty(), "a clean crate: {v}");
    let v = ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "src/lib.rs", "old_text": "    42\n", "new_text": "    return undefined_thing;\n"}),
    );
    let new = &v["diagnostics"]["new"];
    assert!(
        codes(new).iter().any(|c| c == "E0425"),
        "the write said nothing of cargo check's E0425: {v}"
    );
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/lib.rs"}),
    );
    assert!(codes(&v["diagnostics"]).iter().any(|c| c == "E0425"), "{v}");
    let text = v["text"].as_str().unwrap();
    assert_eq!(
        text.matches("undefined_thing").count(),
        1,
        "one error, listed once: {text}"
    );
    // Fixed: it goes away from both.
    let v = ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "src/lib.rs", "old_text": "    return undefined_thing;\n", "new_text": "    42\n"}),
    );
    assert!(codes(&v["diagnostics"]["new"]).is_empty(), "{v}");
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/lib.rs"}),
    );
    assert!(
        codes(&v["diagnostics"]).is_empty(),
        "the fixed error stayed: {v}"
    );
}

#[test]
fn an_untrusted_root_says_type_checking_is_off() {
    require("rust-analyzer");
    let p = crate_project();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "src/lib.rs", "old_text": "    42\n", "new_text": "    return undefined_thing;\n"}),
    );
    let text = v["diagnostics"]["text"].as_str().unwrap();
    assert!(
        text.contains("type checking is off") && text.contains("untrusted"),
        "an untrusted root's write does not say cargo check did not run: {v}"
    );
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/lib.rs"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("type checking is off"), "{v}");
    assert_eq!(v["checking"], "off", "{v}");
}

/// A fresh probe on `bytes`: rust-analyzer's own default cfgs turn `miri` on, so `definition`
/// of a function with a `#[cfg(miri)]` twin answered the twin cargo does not compile; and
/// `diagnostics "*"` ran `cargo check` on the library alone, so an error in `tests/` was not
/// in "the whole project". rust-analyzer now runs with cargo's cfgs and the project check
/// covers the workspace's every target.
#[test]
fn rust_analyzer_reads_the_code_cargo_builds_and_the_project_check_covers_the_tests() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"twins\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "#[cfg(miri)]\nfn twin() -> u8 {\n    1\n}\n\n#[cfg(not(miri))]\nfn twin() -> u8 {\n    2\n}\n\npub fn answer() -> u8 {\n    twin()\n}\n",
        ),
        (
            "tests/t.rs",
            "#[test]\nfn t() {\n    let x: u32 = \"s\";\n    assert_eq!(x, 1);\n}\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(&format!(
        "\n[trust]\nroots = [{:?}]\n",
        root.display().to_string()
    )));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "definition", "file": "src/lib.rs", "line": 12, "symbol": "twin"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("src/lib.rs:7:"), "the twin cargo builds: {v}");
    assert!(!text.contains("src/lib.rs:2:"), "the miri twin: {v}");
    let v = ok_in(&d, &root, "lsp", json!({"op": "diagnostics", "file": "*"}));
    let in_tests: Vec<&Value> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["path"] == "tests/t.rs")
        .collect();
    assert!(
        in_tests.iter().any(|d| d["code"] == "E0308"),
        "the test target's type error: {v}"
    );
    assert!(
        v["checker"].as_str().unwrap().contains("--all-targets"),
        "{v}"
    );
}
