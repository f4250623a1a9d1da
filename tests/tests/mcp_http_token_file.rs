//! `toolvisor mcp --listen --token-file` against another local user who can write the token
//! file's directory: a link flipped between the operator's 0600 token and the
//! other user's own file once got the other user's token accepted, because the file was
//! checked by path and then read by path again. Now every start in a directory others may
//! write is refused naming the directory, and a link is refused even in a private one.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use toolvisor_tests::{bin, wait_for};

/// Start `toolvisor mcp --listen 127.0.0.1:0 --token-file FILE`: `Ok(url)` when it started
/// (then stopped again), `Err(stderr)` when it refused.
fn start(dir: &Path, token_file: &Path) -> Result<String, String> {
    let mut child = Command::new(bin())
        .args(["mcp", "--listen", "127.0.0.1:0", "--socket"])
        .arg(dir.join("no-daemon.sock"))
        .arg("--workdir")
        .arg(dir)
        .arg("--token-file")
        .arg(token_file)
        .env_remove("TOOLVISOR_MCP_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolvisor mcp --listen");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line.starts_with("http://") {
        let _ = child.kill();
        let _ = child.wait();
        return Ok(line);
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = wait_for(
        "the refused listener to exit",
        Duration::from_secs(20),
        || child.try_wait().ok().flatten(),
    );
    assert!(!status.success(), "it printed no URL yet exited 0: {err}");
    Err(err)
}

#[test]
fn a_token_file_in_a_directory_others_can_write_is_refused_however_its_link_flips() {
    toolvisor_tests::require_root("a token file of another user (uid 65534)");
    // /tmp's own form: world-writable and sticky.
    let shared = tempfile::tempdir().unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let ours = shared.path().join("operator.token");
    std::fs::write(&ours, format!("{}\n", "a".repeat(64))).unwrap();
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o600)).unwrap();
    let theirs = shared.path().join("theirs.token");
    std::fs::write(&theirs, format!("{}\n", "e".repeat(64))).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o600)).unwrap();
    nix::unistd::chown(
        &theirs,
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    let link = shared.path().join("token");
    std::os::unix::fs::symlink(&ours, &link).unwrap();

    // The other user's part: the link points at one file, then the other, as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, dir, ours, theirs) = (
            stop.clone(),
            shared.path().to_path_buf(),
            ours.clone(),
            theirs.clone(),
        );
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let target = if flips.is_multiple_of(2) {
                    &theirs
                } else {
                    &ours
                };
                let tmp = dir.join("token.next");
                let _ = std::fs::remove_file(&tmp);
                let flipped = std::os::unix::fs::symlink(target, &tmp)
                    .and_then(|()| std::fs::rename(&tmp, dir.join("token")));
                if flipped.is_err() {
                    // The test failed and its directory is gone.
                    break;
                }
                flips += 1;
            }
            flips
        })
    };
    let dir_text = shared.path().display().to_string();
    for attempt in 0..12 {
        match start(shared.path(), &link) {
            Ok(url) => {
                panic!("start {attempt} listened at {url} with a token file others can swap")
            }
            Err(err) => assert!(
                err.contains(&dir_text)
                    && err.contains("group or others may write")
                    && err.contains("directory only you"),
                "start {attempt}: the refusal names the directory and what to do: {err}"
            ),
        }
    }
    stop.store(true, Ordering::Relaxed);
    assert!(flipper.join().unwrap() > 0, "the link never flipped");
    // The operator's own file there is refused as well: the directory is the problem.
    let err = start(shared.path(), &ours).unwrap_err();
    assert!(err.contains(&dir_text), "{err}");

    // In a private directory a link is refused all the same: it is never followed.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let real = private.path().join("real.token");
    std::fs::write(&real, format!("{}\n", "b".repeat(64))).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    let private_link = private.path().join("token");
    std::os::unix::fs::symlink(&real, &private_link).unwrap();
    for _ in 0..3 {
        let err = start(private.path(), &private_link).unwrap_err();
        assert!(
            err.contains("symbolic link") && err.contains("realpath"),
            "the refusal says to give the file itself: {err}"
        );
    }
    // The file itself, there, is taken.
    let url = start(private.path(), &real).expect("a private token file");
    assert!(url.contains("127.0.0.1"), "{url}");
}
