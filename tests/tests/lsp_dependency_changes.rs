//! The diagnostics (and positions) of a file are fresh after a file it
//! depends on changed, or the answer says `complete: false` and why. Each truth comes from the
//! compiler itself: tsc, the C compiler, cargo check.
//!
//! - TypeScript: `diagnostics src/types.ts` answered 0 errors for 1–5 s after the imported
//!   module's signature changed on disk (a `git checkout`), and the stale errors stayed after
//!   the checkout back.
//! - clangd: after lines were added at the top of a header, `definition` answered the old
//!   line; the including file's diagnostics stayed those of the old header.
//! - rust-analyzer: `diagnostics src/b.rs` said "no diagnostics" for a file that was not open
//!   when `cargo check` ran, while the check reported an error there.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{git, lsp_config, ok_in, project, require, write};

fn errors_in(v: &Value, file: &str) -> usize {
    v["diagnostics"]
        .as_array()
        .unwrap_or_else(|| panic!("no diagnostics list in {v}"))
        .iter()
        .filter(|d| d["severity"] == "error" && d["path"] == file)
        .count()
}

/// An answer that is either complete and equal to `want`, or says it is not complete and why.
/// Returns whether it was complete.
fn fresh_or_honest(v: &Value, got: usize, want: usize, what: &str) -> bool {
    if v["complete"] == true {
        assert_eq!(
            got, want,
            "{what}: a complete answer with {got} errors, the compiler counts {want}: {v}"
        );
        return true;
    }
    let reason = v["partial_reason"].as_str().unwrap_or("");
    assert!(
        !reason.is_empty() && v["text"].as_str().unwrap_or("").contains(reason),
        "{what}: an incomplete answer must say why, in its text too: {v}"
    );
    false
}

/// tsc's error count for `file` in the project at `root` (`tsc --noEmit -p .`).
fn tsc_errors(root: &Path, file: &str) -> usize {
    let out = Command::new(require("tsc"))
        .args(["--noEmit", "-p", ".", "--pretty", "false"])
        .current_dir(root)
        .output()
        .expect("tsc runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("{file}(")) && l.contains("): error TS"))
        .count()
}

const CALLS: usize = 12;

#[test]
fn typescript_diagnostics_follow_an_imported_module_changed_on_disk() {
    require("typescript-language-server");
    let mut uses = String::from("import { enlist } from \"./core\";\n\n");
    for i in 0..CALLS {
        uses.push_str(&format!("export const x{i}: string = enlist(\"m{i}\");\n"));
    }
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true, \"module\": \"commonjs\"}, \"include\": [\"src\"]}\n",
        ),
        (
            "src/core.ts",
            "export function enlist(name: string): string {\n    return name;\n}\n",
        ),
        ("src/types.ts", &uses),
    ]);
    let root = p.path().canonicalize().unwrap();
    git(&root, &["init", "-q"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "main"]);
    git(&root, &["checkout", "-qb", "feature"]);
    write(
        &root,
        "src/core.ts",
        "export function enlist(name: number): number {\n    return name;\n}\n",
    );
    git(&root, &["commit", "-qam", "feature"]);
    git(&root, &["checkout", "-q", "main"]);
    let d = TestDaemon::start(&lsp_config(""));
    let ask = || {
        ok_in(
            &d,
            &root,
            "lsp",
            json!({"op": "diagnostics", "file": "src/types.ts"}),
        )
    };
    let v = ask();
    assert_eq!(errors_in(&v, "src/types.ts"), 0, "{v}");
    let mut complete = 0;
    for round in 0..3 {
        for branch in ["feature", "main"] {
            git(&root, &["checkout", "-q", branch]);
            let want = tsc_errors(&root, "src/types.ts");
            if branch == "feature" {
                assert!(want >= CALLS, "tsc finds the broken calls: {want}");
            }
            let v = ask();
            let what = format!("round {round}, after checking out {branch}");
            complete += fresh_or_honest(&v, errors_in(&v, "src/types.ts"), want, &what) as usize;
        }
    }
    assert!(
        complete > 0,
        "typescript-language-server answered: not one answer in six was complete"
    );
}

fn c_project() -> tempfile::TempDir {
    let p = project(&[
        ("ultra.h", "#pragma once\nint enlist(int x);\n"),
        (
            "encode.c",
            "#include \"ultra.h\"\n\nint encode(void) { return enlist(1); }\n",
        ),
    ]);
    let dir = p.path().canonicalize().unwrap().display().to_string();
    write(
        p.path(),
        "compile_commands.json",
        &serde_json::to_string(
            &json!([{"directory": dir, "file": format!("{dir}/encode.c"),
            "arguments": ["cc", "-c", "encode.c"]}]),
        )
        .unwrap(),
    );
    p
}

/// The C compiler's error count for `file` (`cc -fsyntax-only`).
fn cc_errors(root: &Path, file: &str) -> usize {
    let out = Command::new("cc")
        .args(["-fsyntax-only", file])
        .current_dir(root)
        .output()
        .expect("cc runs");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with(&format!("{file}:")) && l.contains(": error:"))
        .count()
}

/// The 1-based line of the first line of `root/file` that starts with `prefix`.
fn line_of(root: &Path, file: &str, prefix: &str) -> u64 {
    let text = std::fs::read_to_string(root.join(file)).unwrap();
    text.lines()
        .position(|l| l.starts_with(prefix))
        .map(|i| i as u64 + 1)
        .unwrap_or_else(|| panic!("no line starts with {prefix:?} in {text}"))
}

#[test]
fn clangd_answers_from_the_header_as_it_is_on_disk() {
    require("clangd");
    let p = c_project();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let definition = || {
        ok_in(
            &d,
            &root,
            "lsp",
            json!({"op": "definition", "file": "encode.c", "line": 3, "symbol": "enlist"}),
        )
    };
    let diagnostics = || {
        ok_in(
            &d,
            &root,
            "lsp",
            json!({"op": "diagnostics", "file": "encode.c"}),
        )
    };
    let v = definition();
    assert_eq!(v["locations"][0]["line"], 2, "{v}");
    let v = diagnostics();
    assert_eq!(errors_in(&v, "encode.c"), 0, "{v}");

    // Two lines added at the top of the header, outside the daemon (a `sed`).
    write(
        &root,
        "ultra.h",
        "#pragma once\n/* ultra: the encoder's API */\n/* (one int in) */\nint enlist(int x);\n",
    );
    let want = line_of(&root, "ultra.h", "int enlist(");
    let v = definition();
    if v["complete"] == true {
        assert_eq!(
            v["locations"][0]["line"], want,
            "the definition is on line {want} of the header now: {v}"
        );
    } else {
        assert!(v["partial_reason"].as_str().is_some(), "{v}");
    }

    // The signature changes: encode.c's call has too few arguments now.
    write(
        &root,
        "ultra.h",
        "#pragma once\n/* ultra: the encoder's API */\n/* (two ints in) */\nint enlist(int x, int y);\n",
    );
    let want = cc_errors(&root, "encode.c");
    assert!(want > 0, "the compiler finds the call's missing argument");
    let v = diagnostics();
    fresh_or_honest(
        &v,
        errors_in(&v, "encode.c"),
        want,
        "after the header changed",
    );
    // And back: the error goes.
    write(
        &root,
        "ultra.h",
        "#pragma once\n/* ultra: the encoder's API */\n/* (one int in) */\nint enlist(int x);\n",
    );
    let want = cc_errors(&root, "encode.c");
    let v = diagnostics();
    fresh_or_honest(
        &v,
        errors_in(&v, "encode.c"),
        want,
        "after the header was restored",
    );
}

/// cargo check's errors in `file` (error codes), in a target directory of its own.
fn cargo_errors(root: &Path, file: &str, target: &Path) -> Vec<String> {
    let out = Command::new("cargo")
        .args(["check", "--quiet", "--message-format=short", "--target-dir"])
        .arg(target)
        .current_dir(root)
        .output()
        .expect("cargo runs");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.starts_with(&format!("{file}:")) && l.contains(": error["))
        .filter_map(|l| {
            let code = l.split("error[").nth(1)?.split(']').next()?;
            Some(code.to_string())
        })
        .collect()
}

#[test]
fn rust_diagnostics_of_a_file_not_open_include_the_last_check() {
    require("rust-analyzer");
    // A use after move: only rustc's borrow checker finds it, never rust-analyzer itself.
    let p = project(&[
        (
            "Cargo.toml",
            "[package]\nname = \"moved\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "pub mod b;\n\npub fn answer() -> u32 {\n    42\n}\n",
        ),
        (
            "src/b.rs",
            "pub fn twice() -> usize {\n    let s = String::from(\"x\");\n    let t = s;\n    s.len() + t.len()\n}\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let target = tempfile::tempdir().unwrap();
    let want = cargo_errors(&root, "src/b.rs", target.path());
    assert!(
        want.iter().any(|c| c == "E0382"),
        "cargo check finds the use after move: {want:?}"
    );
    let d = TestDaemon::start(&lsp_config(&format!(
        "\n[trust]\nroots = [{:?}]\n",
        root.display().to_string()
    )));
    // lib.rs is opened and saved (an edit): the check that follows covers the crate.
    ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/lib.rs"}),
    );
    ok_in(
        &d,
        &root,
        "edit",
        json!({"path": "src/lib.rs", "old_text": "    42\n", "new_text": "    41 + 1\n"}),
    );
    // b.rs was not open when that check ran.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/b.rs"}),
    );
    let got: Vec<String> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["severity"] == "error")
        .map(|d| d["code"].as_str().unwrap_or("").to_string())
        .collect();
    if v["complete"] == true {
        for code in &want {
            assert!(
                got.contains(code),
                "cargo check reports {code} in src/b.rs; the answer has {got:?}: {v}"
            );
        }
    } else {
        assert!(v["partial_reason"].as_str().is_some(), "{v}");
    }
    // Asked again, the same: the check's errors stay until a check says otherwise.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "diagnostics", "file": "src/b.rs"}),
    );
    assert!(
        v["text"].as_str().unwrap().contains("E0382"),
        "the second answer lost cargo check's error: {v}"
    );
}
