//! A `tsconfig.json` below the root makes a project of its own, which tsserver
//! searches only once a file of it is open (ts-pattern's `tests/tsconfig.json`): asked from
//! `src/`, references, callers and renames missed every use in `tests/` and said complete.
//! Now the answer is `complete: false` naming those places and the file to ask from; asked
//! from there, the nested root's server answers and the outer root's answer is merged in.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{lsp_config, ok_in, project, require};

#[test]
fn uses_in_a_nested_project_are_named_until_asked_from_there() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            r#"{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}"#,
        ),
        (
            "src/errors.ts",
            "export class NonExhaustiveError extends Error {}\n",
        ),
        (
            "src/index.ts",
            "import { NonExhaustiveError } from './errors';\n\nexport function fail(): never {\n    throw new NonExhaustiveError();\n}\n",
        ),
        (
            "tests/tsconfig.json",
            r#"{"extends": "../tsconfig.json", "include": ["."]}"#,
        ),
        (
            "tests/errors.test.ts",
            "import { NonExhaustiveError } from '../src/errors';\n\nexport const e = new NonExhaustiveError();\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "src/errors.ts", "line": 1, "symbol": "NonExhaustiveError"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("src/index.ts:4:"), "{v}");
    assert!(
        !text.contains("tests/errors.test.ts:3:"),
        "tsserver searched the nested project unasked: the test no longer shows the gap: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    let reason = v["partial_reason"].as_str().unwrap();
    for place in ["tests/errors.test.ts:1", "tests/errors.test.ts:3"] {
        assert!(reason.contains(place), "{place} is not named: {v}");
    }
    assert!(reason.contains("`file`: tests/errors.test.ts"), "{v}");

    // Asked from there, as the answer says: every use, complete.
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "tests/errors.test.ts", "line": 3, "symbol": "NonExhaustiveError"}),
    );
    let text = v["text"].as_str().unwrap();
    for place in [
        "src/errors.ts:1:",
        "src/index.ts:4:",
        "tests/errors.test.ts:3:",
    ] {
        assert!(text.contains(place), "{place} missing: {v}");
    }
    assert_eq!(v["complete"], true, "{v}");
}

/// A fresh probe on rxjs: `scripts/check2.ts` is outside the root tsconfig's `include`, so
/// tsserver sees it only while it is open; made on disk (not opened), its two uses of
/// `operate` were missing from references and a rename, which said complete (tsc then fails
/// on it). Such a file's uses are named now, and a `.d.ts` or the `outDir` never are.
#[test]
fn uses_in_a_file_the_tsconfig_leaves_out_are_named() {
    require("typescript-language-server");
    let p = project(&[
        (
            "tsconfig.json",
            "{\n  // as rxjs has it\n  \"compilerOptions\": {\"strict\": true, \"target\": \"es2020\", \"module\": \"commonjs\", \"outDir\": \"dist\"},\n  \"include\": [\"src\"],\n}\n",
        ),
        (
            "src/lift.ts",
            "export function operate(n: number): number {\n    return n + 1;\n}\n",
        ),
        (
            "src/map.ts",
            "import { operate } from './lift';\n\nexport const two = operate(1);\n",
        ),
        (
            "scripts/check2.ts",
            "import { operate } from '../src/lift';\n\nconsole.log(operate(2));\n",
        ),
        (
            "dist/lift.d.ts",
            "export declare function operate(n: number): number;\n",
        ),
    ]);
    let root = p.path().canonicalize().unwrap();
    let d = TestDaemon::start(&lsp_config(""));
    let v = ok_in(
        &d,
        &root,
        "lsp",
        json!({"op": "references", "file": "src/lift.ts", "line": 1, "symbol": "operate"}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("src/map.ts:3:"), "{v}");
    assert!(
        !text.contains("scripts/check2.ts:3:"),
        "tsserver searched the left-out file unasked: the test no longer shows the gap: {v}"
    );
    assert_eq!(v["complete"], false, "{v}");
    let reason = v["partial_reason"].as_str().unwrap();
    for place in ["scripts/check2.ts:1", "scripts/check2.ts:3"] {
        assert!(reason.contains(place), "{place} is not named: {v}");
    }
    assert!(!reason.contains("dist/"), "built output is no use: {v}");
    let v = ok_in(
        &d,
        &root,
        "lsp_rename",
        json!({"file": "src/lift.ts", "line": 1, "symbol": "operate", "new_name": "apply", "dry_run": true}),
    );
    assert_eq!(v["complete"], false, "{v}");
    assert!(
        v["partial_reason"]
            .as_str()
            .unwrap()
            .contains("scripts/check2.ts:3"),
        "{v}"
    );
}
