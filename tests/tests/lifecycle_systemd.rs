//! The daemon under a service manager: started by socket activation on the first client's
//! connect (Debian's `systemd-socket-activate` plays systemd's `.socket` unit), and
//! reporting readiness, a watchdog ping and its stop over `NOTIFY_SOCKET` (the test plays the
//! manager's listener).

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ClientFrame, DaemonFrame, Outcome, Tier};
use toolvisor_tests::{bin, options, wait_for};

fn write_config(dir: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {:?}\n",
            dir.join("state").display().to_string()
        ),
    )
    .unwrap();
    config
}

#[test]
fn socket_activation_starts_the_daemon_on_the_first_connect_and_answers_that_client() {
    let activate = which("systemd-socket-activate").expect(
        "systemd-socket-activate (Debian's systemd package; scripts/install-test-deps installs it)",
    );
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("toolvisor.sock");
    let config = write_config(dir.path());
    let log = std::fs::File::create(dir.path().join("daemon.log")).unwrap();
    let mut manager = Command::new(activate)
        .arg("-l")
        .arg(&socket)
        .arg(bin())
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start systemd-socket-activate");
    // The socket file appears at bind(), before listen(): a connect in between is refused.
    // systemd-socket-activate logs "Listening on …" once it listens.
    let log_path = dir.path().join("daemon.log");
    wait_for(
        "systemd-socket-activate to listen",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(&log_path)
                .ok()
                .filter(|log| log.contains("Listening on"))
                .map(|_| ())
        },
    );
    // Nothing serves yet: the first connect is what starts the daemon, and that same client
    // gets its answer.
    let mut client = Client::connect(&socket, options(Codec::Json, Tier::Exec, true))
        .expect("the first client connects through the activated socket");
    let reply = client
        .call_with("c", "ls", json!({"path": "."}), |_| true)
        .expect("the first client's call");
    assert!(
        matches!(reply.outcome, Outcome::Ok(_)),
        "{:?}\n{}",
        reply.outcome,
        std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default()
    );
    let status = match client.request(&ClientFrame::Status).unwrap() {
        DaemonFrame::Status(s) => s,
        other => panic!("{other:?}"),
    };
    // systemd-socket-activate execs the daemon in its own place.
    assert_eq!(status.pid, manager.id());
    assert_eq!(status.socket, socket.display().to_string());
    drop(client);

    toolvisor_tests::sigterm(manager.id()).expect("SIGTERM");
    let exit = wait_for("the daemon to exit", Duration::from_secs(20), || {
        manager.try_wait().ok().flatten()
    });
    assert!(exit.success(), "{exit:?}");
    assert!(
        socket.exists(),
        "the manager's socket is the manager's: the daemon leaves it for the next start"
    );
}

#[test]
fn readiness_watchdog_and_stopping_are_notified_to_the_notify_socket() {
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify");
    let listener = UnixDatagram::bind(&notify_path).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let config = write_config(dir.path());
    let socket = dir.path().join("toolvisor.sock");
    let mut daemon = Command::new(bin())
        .arg("serve")
        .arg("--socket")
        .arg(&socket)
        .arg("--config")
        .arg(&config)
        .env("NOTIFY_SOCKET", &notify_path)
        .env("WATCHDOG_USEC", "400000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    let mut next = |what: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(
                Instant::now() < deadline,
                "no {what} notification; got {seen:?}"
            );
            let mut buf = [0u8; 4096];
            let n = listener
                .recv(&mut buf)
                .unwrap_or_else(|e| panic!("waiting for {what}: {e}; got {seen:?}"));
            let text = String::from_utf8_lossy(&buf[..n]).to_string();
            seen.push(text.clone());
            if text.lines().any(|l| l == what) {
                return text;
            }
        }
    };
    let ready = next("READY=1");
    assert!(
        ready.contains(&format!("MAINPID={}", daemon.id())),
        "{ready}"
    );
    assert!(ready.contains("STATUS=serving on"), "{ready}");
    // Ready means ready: a client is served right away.
    Client::connect(&socket, options(Codec::Json, Tier::Read, false))
        .expect("served once READY=1 was sent");
    next("WATCHDOG=1");
    toolvisor_tests::sigterm(daemon.id()).expect("SIGTERM");
    let stopping = next("STOPPING=1");
    assert!(stopping.contains("STATUS=draining"), "{stopping}");
    let exit = wait_for("the daemon to exit", Duration::from_secs(20), || {
        daemon.try_wait().ok().flatten()
    });
    assert!(exit.success(), "{exit:?}");
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// The shipped units are valid for systemd: `systemd-analyze verify` (as a user manager)
/// finds no unknown key, bad value or missing command once ExecStart names a built binary.
#[test]
fn the_shipped_units_pass_systemd_analyze_verify() {
    let analyze = which("systemd-analyze").expect("systemd-analyze (Debian's systemd package)");
    let dir = tempfile::tempdir().unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/systemd");
    let mut units = Vec::new();
    for name in ["toolvisor.socket", "toolvisor.service"] {
        let text = std::fs::read_to_string(shipped.join(name)).unwrap();
        assert!(
            name != "toolvisor.service" || text.contains("ExecStart=%h/.cargo/bin/toolvisor serve"),
            "the service runs `toolvisor serve` from cargo's bin directory"
        );
        let text = text.replace("%h/.cargo/bin/toolvisor", &bin().display().to_string());
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        units.push(path);
    }
    let out = Command::new(analyze)
        .args(["verify", "--user"])
        .args(&units)
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && said.trim().is_empty(), "{said}");
}

#[test]
fn a_sigterm_right_after_ready_drains_and_exits_cleanly() {
    // The daemon's signal handlers must be in place before it says READY=1: a SIGTERM that
    // follows at once used to kill it outright whenever it came before the accept loop first
    // ran (seen under load: no STOPPING=1, a death by signal).
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let notify_path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&notify_path).unwrap();
        listener
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let config = write_config(dir.path());
        let mut daemon = Command::new(bin())
            .arg("serve")
            .arg("--socket")
            .arg(dir.path().join("toolvisor.sock"))
            .arg("--config")
            .arg(&config)
            .env("NOTIFY_SOCKET", &notify_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = listener.recv(&mut buf).expect("READY=1");
        assert!(String::from_utf8_lossy(&buf[..n]).contains("READY=1"));
        toolvisor_tests::sigterm(daemon.id()).expect("SIGTERM");
        let n = listener
            .recv(&mut buf)
            .expect("STOPPING=1 after a SIGTERM right after READY=1");
        assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
        let exit = wait_for("the daemon to exit", Duration::from_secs(20), || {
            daemon.try_wait().ok().flatten()
        });
        assert!(exit.success(), "{exit:?}");
    }
}
