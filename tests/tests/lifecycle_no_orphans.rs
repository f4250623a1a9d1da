//! A killed daemon leaves no child alive; a stale socket is recovered; a second daemon on a
//! live socket refuses to start; the socket is private.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;
use toolvisor_tests::{TestDaemon, alive, bin, wait_for};

#[test]
fn sigkill_of_the_daemon_leaves_no_child_alive() {
    let mut d = TestDaemon::start("");
    // A tracked process, a process that escapes its group with setsid, and a running bash.
    let tracked = d.ok(
        "c",
        "process",
        json!({"op": "start", "command": "exec sleep 300"}),
    );
    let tracked_pid = tracked["pid"].as_u64().unwrap() as u32;
    let escape_file = d.dir.path().join("escaped.pid");
    d.ok("c", "process", json!({"op": "start", "command": format!(
        "python3 -c 'import os,time\nif os.fork()==0:\n  os.setsid()\n  open(\"{}\",\"w\").write(str(os.getpid()))\n  time.sleep(300)\nelse:\n  time.sleep(300)'",
        escape_file.display())}));
    let escaped: u32 = wait_for(
        "the escaping grandchild to write its pid",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&escape_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
        },
    );
    let bash_file = d.dir.path().join("bash.pid");
    let mut c = d.client(Codec::Bincode, Tier::Exec, true);
    c.start_call(
        "c",
        "bash",
        json!({"command": format!("echo $$ > {}; sleep 300", bash_file.display())}),
    )
    .unwrap();
    // Approve it.
    if let toolvisor_protocol::wire::DaemonFrame::ApprovalRequest(req) = c.recv().unwrap() {
        c.send(&toolvisor_protocol::wire::ClientFrame::ApprovalAnswer(
            toolvisor_protocol::wire::ApprovalAnswer {
                request_id: req.request_id,
                approved: true,
                reason: None,
            },
        ))
        .unwrap();
    }
    let bash_pid: u32 = wait_for(
        "the bash command to write its pid",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&bash_file)
                .ok()
                .and_then(|s| s.trim().parse().ok())
        },
    );
    for pid in [tracked_pid, escaped, bash_pid] {
        assert!(alive(pid), "{pid} should run before the kill");
    }
    d.kill_hard();
    for pid in [tracked_pid, escaped, bash_pid] {
        wait_for(
            &format!("child {pid} to die after the daemon's SIGKILL"),
            Duration::from_secs(2),
            || (!alive(pid)).then_some(()),
        );
    }
}

#[test]
fn a_stale_socket_is_recovered_and_a_live_one_is_not_taken() {
    let mut d = TestDaemon::start("");
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode");
    // A second daemon on the live socket refuses to start, and the first keeps serving.
    let out = Command::new(bin())
        .args(["serve", "--socket"])
        .arg(&d.socket)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already serving"), "{err}");
    d.client(Codec::Bincode, Tier::Read, false);
    // SIGKILL leaves the socket file behind; the next daemon recovers it.
    d.kill_hard();
    assert!(d.socket.exists(), "a SIGKILLed daemon leaves its socket");
    d.spawn("");
    assert!(d.log_text().contains("recovering a stale socket"));
    let v = d.ok("c", "bash", json!({"command": "echo back"}));
    assert_eq!(v["stdout"], "back\n");
    // SIGTERM is a clean stop that removes the socket.
    let status = d.stop();
    assert!(status.success(), "{status:?}");
    assert!(!d.socket.exists());
}

#[test]
fn a_peer_of_another_uid_is_refused_and_logged() {
    toolvisor_tests::require_root("running the daemon as another user");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The socket's directory must be the daemon's own (nobody's), mode 0700.
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&run, Some(65534), Some(65534)).unwrap();
    let socket = run.join("nobody.sock");
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(bin())
        .args(["serve", "--socket"])
        .arg(&socket)
        .env("XDG_STATE_HOME", run.join("state"))
        .uid(65534)
        .gid(65534)
        .stderr(log)
        .spawn()
        .unwrap();
    wait_for(
        "the daemon running as nobody to bind",
        Duration::from_secs(20),
        || socket.exists().then_some(()),
    );
    // Root bypasses the 0600 mode, so only the SO_PEERCRED check stands in the way. The
    // socket file appears at bind(), a moment before listen(): retry a refused connect.
    // Our own client refuses a server of another uid before it sends anything
    // (tests/tests/protocol_server_uid.rs), so the Hello goes out over a raw socket here.
    let result = wait_for(
        "the daemon running as nobody to answer",
        Duration::from_secs(20),
        || {
            let mut stream = std::os::unix::net::UnixStream::connect(&socket).ok()?;
            let hello =
                toolvisor_protocol::wire::ClientFrame::Hello(toolvisor_protocol::wire::Hello {
                    protocol_version: toolvisor_protocol::PROTOCOL_VERSION,
                    codec: Codec::Json,
                    client_kind: toolvisor_protocol::wire::ClientKind::Ops,
                    run_id: String::new(),
                    workdir: String::new(),
                    surface: toolvisor_tests::options(Codec::Json, Tier::Read, false).surface,
                    run_token: None,
                });
            let max = toolvisor_protocol::DEFAULT_MAX_FRAME;
            let _ = toolvisor_protocol::codec::write_frame(&mut stream, Codec::Json, &hello, max);
            let payload = toolvisor_protocol::codec::read_frame(&mut stream, max).ok()?;
            Some(toolvisor_protocol::codec::decode::<
                toolvisor_protocol::wire::DaemonFrame,
            >(Codec::Json, &payload))
        },
    );
    let _ = child.kill();
    let _ = child.wait();
    match result {
        Ok(toolvisor_protocol::wire::DaemonFrame::Refused(e)) => {
            assert!(
                e.message.contains("uid 0") && e.message.contains("65534"),
                "{e}"
            );
        }
        Ok(other) => panic!("expected a refusal frame, got {other:?}"),
        Err(e) => panic!("expected a refusal frame, got {e}"),
    }
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(
        log.contains("refused a connection from another user"),
        "{log}"
    );
}
