//! The store's tests: queries, ids across re-conversion, the trash and revisions, the database
//! file's mode, and documents converted by an older pipeline converted again.

use super::*;

fn who() -> Who {
    Who {
        conversation: "c".into(),
        tool: "test".into(),
    }
}

/// The temp dir as the collection's folder.
fn root(dir: &tempfile::TempDir) -> Root {
    Root::of(dir.path()).unwrap()
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join("hub.sqlite3")).unwrap();
    (dir, s)
}

#[test]
fn queries_keep_words_and_phrases_and_drop_every_operator() {
    assert_eq!(
        fts_query("alpha beta").as_deref(),
        Some("\"alpha\" \"beta\"")
    );
    assert_eq!(
        fts_query("\"release notes\" q3").as_deref(),
        Some("\"release notes\" \"q3\"")
    );
    assert_eq!(
        fts_query("title:x OR (y NEAR z) \"unclosed").as_deref(),
        Some("\"title\" \"x\" \"OR\" \"y\" \"NEAR\" \"z\" \"unclosed\"")
    );
    assert_eq!(fts_query("*** ()) '' \"\""), None);
    assert_eq!(
        fts_query_any("alpha \"release notes\" q3").as_deref(),
        Some("\"alpha\" OR \"release notes\" OR \"q3\"")
    );
    assert_eq!(
        fts_query("Robert'); DROP TABLE docs;--").as_deref(),
        Some("\"Robert\" \"DROP\" \"TABLE\" \"docs\"")
    );
}

#[test]
fn ids_stay_put_across_re_conversion_and_search_follows_the_original() {
    let (dir, mut s) = store();
    let f = dir.path().join("a.md");
    std::fs::write(&f, "# Apples\nred fruit").unwrap();
    let id = s
        .ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
        .unwrap()
        .unwrap();
    let reach = Reach::new(["c1".to_string()]);
    assert_eq!(
        s.search(&reach, "fruit", 10).unwrap()[0].handle,
        s.handle(id)
    );
    assert!(
        s.ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
            .unwrap()
            .is_none(),
        "unchanged"
    );
    std::fs::write(&f, "# Apples\ngreen vegetable, longer").unwrap();
    assert_eq!(
        s.ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
            .unwrap(),
        Some(id)
    );
    assert!(s.search(&reach, "fruit", 10).unwrap().is_empty());
    assert_eq!(s.search(&reach, "vegetable", 10).unwrap().len(), 1);
    let hits = s.search(&reach, "green", 10).unwrap();
    assert!(hits[0].snippet.contains("«green»"), "{:?}", hits[0]);
    assert!(
        s.search(&Reach::new(["other".to_string()]), "green", 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_trash_hides_a_document_until_it_is_restored_and_every_change_is_a_revision() {
    let (dir, mut s) = store();
    let f = dir.path().join("b.txt");
    std::fs::write(&f, "Budget\nnumbers here").unwrap();
    let id = s
        .ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
        .unwrap()
        .unwrap();
    let reach = Reach::new(["c1".to_string()]);
    let annotate = CardUpdate {
        annotation: Some("checked by finance".into()),
        ..Default::default()
    };
    let (_, changed) = s.update_card(&reach, id, &annotate, &who()).unwrap();
    assert!(changed);
    // The same update again, and one naming the title it has: nothing written, no revision.
    let before = s.revisions(id).unwrap().len();
    let (card, changed) = s.update_card(&reach, id, &annotate, &who()).unwrap();
    assert!(!changed);
    let same_title = CardUpdate {
        title: Some(card.title.clone()),
        annotation: Some("checked by finance".into()),
        ..Default::default()
    };
    assert!(!s.update_card(&reach, id, &same_title, &who()).unwrap().1);
    assert_eq!(
        s.revisions(id).unwrap().len(),
        before,
        "a no-op made a revision"
    );
    assert_eq!(
        s.search(&reach, "finance", 10).unwrap().len(),
        1,
        "annotations are searchable"
    );
    s.trash(&reach, id, &who()).unwrap();
    assert!(matches!(s.card(&reach, id), Err(DataError::NotFound(_))));
    assert!(s.search(&reach, "numbers", 10).unwrap().is_empty());
    assert_eq!(s.trash_list().unwrap()[0].handle, s.handle(id));
    s.restore(id, &Who::operator("restore")).unwrap();
    assert_eq!(s.card(&reach, id).unwrap().annotation, "checked by finance");
    assert_eq!(s.search(&reach, "numbers", 10).unwrap().len(), 1);
    let revs = s.revisions(id).unwrap();
    let changes: Vec<String> = revs.iter().map(|r| r.3.to_string()).collect();
    assert_eq!(revs.len(), 4, "{changes:?}");
    assert_eq!(revs[3].1, "operator");
}

#[test]
fn a_trashed_document_whose_original_changes_stays_in_the_trash_and_out_of_every_search() {
    let (dir, mut s) = store();
    let f = dir.path().join("t.md");
    std::fs::write(
        &f,
        "# Plans
old words",
    )
    .unwrap();
    let id = s
        .ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
        .unwrap()
        .unwrap();
    let reach = Reach::new(["c1".to_string()]);
    s.trash(&reach, id, &who()).unwrap();
    // The original changes: converted again, still trashed.
    std::fs::write(
        &f,
        "# Plans
fresh zebra words, longer",
    )
    .unwrap();
    assert_eq!(
        s.ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
            .unwrap(),
        Some(id)
    );
    assert!(s.search(&reach, "zebra", 10).unwrap().is_empty());
    assert!(s.search(&reach, "plans", 10).unwrap().is_empty());
    assert!(
        s.hybrid(&reach, "zebra", &[1.0, 0.0], "m", 10)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(s.card(&reach, id), Err(DataError::NotFound(_))));
    assert_eq!(s.trash_list().unwrap()[0].handle, s.handle(id));
    assert_eq!(s.count().unwrap(), 0);
    // Restored: found by what the original says now.
    s.restore(id, &Who::operator("restore")).unwrap();
    assert_eq!(
        s.search(&reach, "zebra", 10).unwrap()[0].handle,
        s.handle(id)
    );
}

#[test]
fn a_document_trashed_because_its_original_was_removed_returns_with_the_original() {
    let (dir, mut s) = store();
    let f = dir.path().join("r.md");
    std::fs::write(&f, "# Notes\nkoala facts").unwrap();
    let id = s
        .ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
        .unwrap()
        .unwrap();
    let reach = Reach::new(["c1".to_string()]);
    let bytes = std::fs::read(&f).unwrap();
    std::fs::remove_file(&f).unwrap();
    assert!(s.original_removed(&f, &who()).unwrap());
    assert!(s.search(&reach, "koala", 10).unwrap().is_empty());
    // Back with the same bytes (an editor that saves by remove and create): back in results.
    std::fs::write(&f, &bytes).unwrap();
    assert_eq!(
        s.ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
            .unwrap(),
        Some(id)
    );
    assert_eq!(
        s.search(&reach, "koala", 10).unwrap()[0].handle,
        s.handle(id)
    );
    assert!(s.trash_list().unwrap().is_empty());
    // Deleted by a tool afterwards: a change to the original no longer brings it back.
    s.trash(&reach, id, &who()).unwrap();
    std::fs::write(&f, "# Notes\nkoala facts, and more").unwrap();
    s.ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
        .unwrap();
    assert!(s.search(&reach, "koala", 10).unwrap().is_empty());
    assert_eq!(s.trash_list().unwrap().len(), 1);
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_database_and_its_wal_files_are_0600_made_so_and_narrowed_at_open() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, mut s) = store();
    let db = dir.path().join("hub.sqlite3");
    let f = dir.path().join("a.md");
    std::fs::write(&f, "# A\ntext").unwrap();
    s.ingest("c1", &root(&dir), &f, false, 1 << 20, &who())
        .unwrap();
    let files = [
        db.clone(),
        crate::dbfile::side_file(&db, "-wal"),
        crate::dbfile::side_file(&db, "-shm"),
    ];
    for p in &files {
        assert_eq!(mode(p), 0o600, "{} as created", p.display());
    }
    // An older version's (or a umask's) 0644 files, the database still open elsewhere.
    for p in &files {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let again = Store::open(&db).unwrap();
    for p in &files {
        assert_eq!(mode(p), 0o600, "{} narrowed at open", p.display());
    }
    assert_eq!(again.count().unwrap(), 1);
    drop((s, again));

    // A symbolic link in the database's place is refused, not followed.
    let other = tempfile::tempdir().unwrap();
    let link = other.path().join("hub.sqlite3");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    let e = Store::open(&link).err().expect("a link is refused");
    assert!(e.to_string().contains("symbolic link"), "{e}");
}

/// Bodies an older pipeline made (code indentation collapsed, setext headings
/// not seen) are converted again from their unchanged originals when the database is opened
/// by this version, keeping the handle and the card's edits; then not again.
#[test]
fn documents_an_older_pipeline_converted_are_converted_again_keeping_id_and_card() {
    let (dir, mut s) = store();
    let db = dir.path().join("hub.sqlite3");
    let html = dir.path().join("guide.html");
    std::fs::write(
        &html,
        "<h1>Guide</h1><pre><code>fn main() {\n    run();\n}</code></pre>",
    )
    .unwrap();
    let md = dir.path().join("readme.md");
    std::fs::write(&md, "Readme\n======\n\nIntro.\n\nUsage\n-----\n\nRun it.\n").unwrap();
    let reach = Reach::new(["c1".to_string()]);
    let h = s
        .ingest("c1", &root(&dir), &html, false, 1 << 20, &who())
        .unwrap()
        .unwrap();
    let m = s
        .ingest("c1", &root(&dir), &md, false, 1 << 20, &who())
        .unwrap()
        .unwrap();
    let update = CardUpdate {
        annotation: Some("reviewed".into()),
        ..CardUpdate::default()
    };
    s.update_card(&reach, h, &update, &who()).unwrap();
    // What the version before the `converter` column stored: no column, the old bodies.
    let versioned: i64 = s
        .conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('docs') WHERE name = 'converter'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    if versioned > 0 {
        s.conn
            .execute_batch("ALTER TABLE docs DROP COLUMN converter")
            .unwrap();
    }
    s.conn
        .execute_batch(
            "UPDATE docs SET body = 'Guide\n\nfn main() {\nrun();\n}',
                 sections = '[{\"title\":\"Guide\",\"level\":1,\"text\":\"fn main() {\\nrun();\\n}\"}]'
                 WHERE source LIKE '%guide.html';
             UPDATE docs SET sections = '[{\"title\":\"\",\"level\":0,\"text\":\"Readme\\n======\"}]'
                 WHERE source LIKE '%readme.md';",
        )
        .unwrap();
    drop(s);

    let mut s = Store::open(&db).unwrap();
    assert_eq!(
        s.ingest("c1", &root(&dir), &html, false, 1 << 20, &who())
            .unwrap(),
        Some(h)
    );
    assert_eq!(
        s.ingest("c1", &root(&dir), &md, false, 1 << 20, &who())
            .unwrap(),
        Some(m)
    );
    let (card, body) = s.body(&reach, h).unwrap();
    assert_eq!(body, "Guide\n\nfn main() {\n    run();\n}");
    assert_eq!(card.annotation, "reviewed", "the card's edits are kept");
    assert_eq!(s.card(&reach, m).unwrap().sections, ["Readme", "Usage"]);
    assert_eq!(
        s.ingest("c1", &root(&dir), &html, false, 1 << 20, &who())
            .unwrap(),
        None,
        "converted once, not at every scan"
    );
}
