//! `eval` with a real Node kernel: state persists (top-level `let`/`const` can be declared
//! again), the completion value is echoed, console.log is captured, top-level `await`,
//! `require` and dynamic `import` work from the workdir, errors carry their stack, and a
//! silent cell is interrupted without losing the kernel.

use serde_json::json;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::eval::{self, args};
use toolvisor_tests::{err_of, ok_of};

fn js(code: &str) -> serde_json::Value {
    args(code, json!({"language": "javascript"}))
}

#[test]
fn state_echo_console_and_top_level_await() {
    let d = eval::daemon("");
    let v = eval::ok_with(
        &d,
        "c",
        js("let x = 41\nconst double = (n) => n * 2\nx + 1"),
    );
    assert_eq!(v["text"], "42\n");
    assert_eq!(v["language"], "javascript");
    let pid = v["kernel"]["pid"].clone();
    let v = eval::ok_with(
        &d,
        "c",
        js(
            "console.log('x is', x, {a: [1, 2]})\nconsole.error('to stderr')\nawait new Promise((r) => setTimeout(r, 10))\ndouble(x)",
        ),
    );
    assert_eq!(v["text"], "x is 41 { a: [ 1, 2 ] }\nto stderr\n82\n");
    assert_eq!(v["kernel"]["pid"], pid);
    // Running a cell again (declaring the same names) works, as in a notebook.
    let v = eval::ok_with(
        &d,
        "c",
        js("let x = 1\nclass P { get v() { return x } }\nnew P().v"),
    );
    assert_eq!(v["text"], "1\n");
    let v = eval::ok_with(
        &d,
        "c",
        js("let x = 2\nfunction f() { return x * 10 }\ndisplay('shown'); f()"),
    );
    assert_eq!(v["text"], "shown\n20\n");
    // Python and JavaScript kernels of one conversation are separate.
    assert_eq!(eval::ok(&d, "c", "'x' in globals()")["text"], "False\n");
}

#[test]
fn require_and_dynamic_import_resolve_from_the_workdir() {
    let d = eval::daemon("");
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("local.js"),
        "module.exports = { answer: 42 };\n",
    )
    .unwrap();
    std::fs::write(
        work.path().join("esm.mjs"),
        "export const greet = (n) => `hi ${n}`;\n",
    )
    .unwrap();
    let mut c = Client::connect(&d.socket, eval::options_in(work.path(), &[])).unwrap();
    let mut asked = Vec::new();
    let reply = eval::run(
        &mut c,
        "c",
        js(
            "const fs = require('fs')\nconst { answer } = require('./local.js')\nconst m = await import('./esm.mjs')\nconst path = await import('node:path');\n[answer, m.greet('js'), typeof fs.readFileSync, path.basename('/a/b.txt')]",
        ),
        &mut asked,
    );
    let v = ok_of(&reply);
    assert_eq!(v["status"], "ok", "{}", v["text"]);
    assert_eq!(v["text"], "[ 42, 'hi js', 'function', 'b.txt' ]\n");
}

#[test]
fn errors_carry_their_stack_and_the_kernel_lives_on() {
    let d = eval::daemon("");
    eval::ok_with(&d, "c", js("const kept = 'yes'"));
    let v = eval::result_with(
        &d,
        "c",
        js("console.log('before')\nfunction inner() {\n  throw new TypeError('boom')\n}\ninner()"),
    );
    assert_eq!(v["status"], "error");
    assert_eq!(v["error"]["ename"], "TypeError");
    assert_eq!(v["error"]["evalue"], "boom");
    let stack = v["error"]["traceback"].as_str().unwrap();
    assert!(
        stack.contains("at inner") && stack.contains("[cell 2]:3:"),
        "{stack}"
    );
    assert!(
        !stack.contains("[eval]") && !stack.contains("node:"),
        "driver frames leak: {stack}"
    );
    let v = eval::result_with(
        &d,
        "c",
        js("await Promise.reject(new RangeError('async boom'))"),
    );
    assert_eq!(v["error"]["ename"], "RangeError");
    let v = eval::result_with(&d, "c", js("this is not javascript"));
    assert_eq!(v["error"]["ename"], "SyntaxError");
    assert_eq!(eval::ok_with(&d, "c", js("kept"))["text"], "'yes'\n");
}

#[test]
fn a_silent_javascript_cell_is_interrupted_and_the_kernel_keeps_its_state() {
    let d = eval::daemon("");
    let first = eval::ok_with(&d, "c", js("var kept = 7"));
    // A synchronous busy loop and a promise that never settles: both are interrupted.
    for code in ["while (true) {}", "await new Promise(() => {})"] {
        let e = eval::err_with(
            &d,
            "c",
            args(code, json!({"language": "javascript", "timeout_s": 1})),
        );
        assert_eq!(e.kind, ErrorKind::Timeout, "{code}: {e}");
        assert!(e.message.contains("state are kept"), "{code}: {e}");
    }
    let v = eval::ok_with(&d, "c", js("kept"));
    assert_eq!(v["text"], "7\n");
    assert_eq!(v["kernel"]["pid"], first["kernel"]["pid"]);
}

#[test]
fn a_javascript_kernel_that_exits_answers_kernel_died() {
    let d = eval::daemon("");
    let mut c = d.client(
        toolvisor_protocol::codec::Codec::Json,
        toolvisor_protocol::wire::Tier::Exec,
        true,
    );
    let reply = c
        .call_with("c", "eval", js("process.exit(4)"), |_| true)
        .unwrap();
    let e = err_of(&reply);
    assert_eq!(e.kind, ErrorKind::KernelDied);
    assert!(e.message.contains("exited with code 4"), "{e}");
    assert_eq!(eval::ok_with(&d, "c", js("1 + 1"))["text"], "2\n");
}

fn ts(code: &str) -> serde_json::Value {
    args(code, json!({"language": "typescript"}))
}

#[test]
fn typescript_cells_run_in_the_javascript_kernel_with_its_state() {
    let typescript = eval::typescript();
    let d = eval::daemon(&format!(
        "typescript = {:?}",
        typescript.display().to_string()
    ));
    let v = eval::ok_with(
        &d,
        "c",
        ts(
            "interface Point { x: number; y: number }\nconst p: Point = { x: 40, y: 2 }\nfunction sum(q: Point): number { return q.x + q.y }\nsum(p)",
        ),
    );
    assert_eq!(v["text"], "42\n", "{v}");
    assert_eq!(v["language"], "javascript", "{v}");
    let pid = v["kernel"]["pid"].clone();
    // An enum needs code, not only erasure; generics and `as` casts are erased.
    let v = eval::ok_with(
        &d,
        "c",
        ts(
            "enum Color { Red, Green }\nconst ids: Array<number> = [Color.Green as number]\nawait Promise.resolve(ids[0] + p.x)",
        ),
    );
    assert_eq!(v["text"], "41\n", "{v}");
    assert_eq!(v["kernel"]["pid"], pid, "the same kernel");
    // JavaScript cells of the conversation see what the TypeScript cells declared.
    let v = eval::ok_with(&d, "c", js("sum({ x: 1, y: 1 }) + Color.Red"));
    assert_eq!(v["text"], "2\n", "{v}");
    // A type error is not checked (types are stripped, not checked), a runtime error is reported.
    let v = eval::result_with(&d, "c", ts("const s: string = 5 as any\n(s as any).nope()"));
    assert_eq!(v["status"], "error", "{v}");
    assert!(
        v["error"]["evalue"].as_str().unwrap().contains("nope"),
        "{v}"
    );
}

#[test]
fn typescript_without_a_stripper_says_how_to_get_one() {
    // Node 22.13+ strips types itself; elsewhere a global typescript would be found.
    let node_strips = std::process::Command::new(eval::node())
        .args([
            "-e",
            "process.exit(typeof require('module').stripTypeScriptTypes === 'function' ? 0 : 1)",
        ])
        .status()
        .unwrap()
        .success();
    let global = [
        "/usr/lib/node_modules/typescript",
        "/usr/local/lib/node_modules/typescript",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists());
    let d = eval::daemon("typescript = \"/nonexistent/typescript\"");
    let v = eval::result_with(&d, "c", ts("const n: number = 1\nn + 1"));
    if node_strips || global {
        assert_eq!(v["text"], "2\n", "{v}");
        return;
    }
    assert_eq!(v["status"], "error", "{v}");
    assert_eq!(v["error"]["ename"], "TypeScriptUnavailable", "{v}");
    let message = v["error"]["evalue"].as_str().unwrap();
    assert!(
        message.contains("/nonexistent/typescript") && message.contains("[kernels] typescript"),
        "{message}"
    );
}
