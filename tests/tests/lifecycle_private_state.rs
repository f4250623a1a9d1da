//! What the daemon keeps on disk is private whatever the umask: the state directory, staged
//! edits (whole file contents), stored results, the audit log, the lock, the spawn ledger,
//! the write journal and the temp log are 0700 directories and 0600 files.
//!
//! This file holds one test on purpose: it sets the umask of the whole test process to 0.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::sys::stat::{Mode, umask};
use serde_json::json;
use toolvisor_tests::TestDaemon;
use toolvisor_tests::structural::four_files;

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Every directory under `root` (itself included) is 0700 and every file 0600; returns how
/// many files it saw.
fn all_private(root: &Path) -> usize {
    assert_eq!(mode(root), 0o700, "{}", root.display());
    let mut files = 0;
    for entry in std::fs::read_dir(root).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files += all_private(&path);
        } else {
            assert_eq!(mode(&path), 0o600, "{}", path.display());
            files += 1;
        }
    }
    files
}

#[test]
fn state_files_are_private_even_with_umask_0() {
    // The socket's directory must stay private: made before the umask changes.
    let dir = tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap();
    umask(Mode::empty());
    let d = TestDaemon::start_in(
        dir,
        "[policy]\ndeny = [\"grep\"]\n[result_store]\ninline_chars = 8000\nprojection_chars = 2000\n",
    );
    // An audit record: a call the policy denies.
    let denied = d.call("c", "grep", json!({"pattern": "x"}));
    assert!(
        matches!(denied, toolvisor_protocol::wire::Outcome::Err(_)),
        "{denied:?}"
    );
    // A staged edit, which holds whole file contents.
    let files = four_files(d.dir.path());
    let proj = files[0].parent().unwrap().to_path_buf();
    d.ok(
        "c",
        "ast_edit",
        json!({"pattern": "print($$$A)", "rewrite": "log($$$A)", "path": proj}),
    );
    // A result too big to return inline, stored under results/.
    let big = d.ok("c", "bash", json!({"command": "seq 1 100000"}));
    assert!(
        big["projected"]["stdout"]["ref"].is_string(),
        "the output was stored: {big:.500}"
    );
    // A live process, so the spawn ledger holds a record.
    d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300"}),
    );

    // A write, so the temp log records its directory.
    let work = d.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let mut c = d.client(
        toolvisor_protocol::codec::Codec::Json,
        toolvisor_protocol::wire::Tier::Write,
        true,
    );
    let wrote = c
        .call_with(
            "c",
            "write",
            json!({"path": work.join("a.txt"), "content": "x"}),
            |_| true,
        )
        .expect("call");
    assert!(
        matches!(wrote.outcome, toolvisor_protocol::wire::Outcome::Ok(_)),
        "{:?}",
        wrote.outcome
    );

    let state = d.state_dir();
    assert!(all_private(&state.join("temps")) >= 1, "a temp log record");
    all_private(&state.join("journal"));
    assert_eq!(mode(&state), 0o700, "state dir");
    assert_eq!(mode(&state.join("audit.jsonl")), 0o600, "audit log");
    assert!(
        all_private(&state.join("structural")) >= 2,
        "edit and next_id"
    );
    assert!(all_private(&state.join("results")) >= 1, "a stored result");
    assert_eq!(mode(&d.socket), 0o600, "socket");
    let lock = format!("{}.lock", d.socket.display());
    assert_eq!(mode(Path::new(&lock)), 0o600, "lock file");
    let ledger = format!("{}.ledger", d.socket.display());
    assert!(all_private(Path::new(&ledger)) >= 1, "a ledger record");
}
