//! Staged edits are on disk: a daemon killed with SIGKILL and started again still has them,
//! accepts them, and never hands out an id twice.

use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::structural::{contents, four_files, original, rewritten};

#[test]
fn a_staged_edit_survives_a_hard_restart() {
    let mut d = TestDaemon::start("");
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    let first = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
    );
    let id = first["edit_id"].as_str().unwrap().to_string();

    d.kill_hard();
    d.spawn("");

    assert_eq!(contents(&files), (1..=4).map(original).collect::<Vec<_>>());
    let second = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "x = $A", "rewrite": "y = $A", "path": proj}),
    );
    let id2 = second["edit_id"].as_str().unwrap().to_string();
    assert_ne!(id, id2, "ids are unique across restarts");

    let r = d.ok("c", "resolve", json!({"edit_id": id, "action": "accept"}));
    assert_eq!(r["written"].as_array().unwrap().len(), 4);
    assert_eq!(contents(&files), (1..=4).map(rewritten).collect::<Vec<_>>());

    // The second edit was staged against the old content: it conflicts now.
    d.stop();
    d.spawn("");
    match d.call("c", "resolve", json!({"edit_id": id2, "action": "accept"})) {
        toolvisor_protocol::wire::Outcome::Err(e) => {
            assert_eq!(
                e.kind,
                toolvisor_protocol::error::ErrorKind::Conflict,
                "{e}"
            )
        }
        toolvisor_protocol::wire::Outcome::Ok(v) => panic!("accepted a stale edit: {}", v.0),
    }
    assert_eq!(contents(&files), (1..=4).map(rewritten).collect::<Vec<_>>());
}
