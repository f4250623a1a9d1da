//! Runs the chaos runner briefly against the built daemon, so the suite checks that faults
//! under load leave nothing hung, lost or leaked.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>/toolvisor`, next to `target/<profile>/deps/<this test>`.
fn daemon_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TOOLVISOR_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("toolvisor");
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p toolvisor` first (scripts/test does)",
        bin.display()
    );
    bin
}

fn chaos(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_toolvisor-chaos"))
        .args(args)
        .arg("--daemon")
        .arg(daemon_bin())
        .output()
        .expect("run toolvisor-chaos")
}

/// The report's `| key | value |` rows, by key.
fn rows(report: &str) -> std::collections::BTreeMap<String, String> {
    report
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .collect();
            (cells.len() == 2).then(|| (cells[0].trim().to_string(), cells[1].trim().to_string()))
        })
        .collect()
}

/// The whole number a report value starts with ("12 (kernel 3, …)" → 12).
fn leading(value: &str) -> u64 {
    value
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The seed of the smoke run: pinned, so a failure replays with
/// `toolvisor-chaos --seconds 5 --clients 4 --seed 11`.
const SEED: &str = "11";

#[test]
fn a_short_chaos_run_leaves_nothing_hung_lost_or_leaked() {
    let out = chaos(&["--seconds", "5", "--clients", "4", "--seed", SEED]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(
        out.status.success(),
        "chaos run failed: {:?}\n{context}",
        out.status
    );
    for row in [
        "| hung | 0 |",
        "| lost data | 0 |",
        "| leaked processes | 0 |",
        "| verdict | PASS |",
    ] {
        assert!(stdout.contains(row), "missing {row:?}\n{context}");
    }
    // Read as a table: the seed asked for, calls actually made, faults actually injected.
    let table = rows(&stdout);
    assert_eq!(
        table.get("seed").map(String::as_str),
        Some(SEED),
        "{context}"
    );
    let calls = table.get("calls made").map_or(0, |v| leading(v));
    assert!(calls > 0, "no calls made\n{context}");
    let faults: u64 = table
        .iter()
        .filter(|(k, _)| {
            k.starts_with("faults: ") && !k.contains("model hub") && !k.contains("SIGKILL")
        })
        .map(|(_, v)| leading(v))
        .sum();
    assert!(faults > 0, "no fault injected on any kind\n{context}");
}

/// The survival checks can fail: a run whose state dir is wiped while the daemon is down
/// (staged edits, stored results and id counters gone) must fail and say what was lost.
#[test]
fn a_restart_that_loses_the_state_dir_fails_the_run_naming_what_was_lost() {
    let out = chaos(&[
        "--seconds",
        "12",
        "--clients",
        "4",
        "--heavy-clients",
        "4",
        "--seed",
        "7",
        "--wipe-state-at-restart",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let context = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "the run must fail\n{context}");
    assert!(stdout.contains("| verdict | FAIL |"), "{context}");
    assert!(
        stdout.contains("did not survive the daemon restart")
            || stdout.contains("is not resolvable after the daemon restart"),
        "a stored result or a staged edit is reported lost\n{context}"
    );
    assert!(
        stdout.contains("REUSED ID"),
        "a process id handed out again is caught\n{context}"
    );
}
