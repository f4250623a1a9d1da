//! Children the daemon starts do not write `__pycache__/` into the user's
//! tree: `[env] set` puts `PYTHONDONTWRITEBYTECODE=1` in every child's environment by
//! default (a `bash` command and an `eval` kernel importing a project module here), and
//! `set = {}` turns it off (then Python writes its cache as usual).

use std::path::Path;

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::eval::{args, kernels_config};
use toolvisor_tests::lsp::{ok_in, project};

fn python_imports(d: &TestDaemon, w: &Path) {
    let v = ok_in(
        d,
        w,
        "bash",
        json!({"command": "python3 -c 'import helper; print(helper.VALUE)'"}),
    );
    assert_eq!(v["stdout"], "7\n", "{v}");
    let v = ok_in(
        d,
        w,
        "eval",
        args(
            "import sys, os\nsys.path.insert(0, os.getcwd())\nimport kernel_helper\nprint(kernel_helper.VALUE)",
            json!({}),
        ),
    );
    assert!(v["text"].as_str().unwrap_or("").contains('8'), "{v}");
}

#[test]
fn children_write_no_bytecode_into_the_tree_unless_configured() {
    let p = project(&[
        ("helper.py", "VALUE = 7\n"),
        ("kernel_helper.py", "VALUE = 8\n"),
    ]);
    let d = TestDaemon::start(&kernels_config(""));
    python_imports(&d, p.path());
    assert!(
        !p.path().join("__pycache__").exists(),
        "a child wrote __pycache__/ into the project"
    );
    drop(d);

    let q = project(&[
        ("helper.py", "VALUE = 7\n"),
        ("kernel_helper.py", "VALUE = 8\n"),
    ]);
    let d = TestDaemon::start(&format!("[env]\nset = {{}}\n{}", kernels_config("")));
    python_imports(&d, q.path());
    let cached: Vec<String> = std::fs::read_dir(q.path().join("__pycache__"))
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        cached.iter().any(|n| n.starts_with("helper."))
            && cached.iter().any(|n| n.starts_with("kernel_helper.")),
        "with `set = {{}}` Python writes its cache as usual: {cached:?}"
    );
}
