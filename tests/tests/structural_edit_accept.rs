//! `ast_edit` stages and writes nothing; `resolve accept` writes every file; a second
//! resolve, an unknown id and a call without approval are refused with clear errors.

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::ErrorKind;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::structural::{contents, four_files, original, rewritten};

#[test]
fn ast_edit_then_accept_writes_every_file() {
    let d = TestDaemon::start("");
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    let v = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
    );
    let id = v["edit_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("edit_"), "{v:#}");
    let summary = v["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("(proposed) 8 replacements in 4 files"),
        "{summary}"
    );
    assert!(
        summary.contains(&format!("call resolve with edit_id \"{id}\"")),
        "{summary}"
    );
    let preview = v["preview"].as_str().unwrap();
    assert!(
        preview.contains("-print(1)\n") && preview.contains("+log(1)\n"),
        "{preview}"
    );
    assert_eq!(v["preview_truncated"], false);
    assert_eq!(v["files"].as_array().unwrap().len(), 4);
    // Nothing written yet.
    assert_eq!(contents(&files), (1..=4).map(original).collect::<Vec<_>>());

    let r = d.ok("c", "resolve", json!({"edit_id": id, "action": "accept"}));
    assert_eq!(r["action"], "accept");
    assert_eq!(r["written"].as_array().unwrap().len(), 4);
    assert_eq!(r["replacements"], 8);
    assert!(r["diagnostics"].is_object(), "{r:#}");
    assert_eq!(contents(&files), (1..=4).map(rewritten).collect::<Vec<_>>());

    // Already resolved.
    for action in ["accept", "discard"] {
        match d.call("c", "resolve", json!({"edit_id": id, "action": action})) {
            Outcome::Err(e) => {
                assert_eq!(e.kind, ErrorKind::NotFound);
                assert!(e.message.contains("already accepted"), "{e}");
            }
            Outcome::Ok(v) => panic!("second resolve succeeded: {}", v.0),
        }
    }
    // Unknown.
    match d.call(
        "c",
        "resolve",
        json!({"edit_id": "edit_4242", "action": "accept"}),
    ) {
        Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::NotFound);
            assert!(e.message.contains("no staged edit \"edit_4242\""), "{e}");
        }
        Outcome::Ok(v) => panic!("unknown edit accepted: {}", v.0),
    }
}

#[test]
fn ast_edit_needs_approval_and_a_rewrite_of_nothing_stages_nothing() {
    let d = TestDaemon::start("");
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    let mut c = d.client(Codec::Json, Tier::Write, true);
    let reply = c
        .call_with(
            "c",
            "ast_edit",
            json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
            |_| false,
        )
        .unwrap();
    match reply.outcome {
        Outcome::Err(e) => assert_eq!(e.kind, ErrorKind::ApprovalDenied),
        Outcome::Ok(v) => panic!("ran without approval: {}", v.0),
    }
    let v = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "nothing_calls_this($A)", "rewrite": "x($A)", "path": proj}),
    );
    assert!(v["edit_id"].is_null(), "{v:#}");
    assert!(
        v["summary"]
            .as_str()
            .unwrap()
            .contains("nothing was staged")
    );
    // More replacements than max_results: refused, not cut.
    match d.call(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj, "max_results": 3}),
    ) {
        Outcome::Err(e) => {
            assert_eq!(e.kind, ErrorKind::InvalidArgs);
            assert!(
                e.message
                    .contains("8 replacements, more than max_results = 3"),
                "{e}"
            );
        }
        Outcome::Ok(v) => panic!("staged past max_results: {}", v.0),
    }
    assert_eq!(contents(&files), (1..=4).map(original).collect::<Vec<_>>());
}
