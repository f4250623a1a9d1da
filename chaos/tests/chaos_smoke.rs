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

#[test]
fn a_short_chaos_run_leaves_nothing_hung_lost_or_leaked() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolvisor-chaos"))
        .args(["--seconds", "5", "--clients", "4", "--daemon"])
        .arg(daemon_bin())
        .output()
        .expect("run toolvisor-chaos");
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
    // Faults were actually injected and calls actually made.
    assert!(!stdout.contains("| calls made | 0 |"), "{context}");
}
