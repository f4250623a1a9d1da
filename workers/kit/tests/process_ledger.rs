//! The spawn ledger records live groups, forgets reaped ones, and lets a later daemon kill exactly the groups it recorded.

#[path = "support/kit.rs"]
mod kit;

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;

use kit::{Seen, spec, wait_exit, wait_until_async};
use toolvisor_kit::process::{Ledger, SpawnSpec, Spawned, spawn};

fn recorded(spec: SpawnSpec, ledger: &Ledger) -> SpawnSpec {
    SpawnSpec {
        ledger: Some(ledger.clone()),
        ..spec
    }
}

/// The numeric fields of a record (pid, start time, owner, owner start), then its token.
fn record_fields(ledger: &Ledger, pgid: u32) -> (Vec<u64>, String) {
    let text = std::fs::read_to_string(ledger.record_path(pgid)).expect("record exists");
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    assert_eq!(
        words.len(),
        5,
        "pid, start, owner, owner start, token: {text}"
    );
    let numbers = words[..4]
        .iter()
        .map(|word| word.parse().expect("numeric field"))
        .collect();
    (numbers, words[4].to_owned())
}

/// The group records in the ledger directory (not the incarnation record every ledger
/// writes at open).
fn group_records(ledger: &Ledger) -> Vec<String> {
    std::fs::read_dir(ledger.dir())
        .expect("ledger dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("incarnation-"))
        .collect()
}

/// A `sleep 300` started outside any ledger, as an unrelated process of the same user.
struct Unrelated(std::process::Child);

impl Unrelated {
    fn start() -> Unrelated {
        Unrelated(
            std::process::Command::new("sleep")
                .arg("300")
                .process_group(0)
                .spawn()
                .expect("spawn sleep"),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Unrelated {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
        let (fields, token) = record_fields(&ledger, guard.pgid());
        assert_eq!(token, ledger.token());
        let record_mode = std::fs::metadata(ledger.record_path(guard.pgid()))
            .expect("record")
            .mode();
        assert_eq!(record_mode & 0o777, 0o600, "record mode");
        assert_eq!(
            fields[0],
            u64::from(guard.pid()),
            "the record names the leader"
        );
        assert_eq!(fields[1], Seen::now(guard.pid()).start_time);
        drop(guard);
        wait_exit(&mut exit, "recorded sleep").await;
        assert_eq!(
            group_records(&ledger),
            Vec::<String>::new(),
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
    let (mut fields, token) = record_fields(&ledger, guard.pgid());
    fields[1] += 1; // a recycled pid: same number, another process
    let mut text: Vec<String> = fields.iter().map(u64::to_string).collect();
    text.push(token);
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
    assert_eq!(group_records(&ledger), Vec::<String>::new());
}

/// A forged record naming an unrelated live process with its true start time is not honoured,
/// with or without a token, and whatever its owner fields say.
#[tokio::test]
async fn sweep_never_kills_an_unrelated_process_named_by_a_forged_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let victim = Unrelated::start();
    let seen = Seen::now(victim.pid());
    let pid = victim.pid();
    for forged in [
        format!("{pid} {}", seen.start_time),
        format!("{pid} {} 999999 1", seen.start_time),
        format!("{pid} {} 999999 1 {}", seen.start_time, ledger.token()),
        format!("{pid} {} 999999 1 0123456789abcdef", seen.start_time),
    ] {
        std::fs::write(ledger.record_path(pid), &forged).expect("forge record");
        assert_eq!(ledger.sweep(), 0, "forged record {forged:?}");
        assert!(
            seen.is_running(),
            "forged record {forged:?} killed pid {pid}"
        );
        assert!(!ledger.record_path(pid).exists(), "forged record removed");
    }
}

/// A record that is a symlink (to a record-shaped file naming a live group of ours) is
/// neither followed nor honoured.
#[tokio::test]
async fn sweep_does_not_follow_a_symlinked_record() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(&dir.path().join("ledger")).expect("open ledger");
    let Spawned {
        guard, mut exit, ..
    } = spawn(recorded(spec("sleep", &["300"], true), &ledger))
        .await
        .expect("spawn sleep");
    let record = ledger.record_path(guard.pgid());
    let outside = dir.path().join("outside");
    std::fs::rename(&record, &outside).expect("move the record out");
    std::os::unix::fs::symlink(&outside, &record).expect("symlink the record");
    let program = Seen::now(guard.main_pid());
    assert_eq!(ledger.sweep(), 0);
    assert!(program.is_running(), "a symlinked record must not kill");
    assert!(
        std::fs::symlink_metadata(&record).is_err(),
        "symlinked record removed"
    );
    assert!(outside.exists(), "the link's target is left alone");
    drop(guard);
    wait_exit(&mut exit, "sleep").await;
}

/// The token reaches the shim, which proves the group is ours, but not the program; the
/// incarnation's mark reaches the program too.
#[tokio::test]
async fn the_token_stops_at_the_shim() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let Spawned {
        guard,
        stdout,
        mut exit,
        ..
    } = spawn(recorded(spec("env", &[], true), &ledger))
        .await
        .expect("spawn env");
    let env = kit::read_to_string(stdout, "env's output").await;
    assert!(env.contains("PATH="), "{env}");
    assert!(
        !env.contains(toolvisor_kit::process::LEDGER_TOKEN_ENV),
        "the program saw the ledger token: {env}"
    );
    let mark = format!(
        "{}={}",
        toolvisor_kit::process::LEDGER_MARK_ENV,
        ledger.mark()
    );
    assert!(
        env.lines().any(|line| line == mark),
        "the program lacks the incarnation's mark {mark}: {env}"
    );
    drop(guard);
    wait_exit(&mut exit, "env").await;
}

/// A record file that belongs to another user is not honoured even when its process is ours.
#[tokio::test]
async fn sweep_ignores_a_record_owned_by_another_user() {
    // Never a silent pass: the suite runs as root (scripts/test refuses to start otherwise).
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root to give a file to another user"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let Spawned {
        guard, mut exit, ..
    } = spawn(recorded(spec("sleep", &["300"], true), &ledger))
        .await
        .expect("spawn sleep");
    let record = ledger.record_path(guard.pgid());
    std::os::unix::fs::chown(&record, Some(65534), Some(65534)).expect("chown record");
    let program = Seen::now(guard.main_pid());
    assert_eq!(ledger.sweep(), 0);
    assert!(
        program.is_running(),
        "a record of another user must not kill"
    );
    drop(guard);
    wait_exit(&mut exit, "sleep").await;
}

/// A process that left its group and its tree (a `setsid` child whose group record is gone, as
/// after the waiter reaped a shim killed from outside just before its daemon died) carries the
/// incarnation's mark, and the next daemon's sweep finds it by that alone; an unrelated process
/// of ours is left alone.
#[tokio::test]
async fn sweep_kills_what_carries_a_dead_incarnations_mark() {
    let dir = tempfile::tempdir().expect("temp dir");
    let old = Ledger::open(dir.path()).expect("open the old incarnation's ledger");
    let incarnation = dir.path().join(format!("incarnation-{}", old.mark()));
    assert!(incarnation.exists(), "the incarnation is recorded at open");
    let Spawned {
        guard,
        stdout,
        mut exit,
        ..
    } = spawn(recorded(
        spec(
            "sh",
            &["-c", "setsid sleep 300 & echo $!; exec sleep 301"],
            true,
        ),
        &old,
    ))
    .await
    .expect("spawn sh");
    let mut lines = tokio::io::BufReader::new(stdout);
    let escapee: u32 = kit::read_line(&mut lines, "the escapee's pid")
        .await
        .trim()
        .parse()
        .expect("a pid");
    let escapee = Seen::now(escapee);
    // setsid ran and both execs are done (a sweep reading a process mid-exec may find its
    // environment empty; a loaded machine is slower than the output).
    wait_until_async("setsid and both execs to be done", || {
        kit::pgrp(escapee.pid).is_some_and(|g| g != guard.pgid())
            && kit::comm(escapee.pid).as_deref() == Some("sleep")
            && kit::comm(guard.main_pid()).as_deref() == Some("sleep")
    })
    .await;
    let program = Seen::now(guard.main_pid());
    std::fs::remove_file(old.record_path(guard.pgid())).expect("forget the group's record");
    let bystander = Unrelated::start();

    let new = Ledger::open(dir.path()).expect("open the next incarnation's ledger");
    assert!(
        new.sweep() >= 3,
        "the shim, the program and the escapee were killed"
    );
    wait_until_async("the marked escapee to die", || escapee.is_dead()).await;
    wait_until_async("the marked program to die", || program.is_dead()).await;
    assert!(
        Seen::now(bystander.pid()).is_running(),
        "an unmarked process is left alone"
    );
    assert!(
        !incarnation.exists(),
        "the dead incarnation's record is removed"
    );
    assert!(
        dir.path()
            .join(format!("incarnation-{}", new.mark()))
            .exists(),
        "the sweeping incarnation keeps its own"
    );
    wait_exit(&mut exit, "the shim").await;
    drop(guard);
}

/// An incarnation record that is not what its name says is removed and kills nothing.
#[tokio::test]
async fn a_malformed_incarnation_record_kills_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = Ledger::open(dir.path()).expect("open ledger");
    let bystander = Unrelated::start();
    let forged = dir.path().join("incarnation-0123");
    std::fs::write(&forged, "1 1 0123\n").expect("write forged record");
    assert_eq!(ledger.sweep(), 0);
    assert!(Seen::now(bystander.pid()).is_running());
    assert!(!forged.exists(), "the malformed record is removed");
}
