//! The spawn ledger records live groups, forgets reaped ones, and lets a later daemon kill exactly the groups it recorded.

#[path = "support/kit.rs"]
mod kit;

use kit::{Seen, spec, wait_exit, wait_until_async};
use toolvisor_kit::process::{Ledger, SpawnSpec, Spawned, spawn};

fn recorded(spec: SpawnSpec, ledger: &Ledger) -> SpawnSpec {
    SpawnSpec {
        ledger: Some(ledger.clone()),
        ..spec
    }
}

fn record_fields(ledger: &Ledger, pgid: u32) -> Vec<u64> {
    std::fs::read_to_string(ledger.record_path(pgid))
        .expect("record exists")
        .split_ascii_whitespace()
        .map(|word| word.parse().expect("numeric field"))
        .collect()
}

#[tokio::test]
async fn record_lives_exactly_as_long_as_the_group() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(&dir.path().join("ledger")).expect("open ledger");
    let mode = std::fs::metadata(ledger.dir())
        .expect("ledger dir")
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o700
    );
    for shimmed in [false, true] {
        let Spawned {
            guard, mut exit, ..
        } = spawn(recorded(spec("sleep", &["300"], shimmed), &ledger))
            .await
            .expect("spawn sleep");
        let fields = record_fields(&ledger, guard.pgid());
        assert_eq!(
            fields[0],
            u64::from(guard.pid()),
            "the record names the leader"
        );
        assert_eq!(fields[1], Seen::now(guard.pid()).start_time);
        drop(guard);
        wait_exit(&mut exit, "recorded sleep").await;
        assert!(
            std::fs::read_dir(ledger.dir())
                .expect("ledger dir")
                .next()
                .is_none(),
            "record removed after reaping (shimmed: {shimmed})"
        );
    }
}

#[tokio::test]
async fn sweep_kills_a_recorded_live_group() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    for shimmed in [false, true] {
        let Spawned {
            guard, mut exit, ..
        } = spawn(recorded(spec("sleep", &["300"], shimmed), &ledger))
            .await
            .expect("spawn sleep");
        let program = Seen::now(guard.main_pid());
        assert_eq!(ledger.sweep(), 1);
        let status = wait_exit(&mut exit, "the swept group's leader").await;
        assert_eq!(status.signal, Some(9), "{status}");
        wait_until_async("the swept program to die", || program.is_dead()).await;
        assert!(!ledger.record_path(guard.pgid()).exists());
    }
}

#[tokio::test]
async fn sweep_ignores_a_group_whose_start_time_differs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let Spawned {
        guard, mut exit, ..
    } = spawn(recorded(spec("sleep", &["300"], false), &ledger))
        .await
        .expect("spawn sleep");
    let sleep = Seen::now(guard.pid());
    let mut fields = record_fields(&ledger, guard.pgid());
    fields[1] += 1; // a recycled pid: same number, another process
    let text: Vec<String> = fields.iter().map(u64::to_string).collect();
    std::fs::write(ledger.record_path(guard.pgid()), text.join(" ")).expect("rewrite record");

    assert_eq!(ledger.sweep(), 0);
    assert!(sleep.is_running(), "a mismatched record must not kill");
    assert!(!guard.has_exited());
    assert!(
        !ledger.record_path(guard.pgid()).exists(),
        "stale record removed"
    );
    drop(guard);
    wait_exit(&mut exit, "sleep").await;
}

#[tokio::test]
async fn sweep_leaves_groups_of_a_running_daemon_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let Spawned {
        guard, mut exit, ..
    } = spawn(spec("sleep", &["300"], false))
        .await
        .expect("spawn sleep");
    // Record it as if our (live) parent process had spawned it.
    let owner = Seen::now(nix::unistd::getppid().as_raw() as u32);
    let sleep = Seen::now(guard.pid());
    let record = ledger.record_path(guard.pgid());
    std::fs::write(
        &record,
        format!(
            "{} {} {} {}",
            sleep.pid, sleep.start_time, owner.pid, owner.start_time
        ),
    )
    .expect("write record");

    assert_eq!(ledger.sweep(), 0);
    assert!(sleep.is_running());
    assert!(record.exists(), "a live daemon's record stays");
    std::fs::remove_file(&record).expect("clean up record");
    drop(guard);
    wait_exit(&mut exit, "sleep").await;
}

#[tokio::test]
async fn sweep_removes_records_of_dead_groups() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let Spawned {
        guard, mut exit, ..
    } = spawn(spec("true", &[], false)).await.expect("spawn true");
    let pid = guard.pid();
    wait_exit(&mut exit, "true").await;
    std::fs::write(ledger.record_path(pid), format!("{pid} 1")).expect("write record");
    std::fs::write(ledger.dir().join("12345"), "garbage").expect("write garbage record");
    assert_eq!(ledger.sweep(), 0);
    assert!(
        std::fs::read_dir(ledger.dir())
            .expect("dir")
            .next()
            .is_none()
    );
}
