//! rust-analyzer does not list a use inside a `macro_rules!` body (`$crate::…`) or
//! under a `#[cfg(feature = …)]` that is off, so its references and renames of such a name
//! answered complete while the macro and the feature-gated code kept the old name (smallvec's
//! `from_vec` and `DrainFilter`). Now such an answer is `complete: false` and names the file and
//! line of every use the server did not report. The truth is the disk: after the rename, every
//! line still holding the old name as a whole word must be named.

use std::path::Path;

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, names_each, ok_in, project, require};

const CARGO: &str = "[package]\nname = \"bufs\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\nextra = []\n\n[workspace]\n";

const LIB: &str = r#"pub struct Buf { pub items: Vec<u8> }
impl Buf {
    pub fn from_vec(items: Vec<u8>) -> Buf { Buf { items } }
}
#[macro_export]
macro_rules! buf {
    ($($x:expr),*) => { $crate::Buf::from_vec(vec![$($x),*]) };
}
#[cfg(feature = "extra")]
pub fn doubled(v: Vec<u8>) -> Buf {
    Buf::from_vec(v.iter().map(|x| x * 2).collect())
}
// from_vec in a comment is no use
pub fn one() -> Buf { Buf::from_vec(vec![1]) }
"#;

/// `src/lib.rs:N` of every line of lib.rs holding `word` as a whole word, comments left out.
fn whole_word_lines(root: &Path, word: &str) -> Vec<String> {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let text = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .filter(|(_, line)| {
            line.match_indices(word).any(|(at, _)| {
                !is_word(line[..at].chars().next_back())
                    && !is_word(line[at + word.len()..].chars().next())
            })
        })
        .map(|(i, _)| format!("src/lib.rs:{}", i + 1))
        .collect()
}

#[test]
fn references_and_rename_name_the_uses_rust_analyzer_cannot_see() {
    require("rust-analyzer");
    let p = project(&[("Cargo.toml", CARGO), ("src/lib.rs", LIB)]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));

    // The macro body (line 7) and the feature-gated function (line 11) hold uses the server
    // does not list; the comment (line 13) is no use.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "src/lib.rs", "line": 3, "symbol": "from_vec"}),
    );
    assert!(
        v["text"].as_str().unwrap().contains("src/lib.rs:14:"),
        "the active use is listed: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    names_each(
        &v,
        &["src/lib.rs:7".to_string(), "src/lib.rs:11".to_string()],
    );
    assert!(
        !v["partial_reason"].as_str().unwrap().contains("lib.rs:13"),
        "a comment is no use: {v}"
    );

    // A dry run says so too.
    let v = ok_in(
        &d,
        &root,
        "lsp_rename",
        json!({"file": "src/lib.rs", "line": 3, "symbol": "from_vec", "new_name": "of_vec", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "{v}");

    let v = ok_in(
        &d,
        &root,
        "lsp_rename",
        json!({"file": "src/lib.rs", "line": 3, "symbol": "from_vec", "new_name": "of_vec"}),
    );
    // What the rename left behind, read from the disk.
    let left = whole_word_lines(&root, "from_vec");
    assert!(
        !left.is_empty(),
        "rust-analyzer renamed inside the macro and the gated code: the test no longer shows the gap"
    );
    assert_eq!(
        v["complete"], false,
        "the rename left {left:?} with the old name and said complete: {v}"
    );
    names_each(&v, &left);
}

#[test]
fn a_module_switched_off_by_a_feature_is_searched_whole() {
    // Found by a probe on tinyvec: `#[cfg(feature = "alloc")] mod tinyvec;` leaves 2,000 lines
    // out of the build; references, callers and renames of names used there answered
    // complete while missing them (`split_off`: 1 of 2).
    require("rust-analyzer");
    let lib = "#[cfg(feature = \"extra\")]\nmod heap;\n\npub fn split_off(v: &mut Vec<u8>) -> Vec<u8> { v.split_off(1) }\n\npub fn first(v: &mut Vec<u8>) -> Vec<u8> { split_off(v) }\n";
    let heap = "use crate::split_off;\n\npub fn spill(v: &mut Vec<u8>) -> Vec<u8> {\n    split_off(v)\n}\n";
    let p = project(&[
        ("Cargo.toml", CARGO),
        ("src/lib.rs", lib),
        ("src/heap.rs", heap),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "src/lib.rs", "line": 4, "symbol": "split_off", "occurrence": 1}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("src/lib.rs:6:"), "the active use: {v}");
    assert!(
        !text.contains("src/heap.rs:4:"),
        "rust-analyzer now sees the switched-off module: the test no longer shows the gap: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    names_each(
        &v,
        &["src/heap.rs:1".to_string(), "src/heap.rs:4".to_string()],
    );

    // The callers too.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/lib.rs", "line": 4, "symbol": "split_off", "occurrence": 1}),
    );
    assert_eq!(v["complete"], false, "{v}");
    names_each(&v, &["src/heap.rs:4".to_string()]);

    // Asked from inside the switched-off module, the server knows nothing there: the error
    // says why.
    let e = toolvisor_tests::lsp::err_in(
        &d,
        &root,
        "lsp",
        json!({"op": "call_hierarchy", "file": "src/heap.rs", "line": 3, "symbol": "spill"}),
    );
    assert!(
        e.message.contains("switched off") && e.message.contains("src/lib.rs"),
        "{e}"
    );
}

/// A fresh probe on strsim: rust-analyzer listed no use of `osa_distance` inside
/// `assert_eq!(3, osa_distance(…))` in the integration tests (`tests/lib.rs`), and the answer
/// said complete. Every line of the tests holding the name is now listed or named as a place
/// the answer may miss. (On this small crate rust-analyzer lists them all, so this guards the
/// invariant; the scan itself is `hidden_uses::rust`'s unit test.)
#[test]
fn uses_in_macro_call_arguments_are_listed_or_named() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"sims\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "pub fn osa_distance(a: &str, b: &str) -> usize {\n    a.len() + b.len()\n}\n",
        ),
        (
            "tests/lib.rs",
            "use sims::osa_distance;\n\n#[test]\nfn osa() {\n    assert_eq!(5, osa_distance(\"ac\", \"cba\"));\n}\n\nmacro_rules! assert_delta {\n    ($x:expr, $y:expr) => { assert!(($x as i64 - $y as i64).abs() < 2) };\n}\n\n#[test]\nfn delta() {\n    assert_delta!(5, osa_distance(\"ab\", \"abc\"));\n}\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "src/lib.rs", "line": 1, "symbol": "osa_distance"}),
    );
    let text = v["text"].as_str().unwrap();
    let reason = v["partial_reason"].as_str().unwrap_or("");
    for line in [1, 5, 14] {
        let place = format!("tests/lib.rs:{line}");
        assert!(
            text.contains(&format!("{place}:")) || reason.contains(&place),
            "{place} holds a use the answer neither lists nor names: {v}"
        );
    }
    if !text.contains("tests/lib.rs:14:") {
        assert_eq!(v["complete"], false, "{v}");
    }
}

/// A fresh probe on strsim: a rename of `jaro_winkler` said complete while the doc example
/// above it kept the old name, and `cargo test --doc` failed. A doc test's use is named now.
#[test]
fn a_rename_names_the_doc_test_it_does_not_change() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"sims\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "/// Like the others.\n///\n/// ```\n/// assert_eq!(2, sims::jaro_winkler(\"a\", \"b\"));\n/// ```\npub fn jaro_winkler(a: &str, b: &str) -> usize {\n    a.len() + b.len()\n}\n\npub fn twice() -> usize {\n    jaro_winkler(\"x\", \"y\") * 2\n}\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "lsp_rename",
        json!({"file": "src/lib.rs", "line": 6, "symbol": "jaro_winkler", "new_name": "jw", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "{v}");
    names_each(&v, &["src/lib.rs:4".to_string()]);
}

/// An eighth probe (base64 0.22): a write to `src/write.rs`, declared
/// `#[cfg(any(feature = "std", test))] mod write;` with `std` a default feature, said the file
/// was switched off and not analysed — in the same answer as rust-analyzer's error there. A
/// cfg known to be on (`test`, the default features, this host) switches nothing off.
#[test]
fn a_module_under_a_default_feature_or_test_is_not_said_to_be_switched_off() {
    require("rust-analyzer");
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"b64\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[features]\ndefault = [\"std\"]\nstd = []\nextra = []\n\n[workspace]\n",
        ),
        (
            "src/lib.rs",
            "#[cfg(any(feature = \"std\", test))]\nmod write;\n#[cfg(feature = \"extra\")]\nmod more;\n",
        ),
        ("src/write.rs", "pub fn w() -> u32 {\n    1\n}\n"),
        ("src/more.rs", "pub fn m() -> u32 {\n    1\n}\n"),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&format!(
        "[trust]\nroots = [{:?}]\n{}",
        root.display().to_string(),
        lsp_config("")
    ));
    let v = ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "src/write.rs", "old_text": "    1\n", "new_text": "    let s: u32 = \"x\";\n    s\n"}),
    );
    let text = v["diagnostics"]["text"].as_str().unwrap();
    assert!(
        !text.contains("switched off"),
        "an analysed module said to be switched off: {v}"
    );
    let v = ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "src/more.rs", "old_text": "    1\n", "new_text": "    2\n"}),
    );
    let text = v["diagnostics"]["text"].as_str().unwrap();
    assert!(
        text.contains("switched off"),
        "a module under a feature that is off is no longer named: {v}"
    );
}
