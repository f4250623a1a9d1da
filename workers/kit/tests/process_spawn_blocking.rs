//! A child spawned from a short-lived thread (tokio's blocking pool) survives that thread's exit: PR_SET_PDEATHSIG is tied to the forking thread.

#[path = "support/kit.rs"]
mod kit;

use std::time::Duration;

use kit::{read_line, spec, wait_exit, wait_until_async};
use tokio::io::{AsyncWriteExt, BufReader};
use toolvisor_kit::process::{Spawned, spawn};

#[test]
fn child_outlives_the_blocking_thread_that_spawned_it() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_keep_alive(Duration::from_millis(50))
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for shimmed in [false, true] {
            let handle = tokio::runtime::Handle::current();
            let (spawned, tid) = tokio::task::spawn_blocking(move || {
                let tid = nix::unistd::gettid().as_raw();
                let mut echo = spec("sh", &["-c", "read line; echo \"alive:$line\""], shimmed);
                echo.stdin = true;
                (handle.block_on(spawn(echo)), tid)
            })
            .await
            .expect("blocking task");
            let Spawned {
                guard,
                stdin,
                stdout,
                mut exit,
                ..
            } = spawned.expect("spawn sh");
            wait_until_async("the idle blocking-pool thread to exit", || {
                !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
            })
            .await;
            // A death signal would have been sent before the thread vanished from /proc.
            let mut stdin = stdin.expect("stdin");
            stdin.write_all(b"yes\n").await.expect("write to sh");
            let mut stdout = BufReader::new(stdout);
            assert_eq!(
                read_line(&mut stdout, "sh to answer").await,
                "alive:yes",
                "shimmed: {shimmed}"
            );
            assert!(wait_exit(&mut exit, "sh").await.success());
            drop(guard);
        }
    });
}
