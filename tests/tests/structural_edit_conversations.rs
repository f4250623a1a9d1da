//! Edits belong to their conversation: two conversations stage concurrently and get
//! distinct ids; neither can see, accept or discard the other's edit (`not_found`, exactly
//! as for an unknown id, so ids reveal nothing about other conversations).

use std::path::PathBuf;

use serde_json::json;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::Outcome;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::structural::{contents, four_files, original, rewritten};

#[test]
fn concurrent_edits_in_two_conversations_stay_apart() {
    let d = TestDaemon::start("");
    let a = four_files(&d.dir.path().join("a"));
    let b = four_files(&d.dir.path().join("b"));
    let dir = |files: &[PathBuf]| files[0].parent().unwrap().to_path_buf();
    let (dir_a, dir_b) = (dir(&a), dir(&b));
    let ids: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = [("conv-a", dir_a.clone()), ("conv-b", dir_b.clone())]
            .into_iter()
            .flat_map(|(conv, path)| {
                let d = &d;
                (0..3).map(move |i| {
                    let path = path.clone();
                    s.spawn(move || {
                        let v = d.ok(
                            conv,
                            "ast_edit",
                            json!({"pattern": "print($$$A)", "rewrite": format!("log{i}($$$A)"), "path": path}),
                        );
                        format!("{conv} {i} {}", v["edit_id"].as_str().unwrap())
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut distinct: Vec<&str> = ids.iter().map(|l| l.rsplit(' ').next().unwrap()).collect();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 6, "every edit has its own id: {ids:?}");
    let id_of = |conv: &str, i: usize| {
        ids.iter()
            .find(|l| l.starts_with(&format!("{conv} {i} ")))
            .unwrap()
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };

    // conv-b cannot touch conv-a's edit.
    let a0 = id_of("conv-a", 0);
    for action in ["accept", "discard"] {
        match d.call(
            "conv-b",
            "resolve",
            json!({"edit_id": a0, "action": action}),
        ) {
            Outcome::Err(e) => {
                assert_eq!(e.kind, ErrorKind::NotFound);
                assert!(e.message.contains("in conversation \"conv-b\""), "{e}");
            }
            Outcome::Ok(v) => panic!("another conversation resolved it: {}", v.0),
        }
    }
    assert_eq!(contents(&a), (1..=4).map(original).collect::<Vec<_>>());

    // Each accepts its own; the files of the other stay as they were until it does.
    d.ok(
        "conv-a",
        "resolve",
        json!({"edit_id": a0, "action": "accept"}),
    );
    let log0: Vec<String> = (1..=4)
        .map(|i| rewritten(i).replace("log(", "log0("))
        .collect();
    assert_eq!(contents(&a), log0);
    assert_eq!(contents(&b), (1..=4).map(original).collect::<Vec<_>>());
    d.ok(
        "conv-b",
        "resolve",
        json!({"edit_id": id_of("conv-b", 2), "action": "accept"}),
    );
    let log2: Vec<String> = (1..=4)
        .map(|i| rewritten(i).replace("log(", "log2("))
        .collect();
    assert_eq!(contents(&b), log2);
    // The other staged edits of conv-a were made against the old content.
    match d.call(
        "conv-a",
        "resolve",
        json!({"edit_id": id_of("conv-a", 1), "action": "accept"}),
    ) {
        Outcome::Err(e) => assert_eq!(e.kind, ErrorKind::Conflict, "{e}"),
        Outcome::Ok(v) => panic!("accepted a stale edit: {}", v.0),
    }
}
