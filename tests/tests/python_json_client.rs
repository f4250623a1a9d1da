//! The Python example client speaks the JSON codec with nothing but a socket.

use std::process::Command;

use toolvisor_tests::TestDaemon;

#[test]
fn the_python_example_client_round_trips() {
    let d = TestDaemon::start("");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/json_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&d.socket)
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("tools:") && stdout.contains("bash"),
        "{stdout}"
    );
    assert!(stdout.contains("hello from python"), "{stdout}");
    assert!(stdout.contains("approval_denied"), "{stdout}");
}
