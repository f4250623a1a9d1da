//! The daemon is non-dumpable (PR_SET_DUMPABLE 0, as ssh-agent): a process of the same uid
//! that is not root cannot read its environment through /proc.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use toolvisor_tests::{bin, wait_for};

const NOBODY: u32 = 65534;

/// Kills and reaps on drop, so a failing test leaves nothing running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cat /proc/<pid>/environ` run as nobody.
fn read_environ_as_nobody(pid: u32) -> Output {
    Command::new("cat")
        .arg(format!("/proc/{pid}/environ"))
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .expect("run cat as nobody")
}

#[test]
fn a_same_uid_process_cannot_read_the_daemons_environment() {
    toolvisor_tests::require_root("running the daemon and the reader as nobody");
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = base.path().join("run");
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&run, Some(NOBODY), Some(NOBODY)).unwrap();
    let socket = run.join("toolvisor.sock");
    let daemon = Reaped(
        Command::new(bin())
            .args(["serve", "--socket"])
            .arg(&socket)
            .env("XDG_STATE_HOME", run.join("state"))
            .env("TOOLVISOR_TEST_SECRET", "hunter2-in-the-daemon-env")
            .uid(NOBODY)
            .gid(NOBODY)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(base.path().join("log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let log = base.path().join("log");
    wait_for(
        "the daemon running as nobody to log that it serves",
        Duration::from_secs(20),
        || {
            std::fs::read_to_string(&log)
                .ok()
                .filter(|text| text.contains("toolvisor serving"))
                .map(drop)
        },
    );
    let pid = daemon.0.id();
    // The reader's method works: a plain process of nobody's is readable by nobody.
    let bystander = Reaped(
        Command::new("sleep")
            .arg("300")
            .env("TOOLVISOR_TEST_SECRET", "visible")
            .uid(NOBODY)
            .gid(NOBODY)
            .spawn()
            .unwrap(),
    );
    let control = read_environ_as_nobody(bystander.0.id());
    assert!(
        control.status.success() && String::from_utf8_lossy(&control.stdout).contains("visible"),
        "control: nobody should read its own sleep's environ: {control:?}"
    );
    let out = read_environ_as_nobody(pid);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("hunter2"),
        "a same-uid process read the daemon's environment"
    );
    assert!(
        !out.status.success(),
        "reading the environ succeeded: {out:?}"
    );
    assert!(stderr.contains("Permission denied"), "{stderr}");
}
