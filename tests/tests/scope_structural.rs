//! Structural tools: `ast_grep` and `ast_edit` resolve `path` through the file
//! tools' scope (an outside directory, `..`, or a symbolic link inside the workdir pointing
//! out are `out_of_scope`), the walk never follows a link out, `resolve accept` checks every
//! file again (a staged file swapped for a link to outside is refused and the outside file
//! stays untouched), and `[files] allow_outside_workdir` / `read_roots` lift it as for `read`.

use std::path::PathBuf;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_tests::lsp::{call_in, canonical, err_in, ok_in};
use toolvisor_tests::{TestDaemon, assert_out_of_scope};

/// `base/work` (the workdir: `a.py`, and `link` → `../outside`) and `base/outside/o.py`.
struct Layout {
    _base: tempfile::TempDir,
    work: PathBuf,
    outside: PathBuf,
}

const SOURCE: &str = "print(1)\nx = 1\n";

fn layout() -> Layout {
    let base = tempfile::tempdir().unwrap();
    let root = canonical(base.path());
    let work = root.join("work");
    let outside = root.join("outside");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(work.join("a.py"), SOURCE).unwrap();
    std::fs::write(outside.join("o.py"), SOURCE).unwrap();
    std::os::unix::fs::symlink("../outside", work.join("link")).unwrap();
    Layout {
        _base: base,
        work,
        outside,
    }
}

#[test]
fn ast_grep_outside_the_workdir_is_out_of_scope() {
    let l = layout();
    let d = TestDaemon::start("");
    let o = l.outside.join("o.py");
    for (path, real) in [
        (l.outside.display().to_string(), l.outside.clone()),
        ("../outside".to_string(), l.outside.clone()),
        (o.display().to_string(), o.clone()),
        // A symbolic link inside the workdir pointing out, and a file through it.
        ("link".to_string(), l.outside.clone()),
        ("link/o.py".to_string(), o.clone()),
    ] {
        let e = err_in(
            &d,
            &l.work,
            "ast_grep",
            json!({"pattern": "print($A)", "path": path, "language": "python"}),
        );
        assert_out_of_scope(&e, "ast_grep", &real, &l.work);
    }
    // Inside still works, and the walk of the workdir does not follow `link` out.
    let v = ok_in(
        &d,
        &l.work,
        "ast_grep",
        json!({"pattern": "print($A)", "language": "python"}),
    );
    let paths: Vec<&str> = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["a.py"], "{v}");
}

#[test]
fn ast_edit_outside_the_workdir_is_out_of_scope_and_stages_nothing() {
    let l = layout();
    let d = TestDaemon::start("");
    let o = l.outside.join("o.py");
    for (path, real) in [
        (l.outside.display().to_string(), l.outside.clone()),
        ("link/o.py".to_string(), o.clone()),
    ] {
        let e = err_in(
            &d,
            &l.work,
            "ast_edit",
            json!({"pattern": "print($A)", "rewrite": "log($A)", "path": path}),
        );
        assert_out_of_scope(&e, "ast_edit", &real, &l.work);
    }
    // No edit id was used by the refusals: the next staged edit is the first.
    let v = ok_in(
        &d,
        &l.work,
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)"}),
    );
    assert_eq!(v["edit_id"], "edit_1", "{v}");
    assert_eq!(v["files"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(std::fs::read_to_string(&o).unwrap(), SOURCE);
}

#[test]
fn a_read_root_is_searchable_but_not_editable() {
    let l = layout();
    let d = TestDaemon::start(&format!(
        "[files]\nread_roots = [{:?}]\n",
        l.outside.display().to_string()
    ));
    let v = ok_in(
        &d,
        &l.work,
        "ast_grep",
        json!({"pattern": "print($A)", "path": "link"}),
    );
    assert_eq!(v["total"], 1, "{v}");
    let e = err_in(
        &d,
        &l.work,
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)", "path": "link"}),
    );
    assert_out_of_scope(&e, "ast_edit", &l.outside, &l.work);
}

#[test]
fn a_staged_file_swapped_for_a_link_to_outside_is_refused_at_accept() {
    let l = layout();
    let d = TestDaemon::start("");
    let v = ok_in(
        &d,
        &l.work,
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)", "path": "a.py"}),
    );
    let id = v["edit_id"].as_str().unwrap().to_string();
    // The outside file holds exactly the staged snapshot: only the scope can tell.
    let a = l.work.join("a.py");
    let target = l.outside.join("o.py");
    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink(&target, &a).unwrap();

    let e = err_in(
        &d,
        &l.work,
        "resolve",
        json!({"edit_id": id, "action": "accept"}),
    );
    assert_out_of_scope(&e, "resolve", &target, &l.work);
    assert!(e.message.contains(&format!("edit \"{id}\" refused")), "{e}");
    assert!(e.message.contains("nothing was written"), "{e}");
    assert!(e.hint.contains("still staged"), "{e}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), SOURCE);
    assert!(
        std::fs::symlink_metadata(&a)
            .unwrap()
            .file_type()
            .is_symlink()
    );

    // The edit stays staged: with the file back, the same edit is accepted.
    std::fs::remove_file(&a).unwrap();
    std::fs::write(&a, SOURCE).unwrap();
    let v = ok_in(
        &d,
        &l.work,
        "resolve",
        json!({"edit_id": id, "action": "accept"}),
    );
    assert_eq!(v["written"], json!(["a.py"]), "{v}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "log(1)\nx = 1\n");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), SOURCE);
}

#[test]
fn allow_outside_workdir_lifts_it_for_every_structural_tool() {
    let l = layout();
    let d = TestDaemon::start("[files]\nallow_outside_workdir = true\n");
    let o = l.outside.join("o.py");
    let v = ok_in(
        &d,
        &l.work,
        "ast_grep",
        json!({"pattern": "print($A)", "path": "../outside"}),
    );
    assert_eq!(v["total"], 1, "{v}");
    assert_eq!(v["matches"][0]["path"], o.display().to_string(), "{v}");
    let v = ok_in(
        &d,
        &l.work,
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)", "path": "link/o.py"}),
    );
    let id = v["edit_id"].as_str().unwrap();
    let v = ok_in(
        &d,
        &l.work,
        "resolve",
        json!({"edit_id": id, "action": "accept"}),
    );
    assert_eq!(v["written"], json!([o.display().to_string()]), "{v}");
    assert_eq!(std::fs::read_to_string(&o).unwrap(), "log(1)\nx = 1\n");
    // Still a conflict, not a write through: a staged file swapped for a link.
    let v = ok_in(
        &d,
        &l.work,
        "ast_edit",
        json!({"pattern": "x = $A", "rewrite": "y = $A", "path": "a.py"}),
    );
    let id = v["edit_id"].as_str().unwrap().to_string();
    let a = l.work.join("a.py");
    std::fs::write(l.outside.join("p.py"), SOURCE).unwrap();
    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink(l.outside.join("p.py"), &a).unwrap();
    match call_in(
        &d,
        &l.work,
        "resolve",
        json!({"edit_id": id, "action": "accept"}),
    ) {
        toolvisor_protocol::wire::Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
            assert!(e.message.contains("symbolic link"), "{e}");
        }
        toolvisor_protocol::wire::Outcome::Ok(v) => panic!("accepted through a link: {}", v.0),
    }
    assert_eq!(
        std::fs::read_to_string(l.outside.join("p.py")).unwrap(),
        SOURCE
    );
}
