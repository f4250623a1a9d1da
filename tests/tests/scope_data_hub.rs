//! On the real daemon: a sensitive data-hub collection whose originals lie under
//! the workdir (and the hub's own directory, there too) is out of every file tool's reach.
//! `read`, `ls`, `write`, `edit`, `apply_patch`, `ast_grep`, `ast_edit` and `lsp` refuse a path
//! into it (`out_of_scope`, the collection never named); `grep`, `find`, `ls` and the
//! structural walk over the parent leave it out and say how many paths they left; a grep
//! result large enough to be stored holds none of it when read back with `tool_result_read`;
//! a definition pyright finds there is named, never quoted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::lsp::{call_in, canonical, lsp_config, require};
use toolvisor_tests::{TestDaemon, wait_for};

/// What no tool may show: it is only in the sensitive collection's originals.
const SECRET: &str = "zebracorn";

struct Project {
    d: TestDaemon,
    /// The workdir (real path).
    work: PathBuf,
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The workdir `proj` holds the collections' folders: `handbook` (ordinary) and `people`
/// (the sensitive collection `payroll`: its name differs from its folder's, so a refusal
/// that named it would show), a link `to-people` to it, application code that imports a
/// module from it, and the hub's own directory `.hub` (`[data] dir`).
fn project(extra: &str) -> Project {
    let dir = tempfile::tempdir().unwrap();
    let work = canonical(dir.path()).join("proj");
    let budget: String = (0..3000)
        .map(|i| format!("budget line {i} of the handbook\n"))
        .collect();
    write(&work, "pyproject.toml", "");
    write(&work, "handbook/guide.md", &budget);
    write(&work, "handbook/intro.md", "# Intro\nThe open budget.\n");
    write(
        &work,
        "people/salaries.md",
        &format!("# Salaries\nThe {SECRET} budget is confidential.\n"),
    );
    write(
        &work,
        "people/wages.py",
        &format!("def {SECRET}_total():\n    return 1\n\nprint({SECRET}_total())\n"),
    );
    write(
        &work,
        "app/main.py",
        &format!("from people.wages import {SECRET}_total\n\nprint({SECRET}_total())\n"),
    );
    std::os::unix::fs::symlink(work.join("people"), work.join("to-people")).unwrap();
    let config = format!(
        "[result_store]\ninline_chars = 8000\nprojection_chars = 2000\n\
         [data]\ndir = {:?}\n\
         [data.collections.handbook]\npath = {:?}\n\
         [data.collections.payroll]\npath = {:?}\nsensitive = true\n{extra}",
        work.join(".hub").display().to_string(),
        work.join("handbook").display().to_string(),
        work.join("people").display().to_string(),
    );
    let d = TestDaemon::start_in(dir, &config);
    let p = Project { d, work };
    wait_for(
        "the data hub to be ready",
        Duration::from_secs(30),
        || match p.call("list_data", json!({})) {
            Ok(_) => Some(()),
            Err(e) if e.kind == ErrorKind::NotReady => None,
            Err(e) => panic!("list_data: {e}"),
        },
    );
    assert!(
        p.work.join(".hub/hub.sqlite3").is_file(),
        "the hub's database lies under the workdir"
    );
    p
}

impl Project {
    fn call(&self, tool: &str, args: Json) -> Result<Json, ToolError> {
        match call_in(&self.d, &self.work, tool, args) {
            Outcome::Ok(v) => Ok(v.0),
            Outcome::Err(e) => Err(e),
        }
    }

    fn ok(&self, tool: &str, args: Json) -> Json {
        self.call(tool, args.clone())
            .unwrap_or_else(|e| panic!("{tool} {args}: {e}\n{}", self.d.log_text()))
    }

    /// The call is refused as out of scope, naming the path as given and why, never the
    /// collection, its real location or its text.
    fn refused(&self, tool: &str, args: Json, given: &str) {
        let e = match self.call(tool, args.clone()) {
            Err(e) => e,
            Ok(v) => panic!("{tool} {args} answered {v}"),
        };
        assert_eq!(e.kind, ErrorKind::OutOfScope, "{tool} {args}: {e}");
        assert!(e.message.contains(given), "names the path: {e}");
        assert!(
            e.message.contains("kept private") && e.hint.contains("sensitive"),
            "says why: {e}"
        );
        for hidden in ["payroll", SECRET] {
            assert!(
                !e.message.contains(hidden) && !e.hint.contains(hidden),
                "{tool} {args} shows {hidden:?}: {e}"
            );
        }
        assert!(
            !e.message.contains(&self.work.display().to_string()),
            "not the real location: {e}"
        );
    }
}

fn left_out(v: &Json, n: u64) {
    assert_eq!(v["skipped_protected"], n, "{v}");
    let notes = v["notes"].to_string();
    assert!(notes.contains("left out"), "{v}");
    assert!(
        !notes.contains("payroll") && !notes.contains("people"),
        "{v}"
    );
}

#[test]
fn every_file_tool_refuses_a_sensitive_collection_and_walks_leave_it_out() {
    let p = project("");

    // Named: refused, however it is named.
    for path in [
        "people/salaries.md",
        "to-people/salaries.md",
        "handbook/../people/salaries.md",
        ".hub/hub.sqlite3",
    ] {
        p.refused("read", json!({"path": path}), path);
    }
    let abs = p.work.join("people/salaries.md").display().to_string();
    let e = p.call("read", json!({"path": abs})).unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutOfScope, "{e}");
    assert!(
        p.ok("read", json!({"path": "handbook/intro.md"}))["content"]
            .as_str()
            .unwrap()
            .contains("open budget")
    );
    p.refused("ls", json!({"path": "people"}), "people");
    p.refused("ls", json!({"path": ".hub"}), ".hub");
    p.refused(
        "grep",
        json!({"pattern": SECRET, "path": "people"}),
        "people",
    );
    p.refused("find", json!({"pattern": "*", "path": "people"}), "people");
    p.refused(
        "write",
        json!({"path": "people/new.md", "content": "x"}),
        "people/new.md",
    );
    p.refused(
        "write",
        json!({"path": ".hub/notes/x/n.md", "content": "x"}),
        ".hub/notes/x/n.md",
    );
    p.refused(
        "edit",
        json!({"path": "people/salaries.md", "old_text": "budget", "new_text": "plan"}),
        "people/salaries.md",
    );
    let patch = "*** Begin Patch\n*** Add File: handbook/new.md\n+fine\n*** Add File: people/new2.md\n+not fine\n*** End Patch\n";
    p.refused("apply_patch", json!({"patch": patch}), "people/new2.md");
    assert!(!p.work.join("people/new.md").exists());
    assert!(!p.work.join("people/new2.md").exists());
    assert!(
        !p.work.join("handbook/new.md").exists(),
        "the whole patch was refused"
    );
    assert!(
        std::fs::read_to_string(p.work.join("people/salaries.md"))
            .unwrap()
            .contains("budget is confidential")
    );
    p.refused(
        "ast_grep",
        json!({"pattern": "print($A)", "path": "people"}),
        "people",
    );
    p.refused(
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)", "path": "people/wages.py"}),
        "people/wages.py",
    );

    // Over the parent: left out, and counted (`people/` and `.hub/`).
    let all = json!({"pattern": SECRET, "hidden": true, "ignored": true});
    let g = p.ok("grep", all);
    assert_eq!(g["files_with_matches"], 1, "only app/main.py: {g}");
    assert!(
        g["output"]
            .as_str()
            .unwrap()
            .starts_with("app/main.py:1:from people.wages"),
        "{g}"
    );
    assert!(!g["output"].as_str().unwrap().contains("people/"), "{g}");
    left_out(&g, 2);
    let f = p.ok(
        "find",
        json!({"pattern": "*", "hidden": true, "ignored": true}),
    );
    let paths: Vec<&str> = f["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        paths
            .iter()
            .all(|p| !p.starts_with("people") && !p.starts_with(".hub")),
        "{f}"
    );
    assert!(paths.contains(&"handbook/intro.md"), "{f}");
    left_out(&f, 2);
    let l = p.ok("ls", json!({}));
    let names: Vec<&str> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["app/", "handbook/", "pyproject.toml", "to-people"],
        "{l}"
    );
    assert_eq!(l["total"], 4);
    left_out(&l, 2);

    // The structural walk leaves it out silently: not searched, not listed as skipped.
    let s = p.ok(
        "ast_grep",
        json!({"pattern": "print($A)", "language": "python"}),
    );
    assert_eq!(s["total"], 1, "only app/main.py: {s}");
    assert!(!s.to_string().contains("people/"), "{s}");
    let e = p.ok(
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)", "language": "python"}),
    );
    let files = e["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{e}");
    assert!(
        files[0]["path"].as_str().unwrap().ends_with("app/main.py"),
        "{e}"
    );
    assert!(!e["preview"].as_str().unwrap().contains("people/"), "{e}");

    // A grep result stored and read back holds none of it.
    let big = p.ok(
        "grep",
        json!({"pattern": "budget", "max_results": 100000, "hidden": true}),
    );
    let r = big["projected"]["output"]["ref"]
        .as_str()
        .unwrap_or_else(|| panic!("the grep result is stored: {big}"))
        .to_string();
    let mut text = String::new();
    let mut offset = 0u64;
    loop {
        let page = p.ok("tool_result_read", json!({"ref": r, "offset": offset}));
        text.push_str(page["text"].as_str().unwrap());
        if page["eof"] == true {
            break;
        }
        offset = page["next_offset"].as_u64().unwrap();
    }
    assert!(
        text.contains("handbook/guide.md:3000:budget line 2999"),
        "the whole result"
    );
    assert!(
        !text.contains(SECRET) && !text.contains("people/"),
        "the stored result holds the sensitive collection's text"
    );
}

#[test]
fn lsp_refuses_a_file_there_and_does_not_quote_a_definition_found_there() {
    require("pyright-langserver");
    let p = project(&lsp_config(""));
    p.refused(
        "lsp",
        json!({"op": "symbols", "file": "people/wages.py"}),
        "people/wages.py",
    );
    p.refused(
        "lsp",
        json!({"op": "hover", "file": "to-people/wages.py", "line": 1, "symbol": "total"}),
        "to-people/wages.py",
    );
    p.refused(
        "synced_write",
        json!({"path": "people/wages.py"}),
        "people/wages.py",
    );
    // Found from an ordinary file: the location is the server's answer, its text is not read.
    let v = p.ok(
        "lsp",
        json!({"op": "definition", "file": "app/main.py", "line": 3, "symbol": format!("{SECRET}_total")}),
    );
    let text = v["text"].as_str().unwrap();
    assert!(text.contains("people/wages.py:1"), "{v}");
    assert!(
        !text.contains(&format!("def {SECRET}_total")),
        "quotes the sensitive file's line: {v}"
    );
}
