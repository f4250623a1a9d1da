//! `resolve discard` drops a staged edit without writing; it cannot be accepted afterwards.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::structural::{contents, four_files, original};

#[test]
fn discard_writes_nothing_and_ends_the_edit() {
    let d = TestDaemon::start("");
    let files = four_files(d.dir.path());
    let v = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($A)", "rewrite": "log($A)", "path": files[0]}),
    );
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .starts_with("(proposed) 1 replacement in 1 file"),
        "{v:#}"
    );
    let id = v["edit_id"].as_str().unwrap().to_string();
    let r = d.ok("c", "resolve", json!({"edit_id": id, "action": "discard"}));
    assert!(
        r["summary"]
            .as_str()
            .unwrap()
            .contains("nothing was written"),
        "{r:#}"
    );
    assert_eq!(contents(&files), (1..=4).map(original).collect::<Vec<_>>());
    match d.call("c", "resolve", json!({"edit_id": id, "action": "accept"})) {
        Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::NotFound);
            assert!(e.message.contains("already discarded"), "{e}");
        }
        Outcome::Ok(v) => panic!("accepted a discarded edit: {}", v.0),
    }
    assert_eq!(contents(&files), (1..=4).map(original).collect::<Vec<_>>());
}
