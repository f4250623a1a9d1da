//! clangd cannot see a use of a name inside a `#define` body, a disabled
//! preprocessor branch or the arguments of a macro that drops them, so its rename of a function used there answered "1 edits in 1 files",
//! complete, and left the macro calling the old name (its references missed that use too).
//! Now such an answer is `complete: false` and names the file and line of every use the
//! server did not report. The truth is the disk: after the rename, every line still holding
//! the old name as a whole word must be named.

use std::path::Path;

use serde_json::{Value, json};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, names_each, ok_in, project, require, write};

/// `file:line` of every line of the C files under `root` holding `word` as a whole word.
fn whole_word_lines(root: &Path, word: &str) -> Vec<String> {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut found = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with(".c") || n.ends_with(".h"))
        .collect();
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(root.join(&name)).unwrap();
        for (i, line) in text.lines().enumerate() {
            let hit = line.match_indices(word).any(|(at, _)| {
                !is_word(line[..at].chars().next_back())
                    && !is_word(line[at + word.len()..].chars().next())
            });
            if hit {
                found.push(format!("{name}:{}", i + 1));
            }
        }
    }
    found
}

const HEADER: &str = "#ifndef CORE_H\n#define CORE_H\n\nint enlist(int x);\n\n#define TWICE(v) \\\n    (enlist(v) + enlist(v))\n#define check(c) ((void)0)\n\n#endif\n";
const MAIN: &str = "#include \"core.h\"\n\n/* enlist is called below */\nint run(void) {\n    int n = enlist(1);\n#ifdef LEGACY\n    n += enlist(2);\n#endif\n    check(enlist(4) > 0);\n    return n;\n}\n";

fn c_project() -> tempfile::TempDir {
    let p = project(&[
        ("core.h", HEADER),
        (
            "core.c",
            "#include \"core.h\"\n\nint enlist(int x) { return x; }\n",
        ),
        ("main.c", MAIN),
    ]);
    let dir = p.path().canonicalize().unwrap().display().to_string();
    let db: Vec<Value> = ["core.c", "main.c"]
        .iter()
        .map(|f| json!({"directory": dir, "file": format!("{dir}/{f}"), "arguments": ["cc", "-c", f]}))
        .collect();
    write(
        p.path(),
        "compile_commands.json",
        &serde_json::to_string(&db).unwrap(),
    );
    p
}

#[test]
fn references_and_rename_name_the_uses_clangd_cannot_see() {
    require("clangd");
    let p = c_project();
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));

    // The macro body (core.h:7) and the disabled branch (main.c:7) hold uses clangd misses;
    // the comment (main.c:3) is no use.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "core.c", "line": 3, "symbol": "enlist"}),
    );
    assert_eq!(v["complete"], false, "{v}");
    // The argument of `check`, a macro that drops it (main.c:9), never reaches clangd either
    // (lz4's `assert` and `DEBUGLOG` without debugging).
    names_each(
        &v,
        &[
            "core.h:7".to_string(),
            "main.c:7".to_string(),
            "main.c:9".to_string(),
        ],
    );
    assert!(
        !v["partial_reason"].as_str().unwrap().contains("main.c:3"),
        "a comment is no use: {v}"
    );

    let v = ok_in(
        &d,
        &root,
        "lsp_rename",
        json!({"file": "core.c", "line": 3, "symbol": "enlist", "new_name": "enroll"}),
    );
    // What the rename left behind, read from the disk.
    let left: Vec<String> = whole_word_lines(&root, "enlist")
        .into_iter()
        .filter(|l| l != "main.c:3")
        .collect();
    assert!(
        !left.is_empty(),
        "clangd renamed inside the macro and the disabled branch: the test no longer shows the gap"
    );
    assert_eq!(
        v["complete"], false,
        "the rename left {left:?} with the old name and said complete: {v}"
    );
    names_each(&v, &left);
}

/// A fresh probe on bitarray: a function whose name a macro pastes together
/// (`bitarray_ ## name`, called as `SHIFT_FUNC(lshift, …)`) is defined by a name no text
/// spells, so clangd's rename of `bitarray_lshift` changed the one call and said complete,
/// and the file no longer compiled. The rename now names the call that defines it.
#[test]
fn a_rename_of_a_name_a_macro_pastes_together_names_the_macro_call() {
    require("clangd");
    let p = project(&[
        ("compile_flags.txt", "-std=c11\n"),
        (
            "shift.c",
            "#define SHIFT_FUNC(name, op) \\\nstatic int bitarray_ ## name(int x) { return x op 1; }\n\nSHIFT_FUNC(lshift, <<)\nSHIFT_FUNC(rshift, >>)\n\nint run(void) {\n    return bitarray_lshift(3) + bitarray_rshift(4);\n}\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let args = json!({"file": "shift.c", "line": 8, "symbol": "bitarray_lshift", "new_name": "ba_lshift", "dry_run": true});
    let v = ok_in(&d, &root, "lsp_rename", args);
    assert_eq!(v["complete"], false, "{v}");
    names_each(&v, &["shift.c:4".to_string()]);
    assert!(
        !v["partial_reason"].as_str().unwrap().contains("shift.c:5"),
        "SHIFT_FUNC(rshift) pastes another name: {v}"
    );
    // References list the call that defines it (clangd maps the expansion back to it).
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "shift.c", "line": 8, "symbol": "bitarray_lshift"}),
    );
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("shift.c:4: SHIFT_FUNC(lshift, <<)"),
        "{v}"
    );
}

/// A fresh probe on mmh3: clangd's outline of `typedef struct {…} Name;` came with the name
/// (shown at its line) before the anonymous struct (shown at the `typedef`), out of the
/// file's order. The outline reads by the lines it shows.
#[test]
fn a_typedef_struct_outline_reads_in_the_files_order() {
    require("clangd");
    let p = project(&[
        ("compile_flags.txt", "-std=c11\n"),
        (
            "h.c",
            "typedef struct {\n    int seed;\n    int len;\n} Hasher;\n\nint init(Hasher *h) {\n    return h->seed;\n}\n",
        ),
    ]);
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(&d, p.path(), "lsp", json!({"op": "symbols", "file": "h.c"}));
    let lines: Vec<u64> = v["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["line"].as_u64().unwrap())
        .collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert!(lines.len() >= 3, "{v}");
    assert_eq!(lines, sorted, "{v}");
}
