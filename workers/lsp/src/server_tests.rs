//! Tests of the server state ([`super::ServerShared`]): readiness, document sync, publishes,
//! registrations; and the helpers other modules' tests use (`shared`, `connect`, `Fifo`).

use super::*;
use crate::actor::answer_request;
use serde_json::json;
use std::path::Path;
use toolvisor_jsonrpc::{Transport, TransportOptions};
use toolvisor_kit::status::TreeNotifier;

pub(crate) fn shared(program: &str) -> Arc<ServerShared> {
    shared_in(program, Path::new("/tmp"))
}

/// A server of `program` whose root is `root`.
pub(crate) fn shared_in(program: &str, root: &Path) -> Arc<ServerShared> {
    let status = NodeStatus::new(
        "language_server",
        "t",
        String::new(),
        TreeNotifier::default(),
    );
    ServerShared::new(
        "t".into(),
        "python".into(),
        root.to_path_buf(),
        vec![program.into()],
        PathBuf::from(format!("/bin/{program}")),
        None,
        None,
        Vec::new(),
        status,
        Waits {
            init: Duration::from_secs(5),
            request: Duration::from_secs(5),
            ready: Duration::from_secs(5),
            settle: Duration::from_millis(300),
            diagnostics: Duration::from_secs(5),
        },
        None,
        None,
    )
}

/// Connects `s` to an in-memory peer; the returned halves keep the streams open.
pub(crate) fn connect(s: &ServerShared) -> Vec<tokio::io::DuplexStream> {
    let (stdin, peer_in) = tokio::io::duplex(1024);
    let (peer_out, stdout) = tokio::io::duplex(1024);
    let (peer_err, stderr) = tokio::io::duplex(1024);
    let (client, _incoming) = Transport::start(stdout, stdin, stderr, TransportOptions::default());
    s.set_conn(Some(Arc::new(Conn {
        client,
        caps: json!({"hoverProvider": true, "renameProvider": false}),
        encoding: Encoding::Utf16,
        pid: 2,
        generation: 1,
        name: "fake".into(),
        legacy_type_hierarchy: Default::default(),
    })));
    vec![peer_in, peer_out, peer_err]
}

#[tokio::test(start_paused = true)]
async fn readiness_follows_progress_scan_logs_and_settles() {
    let s = shared("pyright-langserver");
    assert_eq!(s.readiness(), Readiness::Starting);
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    assert!(conn.supports("hoverProvider") && !conn.supports("renameProvider"));
    // pyright: not ready until its scan is logged.
    assert!(matches!(s.readiness(), Readiness::Indexing(w) if w.contains("scanning")));
    s.log_message(&json!({"message": "Found 3 source files"}));
    assert_eq!(s.readiness(), Readiness::Ready);
    s.progress(&json!({"token": 7, "value": {"kind": "begin", "title": "Indexing"}}));
    assert_eq!(s.readiness(), Readiness::Indexing("Indexing".into()));
    s.progress(&json!({"token": 7, "value": {"kind": "report", "message": "3/10"}}));
    assert_eq!(s.readiness(), Readiness::Indexing("Indexing — 3/10".into()));
    // A deadline inside the indexing: not ready, and it says what it was doing.
    let short = Instant::now() + Duration::from_millis(100);
    assert_eq!(
        s.wait_ready(short).await,
        Err(Readiness::Indexing("Indexing — 3/10".into()))
    );
    s.progress(&json!({"token": 7, "value": {"kind": "end"}}));
    assert_eq!(s.readiness(), Readiness::Ready);
    // Ready, but not settled until `settle` of quiet has passed.
    assert!(!s.settled());
    let started = Instant::now();
    s.wait_ready(Instant::now() + Duration::from_secs(5))
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300) - Duration::from_millis(1));
    assert!(s.settled());
}

#[tokio::test(start_paused = true)]
async fn rust_analyzer_is_ready_only_when_quiescent() {
    let s = shared("rust-analyzer");
    let _peer = connect(&s);
    assert!(matches!(s.readiness(), Readiness::Indexing(_)));
    s.server_status(&json!({"health": "ok", "quiescent": false}));
    assert!(matches!(s.readiness(), Readiness::Indexing(_)));
    s.server_status(&json!({"health": "ok", "quiescent": true}));
    assert_eq!(s.readiness(), Readiness::Ready);
}

#[tokio::test(start_paused = true)]
async fn typescript_projects_count_as_loaded_once_the_document_has_diagnostics() {
    let s = shared("typescript-language-server");
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    let path = Path::new("/tmp/a.ts");
    let uri = uri::from_path(path);
    assert!(!s.project_loaded(&uri), "not even open");
    s.sync_text(&conn, path, "export const a = 1;", "typescript")
        .unwrap();
    assert!(!s.project_loaded(&uri), "open, project not loaded yet");
    // Settled, but the project is not loaded: still indexing at the deadline.
    let short = Instant::now() + Duration::from_secs(1);
    let r = s.wait_ready_for(&uri, short).await;
    assert!(
        matches!(&r, Err(Readiness::Indexing(w)) if w.contains("loading the project")),
        "{r:?}"
    );
    s.publish(&json!({"uri": uri, "diagnostics": []}));
    assert!(s.project_loaded(&uri), "an empty list counts");
    // Other servers never wait for it.
    let p = shared("pylsp");
    assert!(p.project_loaded("file:///tmp/never-opened.py"));
}

/// Found under load: clangd's first word of its background index came after the settle, and
/// `references` was answered from the open file alone, marked complete. A document opened
/// under a `compile_commands.json` keeps clangd indexing until that pass has ended.
#[tokio::test]
async fn clangd_opened_under_a_compilation_database_is_indexing_until_its_pass_ends() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("main.c"), "int main(void) { return 0; }\n").unwrap();
    let s = shared_in("clangd", root);
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    // Without a database: ready once settled, as before.
    s.sync_text(
        &conn,
        &root.join("main.c"),
        "int main(void) { return 0; }\n",
        "c",
    )
    .unwrap();
    assert_eq!(s.readiness(), Readiness::Ready);
    // With one: a document opened under it waits for the pass.
    std::fs::create_dir(root.join("sub")).unwrap();
    let entry = r#"[{"directory": "/p", "file": "unit.c", "arguments": ["cc", "-c", "unit.c"]}]"#;
    std::fs::write(root.join("sub/compile_commands.json"), entry).unwrap();
    let unit = root.join("sub/unit.c");
    s.sync_text(&conn, &unit, "int unit;\n", "c").unwrap();
    let short = Instant::now() + Duration::from_millis(500);
    let r = s.wait_ready(short).await;
    assert!(
        matches!(&r, Err(Readiness::Indexing(w)) if w.contains("compile_commands.json")),
        "{r:?}"
    );
    s.progress(&json!({"token": "backgroundIndexProgress", "value": {"kind": "begin", "title": "indexing"}}));
    assert_eq!(s.readiness(), Readiness::Indexing("indexing".into()));
    s.progress(&json!({"token": "backgroundIndexProgress", "value": {"kind": "end"}}));
    s.wait_ready(Instant::now() + Duration::from_secs(5))
        .await
        .unwrap();
}

#[tokio::test]
async fn pull_diagnostics_follow_dynamic_registrations_by_id() {
    let s = shared("pyright-langserver");
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    assert!(!s.diags.pulls(&conn));
    let reg =
        |id: &str| json!({"registrations": [{"id": id, "method": "textDocument/diagnostic"}]});
    answer_request(&s, "client/registerCapability", &reg("a")).unwrap();
    assert!(s.diags.pulls(&conn));
    // pyright registers anew, then drops the old registration by its id.
    answer_request(&s, "client/registerCapability", &reg("b")).unwrap();
    let drop_a = json!({"unregisterations": [{"id": "a", "method": "textDocument/diagnostic"}]});
    answer_request(&s, "client/unregisterCapability", &drop_a).unwrap();
    assert!(s.diags.pulls(&conn), "the newer registration still stands");
    let drop_b = json!({"unregisterations": [{"id": "b", "method": "textDocument/diagnostic"}]});
    answer_request(&s, "client/unregisterCapability", &drop_b).unwrap();
    assert!(!s.diags.pulls(&conn));
}

#[tokio::test]
async fn workspace_pull_follows_the_registrations_options() {
    let s = shared("pyright-langserver");
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    let reg = |id: &str, ws: bool| {
        json!({"registrations": [{"id": id, "method": "textDocument/diagnostic",
            "registerOptions": {"interFileDependencies": true, "workspaceDiagnostics": ws}}]})
    };
    // pyright's own registration: document pulls only.
    answer_request(&s, "client/registerCapability", &reg("a", false)).unwrap();
    assert!(s.diags.pulls(&conn));
    assert!(!s.diags.pulls_workspace(&conn));
    answer_request(&s, "client/registerCapability", &reg("b", true)).unwrap();
    assert!(s.diags.pulls_workspace(&conn));
    let drop_b = json!({"unregisterations": [{"id": "b", "method": "textDocument/diagnostic"}]});
    answer_request(&s, "client/unregisterCapability", &drop_b).unwrap();
    assert!(!s.diags.pulls_workspace(&conn));
}

#[tokio::test]
async fn publishes_record_the_version_they_are_for() {
    let s = shared("clangd");
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    let path = Path::new("/tmp/x.c");
    let (v1, sent) = s.sync_text(&conn, path, "int x;", "c").unwrap();
    assert_eq!((v1, sent), (1, true));
    assert_eq!(s.sync_text(&conn, path, "int x;", "c").unwrap(), (1, false));
    assert_eq!(s.sync_text(&conn, path, "int y;", "c").unwrap(), (2, true));
    let uri = uri::from_path(path);
    s.publish(&json!({"uri": uri, "diagnostics": [{"message": "m"}]}));
    let p = s.diags.get(&uri).unwrap();
    assert_eq!((p.version, p.versioned, p.items.len()), (2, false, 1));
    s.publish(&json!({"uri": uri, "version": 1, "diagnostics": []}));
    let q = s.diags.get(&uri).unwrap();
    assert_eq!((q.version, q.versioned), (1, true));
    assert!(q.seq > p.seq);
}

/// A FIFO and a watchdog: if whatever is tested waits on the FIFO (an open for reading waits
/// for a writer), after 30 s the watchdog feeds it (and drains a writer) so the test ends
/// instead of hanging, and [`Fifo::watchdog_fired`] says so.
pub(crate) struct Fifo {
    done: std::sync::mpsc::Sender<()>,
    watchdog: std::thread::JoinHandle<bool>,
}

impl Fifo {
    pub(crate) fn new(path: &Path) -> Fifo {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let at = path.to_path_buf();
        let watchdog = std::thread::spawn(move || {
            if rx.recv_timeout(Duration::from_secs(30)).is_ok() {
                return false;
            }
            // Fired: feed whoever opens the FIFO for reading, and drain whoever opens it
            // for writing, without ever blocking, until the test is done.
            use std::io::{Read, Write};
            use std::os::unix::fs::OpenOptionsExt;
            const O_NONBLOCK: i32 = 0o4000; // Linux
            while rx.recv_timeout(Duration::from_millis(100)).is_err() {
                let open = |write: bool| {
                    std::fs::OpenOptions::new()
                        .read(!write)
                        .write(write)
                        .custom_flags(O_NONBLOCK)
                        .open(&at)
                };
                if let Ok(mut w) = open(true) {
                    let _ = w.write_all(b"watchdog\n");
                }
                if let Ok(mut r) = open(false) {
                    let _ = r.read_to_end(&mut Vec::new());
                }
            }
            true
        });
        Fifo { done, watchdog }
    }

    /// Whether the watchdog had to feed the FIFO (something waited on it).
    pub(crate) fn watchdog_fired(self) -> bool {
        let _ = self.done.send(());
        drop(self.done);
        self.watchdog.join().unwrap()
    }
}

/// A document that is a FIFO is refused at once, naming its type: the read never waits for a
/// writer (on the old code it blocked until the watchdog fed the FIFO), and the server never
/// sees it.
#[tokio::test(flavor = "current_thread")]
async fn a_fifo_document_is_refused_without_waiting_on_it() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("slow.py");
    let fifo = Fifo::new(&path);
    let s = shared("pylsp");
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    let got = s.sync_from_disk(&conn, &path, "python", None).await;
    assert!(
        !fifo.watchdog_fired(),
        "the sync waited on the FIFO until the watchdog fed it"
    );
    let err = match got {
        Err(e) => e,
        Ok(synced) => panic!("a FIFO was read as a document: {:?}", synced.text),
    };
    assert_eq!(
        toolvisor_kit::special::not_regular(&err),
        Some("a FIFO (named pipe)"),
        "{err}"
    );
    assert!(
        s.doc(&uri::from_path(&path)).is_none(),
        "the FIFO was opened in the server"
    );
}

#[tokio::test]
async fn documents_are_read_beneath_the_root_never_through_a_swapped_directory() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("pkg")).unwrap();
    std::fs::write(root.join("pkg/m.py"), "x = 1\n").unwrap();
    std::fs::write(root.join("n.py"), "y = 1\n").unwrap();
    std::fs::write(outside.path().join("m.py"), "SECRET = 1\n").unwrap();
    let s = shared_in("pyright-langserver", &root);
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    let m = root.join("pkg/m.py");
    let synced = s.sync_from_disk(&conn, &m, "python", None).await.unwrap();
    assert_eq!(synced.text, "x = 1\n");
    // Checked as `pkg/m.py`, then `pkg` becomes a link to a directory outside the root.
    std::fs::rename(root.join("pkg"), root.join("pkg.old")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("pkg")).unwrap();
    let err = match s.sync_from_disk(&conn, &m, "python", None).await {
        Err(e) => e,
        Ok(synced) => panic!("read through the swapped directory: {:?}", synced.text),
    };
    assert!(is_moved(&err), "{err}");
    // Refreshing the open documents (syncing another file) reads none through it either.
    s.sync_from_disk(&conn, &root.join("n.py"), "python", None)
        .await
        .unwrap();
    let doc = s.doc(&uri::from_path(&m)).expect("still open");
    assert_eq!(doc.text, "x = 1\n", "the server never saw the outside text");
}

/// The watch's catch-up, the read and the sync are one trip to the blocking pool. What
/// changed under the root before the call comes back with the synced text; a read that fails
/// leaves those changes pending for the next query instead of dropping them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_after_the_catch_up_brings_the_changes_and_a_failed_read_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("a.py"), "a = 1\n").unwrap();
    let s = shared_in("pyright-langserver", &root);
    let _peer = connect(&s);
    let conn = s.conn().unwrap();
    let watch = Arc::new(crate::watch::RootWatch::start(&root));
    let a = root.join("a.py");
    let first = s
        .sync_from_disk(&conn, &a, "python", Some(watch.clone()))
        .await
        .unwrap();
    assert_eq!(first.outside.unwrap(), vec![], "nothing changed yet");
    // Changed outside the daemon, then a query of a file that is gone: an error, and the
    // change waits.
    std::fs::write(root.join("b.py"), "b = 1\n").unwrap();
    let gone = root.join("gone.py");
    assert!(
        s.sync_from_disk(&conn, &gone, "python", Some(watch.clone()))
            .await
            .is_err()
    );
    let next = s
        .sync_from_disk(&conn, &a, "python", Some(watch.clone()))
        .await
        .unwrap();
    assert_eq!(next.text, "a = 1\n");
    assert_eq!(
        next.outside.unwrap(),
        vec![(root.join("b.py"), crate::watch::Change::Created)],
        "the change made before the failed read"
    );
}
