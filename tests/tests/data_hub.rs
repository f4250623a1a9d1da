//! The data hub end to end on the real daemon: originals converted and searched, cards, bodies
//! and sections read, notes written, card changes and the trash, changes to originals followed,
//! handles stable across restarts; and its scope: a sensitive collection unreachable however it
//! is named, a pinned surface narrowed, FTS syntax and SQL in queries harmless; a corrupt
//! database reported, a SIGKILL mid-write losing nothing, and the database's files 0600.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{Outcome, Tier};
use toolvisor_tests::{TestDaemon, bin, wait_for};

struct Hub {
    d: TestDaemon,
    docs: PathBuf,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn config(docs: &Path, secret: &Path, extra: &str) -> String {
    format!(
        "[data.collections.docs]\npath = {:?}\n[data.collections.secret]\npath = {:?}\nsensitive = true\n[data.collections.notes]\n{extra}\n",
        docs.display().to_string(),
        secret.display().to_string()
    )
}

fn hub(extra: &str) -> Hub {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("originals/docs");
    let secret = dir.path().join("originals/secret");
    write(
        &docs.join("deploy.md"),
        "---\ntags: [ops, kubernetes]\n---\n# Deploying\nWe deploy with kubernetes and helm.\n\n## Rollback\nUse helm rollback to undo a release.\n",
    );
    write(
        &docs.join("team/onboarding.md"),
        "# Onboarding\nNew people read the deploying guide first.\n\n## Accounts\nAsk for a kubernetes account.\n",
    );
    write(
        &docs.join("faq.html"),
        "<html><head><title>FAQ</title></head><body><h2>Builds</h2><p>Builds run on every push.</p></body></html>",
    );
    write(&docs.join("todo.txt"), "Todo list\nbuy milk\n");
    write(
        &secret.join("salaries.md"),
        "# Salaries\nThe zebracorn budget is confidential.\n",
    );
    let d = TestDaemon::start_in(dir, &config(&docs, &secret, extra));
    wait_ready(&d);
    Hub { d, docs }
}

fn call_as(d: &TestDaemon, tier: Tier, tool: &str, args: Json) -> Result<Json, ToolError> {
    let mut c = d.client(Codec::Json, tier, true);
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
    call_as(d, Tier::Exec, tool, args.clone())
        .unwrap_or_else(|e| panic!("{tool} {args}: {e}\n{}", d.log_text()))
}

fn err(d: &TestDaemon, tool: &str, args: Json) -> ToolError {
    match call_as(d, Tier::Exec, tool, args.clone()) {
        Err(e) => e,
        Ok(v) => panic!("{tool} {args} answered {v}"),
    }
}

fn wait_ready(d: &TestDaemon) {
    wait_for(
        "the data hub to be ready",
        Duration::from_secs(30),
        || match call_as(d, Tier::Exec, "list_data", json!({})) {
            Ok(_) => Some(()),
            Err(e) if e.kind == ErrorKind::NotReady => None,
            Err(e) => panic!("list_data before ready: {e}"),
        },
    );
}

fn handles(hits: &Json) -> Vec<String> {
    hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["handle"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn documents_are_searched_read_annotated_trashed_and_follow_their_originals() {
    let mut h = hub("");
    let d = &h.d;
    let found = ok(d, "search_data", json!({"query": "kubernetes"}));
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{found}");
    assert_eq!(
        hits[0]["title"], "Deploying",
        "title and tags weigh most: {found}"
    );
    assert!(
        hits.iter()
            .all(|h| h["snippet"].as_str().unwrap().contains("«kubernetes»")),
        "{found}"
    );
    let deploy = hits[0]["handle"].as_str().unwrap().to_string();

    let card = ok(d, "read_data", json!({"handle": deploy}));
    assert_eq!(card["card"]["tags"], json!(["ops", "kubernetes"]));
    assert_eq!(card["card"]["sections"], json!(["Deploying", "Rollback"]));
    let by_name = ok(
        d,
        "read_data",
        json!({"handle": deploy, "view": "section", "section": "rollback"}),
    );
    assert!(
        by_name["section"]["text"]
            .as_str()
            .unwrap()
            .contains("helm rollback")
    );
    let by_index = ok(
        d,
        "read_data",
        json!({"handle": deploy, "view": "section", "section": "1"}),
    );
    assert_eq!(by_index["section"], by_name["section"]);
    // The index as a JSON integer, as the docs allow and harnesses send it.
    let by_number = ok(
        d,
        "read_data",
        json!({"handle": deploy, "view": "section", "section": 1}),
    );
    assert_eq!(by_number["section"], by_name["section"]);
    let e = err(
        d,
        "read_data",
        json!({"handle": deploy, "view": "section", "section": true}),
    );
    assert!(e.message.contains("must be a string or an integer"), "{e}");
    let body = ok(d, "read_data", json!({"handle": deploy, "view": "body"}));
    assert!(
        body["body"]
            .as_str()
            .unwrap()
            .contains("We deploy with kubernetes")
    );
    let missing = err(
        d,
        "read_data",
        json!({"handle": deploy, "view": "section", "section": "Nope"}),
    );
    assert_eq!(missing.kind, ErrorKind::NotFound);
    assert!(
        missing.message.contains("Rollback"),
        "names the sections: {missing}"
    );

    // Listing: documents, and without a filter the reachable collections (never `secret`).
    let listed = ok(d, "list_data", json!({}));
    assert_eq!(listed["total"], 4, "{listed}");
    let names: Vec<&str> = listed["collections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["docs", "notes"]);
    assert!(!listed.to_string().contains("secret"));
    let tagged = ok(d, "list_data", json!({"tag": "ops"}));
    assert_eq!(tagged["total"], 1);
    assert!(tagged.get("collections").is_none());

    // A note is created, searchable; a card annotation is searchable; a body is never edited.
    let note = ok(
        d,
        "write_data",
        json!({"note": {"title": "Standup", "text": "Discussed the quokka migration.", "collection": "notes"}}),
    );
    assert_eq!(note["created"], true);
    assert_eq!(note["card"]["collection"], "notes");
    let quokka = ok(d, "search_data", json!({"query": "quokka"}));
    assert_eq!(handles(&quokka), [note["card"]["handle"].as_str().unwrap()]);
    let update = json!({"handle": deploy, "card": {"annotation": "reviewed by platypus team", "tags": ["ops", "Prod"]}});
    let changed = ok(d, "write_data", update.clone());
    assert!(changed.get("unchanged").is_none(), "{changed}");
    // The same update again changes nothing: said so, and the card's time stays.
    let again = ok(d, "write_data", update);
    assert_eq!(again["unchanged"], true, "{again}");
    assert_eq!(again["card"]["updated_ms"], changed["card"]["updated_ms"]);
    assert_eq!(
        handles(&ok(d, "search_data", json!({"query": "platypus"}))),
        std::slice::from_ref(&deploy)
    );
    assert_eq!(
        ok(d, "read_data", json!({"handle": deploy}))["card"]["tags"],
        json!(["ops", "prod"])
    );
    let refused = err(
        d,
        "write_data",
        json!({"handle": deploy, "card": {"body": "rewritten"}}),
    );
    assert_eq!(refused.kind, ErrorKind::InvalidArgs);
    assert!(
        refused.message.contains("deploy.md"),
        "names the original: {refused}"
    );
    assert!(
        refused.hint.contains("edit the original") && refused.hint.contains("annotation"),
        "{refused}"
    );

    // The trash: gone for tools, listed and restored by the operator.
    let todo = handles(&ok(d, "search_data", json!({"query": "milk"})))[0].clone();
    let trashed = ok(d, "delete_data", json!({"handle": todo}));
    assert_eq!(trashed["trashed"], true);
    assert_eq!(
        err(d, "read_data", json!({"handle": todo})).kind,
        ErrorKind::NotFound
    );
    let cli = |args: &[&str]| {
        let out = Command::new(bin())
            .args(["data"])
            .args(args)
            .arg("--config")
            .arg(d.config_path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(cli(&["trash"]).contains(&todo));
    assert!(cli(&["restore", &todo]).contains("restored"));
    assert_eq!(
        ok(d, "read_data", json!({"handle": todo}))["card"]["title"],
        "Todo list"
    );

    // Originals are watched: a change is searchable, a removal trashes.
    write(
        &h.docs.join("faq.html"),
        "<html><head><title>FAQ</title></head><body><h2>Builds</h2><p>Builds run nightly on the wombat cluster.</p></body></html>",
    );
    wait_for(
        "the changed original to be searchable",
        Duration::from_secs(10),
        || (!handles(&ok(d, "search_data", json!({"query": "wombat"}))).is_empty()).then_some(()),
    );
    std::fs::remove_file(h.docs.join("team/onboarding.md")).unwrap();
    wait_for(
        "the removed original's document to go",
        Duration::from_secs(10),
        || {
            handles(&ok(d, "search_data", json!({"query": "onboarding"})))
                .is_empty()
                .then_some(())
        },
    );

    // Handles survive a restart.
    let d = &mut h.d;
    d.stop();
    d.spawn(
        std::fs::read_to_string(d.config_path())
            .unwrap()
            .split_once('\n')
            .unwrap()
            .1,
    );
    wait_ready(d);
    assert_eq!(
        handles(&ok(d, "search_data", json!({"query": "helm rollback"}))),
        std::slice::from_ref(&deploy)
    );
    assert_eq!(
        handles(&ok(d, "search_data", json!({"query": "platypus"}))),
        [deploy]
    );
}

#[test]
fn a_sensitive_collection_and_crafted_queries_reach_nothing() {
    let h = hub("");
    let d = &h.d;
    assert!(handles(&ok(d, "search_data", json!({"query": "zebracorn"}))).is_empty());
    let named = err(
        d,
        "search_data",
        json!({"query": "zebracorn", "collection": "secret"}),
    );
    let unknown = err(
        d,
        "search_data",
        json!({"query": "zebracorn", "collection": "no-such"}),
    );
    assert_eq!(named.kind, ErrorKind::NotFound);
    assert_eq!(
        named, unknown,
        "a sensitive collection answers like one that does not exist"
    );
    assert!(!named.to_string().contains("secret"));
    assert_eq!(
        err(d, "list_data", json!({"collection": "secret"})),
        err(d, "list_data", json!({"collection": "no-such"}))
    );
    // The sensitive document's handle, from the operator's list (no tool gives it).
    let out = Command::new(bin())
        .args(["data", "list", "--config"])
        .arg(d.config_path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    let secret = listed
        .lines()
        .find(|l| l.split('\t').nth(1) == Some("secret"))
        .and_then(|l| l.split('\t').next())
        .unwrap_or_else(|| panic!("the operator's list has no secret document: {listed}"))
        .to_string();
    assert_eq!(listed.lines().count(), 5, "{listed}");
    // A sensitive document reads like a missing one, and so does a handle nothing has.
    let missing = |handle: &str| {
        let e = call_as(d, Tier::Exec, "read_data", json!({"handle": handle})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotFound, "{handle}: {e}");
        assert_eq!(
            e.message,
            format!("no document {handle} is reachable from this run")
        );
    };
    missing(&secret);
    missing("D-0000000001");
    assert_eq!(
        err(d, "delete_data", json!({"handle": secret.clone()})).kind,
        ErrorKind::NotFound,
    );
    // The handles a run sees say nothing of the others: not a count (D1, D2, D5 left a gap
    // where the sensitive D3 and D4 were), not the order documents came in.
    let seen: Vec<String> = ok(d, "list_data", json!({}))["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|doc| doc["handle"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(seen.len(), 4, "{seen:?}");
    for h in &seen {
        let hex = h.strip_prefix("D-").unwrap_or_else(|| panic!("{h}"));
        assert!(
            hex.len() == 10 && hex.chars().all(|c| c.is_ascii_hexdigit()),
            "{h}"
        );
    }
    // The old numbered form is refused saying what a handle looks like.
    let e = err(d, "read_data", json!({"handle": "D5"}));
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{e}");
    assert!(e.hint.contains("D-"), "{e}");
    // FTS syntax, quotes and SQL: answered or refused clearly, never a database error.
    for q in [
        "\"unclosed",
        "title:Deploying OR (",
        "NEAR(kubernetes helm)",
        "*",
        "kube*",
        "'; DROP TABLE docs; --",
        "docs_fts MATCH 'x'",
        "\"\"",
        "zebracorn) OR collection:secret",
    ] {
        match call_as(d, Tier::Exec, "search_data", json!({"query": q})) {
            Ok(v) => assert!(!v.to_string().contains("zebracorn budget"), "{q}: {v}"),
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::InvalidArgs, "{q}: {e}");
                assert!(e.message.contains("no words"), "{q}: {e}");
            }
        }
    }
    assert_eq!(
        ok(d, "list_data", json!({}))["total"],
        4,
        "nothing was dropped"
    );
}

#[test]
fn a_pinned_surface_reaches_only_its_collections() {
    let h = hub("[data.pin]\nread = [\"notes\"]\n");
    let d = &h.d;
    ok(
        d,
        "write_data",
        json!({"note": {"title": "Pinned", "text": "the ocelot plan", "collection": "notes"}}),
    );
    let read = |tool: &str, args: Json| call_as(d, Tier::Read, tool, args);
    let ocelot = read("search_data", json!({"query": "ocelot"})).unwrap();
    assert_eq!(handles(&ocelot).len(), 1);
    let kube = read("search_data", json!({"query": "kubernetes"})).unwrap();
    assert!(
        handles(&kube).is_empty(),
        "docs is not in the read pin: {kube}"
    );
    assert_eq!(
        read("list_data", json!({"collection": "docs"}))
            .unwrap_err()
            .kind,
        ErrorKind::NotFound
    );
    let listed = read("list_data", json!({})).unwrap();
    assert_eq!(
        listed["collections"],
        json!([{"name": "notes", "documents": 1}])
    );
    // The same daemon's exec surface is not pinned.
    assert_eq!(
        handles(&ok(d, "search_data", json!({"query": "kubernetes"}))).len(),
        2
    );
}

#[test]
fn a_corrupt_database_is_reported_and_the_data_tools_answer_resource_failed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    write(&docs.join("a.md"), "# A\ntext\n");
    let db = dir.path().join("state/data/hub.sqlite3");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        for p in [dir.path().join("state"), db.parent().unwrap().to_path_buf()] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
    }
    std::fs::write(&db, vec![0x5a; 8192]).unwrap();
    let d = TestDaemon::start_in(
        dir,
        &format!(
            "[data.collections.docs]\npath = {:?}\n",
            docs.display().to_string()
        ),
    );
    let e = wait_for(
        "the data hub to give up",
        Duration::from_secs(60),
        || match call_as(&d, Tier::Exec, "search_data", json!({"query": "text"})) {
            Err(e) if e.kind == ErrorKind::ResourceFailed => Some(e),
            Err(e) if e.kind == ErrorKind::NotReady => None,
            other => panic!("a corrupt database answered {other:?}"),
        },
    );
    assert!(
        e.message.contains(&db.display().to_string()),
        "names the file: {e}"
    );
    let status = Command::new(bin())
        .args(["status", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.contains("problem") && text.contains("data_store") && text.contains("hub.sqlite3"),
        "{text}"
    );
    // Everything else serves.
    ok(&d, "ls", json!({"path": "."}));
}

#[test]
fn a_sigkill_while_notes_are_written_loses_no_committed_note() {
    let mut h = hub("");
    let written = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let socket = h.d.socket.clone();
    let w = written.clone();
    let writer = std::thread::spawn(move || {
        let mut c = toolvisor_protocol::client::Client::connect(
            &socket,
            toolvisor_tests::options(Codec::Bincode, Tier::Exec, true),
        )
        .unwrap();
        for i in 0.. {
            let args = json!({"note": {"title": format!("note {i}"), "text": format!("kiwi{i} text"), "collection": "notes"}});
            match c.call_with("c", "write_data", args, |_| true) {
                Ok(r) => match r.outcome {
                    Outcome::Ok(v) => w
                        .lock()
                        .unwrap()
                        .push(v.0["card"]["handle"].as_str().unwrap().to_string()),
                    Outcome::Err(e) => panic!("write_data failed: {e}"),
                },
                Err(_) => return, // the daemon died under us
            }
        }
    });
    wait_for("some notes to be written", Duration::from_secs(30), || {
        (written.lock().unwrap().len() >= 20).then_some(())
    });
    h.d.kill_hard();
    writer.join().unwrap();
    let committed = written.lock().unwrap().clone();
    let cfg = std::fs::read_to_string(h.d.config_path()).unwrap();
    h.d.spawn(cfg.split_once('\n').unwrap().1);
    wait_ready(&h.d);
    for handle in &committed {
        let card = ok(&h.d, "read_data", json!({"handle": handle}));
        assert_eq!(card["card"]["collection"], "notes");
    }
    let listed = ok(&h.d, "list_data", json!({"collection": "notes"}));
    assert!(listed["total"].as_u64().unwrap() >= committed.len() as u64);
    let first = ok(&h.d, "search_data", json!({"query": "kiwi0"}));
    assert_eq!(handles(&first), [committed[0].clone()]);
}

/// The database and its WAL files are 0600 (the daemon's umask would leave a
/// file SQLite creates 0644), and a 0644 one an older version left is narrowed at start.
#[test]
fn the_database_files_are_0600_and_an_open_one_is_narrowed_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let mut h = hub("");
    let db = h.d.state_dir().join("data/hub.sqlite3");
    let side = |suffix: &str| PathBuf::from(format!("{}{suffix}", db.display()));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    ok(
        &h.d,
        "write_data",
        json!({"note": {"title": "Mode", "text": "a committed note", "collection": "notes"}}),
    );
    let files = [db.clone(), side("-wal"), side("-shm")];
    for p in &files {
        assert_eq!(mode(p), 0o600, "{} as the daemon made it", p.display());
    }
    h.d.stop();
    for p in files.iter().filter(|p| p.exists()) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let cfg = std::fs::read_to_string(h.d.config_path()).unwrap();
    h.d.spawn(cfg.split_once('\n').unwrap().1);
    wait_ready(&h.d);
    for p in &files {
        assert_eq!(mode(p), 0o600, "{} after a restart", p.display());
    }
    assert_eq!(
        handles(&ok(&h.d, "search_data", json!({"query": "committed"}))).len(),
        1
    );
}

/// An HTML page's code block keeps its indentation and a Markdown file's
/// setext headings are sections, as converted when the files appear and again when one
/// changes (the hub converts bodies from the originals; a body is never edited).
#[test]
fn html_code_keeps_its_indentation_and_setext_headings_are_sections_across_re_conversion() {
    let h = hub("");
    let d = &h.d;
    let page = |step: &str| {
        format!(
            "<html><head><title>Release runbook</title></head><body>\n<h1>Release runbook</h1>\n<p>Tag, then   build.</p>\n<h2>Script</h2>\n<pre><code class=\"language-sh\">for host in $(cat hosts); do\n    ssh \"$host\" &lt;&lt;'EOF'\n        systemctl restart app\nEOF\ndone\n</code></pre>\n<p>{step}</p>\n</body></html>"
        )
    };
    write(
        &h.docs.join("runbook.html"),
        &page("Watch the capybara dashboard."),
    );
    write(
        &h.docs.join("handbook.md"),
        "Team Handbook\n=============\n\nHow we work.\n\nOn call\n-------\n\nThe pager rotates weekly.\n\nEscalation\n----------\n\nCall the lead.\n",
    );
    let find = |word: &str| {
        wait_for(
            &format!("a document with {word:?} to be searchable"),
            Duration::from_secs(10),
            || handles(&ok(d, "search_data", json!({"query": word}))).pop(),
        )
    };
    let runbook = find("capybara");
    let script = || {
        ok(
            d,
            "read_data",
            json!({"handle": runbook, "view": "section", "section": "Script"}),
        )["section"]["text"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let code = "for host in $(cat hosts); do\n    ssh \"$host\" <<'EOF'\n        systemctl restart app\nEOF\ndone";
    assert_eq!(script(), format!("{code}\nWatch the capybara dashboard."));
    let handbook = find("pager");
    let card = ok(d, "read_data", json!({"handle": handbook}));
    assert_eq!(card["card"]["title"], "Team Handbook");
    assert_eq!(
        card["card"]["sections"],
        json!(["Team Handbook", "On call", "Escalation"]),
        "{card}"
    );
    assert_eq!(
        ok(
            d,
            "read_data",
            json!({"handle": handbook, "view": "section", "section": "on call"})
        )["section"]["text"],
        "The pager rotates weekly."
    );

    // The original changes: converted again, same handle, still indented.
    write(
        &h.docs.join("runbook.html"),
        &page("Watch the okapi dashboard."),
    );
    assert_eq!(find("okapi"), runbook);
    assert_eq!(script(), format!("{code}\nWatch the okapi dashboard."));
}
