//! No tool waits on a special file. A FIFO or a Unix socket in the workdir is refused, its type
//! named, by `read`, `edit`, `write`, `apply_patch`, `grep`, `ast_grep` and `ast_edit` (named as
//! the path) and `lsp` (a file argument); walks over the directory (`grep`, `find`, `ast_grep`)
//! pass it by; a device is reachable only through a symbolic link, which leads out of the
//! workdir (`out_of_scope`). While one conversation's calls run, another's `ls` answers.
//!
//! Before, each of those calls opened the FIFO and waited for a writer for ever, past the
//! client's cancel and disconnect. Every wait here is bounded by the client's read timeout, so a
//! call that waits on the FIFO fails the test instead of hanging it.

use std::collections::HashMap;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{ApprovalAnswer, ClientFrame, DaemonFrame, Outcome};
use toolvisor_tests::TestDaemon;
use toolvisor_tests::lsp::{canonical, client_in, lsp_config, require};

/// How long any answer may take: far above a refusal's cost, far below "for ever".
const BOUND: Duration = Duration::from_secs(90);

const SOURCE: &str = "print(1)\n";
const FIFO: &str = "a FIFO (named pipe), not a regular file";
const SOCKET: &str = "a Unix socket, not a regular file";

/// The workdir: `a.py`, the FIFO `pipe.py`, the socket `sock.py` (its listener kept open),
/// `null.py` → `/dev/null`, and a `pyproject.toml` (pyright's root marker).
struct Workdir {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    _listener: UnixListener,
}

fn workdir() -> Workdir {
    let dir = tempfile::tempdir().unwrap();
    let path = canonical(dir.path());
    std::fs::write(path.join("a.py"), SOURCE).unwrap();
    std::fs::write(path.join("pyproject.toml"), "").unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(path.join("pipe.py"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo");
    let listener = UnixListener::bind(path.join("sock.py")).unwrap();
    std::os::unix::fs::symlink("/dev/null", path.join("null.py")).unwrap();
    Workdir {
        _dir: dir,
        path,
        _listener: listener,
    }
}

/// A client in `workdir` whose every wait for a frame ends after [`BOUND`].
fn bounded_client(d: &TestDaemon, workdir: &Path) -> Client {
    let c = client_in(d, workdir, "test-run");
    c.set_read_timeout(Some(BOUND)).unwrap();
    c
}

/// Send every call at once (they run side by side), approving what asks; then the outcome of
/// each, in order. A call that never answers fails the test after [`BOUND`], naming it.
fn all_at_once(c: &mut Client, conversation: &str, calls: &[(&str, Json)]) -> Vec<Outcome> {
    let ids: Vec<u64> = calls
        .iter()
        .map(|(tool, args)| c.start_call(conversation, tool, args.clone()).unwrap())
        .collect();
    collect(c, &ids, calls)
}

fn refused(outcome: &Outcome, call: &(&str, Json), what: &str) -> ToolError {
    let e = match outcome {
        Outcome::Err(e) => e.clone(),
        Outcome::Ok(v) => panic!("{} {} was not refused: {}", call.0, call.1, v.0),
    };
    assert_eq!(e.kind, ErrorKind::InvalidArgs, "{} {}: {e}", call.0, call.1);
    assert!(e.message.contains(what), "{} {}: {e}", call.0, call.1);
    assert!(
        e.hint.contains("`bash`"),
        "{} {}: {}",
        call.0,
        call.1,
        e.hint
    );
    e
}

fn ok(outcome: &Outcome, call: &(&str, Json)) -> Json {
    match outcome {
        Outcome::Ok(v) => v.0.clone(),
        Outcome::Err(e) => panic!("{} {}: {e}", call.0, call.1),
    }
}

fn still_special(w: &Workdir) {
    let t = |n: &str| {
        std::fs::symlink_metadata(w.path.join(n))
            .unwrap()
            .file_type()
    };
    assert!(t("pipe.py").is_fifo(), "the FIFO was replaced");
    assert!(t("sock.py").is_socket(), "the socket was replaced");
}

#[test]
fn file_and_structural_tools_refuse_special_files_and_walks_pass_them_by() {
    let w = workdir();
    let d = TestDaemon::start("");
    let mut hostile = bounded_client(&d, &w.path);
    let mut other = bounded_client(&d, &w.path);
    let patch =
        "*** Begin Patch\n*** Update File: pipe.py\n@@\n-print(1)\n+print(2)\n*** End Patch\n";
    let refusals: Vec<((&str, Json), &str)> = vec![
        (("read", json!({"path": "pipe.py"})), FIFO),
        (("read", json!({"path": "sock.py"})), SOCKET),
        (
            (
                "edit",
                json!({"path": "pipe.py", "old_text": "print(1)", "new_text": "print(2)"}),
            ),
            FIFO,
        ),
        (
            ("write", json!({"path": "pipe.py", "content": "x = 1\n"})),
            FIFO,
        ),
        (
            ("write", json!({"path": "sock.py", "content": "x = 1\n"})),
            SOCKET,
        ),
        (("apply_patch", json!({"patch": patch})), FIFO),
        (
            ("grep", json!({"pattern": "print", "path": "pipe.py"})),
            FIFO,
        ),
        (
            (
                "ast_grep",
                json!({"pattern": "print($A)", "path": "pipe.py"}),
            ),
            FIFO,
        ),
        (
            (
                "ast_grep",
                json!({"pattern": "print($A)", "path": "sock.py"}),
            ),
            SOCKET,
        ),
        (
            (
                "ast_edit",
                json!({"pattern": "print($A)", "rewrite": "log($A)", "path": "pipe.py"}),
            ),
            FIFO,
        ),
    ];
    let walks: Vec<(&str, Json)> = vec![
        ("grep", json!({"pattern": "print"})),
        ("find", json!({"pattern": "*.py"})),
        (
            "ast_grep",
            json!({"pattern": "print($A)", "language": "python"}),
        ),
        ("read", json!({"path": "null.py"})),
    ];
    let mut calls: Vec<(&str, Json)> = refusals.iter().map(|(c, _)| c.clone()).collect();
    calls.extend(walks.iter().cloned());

    // All of them in flight at once in one conversation, then `ls` in another.
    let ids: Vec<u64> = calls
        .iter()
        .map(|(tool, args)| hostile.start_call("hostile", tool, args.clone()).unwrap())
        .collect();
    let ls = all_at_once(&mut other, "other", &[("ls", json!({"path": "."}))]);
    let listed = ok(&ls[0], &("ls", json!({})));
    assert!(listed.to_string().contains("a.py"), "{listed}");
    let outcomes = collect(&mut hostile, &ids, &calls);

    for (i, (call, what)) in refusals.iter().enumerate() {
        let e = refused(&outcomes[i], call, what);
        if matches!(call.0, "read" | "edit" | "write" | "grep") {
            let name = call.1["path"].as_str().unwrap();
            assert_eq!(e.message, format!("{}: {name} is {what}", call.0), "{e}");
        }
    }
    let walked = &outcomes[refusals.len()..];
    let grep = ok(&walked[0], &walks[0]);
    assert!(grep.to_string().contains("a.py:1:print(1)"), "{grep}");
    let find = ok(&walked[1], &walks[1]);
    assert!(find.to_string().contains("a.py"), "{find}");
    let ast = ok(&walked[2], &walks[2]);
    assert_eq!(ast["total"], 1, "{ast}");
    match &walked[3] {
        Outcome::Err(e) => assert_eq!(e.kind, ErrorKind::OutOfScope, "{e}"),
        Outcome::Ok(v) => panic!("/dev/null through a link was read: {}", v.0),
    }
    still_special(&w);
    assert_eq!(
        std::fs::read_to_string(w.path.join("a.py")).unwrap(),
        SOURCE
    );
}

/// The outcomes of the calls `ids` (sent as `calls`), approving what asks.
fn collect(c: &mut Client, ids: &[u64], calls: &[(&str, Json)]) -> Vec<Outcome> {
    let mut got: HashMap<u64, Outcome> = HashMap::new();
    while got.len() < ids.len() {
        let frame = c.recv().unwrap_or_else(|e| {
            let waiting: Vec<String> = ids
                .iter()
                .zip(calls)
                .filter(|(id, _)| !got.contains_key(id))
                .map(|(_, (tool, args))| format!("{tool} {args}"))
                .collect();
            panic!("no answer within {BOUND:?} ({e}); still waiting: {waiting:?}")
        });
        match frame {
            DaemonFrame::Result { id, outcome } => {
                got.insert(id, outcome);
            }
            DaemonFrame::ApprovalRequest(req) => c
                .send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                    request_id: req.request_id,
                    approved: true,
                    reason: None,
                }))
                .unwrap(),
            DaemonFrame::Error(e) => panic!("an error frame: {e}"),
            _ => {}
        }
    }
    ids.iter().map(|id| got.remove(id).unwrap()).collect()
}

#[test]
fn lsp_refuses_a_fifo_file_argument_and_the_server_keeps_answering() {
    require("pyright-langserver");
    let w = workdir();
    let d = TestDaemon::start(&lsp_config(""));
    let mut hostile = bounded_client(&d, &w.path);
    let mut other = bounded_client(&d, &w.path);
    let calls: Vec<(&str, Json)> = vec![
        ("lsp", json!({"op": "symbols", "file": "pipe.py"})),
        ("lsp", json!({"op": "diagnostics", "file": "pipe.py"})),
        (
            "lsp",
            json!({"op": "hover", "file": "pipe.py", "line": 1, "symbol": "print"}),
        ),
    ];
    let ids: Vec<u64> = calls
        .iter()
        .map(|(tool, args)| hostile.start_call("hostile", tool, args.clone()).unwrap())
        .collect();
    let ls = all_at_once(&mut other, "other", &[("ls", json!({"path": "."}))]);
    ok(&ls[0], &("ls", json!({})));
    let outcomes = collect(&mut hostile, &ids, &calls);
    for (outcome, call) in outcomes.iter().zip(&calls) {
        refused(outcome, call, FIFO);
    }
    // The server was not left waiting on the FIFO: the next file is answered.
    let after = all_at_once(
        &mut other,
        "other",
        &[("lsp", json!({"op": "symbols", "file": "a.py"}))],
    );
    ok(
        &after[0],
        &("lsp", json!({"op": "symbols", "file": "a.py"})),
    );
    still_special(&w);
}
