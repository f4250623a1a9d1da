//! Dropping a guard kills the child's whole tree, escaped grandchildren and stopped shims included, and leaves no zombie.

#[path = "support/kit.rs"]
mod kit;

use kit::{Seen, all_our_zombies, comm, python3, spec, wait_exit, wait_until_async};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::BufReader;
use toolvisor_kit::process::{Spawned, descendants, spawn};

/// The child and all its descendants, once `ready` says the tree is complete.
async fn tree_of(root: u32, what: &str, ready: impl Fn(&[u32]) -> bool) -> Vec<Seen> {
    wait_until_async(what, || ready(&descendants(root))).await;
    std::iter::once(root)
        .chain(descendants(root))
        .map(Seen::now)
        .collect()
}

fn count_sleeps(pids: &[u32]) -> usize {
    pids.iter()
        .filter(|&&pid| comm(pid).as_deref() == Some("sleep"))
        .count()
}

async fn drop_kills_sleep_tree(shimmed: bool) {
    let Spawned {
        guard, mut exit, ..
    } = spawn(spec("sh", &["-c", "sleep 300 & sleep 300 & wait"], shimmed))
        .await
        .expect("spawn sh");
    let tree = tree_of(guard.pid(), "two sleeps under sh", |pids| {
        count_sleeps(pids) == 2
    })
    .await;
    drop(guard);
    wait_exit(&mut exit, "the dropped sh tree").await;
    wait_until_async("every process of the sh tree to die", || {
        tree.iter().all(Seen::is_dead)
    })
    .await;
    let pids: Vec<u32> = tree.iter().map(|seen| seen.pid).collect();
    assert!(kit::our_zombies(&pids).is_empty(), "zombies left: {pids:?}");
}

#[tokio::test]
async fn drop_kills_the_whole_tree_without_shim() {
    drop_kills_sleep_tree(false).await;
}

#[tokio::test]
async fn drop_kills_the_whole_tree_with_shim() {
    drop_kills_sleep_tree(true).await;
}

const ESCAPE: &str = r#"
import os, time
if os.fork() == 0:
    os.setsid()
    print(os.getpid(), flush=True)
    time.sleep(300)
    os._exit(0)
time.sleep(300)
"#;

async fn drop_kills_escaped_grandchild(shimmed: bool) {
    let Spawned {
        guard,
        stdout,
        mut exit,
        ..
    } = spawn(spec(&python3(), &["-c", ESCAPE], shimmed))
        .await
        .expect("spawn python3");
    let mut stdout = BufReader::new(stdout);
    let line = kit::read_line(&mut stdout, "the escaped grandchild's pid").await;
    let escaped = Seen::now(line.parse().expect("a pid"));
    let (_, _, _) = kit::stat(escaped.pid).expect("escaped grandchild alive");
    assert_ne!(
        kit::pgrp(escaped.pid),
        Some(guard.pgid()),
        "the grandchild left the group"
    );
    let program = Seen::now(guard.main_pid());
    drop(guard);
    wait_exit(&mut exit, "the dropped python3 tree").await;
    wait_until_async("the escaped grandchild to die", || {
        escaped.is_dead() && program.is_dead()
    })
    .await;
}

#[tokio::test]
async fn drop_kills_an_escaped_grandchild_with_shim() {
    drop_kills_escaped_grandchild(true).await;
}

#[tokio::test]
async fn drop_kills_an_escaped_grandchild_without_shim() {
    drop_kills_escaped_grandchild(false).await;
}

#[tokio::test]
async fn drop_kills_a_stopped_shim_and_its_program() {
    let Spawned {
        guard, mut exit, ..
    } = spawn(spec("sleep", &["300"], true))
        .await
        .expect("spawn sleep");
    let shim = Seen::now(guard.pid());
    let program = Seen::now(guard.main_pid());
    kill(Pid::from_raw(shim.pid as i32), Signal::SIGSTOP).expect("stop the shim");
    wait_until_async("the shim to be stopped", || {
        matches!(kit::stat(shim.pid), Some(('T', _, _)))
    })
    .await;
    guard.terminate();
    guard.terminate();
    let status = wait_exit(&mut exit, "the stopped shim").await;
    assert_eq!(
        status.code,
        Some(143),
        "the shim tore down after SIGTERM: {status}"
    );
    wait_until_async("the program under the stopped shim to die", || {
        program.is_dead()
    })
    .await;
    assert!(guard.has_exited());
}

#[tokio::test]
async fn leftovers_die_with_the_child_and_no_zombie_is_left() {
    for shimmed in [false, true] {
        let Spawned {
            guard,
            stdout,
            mut exit,
            ..
        } = spawn(spec("sh", &["-c", "sleep 300 & echo $!; exit 0"], shimmed))
            .await
            .expect("spawn sh");
        let mut stdout = BufReader::new(stdout);
        let line = kit::read_line(&mut stdout, "the background sleep's pid").await;
        let pid: u32 = line.parse().expect("a pid");
        // It may already be dead (and is then fine); if alive, note who it is.
        let background = kit::stat(pid).map(|_| Seen::now(pid));
        assert!(
            wait_exit(&mut exit, "sh that backgrounds a sleep")
                .await
                .success()
        );
        if let Some(background) = background {
            wait_until_async("the background sleep to die with its group", || {
                background.is_dead()
            })
            .await;
        }
        drop(guard);
    }
    // Other tests of this binary reap their own children; ours must all be gone eventually.
    wait_until_async("no zombie child of this test process", || {
        all_our_zombies().is_empty()
    })
    .await;
}

/// A child with a scratch directory writes its temporary files there (as clangd writes its
/// `preamble-*.pch`); killed, its directory goes with it — shimmed or not.
#[tokio::test]
async fn a_killed_childs_scratch_directory_is_removed() {
    for shimmed in [false, true] {
        let mut s = spec(
            "sh",
            &[
                "-c",
                "echo \"$TMPDIR\"; echo x > \"$TMPDIR/preamble-1.pch\"; sleep 300",
            ],
            shimmed,
        );
        s.scratch = true;
        let Spawned {
            guard,
            mut exit,
            stdout,
            ..
        } = spawn(s).await.expect("spawn sh");
        let mut lines = BufReader::new(stdout);
        let dir = std::path::PathBuf::from(kit::read_line(&mut lines, "the child's TMPDIR").await);
        assert!(
            dir.starts_with(toolvisor_kit::process::scratch::base()),
            "TMPDIR is not a scratch directory: {}",
            dir.display()
        );
        wait_until_async("the child to write its file", || {
            dir.join("preamble-1.pch").exists()
        })
        .await;
        drop(guard);
        wait_exit(&mut exit, "the killed sh").await;
        assert!(!dir.exists(), "{} is left behind", dir.display());
    }
}
