//! `diagnostics "*"` in a root with only a `jsconfig.json` or a
//! `package.json` answered "no diagnostics (exit code 1)": tsc, given no tsconfig.json,
//! printed its help and checked nothing; and the answer's `root` was `""`. Now a
//! `jsconfig.json` is the project tsc checks, a root with neither is refused naming why, a
//! checker that fails without reporting anything is an error quoting its output, and `root`
//! is `.` for the workdir itself.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{err_in, lsp_config, ok_in, project, require};

const BAD_JS: &str =
    "// @ts-check\n/** @type {number} */\nconst n = \"not a number\";\nmodule.exports = n;\n";

#[test]
fn a_jsconfig_root_is_checked_and_a_package_json_root_is_refused() {
    require("tsc");
    let d = TestDaemon::start(&lsp_config(""));
    let js = project(&[
        (
            "jsconfig.json",
            "{\"compilerOptions\": {\"checkJs\": true}}\n",
        ),
        ("a.js", BAD_JS),
    ]);
    let v = ok_in(
        &d,
        js.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "*"}),
    );
    assert_eq!(v["root"], ".", "{v}");
    assert!(
        v["total"].as_u64().unwrap() >= 1,
        "tsc checked nothing: {v}"
    );
    assert!(v["text"].as_str().unwrap().contains("a.js:3:"), "{v}");
    assert!(
        v["checker"].as_str().unwrap().contains("-p jsconfig.json"),
        "{v}"
    );

    let pkg = project(&[("package.json", "{\"name\": \"p\"}\n"), ("a.js", BAD_JS)]);
    let e = err_in(
        &d,
        pkg.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "*"}),
    );
    assert_eq!(e.kind, ErrorKind::NotAvailable, "{e}");
    assert!(
        e.message.contains("tsconfig.json") && e.message.contains("checks nothing"),
        "{e}"
    );
}

/// Any checker that fails and reports nothing did not check: an error with its output.
#[test]
fn a_failing_checker_that_reports_nothing_is_an_error() {
    let p = project(&[("marker.broken", ""), ("a.broken", "")]);
    let d = TestDaemon::start(&lsp_config(
        "[lsp.languages.broken]\nextensions = [\"broken\"]\nmarkers = [\"marker.broken\"]\nservers = [[\"no-such-broken-server\"]]\nchecker = [\"sh\", \"-c\", \"echo 'config error: no project here' >&2; exit 2\"]\nchecker_format = \"gcc\"\n",
    ));
    let e = err_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "*"}),
    );
    assert_eq!(e.kind, ErrorKind::ResourceFailed, "{e}");
    assert!(
        e.message.contains("did not check") && e.message.contains("config error: no project here"),
        "{e}"
    );
}

/// A fresh probe on neverthrow: tsc's errors of no file (`error TS2318: Cannot find global
/// type …`, a missing type library) were dropped, so `diagnostics "*"` said 7 where tsc said
/// 8 (and here, where it is the only one, "did not check"). They stand at the tsconfig.json.
#[test]
fn a_tsc_error_of_no_file_is_a_diagnostic_of_the_tsconfig() {
    require("tsc");
    let d = TestDaemon::start(&lsp_config(""));
    let p = project(&[
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true, \"types\": [\"no-such-types\"]}}\n",
        ),
        ("src/a.ts", "export const n: number = 1;\n"),
    ]);
    let v = ok_in(
        &d,
        p.path(),
        "lsp",
        json!({"op": "diagnostics", "file": "*"}),
    );
    assert_eq!(v["total"], 1, "{v}");
    let diag = &v["diagnostics"][0];
    assert_eq!(diag["path"], "tsconfig.json", "{v}");
    assert_eq!(diag["code"], "TS2688", "{v}");
    assert!(
        diag["message"].as_str().unwrap().contains("no-such-types"),
        "{v}"
    );
}
