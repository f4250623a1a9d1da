//! A daemon SIGKILLed in the middle of a write leaves nothing half done: an `apply_patch`
//! over 300 files cut short is rolled back at the next start (never a mix of patched and
//! original files), and the `.toolvisor-<pid>-<n>.tmp` file of a write cut short is removed
//! by the next daemon, while every file that is not its own stays.
//! The daemon is stopped at an exact point with the test hook `[testing] pause_after_writes`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::{TestDaemon, options, wait_for};

const FILES: usize = 300;
const BEFORE_PAUSE: usize = 40;

fn client(d: &TestDaemon, workdir: &Path) -> Client {
    let mut o = options(Codec::Json, Tier::Write, true);
    o.workdir = workdir.display().to_string();
    Client::connect(&d.socket, o).expect("connect")
}

/// Send `tool` from a thread that never gets its answer (the daemon is killed under it).
fn call_in_background(d: &TestDaemon, workdir: &Path, tool: &'static str, args: serde_json::Value) {
    let mut c = client(d, workdir);
    std::thread::spawn(move || {
        let _ = c.call_with("c", tool, args, |_| true);
    });
}

fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(temp_files(&p));
        } else if e.file_name().to_string_lossy().contains(".toolvisor-") {
            out.push(p);
        }
    }
    out
}

fn name(i: usize) -> String {
    format!("src/f{i:03}.txt")
}

fn original(i: usize) -> String {
    format!("file {i}\nold line\nend\n")
}

fn patched(i: usize) -> String {
    format!("file {i}\nnew line\nend\n")
}

#[test]
fn an_apply_patch_cut_by_sigkill_is_rolled_back_at_restart() {
    let mut patch = String::new();
    for i in 0..FILES {
        patch.push_str(&format!(
            "--- a/{n}\n+++ b/{n}\n@@ -1,3 +1,3 @@\n file {i}\n-old line\n+new line\n end\n",
            n = name(i)
        ));
    }
    // A creation and a deletion ride along: rolled back too.
    patch.push_str("--- a/doomed.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n");
    patch.push_str("--- /dev/null\n+++ b/born.txt\n@@ -0,0 +1 @@\n+hello\n");
    cut_by_sigkill_and_rolled_back(&patch);
}

#[test]
fn a_begin_patch_cut_by_sigkill_is_rolled_back_at_restart() {
    let mut patch = String::from("*** Begin Patch\n");
    for i in 0..FILES {
        patch.push_str(&format!(
            "*** Update File: {n}\n@@ file {i}\n-old line\n+new line\n end\n",
            n = name(i)
        ));
    }
    patch.push_str("*** Delete File: doomed.txt\n*** Add File: born.txt\n+hello\n*** End Patch\n");
    cut_by_sigkill_and_rolled_back(&patch);
}

/// `patch` updates every `name(i)`, deletes `doomed.txt` and creates `born.txt`; the daemon is
/// killed between two of its writes, and the next one puts everything back.
fn cut_by_sigkill_and_rolled_back(patch: &str) {
    let mut d = TestDaemon::start(&format!("[testing]\npause_after_writes = {BEFORE_PAUSE}\n"));
    let work = d.dir.path().join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    for i in 0..FILES {
        std::fs::write(work.join(name(i)), original(i)).unwrap();
    }
    std::fs::write(work.join("doomed.txt"), "bye\n").unwrap();

    call_in_background(&d, &work, "apply_patch", json!({"patch": patch}));
    let patched_now = || {
        (0..FILES)
            .filter(|&i| std::fs::read_to_string(work.join(name(i))).unwrap() == patched(i))
            .count()
    };
    wait_for(
        "apply_patch to write its first files and pause before the next rename",
        Duration::from_secs(60),
        || (patched_now() == BEFORE_PAUSE && !temp_files(&work).is_empty()).then_some(()),
    );
    d.kill_hard();
    // The crash window is real: some files patched, the rest not, a temp file beside them.
    assert_eq!(patched_now(), BEFORE_PAUSE);
    assert_eq!(temp_files(&work).len(), 1);

    d.spawn("");
    for i in 0..FILES {
        assert_eq!(
            std::fs::read_to_string(work.join(name(i))).unwrap(),
            original(i),
            "{} after the restart; daemon log:\n{}",
            name(i),
            d.log_text()
        );
    }
    assert_eq!(
        std::fs::read_to_string(work.join("doomed.txt")).unwrap(),
        "bye\n"
    );
    assert!(!work.join("born.txt").exists());
    assert_eq!(temp_files(&work), Vec::<PathBuf>::new());
    let journals: Vec<_> = std::fs::read_dir(d.state_dir().join("journal"))
        .unwrap()
        .collect();
    assert!(journals.is_empty(), "the journal is gone once rolled back");
    assert!(d.log_text().contains("rolled back an apply_patch"));

    // The restarted daemon patches normally, all files at once.
    let mut c = client(&d, &work);
    let r = c
        .call_with("c", "apply_patch", json!({"patch": patch}), |_| true)
        .expect("call");
    assert!(
        matches!(r.outcome, toolvisor_protocol::wire::Outcome::Ok(_)),
        "{:?}",
        r.outcome
    );
    assert_eq!(patched_now(), FILES);
}

#[test]
fn a_file_changed_by_the_user_since_the_crash_is_not_clobbered() {
    let mut d = TestDaemon::start("[testing]\npause_after_writes = 1\n");
    let work = d.dir.path().join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    let mut patch = String::new();
    for i in 0..3 {
        std::fs::write(work.join(name(i)), original(i)).unwrap();
        patch.push_str(&format!(
            "--- a/{n}\n+++ b/{n}\n@@ -1,3 +1,3 @@\n file {i}\n-old line\n+new line\n end\n",
            n = name(i)
        ));
    }
    call_in_background(&d, &work, "apply_patch", json!({"patch": patch}));
    wait_for(
        "apply_patch to write one file and pause",
        Duration::from_secs(60),
        || {
            (std::fs::read_to_string(work.join(name(0))).unwrap() == patched(0)
                && !temp_files(&work).is_empty())
            .then_some(())
        },
    );
    d.kill_hard();
    // The user edits the patched file before the daemon comes back.
    std::fs::write(work.join(name(0)), "the user's own text\n").unwrap();
    d.spawn("");
    assert_eq!(
        std::fs::read_to_string(work.join(name(0))).unwrap(),
        "the user's own text\n"
    );
    for i in 1..3 {
        assert_eq!(
            std::fs::read_to_string(work.join(name(i))).unwrap(),
            original(i)
        );
    }
    assert!(d.log_text().contains("changed since"));
}

#[test]
fn a_temp_file_of_a_write_cut_by_sigkill_is_removed_at_restart() {
    let mut d = TestDaemon::start("[testing]\npause_after_writes = 0\n");
    let work = d.dir.path().join("work");
    std::fs::create_dir_all(work.join("deep/er")).unwrap();
    std::fs::write(work.join("deep/er/a.txt"), "old\n").unwrap();
    let pid = d.pid();
    // Look-alikes that are not the killed daemon's temp files: another (live) process's, a
    // different pid's, a name that is not a temp name, a directory.
    let keep = [
        format!("deep/er/.a.txt.toolvisor-{}-0.tmp", std::process::id()),
        format!("deep/er/.a.txt.toolvisor-1{pid}-0.tmp"),
        format!("deep/er/a.txt.toolvisor-{pid}-0.tmp"),
        format!("deep/er/.a.txt.toolvisor-{pid}-0.tmp.keep"),
        format!("deep/er/.a.txt.toolvisor-{pid}-x.tmp"),
    ];
    for k in &keep {
        std::fs::write(work.join(k), "not the daemon's").unwrap();
    }
    std::fs::create_dir(work.join(format!("deep/er/.d.toolvisor-{pid}-9.tmp"))).unwrap();

    call_in_background(
        &d,
        &work,
        "write",
        json!({"path": "deep/er/a.txt", "content": "new\n"}),
    );
    let prefix = format!(".a.txt.toolvisor-{pid}-");
    let leftover = wait_for(
        "the write to make its temp file and pause before the rename",
        Duration::from_secs(60),
        || {
            std::fs::read_dir(work.join("deep/er"))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().into_owned();
                    n.strip_prefix(&prefix)
                        .and_then(|rest| rest.strip_suffix(".tmp"))
                        .is_some_and(|seq| {
                            !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit())
                        })
                })
        },
    );
    d.kill_hard();
    assert!(leftover.exists(), "the crash leaves the temp file");

    d.spawn("");
    assert!(
        !leftover.exists(),
        "{} survived the restart; daemon log:\n{}",
        leftover.display(),
        d.log_text()
    );
    assert_eq!(
        std::fs::read_to_string(work.join("deep/er/a.txt")).unwrap(),
        "old\n"
    );
    for k in &keep {
        assert!(work.join(k).exists(), "{k} was removed, but it is not ours");
    }
    assert!(
        work.join(format!("deep/er/.d.toolvisor-{pid}-9.tmp"))
            .is_dir()
    );
    assert!(
        d.log_text()
            .contains("removed a temp file left by a daemon killed mid-write")
    );
}

#[test]
fn a_live_daemon_sharing_the_state_dir_keeps_its_temp_files() {
    let mut a = TestDaemon::start("[testing]\npause_after_writes = 0\n");
    let work = a.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("a.txt"), "old\n").unwrap();
    call_in_background(
        &a,
        &work,
        "write",
        json!({"path": "a.txt", "content": "new\n"}),
    );
    wait_for(
        "daemon A to make its temp file and pause",
        Duration::from_secs(60),
        || (!temp_files(&work).is_empty()).then_some(()),
    );
    let leftover = temp_files(&work);
    // Daemon B, another socket, the same state directory: A is alive, its temp file is not
    // B's to remove.
    let dir_b = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(a.state_dir(), dir_b.path().join("state")).unwrap();
    let mut b = TestDaemon::start_in(dir_b, "");
    assert_eq!(
        temp_files(&work),
        leftover,
        "B removed a live daemon's temp file"
    );
    // Once A is dead, the next start cleans up after it.
    a.kill_hard();
    b.stop();
    b.spawn("");
    assert_eq!(
        temp_files(&work),
        Vec::<PathBuf>::new(),
        "daemon log:\n{}",
        b.log_text()
    );
    assert_eq!(
        std::fs::read_to_string(work.join("a.txt")).unwrap(),
        "old\n"
    );
}

#[test]
fn a_resolve_accept_cut_by_sigkill_is_rolled_back_by_the_journal_and_staged_again() {
    use toolvisor_tests::structural::{contents, four_files, original, rewritten};
    let mut d = TestDaemon::start("[testing]\npause_after_writes = 2\n");
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    let staged = d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
    );
    let id = staged["edit_id"].as_str().unwrap().to_string();
    call_in_background(
        &d,
        d.dir.path(),
        "resolve",
        json!({"edit_id": id, "action": "accept"}),
    );
    let written_now = || {
        contents(&files)
            .iter()
            .zip(1..=4)
            .filter(|(c, i)| **c == rewritten(*i))
            .count()
    };
    wait_for(
        "the accept to write two files and pause before the third's rename",
        Duration::from_secs(60),
        || (written_now() == 2 && !temp_files(&proj).is_empty()).then_some(()),
    );
    d.kill_hard();
    assert_eq!(written_now(), 2, "the crash window is real");

    d.spawn("");
    assert_eq!(
        contents(&files),
        (1..=4).map(original).collect::<Vec<_>>(),
        "daemon log:\n{}",
        d.log_text()
    );
    assert_eq!(temp_files(&proj), Vec::<PathBuf>::new());
    let journals = std::fs::read_dir(d.state_dir().join("journal"))
        .unwrap()
        .count();
    assert_eq!(journals, 0, "the accept's journal is gone once rolled back");
    // The edit is staged again, and accepting it now writes every file.
    let r = d.ok("c", "resolve", json!({"edit_id": id, "action": "accept"}));
    assert_eq!(r["written"].as_array().unwrap().len(), 4);
    assert_eq!(contents(&files), (1..=4).map(rewritten).collect::<Vec<_>>());
}
