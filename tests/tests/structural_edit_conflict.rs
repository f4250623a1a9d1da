//! Resolve after one of four files was touched: the whole change is rejected with a
//! `conflict` naming the file, and nothing is written anywhere; the edit stays staged.

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::structural::{contents, four_files, original};

#[test]
fn a_touched_file_rejects_the_whole_change() {
    let d = TestDaemon::start("");
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    let v = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
    );
    let id = v["edit_id"].as_str().unwrap().to_string();
    let touched = "print(3)\nx = 3\nprint(x, 3)\n# touched by hand\n";
    std::fs::write(&files[2], touched).unwrap();

    match d.call("c", "resolve", json!({"edit_id": id, "action": "accept"})) {
        Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::Conflict);
            assert!(e.message.contains("1 of its 4 files changed"), "{e}");
            assert!(e.message.contains("m3.py (modified since staging)"), "{e}");
            assert!(!e.message.contains("m1.py"), "{e}");
            assert!(e.message.contains("nothing was written"), "{e}");
            assert!(e.hint.contains("still staged"), "{e}");
        }
        Outcome::Ok(v) => panic!("accepted over a touched file: {}", v.0),
    }
    let now = contents(&files);
    assert_eq!(now[0], original(1));
    assert_eq!(now[1], original(2));
    assert_eq!(now[2], touched);
    assert_eq!(now[3], original(4));

    // Still staged: discard works and writes nothing.
    let r = d.ok("c", "resolve", json!({"edit_id": id, "action": "discard"}));
    assert_eq!(r["action"], "discard");
    assert_eq!(contents(&files), now);
}
