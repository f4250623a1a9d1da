//! The clients check who serves the socket (SO_PEERCRED) before they send a byte: a server of
//! another uid (root excepted) is refused, and it receives nothing.
//!
//! The tests run as root, and root is the one uid a client accepts from any server; so the
//! refusing direction is a root client and a server of another user (`nobody`).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use toolvisor_protocol::client::{Client, ClientError};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;

const NOBODY: u32 = 65534;

/// A fake server: a plain listening socket, run as `nobody`, that reports per connection how
/// many bytes the client sent before it closed (`received N`), and closes on the first bytes
/// so a client waiting for an answer is not left hanging.
const FAKE_SERVER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(4)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    got = c.recv(65536)
    print(f"received {len(got)}", flush=True)
    c.close()
"#;

struct FakeServer {
    child: Child,
    lines: BufReader<ChildStdout>,
}

impl FakeServer {
    fn start(socket: &Path) -> FakeServer {
        let mut child = Command::new("python3")
            .args(["-c", FAKE_SERVER])
            .arg(socket)
            .uid(NOBODY)
            .gid(NOBODY)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        assert_eq!(next_line(&mut lines), "listening");
        FakeServer { child, lines }
    }

    /// What the fake server saw on the connection that just ended.
    fn received(&mut self) -> String {
        next_line(&mut self.lines)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn next_line(lines: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    lines
        .read_line(&mut line)
        .expect("the fake server's report");
    line.trim_end().to_string()
}

/// A directory `nobody` can bind a socket in.
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn the_rust_client_refuses_a_server_of_another_uid_without_sending_anything() {
    toolvisor_tests::require_root("running a server as another user");
    let dir = shared_dir();
    let socket = dir.path().join("foreign.sock");
    let mut server = FakeServer::start(&socket);
    for codec in [Codec::Bincode, Codec::Json] {
        let result = Client::connect(&socket, toolvisor_tests::options(codec, Tier::Exec, true));
        match result {
            Err(e @ ClientError::ForeignServer { .. }) => {
                let text = e.to_string();
                assert!(
                    text.contains(&socket.display().to_string())
                        && text.contains(&format!("uid {NOBODY}"))
                        && text.contains("uid 0"),
                    "the error names the socket, the server's uid and ours: {text}"
                );
            }
            Err(e) => panic!("{codec}: expected ForeignServer, got {e}"),
            Ok(_) => panic!("{codec}: a server of another uid was used"),
        }
        assert_eq!(server.received(), "received 0", "{codec}: bytes were sent");
    }
}

#[test]
fn the_python_example_refuses_a_server_of_another_uid_without_sending_anything() {
    toolvisor_tests::require_root("running a server as another user");
    let dir = shared_dir();
    let socket = dir.path().join("foreign.sock");
    let mut server = FakeServer::start(&socket);
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/json_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&socket)
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the example went on: {stderr}");
    assert!(
        stderr.contains("refusing the server")
            && stderr.contains(&format!("uid {NOBODY}"))
            && stderr.contains("uid 0"),
        "{stderr}"
    );
    assert_eq!(server.received(), "received 0", "bytes were sent");
}

#[test]
fn a_server_of_our_own_uid_is_used() {
    // The positive direction on the same fake server, run as ourselves: the check lets the
    // connection through and the Hello goes out (the fake then hangs up).
    let dir = shared_dir();
    let socket = dir.path().join("own.sock");
    let mut child = Command::new("python3")
        .args(["-c", FAKE_SERVER])
        .arg(&socket)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    assert_eq!(next_line(&mut lines), "listening");
    let result = Client::connect(
        &socket,
        toolvisor_tests::options(Codec::Json, Tier::Exec, true),
    );
    // connect returns once the fake hung up, after its report was written.
    let received = next_line(&mut lines);
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        !matches!(result, Err(ClientError::ForeignServer { .. })),
        "a server of our own uid was refused"
    );
    let n: usize = received
        .strip_prefix("received ")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(n > 0, "the Hello was not sent: {received}");
}
