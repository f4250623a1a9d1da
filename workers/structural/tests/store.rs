//! The staged-edit store: accept writes all files or none (snapshot mismatch, a failing
//! write, a crash in the middle), edits survive reopening, ids never repeat, and an edit is
//! visible only to its conversation.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use toolvisor_files::Scope;
use toolvisor_files::journal::Journal;
use toolvisor_files::paths::Resolved;
use toolvisor_structural::Error;
use toolvisor_structural::rewrite::{Proposal, propose};
use toolvisor_structural::search::SearchRequest;
use toolvisor_structural::store::{EditState, EditStore};

struct Tree {
    dir: tempfile::TempDir,
    files: Vec<PathBuf>,
}

/// Four Python files, each with two `print(...)` calls.
fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (1..=4)
        .map(|i| {
            let path = dir.path().join(format!("m{i}.py"));
            std::fs::write(&path, format!("print({i})\nx = {i}\nprint(x, {i})\n")).unwrap();
            path
        })
        .collect();
    Tree { dir, files }
}

fn proposal(root: &Path) -> Proposal {
    propose(
        &SearchRequest {
            pattern: "print($$$A)",
            language: Some("python"),
            path: root,
            scope: &Scope::new(root, &[], false).unwrap(),
            max_results: 50,
            prefilter: true,
            threads: 2,
            cancel: None,
            limits: Default::default(),
        },
        "log($$$A)",
    )
    .unwrap()
}

/// The scope of a call made from `dir`, for an interrupted accept's rollback at open.
fn dir_scope(dir: &Path) -> toolvisor_files::Result<Scope> {
    Scope::new(dir, &[], false)
}

fn open(dir: &Path) -> EditStore {
    EditStore::open(dir, &dir_scope).unwrap()
}

impl Tree {
    /// The scope of a call made from the tree's directory.
    fn scope(&self) -> Scope {
        Scope::new(self.dir.path(), &[], false).unwrap()
    }
}

fn contents(files: &[PathBuf]) -> Vec<String> {
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect()
}

fn stage(store: &EditStore, conversation: &str, root: &Path) -> String {
    let p = proposal(root);
    store
        .stage(conversation, "print($$$A)", "log($$$A)", &p)
        .unwrap()
        .id
}

#[test]
fn accept_writes_every_file_and_a_second_resolve_is_refused() {
    let t = tree();
    let store = open(&t.dir.path().join("edits"));
    let p = proposal(t.dir.path());
    assert_eq!((p.files.len(), p.replacements), (4, 8));
    let staged = store.stage("c1", "print($$$A)", "log($$$A)", &p).unwrap();
    assert_eq!(staged.id, "edit_1");
    // Staging writes nothing.
    assert!(contents(&t.files).iter().all(|c| c.starts_with("print(")));
    let accepted = store.accept("c1", &staged.id, &t.scope(), None).unwrap();
    assert_eq!(accepted.written.len(), 4);
    assert_eq!(contents(&t.files)[2], "log(3)\nx = 3\nlog(x, 3)\n");
    for again in [
        store.accept("c1", "edit_1", &t.scope(), None),
        store.discard("c1", "edit_1").map(|_| unreachable!()),
    ] {
        match again {
            Err(Error::EditResolved {
                state: EditState::Accepted,
                ..
            }) => {}
            other => panic!("expected already accepted, got {other:?}"),
        }
    }
}

#[test]
fn a_file_touched_after_staging_rejects_the_whole_change() {
    let t = tree();
    let store = open(&t.dir.path().join("edits"));
    let id = stage(&store, "c1", t.dir.path());
    std::fs::write(&t.files[2], "print(3)  # touched\n").unwrap();
    std::fs::remove_file(&t.files[3]).unwrap();
    let before = contents(&t.files[..3]);
    match store.accept("c1", &id, &t.scope(), None) {
        Err(Error::Conflict { changed, total, .. }) => {
            assert_eq!(total, 4);
            let named: Vec<_> = changed
                .iter()
                .map(|c| (c.path.clone(), c.why.clone()))
                .collect();
            assert_eq!(
                named,
                vec![
                    (t.files[2].clone(), "modified since staging".to_string()),
                    (t.files[3].clone(), "deleted since staging".to_string()),
                ]
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(contents(&t.files[..3]), before, "nothing may be written");
    // Still staged: it can be discarded.
    assert_eq!(
        store.discard("c1", &id).unwrap().state,
        EditState::Discarded
    );
}

/// Fails (or panics) on one path, writes the others with the file tools' writer.
struct Faulty {
    fail_on: PathBuf,
    panic: bool,
    calls: AtomicUsize,
}

impl Faulty {
    fn write(&self, target: &Resolved, bytes: Option<&[u8]>) -> toolvisor_files::Result<()> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if target.real == self.fail_on {
            if self.panic {
                panic!("simulated crash while writing {}", target.real.display());
            }
            return Err(toolvisor_files::Error::io(
                target.display.clone(),
                "write",
                std::io::Error::other("disk full (simulated)"),
            ));
        }
        toolvisor_files::journal::write_one(target, bytes)
    }
}

#[test]
fn a_failing_write_restores_the_files_already_written() {
    let t = tree();
    let store = open(&t.dir.path().join("edits"));
    let id = stage(&store, "c1", t.dir.path());
    let original = contents(&t.files);
    let faulty = Faulty {
        fail_on: t.files[2].clone(),
        panic: false,
        calls: AtomicUsize::new(0),
    };
    match store.accept_with("c1", &id, &t.scope(), None, &|t, b| faulty.write(t, b)) {
        Err(Error::WriteFailed {
            path,
            restored,
            unrestored,
            ..
        }) => {
            assert_eq!(path, t.files[2]);
            assert_eq!(restored, t.files[..2].to_vec());
            assert!(unrestored.is_empty());
        }
        other => panic!("expected a write failure, got {other:?}"),
    }
    assert_eq!(contents(&t.files), original, "every file back as it was");
    // Still staged, and a working writer can accept it now.
    store.accept("c1", &id, &t.scope(), None).unwrap();
    assert!(contents(&t.files).iter().all(|c| c.starts_with("log(")));
}

#[test]
fn a_crash_in_the_middle_of_an_accept_is_rolled_back_on_reopen() {
    let t = tree();
    let dir = t.dir.path().join("edits");
    let store = open(&dir);
    let id = stage(&store, "c1", t.dir.path());
    let original = contents(&t.files);
    let crashing = Faulty {
        fail_on: t.files[3].clone(),
        panic: true,
        calls: AtomicUsize::new(0),
    };
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = store.accept_with("c1", &id, &t.scope(), None, &|t, b| crashing.write(t, b));
    }));
    assert!(crashed.is_err());
    assert_ne!(
        contents(&t.files),
        original,
        "three files were written before the crash"
    );
    drop(store);
    let reopened = open(&dir);
    assert_eq!(
        contents(&t.files),
        original,
        "reopening rolls the half-accept back"
    );
    assert_eq!(reopened.get("c1", &id).unwrap().state, EditState::Staged);
    reopened.accept("c1", &id, &t.scope(), None).unwrap();
}

#[test]
fn a_crash_in_the_middle_of_a_journaled_accept_is_rolled_back_by_the_journal() {
    let t = tree();
    let dir = t.dir.path().join("edits");
    let journal = Journal::open(&t.dir.path().join("journal")).unwrap();
    let store = open(&dir);
    let id = stage(&store, "c1", t.dir.path());
    let original = contents(&t.files);
    let crashing = Faulty {
        fail_on: t.files[3].clone(),
        panic: true,
        calls: AtomicUsize::new(0),
    };
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = store.accept_with("c1", &id, &t.scope(), Some(&journal), &|t, b| {
            crashing.write(t, b)
        });
    }));
    assert!(crashed.is_err());
    assert_ne!(contents(&t.files), original, "three files were written");
    drop(store);
    // What the daemon does at start: the file tools' journal first, then the store.
    let outcomes = journal.roll_back(&|root| Scope::new(root, &[], false));
    assert_eq!(
        outcomes.len(),
        4,
        "one journal of the accept's four files: {outcomes:?}"
    );
    assert_eq!(
        contents(&t.files),
        original,
        "the journal rolled the half-accept back"
    );
    let reopened = open(&dir);
    assert_eq!(reopened.get("c1", &id).unwrap().state, EditState::Staged);
    reopened
        .accept("c1", &id, &t.scope(), Some(&journal))
        .unwrap();
    assert!(contents(&t.files).iter().all(|c| c.starts_with("log(")));
    assert_eq!(
        std::fs::read_dir(t.dir.path().join("journal"))
            .unwrap()
            .count(),
        0,
        "a finished accept leaves no journal"
    );
}

#[test]
fn edits_survive_reopening_and_ids_never_repeat() {
    let t = tree();
    let dir = t.dir.path().join("edits");
    let store = open(&dir);
    let a = stage(&store, "c1", t.dir.path());
    let b = stage(&store, "c1", t.dir.path());
    store.discard("c1", &b).unwrap();
    drop(store);
    let store = open(&dir);
    assert_eq!(store.get("c1", &a).unwrap().state, EditState::Staged);
    assert_eq!(store.get("c1", &b).unwrap().state, EditState::Discarded);
    let c = stage(&store, "c1", t.dir.path());
    assert_eq!(
        (a.as_str(), b.as_str(), c.as_str()),
        ("edit_1", "edit_2", "edit_3")
    );
    store.accept("c1", &a, &t.scope(), None).unwrap();
}

#[test]
fn another_conversations_edit_is_not_found() {
    let t = tree();
    let store = open(&t.dir.path().join("edits"));
    let id = stage(&store, "c1", t.dir.path());
    for result in [
        store.accept("c2", &id, &t.scope(), None).map(|_| ()),
        store.discard("c2", &id).map(|_| ()),
    ] {
        match result {
            Err(Error::EditNotFound { conversation, .. }) => assert_eq!(conversation, "c2"),
            other => panic!("expected not found, got {other:?}"),
        }
    }
    assert!(matches!(
        store.accept("c1", "edit_99", &t.scope(), None),
        Err(Error::EditNotFound { .. })
    ));
    assert!(matches!(
        store.accept("c1", "bogus", &t.scope(), None),
        Err(Error::EditNotFound { .. })
    ));
    assert_eq!(store.list("c2").len(), 0);
    assert_eq!(store.list("c1").len(), 1);
}

#[test]
fn too_many_replacements_stage_nothing() {
    let t = tree();
    let err = propose(
        &SearchRequest {
            pattern: "print($$$A)",
            language: Some("python"),
            path: t.dir.path(),
            scope: &t.scope(),
            max_results: 5,
            prefilter: true,
            threads: 2,
            cancel: None,
            limits: Default::default(),
        },
        "log($$$A)",
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::TooManyReplacements { found: 8, max: 5 }),
        "{err}"
    );
}

#[test]
fn a_rewrite_naming_an_unbound_metavariable_is_refused() {
    let t = tree();
    let err = propose(
        &SearchRequest {
            pattern: "print($A)",
            language: Some("python"),
            path: t.dir.path(),
            scope: &t.scope(),
            max_results: 50,
            prefilter: true,
            threads: 1,
            cancel: None,
            limits: Default::default(),
        },
        "log($B)",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the rewrite uses $B, which the pattern does not bind (it binds: $A)"
    );
}

#[test]
fn a_file_outside_the_accepting_scope_stops_the_accept_before_anything_is_written() {
    let t = tree();
    let store = open(&t.dir.path().join("edits"));
    let id = stage(&store, "c1", t.dir.path());
    let original = contents(&t.files);
    // Accepted from a call whose workdir is elsewhere: no file of the edit is in its scope.
    let elsewhere = tempfile::tempdir().unwrap();
    let scope = Scope::new(elsewhere.path(), &[], false).unwrap();
    match store.accept("c1", &id, &scope, None) {
        Err(e @ Error::Refused { .. }) => {
            let Error::Refused {
                ref path,
                more,
                ref source,
                ..
            } = e
            else {
                unreachable!()
            };
            assert_eq!((path, more), (&t.files[0], 3));
            assert!(
                matches!(
                    source.downcast_ref::<toolvisor_files::Error>(),
                    Some(toolvisor_files::Error::Outside { .. })
                ),
                "{source:?}"
            );
            let text = e.to_string();
            assert!(text.contains("and 3 more"), "{text}");
            assert!(text.contains("nothing was written"), "{text}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(contents(&t.files), original, "nothing written");
    assert_eq!(store.get("c1", &id).unwrap().state, EditState::Staged);
}

#[test]
fn a_file_swapped_for_a_symbolic_link_is_a_conflict_and_its_target_is_untouched() {
    let t = tree();
    let store = open(&t.dir.path().join("edits"));
    let id = stage(&store, "c1", t.dir.path());
    // The link's target (in the scope too) holds exactly the staged snapshot, so only the
    // link gives it away.
    let elsewhere = t.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let target = elsewhere.join("m2.py");
    std::fs::write(&target, std::fs::read(&t.files[1]).unwrap()).unwrap();
    std::fs::remove_file(&t.files[1]).unwrap();
    std::os::unix::fs::symlink(&target, &t.files[1]).unwrap();
    match store.accept("c1", &id, &t.scope(), None) {
        Err(Error::Conflict { changed, .. }) => {
            assert_eq!(changed.len(), 1, "{changed:?}");
            assert_eq!(changed[0].path, t.files[1]);
            assert!(changed[0].why.contains("symbolic link"), "{changed:?}");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "print(2)\nx = 2\nprint(x, 2)\n"
    );
    assert!(contents(&t.files).iter().all(|c| c.starts_with("print(")));
}

#[test]
fn a_record_temp_left_by_a_killed_daemon_is_removed_at_open_and_records_stay_private() {
    use std::os::unix::fs::PermissionsExt;
    let t = tree();
    let dir = t.dir.path().join("edits");
    let store = open(&dir);
    let id = stage(&store, "c1", t.dir.path());
    drop(store);
    // What a daemon killed between a record's temp file and its rename leaves (a pid above
    // the kernel's maximum is never alive).
    let leftover = dir.join(".edit_2.json.toolvisor-4194305-0.tmp");
    std::fs::write(&leftover, "{\"half").unwrap();
    let store = open(&dir);
    assert!(!leftover.exists(), "the dead daemon's temp file is removed");
    assert_eq!(store.get("c1", &id).unwrap().state, EditState::Staged);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", path.display());
    }
}

/// FIFOs in place of the store's counter or of a record (a `bash` call can make them) are
/// refused or passed by at open, never waited on: the old code opened them and the daemon
/// never finished starting.
#[test]
fn fifos_in_the_store_are_not_waited_on() {
    for name in ["1.json", "next_id"] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("edits");
        drop(open(&store));
        let made = std::process::Command::new("mkfifo")
            .arg(store.join(name))
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let at = store.clone();
        std::thread::spawn(move || {
            let _ = tx.send(EditStore::open(&at, &dir_scope).map(drop));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("opening the store waited on the FIFO {name}"));
        match (name, got) {
            ("1.json", Ok(())) => {}
            ("next_id", Err(e)) => {
                assert!(
                    e.to_string()
                        .contains("a FIFO (named pipe), not a regular file"),
                    "{e}"
                )
            }
            (_, other) => panic!("{name}: {other:?}"),
        }
    }
}
