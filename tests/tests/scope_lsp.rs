//! Language-server tools, with a real pyright whose root (`pyproject.toml`) is the
//! parent of the workdir: `lsp` ops, `synced_write`, `lsp_rename` and `lsp_edit` on a file outside the
//! workdir (or through a link out of it) are `out_of_scope`; a definition outside is named but
//! its text is not read; a rename whose edit touches a file outside is refused whole, nothing
//! written anywhere; `[files] allow_outside_workdir` lifts all of it, `read_roots` only reads.

use std::path::PathBuf;

use serde_json::{Value as Json, json};
use toolvisor_protocol::ToolError;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::lsp::{canonical, err_in, lsp_config, ok_in, require};
use toolvisor_tests::{TestDaemon, assert_out_of_scope};

const SHARED: &str = "def helper(x):  # text-of-the-outside-file\n    return x\n";
const MAIN: &str = "from shared import helper\n\nprint(helper(1))\n";

/// `base/pyproject.toml`, `base/shared.py` (outside) and the workdir `base/work` with
/// `main.py` using `shared.helper`.
struct Layout {
    _base: tempfile::TempDir,
    base: PathBuf,
    work: PathBuf,
    shared: PathBuf,
    main: PathBuf,
}

fn layout() -> Layout {
    let dir = tempfile::tempdir().unwrap();
    let base = canonical(dir.path());
    let work = base.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(base.join("pyproject.toml"), "").unwrap();
    std::fs::write(base.join("shared.py"), SHARED).unwrap();
    std::fs::write(work.join("main.py"), MAIN).unwrap();
    Layout {
        _base: dir,
        shared: base.join("shared.py"),
        main: work.join("main.py"),
        base,
        work,
    }
}

fn definition_of_helper(d: &TestDaemon, l: &Layout) -> Json {
    ok_in(
        d,
        &l.work,
        "lsp",
        json!({"op": "definition", "file": "main.py", "line": 3, "symbol": "helper"}),
    )
}

fn rename_helper(d: &TestDaemon, l: &Layout) -> Result<Json, ToolError> {
    match toolvisor_tests::lsp::call_in(
        d,
        &l.work,
        "lsp_rename",
        json!({"file": "main.py", "line": 3, "symbol": "helper", "new_name": "aid"}),
    ) {
        toolvisor_protocol::wire::Outcome::Ok(v) => Ok(v.0),
        toolvisor_protocol::wire::Outcome::Err(e) => Err(e),
    }
}

#[test]
fn pyright_tools_stay_inside_the_workdir() {
    require("pyright-langserver");
    let l = layout();
    // A link inside the workdir to the outside file.
    std::os::unix::fs::symlink("../shared.py", l.work.join("link.py")).unwrap();
    let d = TestDaemon::start(&lsp_config(""));

    // Every file argument goes through the scope.
    for file in [
        "../shared.py".to_string(),
        l.shared.display().to_string(),
        "link.py".to_string(),
    ] {
        for args in [
            json!({"op": "hover", "file": file, "line": 1, "symbol": "helper"}),
            json!({"op": "definition", "file": file, "line": 1, "symbol": "helper"}),
            json!({"op": "diagnostics", "file": file}),
            json!({"op": "symbols", "file": file}),
            json!({"op": "status", "file": file}),
            json!({"op": "call_hierarchy", "file": file, "line": 1, "symbol": "helper"}),
            json!({"op": "check_edit", "file": file, "new_text": "x = 1\n"}),
            json!({"op": "type_hierarchy", "file": file, "line": 1, "symbol": "helper"}),
            json!({"op": "signature_help", "file": file, "line": 1, "symbol": "helper"}),
            json!({"op": "completions", "file": file, "line": 1, "symbol": "help"}),
            json!({"op": "inlay_hints", "file": file}),
            json!({"op": "workspace_diagnostics", "file": file}),
        ] {
            let e = err_in(&d, &l.work, "lsp", args);
            assert_out_of_scope(&e, "lsp", &l.shared, &l.work);
        }
        let e = err_in(&d, &l.work, "synced_write", json!({"path": file}));
        assert_out_of_scope(&e, "synced_write", &l.shared, &l.work);
        let e = err_in(
            &d,
            &l.work,
            "lsp_rename",
            json!({"file": file, "line": 1, "symbol": "helper", "new_name": "aid"}),
        );
        assert_out_of_scope(&e, "lsp_rename", &l.shared, &l.work);
        for args in [
            json!({"op": "replace_symbol_body", "file": file, "symbol_path": "helper", "text": "def helper(x):\n    return 0\n"}),
            json!({"op": "insert_after_symbol", "file": file, "symbol_path": "helper", "text": "y = 1\n"}),
            json!({"op": "format", "file": file}),
        ] {
            let e = err_in(&d, &l.work, "lsp_edit", args);
            assert_out_of_scope(&e, "lsp_edit", &l.shared, &l.work);
        }
        assert_eq!(std::fs::read_to_string(&l.shared).unwrap(), SHARED);
    }

    // A definition outside is named (path:line), its text is not read.
    let v = definition_of_helper(&d, &l);
    let text = v["text"].as_str().unwrap();
    let shown = format!("{}:1: (outside the workdir", l.shared.display());
    assert!(text.contains(&shown), "{v}");
    assert!(!text.contains("text-of-the-outside-file"), "{v}");
    let loc = v["locations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["abs_path"] == l.shared.display().to_string())
        .unwrap_or_else(|| panic!("no location in shared.py: {v}"));
    assert_eq!((&loc["outside"], &loc["text"]), (&json!(true), &json!("")));

    // The server's root is the parent: its rename edit reaches shared.py, so it is refused
    // whole and nothing is written anywhere.
    let e = rename_helper(&d, &l).unwrap_err();
    assert_out_of_scope(&e, "lsp_rename", &l.shared, &l.work);
    assert!(e.message.contains("nothing was written"), "{e}");
    assert!(e.hint.contains("holds every file using the symbol"), "{e}");
    assert_eq!(std::fs::read_to_string(&l.shared).unwrap(), SHARED);
    assert_eq!(std::fs::read_to_string(&l.main).unwrap(), MAIN);

    // Inside, the same tools still answer.
    let v = ok_in(&d, &l.work, "synced_write", json!({"path": "main.py"}));
    assert_eq!(v["path"], "main.py", "{v}");
}

#[test]
fn allow_outside_workdir_lifts_it_for_the_language_server_tools() {
    require("pyright-langserver");
    let l = layout();
    let d = TestDaemon::start(&format!(
        "{}\n[files]\nallow_outside_workdir = true\n",
        lsp_config("")
    ));
    let v = ok_in(
        &d,
        &l.work,
        "lsp",
        json!({"op": "hover", "file": "../shared.py", "line": 1, "symbol": "helper"}),
    );
    assert!(v["text"].as_str().unwrap().contains("helper"), "{v}");
    ok_in(
        &d,
        &l.work,
        "lsp",
        json!({"op": "diagnostics", "file": "../shared.py"}),
    );
    ok_in(&d, &l.work, "synced_write", json!({"path": "../shared.py"}));
    let v = definition_of_helper(&d, &l);
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("def helper(x):  # text-of-the-outside-file"),
        "{v}"
    );
    let v = rename_helper(&d, &l).unwrap_or_else(|e| panic!("rename refused: {e}"));
    assert_eq!(v["files"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        std::fs::read_to_string(&l.shared).unwrap(),
        SHARED.replace("helper", "aid")
    );
    assert_eq!(
        std::fs::read_to_string(&l.main).unwrap(),
        MAIN.replace("helper", "aid")
    );
}

#[test]
fn a_read_root_shows_outside_text_but_a_rename_there_is_still_refused() {
    require("pyright-langserver");
    let l = layout();
    let d = TestDaemon::start(&format!(
        "{}\n[files]\nread_roots = [{:?}]\n",
        lsp_config(""),
        l.base.display().to_string()
    ));
    let v = definition_of_helper(&d, &l);
    assert!(
        v["text"]
            .as_str()
            .unwrap()
            .contains("def helper(x):  # text-of-the-outside-file"),
        "{v}"
    );
    let e = rename_helper(&d, &l).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfScope, "{e}");
    assert!(
        e.message
            .contains(&format!("resolves to {}", l.shared.display())),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&l.shared).unwrap(), SHARED);
    assert_eq!(std::fs::read_to_string(&l.main).unwrap(), MAIN);
}
