//! The data hub follows no symbolic link, at start or live, and reads only regular files
//! inside a collection's real root: a link added to a watched collection while the daemon
//! runs (to a sensitive collection's file, to its directory, to a file outside every
//! collection) is reported in `list_data`'s warnings and never indexed, a FIFO is neither
//! opened nor waited on, an original replaced by a link leaves the index, and after a restart
//! the start-up scan says and does the same.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, wait_for};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn call(d: &TestDaemon, tool: &str, args: Json) -> Result<Json, ToolError> {
    let mut c = d.client(Codec::Json, Tier::Read, true);
    match c
        .call_with("c", tool, args, |_| true)
        .expect("call")
        .outcome
    {
        Outcome::Ok(v) => Ok(v.0),
        Outcome::Err(e) => Err(e),
    }
}

fn ok(d: &TestDaemon, tool: &str, args: Json) -> Json {
    call(d, tool, args.clone()).unwrap_or_else(|e| panic!("{tool} {args}: {e}\n{}", d.log_text()))
}

fn ready(d: &TestDaemon) {
    wait_for(
        "the data hub to be ready",
        Duration::from_secs(30),
        || match call(d, "list_data", json!({})) {
            Ok(_) => Some(()),
            Err(e) if e.kind == ErrorKind::NotReady => None,
            Err(e) => panic!("list_data before ready: {e}"),
        },
    );
}

fn hits(d: &TestDaemon, query: &str) -> usize {
    ok(d, "search_data", json!({"query": query}))["hits"]
        .as_array()
        .unwrap()
        .len()
}

fn warnings(d: &TestDaemon) -> Vec<String> {
    ok(d, "list_data", json!({}))["warnings"]
        .as_array()
        .map(|w| w.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Words only in the sensitive collection, and only outside every collection.
const SECRET: &str = "zebracorn";
const OUTSIDE: &str = "quokkaledger";

#[test]
fn links_added_live_or_found_at_start_are_reported_and_never_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("originals/docs");
    let secret = dir.path().join("originals/secret");
    let elsewhere = dir.path().join("elsewhere");
    write(&docs.join("guide.md"), "# Guide\nThe open handbook.\n");
    write(
        &docs.join("replaced.md"),
        "# Replaced\nA wombatplan for now.\n",
    );
    write(
        &secret.join("salaries.md"),
        &format!("# Salaries\nThe {SECRET} budget is confidential.\n"),
    );
    write(
        &elsewhere.join("stored.md"),
        &format!("# Stored\nThe {OUTSIDE} of another conversation.\n"),
    );
    let config = format!(
        "[data.collections.docs]\npath = {:?}\n[data.collections.secret]\npath = {:?}\nsensitive = true\n[data.pin]\nread = [\"docs\"]\n",
        docs.display().to_string(),
        secret.display().to_string(),
    );
    let mut d = TestDaemon::start_in(dir, &config);
    ready(&d);
    assert_eq!(hits(&d, "wombatplan"), 1);

    // While the daemon runs: a link to the sensitive file, one to its directory, one to a
    // file outside every collection, a FIFO, and an indexed original swapped for a link.
    std::os::unix::fs::symlink(secret.join("salaries.md"), docs.join("pay.md")).unwrap();
    std::os::unix::fs::symlink(&secret, docs.join("hr")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("stored.md"), docs.join("stored.md")).unwrap();
    nix::unistd::mkfifo(&docs.join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    std::fs::remove_file(docs.join("replaced.md")).unwrap();
    std::os::unix::fs::symlink(secret.join("salaries.md"), docs.join("replaced.md")).unwrap();
    // A plain file written after them: once it is found, the watcher has passed the links.
    write(&docs.join("later.md"), "# Later\nA sentinelword.\n");
    wait_for(
        "the watcher to take the new file",
        Duration::from_secs(30),
        || (hits(&d, "sentinelword") == 1).then_some(()),
    );
    let expect = |d: &TestDaemon, when: &str| {
        let w = wait_for(
            &format!("{when}: the links and the FIFO in list_data's warnings"),
            Duration::from_secs(30),
            || {
                let w = warnings(d);
                let named = |name: &str| w.iter().any(|l| l.starts_with(&format!("docs/{name}: ")));
                (named("pay.md")
                    && named("hr")
                    && named("stored.md")
                    && named("replaced.md")
                    && named("pipe.md"))
                .then_some(w)
            },
        );
        let all = w.join("\n");
        assert!(all.contains("symbolic link"), "{when}: {all}");
        assert!(all.contains("FIFO"), "{when}: {all}");
        // Where a link leads is never said.
        assert!(
            !all.contains("salaries") && !all.contains("secret") && !all.contains("elsewhere"),
            "{when}: {all}"
        );
        assert_eq!(hits(d, SECRET), 0, "{when}: the sensitive text was indexed");
        assert_eq!(hits(d, OUTSIDE), 0, "{when}: a file outside was indexed");
        assert_eq!(
            hits(d, "wombatplan"),
            0,
            "{when}: the replaced original stayed"
        );
        assert_eq!(hits(d, "handbook"), 1, "{when}");
        let listed = ok(d, "list_data", json!({}));
        let titles: Vec<&str> = listed["documents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["title"].as_str().unwrap_or(""))
            .collect();
        assert!(!titles.contains(&"Salaries"), "{when}: {listed}");
        assert!(!titles.contains(&"Stored"), "{when}: {listed}");
    };
    expect(&d, "live");

    // The start-up scan applies the same rule.
    d.stop();
    d.spawn(
        std::fs::read_to_string(d.config_path())
            .unwrap()
            .split_once('\n')
            .unwrap()
            .1,
    );
    ready(&d);
    expect(&d, "after a restart");
    assert_eq!(hits(&d, "sentinelword"), 1);
}
