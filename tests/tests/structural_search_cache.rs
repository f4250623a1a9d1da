//! `ast_grep` on a warm daemon: a repeated search answers unchanged files from what the last
//! search of the same pattern found (`files_cached`), and never from stale data: files edited
//! (to the same size), created and deleted between searches are searched again, and every
//! answer equals the one a daemon without the cache gives.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, options, wait_for};

fn search(d: &TestDaemon, work: &Path, pattern: &str) -> Json {
    let mut o = options(Codec::Bincode, Tier::Read, false);
    o.workdir = work.display().to_string();
    let mut c = Client::connect(&d.socket, o).unwrap();
    let args = json!({"pattern": pattern, "language": "python", "max_results": 500});
    match c.call("c", "ast_grep", args).unwrap().outcome {
        Outcome::Ok(v) => v.0,
        Outcome::Err(e) => panic!("ast_grep: {e}"),
    }
}

/// What a search found, without the counters: (path, line, text) per match, and the total.
fn found(v: &Json) -> (Vec<(String, u64, String)>, u64) {
    let matches = v["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap().to_string(),
                m["line"].as_u64().unwrap(),
                m["text"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (matches, v["total"].as_u64().unwrap())
}

#[test]
fn repeated_searches_are_answered_from_memory_and_follow_every_edit() {
    let work = tempfile::tempdir().unwrap();
    for i in 0..40 {
        let body = if i % 3 == 0 {
            format!("def f{i}(x):\n    print(x)\n    return x == x\n")
        } else {
            format!("def g{i}(y):\n    return y + {i}\n")
        };
        std::fs::write(work.path().join(format!("m{i:02}.py")), body).unwrap();
    }
    let warm = TestDaemon::start("");
    let cold = TestDaemon::start("[structural]\ncache_bytes = 0\n");
    let same = |pattern: &str| {
        let a = search(&warm, work.path(), pattern);
        let b = search(&cold, work.path(), pattern);
        assert_eq!(found(&a), found(&b), "{pattern}: warm and cold differ");
        assert_eq!(b["files_cached"], 0);
        a
    };

    // Files just written are not remembered (their timestamps are too fresh to key on);
    // once they age, a repeated search is answered from memory.
    let first = same("print($A)");
    assert_eq!(first["total"], 14);
    let remembered = wait_for(
        "a repeated search to be answered from memory",
        Duration::from_secs(20),
        || {
            let v = same("print($A)");
            (v["files_cached"].as_u64() == Some(40)).then_some(v)
        },
    );
    assert_eq!(remembered["files_parsed"], first["files_parsed"]);
    let literal_free = same("$X == $X");
    assert_eq!(literal_free["total"], 14);
    wait_for(
        "the literal-free pattern to be remembered too",
        Duration::from_secs(20),
        || (same("$X == $X")["files_cached"].as_u64() == Some(40)).then_some(()),
    );

    // Edit one file to the same size, create one, delete one: each is searched again.
    let edited = work.path().join("m03.py");
    let text = std::fs::read_to_string(&edited).unwrap();
    let changed = text.replace("print(x)", "paint(x)");
    assert_eq!(changed.len(), text.len());
    std::fs::write(&edited, changed).unwrap();
    std::fs::write(work.path().join("new.py"), "print('new')\nprint('again')\n").unwrap();
    std::fs::remove_file(work.path().join("m06.py")).unwrap();
    let after = same("print($A)");
    assert_eq!(after["total"], 14 - 1 - 1 + 2, "{after}");
    let paths: Vec<String> = found(&after).0.into_iter().map(|m| m.0).collect();
    assert!(
        !paths
            .iter()
            .any(|p| p.ends_with("m03.py") || p.ends_with("m06.py"))
    );
    assert_eq!(paths.iter().filter(|p| p.ends_with("new.py")).count(), 2);
    assert_eq!(after["files_searched"], 40, "one file gone, one new");
    assert!(after["files_cached"].as_u64().unwrap() <= 38, "{after}");

    // `$X == $X` is filtered by its operator (`==`): a file that gains it, one that loses
    // it (both to the same size), one created with it and one deleted are all followed.
    assert_eq!(same("$X == $X")["total"], 13, "m06.py is gone");
    let gains = work.path().join("m04.py");
    let text = std::fs::read_to_string(&gains).unwrap();
    let changed = text.replace("y + 4", "y ==y");
    assert_eq!(changed.len(), text.len());
    std::fs::write(&gains, changed).unwrap();
    let loses = work.path().join("m09.py");
    let text = std::fs::read_to_string(&loses).unwrap();
    let changed = text.replace("x == x", "x != x");
    assert_eq!(changed.len(), text.len());
    std::fs::write(&loses, changed).unwrap();
    std::fs::write(work.path().join("new2.py"), "a = 1\na == a\n").unwrap();
    std::fs::remove_file(work.path().join("m12.py")).unwrap();
    let ops = same("$X == $X");
    assert_eq!(ops["total"], 13 + 1 - 1 + 1 - 1, "{ops}");
    let paths: Vec<String> = found(&ops).0.into_iter().map(|m| m.0).collect();
    assert!(paths.iter().any(|p| p.ends_with("m04.py")), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("new2.py")), "{paths:?}");
    assert!(
        !paths
            .iter()
            .any(|p| p.ends_with("m09.py") || p.ends_with("m12.py")),
        "{paths:?}"
    );
    assert!(
        ops["files_parsed"].as_u64().unwrap() < ops["files_searched"].as_u64().unwrap(),
        "files without `==` are not parsed: {ops}"
    );
}
