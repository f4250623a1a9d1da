//! A socket directory someone else could have made or changed is refused before anything is
//! written in it, and a symlinked lock file is refused, not followed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use toolvisor_tests::{bin, wait_for};

/// Runs `toolvisor serve --socket <socket>` (state in `state`) and returns its stderr; the
/// daemon must refuse to start (exit code 2) instead of serving.
fn serve_must_refuse(socket: &Path, state: &Path) -> String {
    /// Kills a daemon that did not refuse, so a failing test leaves nothing running.
    struct Reaped(std::process::Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let log = state.with_extension("log");
    let mut child = Reaped(
        Command::new(bin())
            .args(["serve", "--socket"])
            .arg(socket)
            .env("XDG_STATE_HOME", state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn toolvisor serve"),
    );
    let status = wait_for(
        &format!("the daemon to refuse the socket {}", socket.display()),
        Duration::from_secs(20),
        || child.0.try_wait().expect("try_wait"),
    );
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(status.code(), Some(2), "{stderr}");
    stderr
}

/// A place for the daemon's state that is ours, outside the directory under test.
fn private_state() -> tempfile::TempDir {
    tempfile::tempdir().expect("state temp dir")
}

#[test]
fn a_socket_directory_writable_by_others_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("open");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let state = private_state();
    let socket = dir.join("toolvisor.sock");
    let err = serve_must_refuse(&socket, &state.path().join("state"));
    assert!(
        err.contains(&dir.display().to_string()),
        "names the directory: {err}"
    );
    assert!(err.contains("mode 0777"), "names the mode: {err}");
    assert!(err.contains("owner "), "names the owner: {err}");
    assert!(err.contains("group or others may write"), "{err}");
    for leftover in [
        "toolvisor.sock",
        "toolvisor.sock.lock",
        "toolvisor.sock.ledger",
    ] {
        assert!(!dir.join(leftover).exists(), "{leftover} was created");
    }
}

#[test]
fn a_socket_directory_of_another_user_is_refused() {
    toolvisor_tests::require_root("giving a directory to another user");
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("theirs");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let state = private_state();
    let err = serve_must_refuse(&dir.join("toolvisor.sock"), &state.path().join("state"));
    assert!(err.contains(&dir.display().to_string()), "{err}");
    assert!(err.contains("uid 65534"), "names the owner: {err}");
    assert!(err.contains("mode 0700"), "names the mode: {err}");
    assert!(err.contains("belongs to another user"), "{err}");
    assert!(!dir.join("toolvisor.sock.lock").exists());
}

#[test]
fn a_socket_directly_in_tmp_is_refused_with_a_hint() {
    let state = private_state();
    let socket = std::env::temp_dir().join(format!("toolvisor-test-{}.sock", std::process::id()));
    let err = serve_must_refuse(&socket, &state.path().join("state"));
    assert!(err.contains("the socket directory"), "{err}");
    assert!(
        err.contains("XDG_RUNTIME_DIR"),
        "says where to put it instead: {err}"
    );
    assert!(!socket.exists());
    assert!(!Path::new(&format!("{}.lock", socket.display())).exists());
}

#[test]
fn a_symlinked_socket_directory_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let real = base.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = base.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let state = private_state();
    let err = serve_must_refuse(&link.join("toolvisor.sock"), &state.path().join("state"));
    assert!(err.contains("symbolic link"), "{err}");
    assert!(
        std::fs::read_dir(&real).unwrap().next().is_none(),
        "nothing written through the link"
    );
}

#[test]
fn a_symlinked_lock_file_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("precious");
    std::fs::write(&target, "precious contents\n").unwrap();
    let socket = dir.path().join("toolvisor.sock");
    std::os::unix::fs::symlink(&target, dir.path().join("toolvisor.sock.lock")).unwrap();
    let err = serve_must_refuse(&socket, &outside.path().join("state"));
    assert!(err.contains("the lock file"), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "precious contents\n",
        "the lock's target was overwritten"
    );
    assert!(!socket.exists(), "the daemon bound anyway");
}
