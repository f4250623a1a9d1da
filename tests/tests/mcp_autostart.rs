//! `toolvisor mcp` with no daemon running: the daemon was killed (its socket file left
//! behind, refusing connections), and the next `toolvisor mcp`, started by a real harness
//! (`claude -p` against the scripted endpoint), starts one with the same socket and config and
//! answers the harness's calls.

use std::time::Duration;

use serde_json::json;
use toolvisor_tests::harness::{Endpoint, claude, project};
use toolvisor_tests::{TestDaemon, wait_for};

/// The pids of `toolvisor serve` processes on `socket` (by /proc cmdline).
fn serving(socket: &std::path::Path) -> Vec<u32> {
    let want = socket.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                return false;
            };
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            args.iter().any(|a| a == "serve") && args.contains(&want)
        })
        .collect()
}

#[test]
fn the_next_toolvisor_mcp_starts_the_daemon_that_was_killed() {
    let mut d = TestDaemon::start("");
    let work = project(&d);
    d.kill_hard();
    assert!(d.socket.exists(), "a daemon killed hard leaves its socket");
    assert!(serving(&d.socket).is_empty());
    let ep = Endpoint::start(
        &d.dir.path().join("ep"),
        json!([
            {"tool": "read", "args": {"path": "pkg/greet.py"}},
            {"final": "read done"}
        ]),
    );
    let config = d.config_path().display().to_string();
    let run = claude(&d, &ep, &work, &["--config", &config], &["read"]);
    let started = serving(&d.socket);
    for pid in &started {
        // Started by this test's `toolvisor mcp`: ours to end.
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status();
    }
    assert!(
        run.status.success(),
        "claude failed ({}):\nstdout: {}\nstderr: {}",
        run.status,
        run.stdout,
        run.stderr
    );
    let text = ep.results_text();
    assert!(text.contains("toolvisor-harness-7731"), "{text}");
    assert_eq!(started.len(), 1, "one daemon started: {started:?}");
    wait_for(
        "the started daemon to exit",
        Duration::from_secs(10),
        || serving(&d.socket).is_empty().then_some(()),
    );
}

/// `toolvisor mcp --socket SOCKET --config CONFIG` over pipes.
fn mcp(socket: &std::path::Path, config: &std::path::Path) -> std::process::Child {
    std::process::Command::new(toolvisor_tests::bin())
        .arg("mcp")
        .arg("--socket")
        .arg(socket)
        .arg("--config")
        .arg(config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start toolvisor mcp")
}

#[test]
fn concurrent_starters_start_one_daemon() {
    use std::io::{BufRead, Write};
    let mut d = TestDaemon::start("");
    d.kill_hard();
    let mut servers: Vec<_> = (0..4).map(|_| mcp(&d.socket, &d.config_path())).collect();
    // Each answers `initialize` only once a daemon answers it.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "autostart-test", "version": "1"}}});
    for s in &mut servers {
        let mut stdin = s.stdin.take().unwrap();
        writeln!(stdin, "{init}").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(s.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("\"serverInfo\""), "{line}");
        drop(stdin);
    }
    let started = serving(&d.socket);
    for s in &mut servers {
        let _ = s.wait();
    }
    for pid in &started {
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status();
    }
    assert_eq!(started.len(), 1, "exactly one daemon: {started:?}");
}

#[test]
fn a_daemon_that_cannot_start_fails_toolvisor_mcp_saying_why() {
    let mut d = TestDaemon::start("");
    d.kill_hard();
    // A state directory that is a file: the daemon it starts exits at once.
    let blocker = d.dir.path().join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    std::fs::write(
        d.config_path(),
        format!("state_dir = {:?}\n", blocker.display().to_string()),
    )
    .unwrap();
    let out = mcp(&d.socket, &d.config_path()).wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("no daemon answers and none could be started")
            && stderr.contains("exited")
            && stderr.contains("toolvisor serve"),
        "{stderr}"
    );
}
