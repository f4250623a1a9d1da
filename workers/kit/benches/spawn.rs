//! What starting a child under the process guard costs (BENCHMARKS.md, "Process spawn"):
//! `kit::process::spawn` of `/bin/sleep 5` with no shim, through the small test shim
//! (`toolvisor-kit-shim`) and through the daemon's own binary as the shim (`toolvisor __shim`,
//! when `target/<profile>/toolvisor` is built or `TOOLVISOR_BENCH_SHIM` names one), against
//! `std::process::Command::spawn` of the same program (posix_spawn: no fork, no death signal,
//! no report). Each spawn is timed until it returns (for a shim: until its `OK <pid>` report);
//! the child is torn down between spawns, outside the timing. The sides alternate round by
//! round. `cargo bench -p toolvisor-kit --bench spawn` (`TOOLVISOR_BENCH_ROUNDS`, default 5,
//! of `TOOLVISOR_BENCH_SPAWNS`, default 50, spawns per side).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toolvisor_kit::process::{self, SpawnSpec};

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The daemon's binary beside this bench's profile directory, or `TOOLVISOR_BENCH_SHIM`.
fn daemon_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TOOLVISOR_BENCH_SHIM") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("toolvisor");
    path.is_file().then_some(path)
}

enum Side {
    Std,
    Guard(Option<PathBuf>),
}

impl Side {
    fn name(&self) -> String {
        match self {
            Side::Std => "std Command::spawn (posix_spawn)".to_owned(),
            Side::Guard(None) => "kit spawn, no shim".to_owned(),
            Side::Guard(Some(shim)) => format!(
                "kit spawn through {} ({:.0} MB)",
                shim.file_name().unwrap_or_default().to_string_lossy(),
                std::fs::metadata(shim).map(|m| m.len()).unwrap_or(0) as f64 / 1e6
            ),
        }
    }

    /// One spawn, timed; the child is gone again when this returns.
    async fn once(&self) -> f64 {
        match self {
            Side::Std => {
                let t = Instant::now();
                let mut child = Command::new("/bin/sleep")
                    .arg("5")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("spawn /bin/sleep");
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                let _ = child.kill();
                let _ = child.wait();
                ms
            }
            Side::Guard(shim) => {
                let spec = SpawnSpec {
                    program: "/bin/sleep".into(),
                    args: vec!["5".into()],
                    cwd: std::env::temp_dir(),
                    env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                    stdin: false,
                    shim: shim.clone(),
                    ledger: None,
                    label: "bench".into(),
                    scratch: false,
                };
                let t = Instant::now();
                let spawned = process::spawn(spec).await.expect("kit spawn");
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                let mut exit = spawned.exit.clone();
                drop(spawned.guard);
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), exit.wait_for(|e| e.is_some()))
                        .await;
                ms
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let rounds = env_n("TOOLVISOR_BENCH_ROUNDS", 5);
    let spawns = env_n("TOOLVISOR_BENCH_SPAWNS", 50);
    let mut sides = vec![
        Side::Std,
        Side::Guard(None),
        Side::Guard(Some(PathBuf::from(env!(
            "CARGO_BIN_EXE_toolvisor-kit-shim"
        )))),
    ];
    match daemon_binary() {
        Some(path) => sides.push(Side::Guard(Some(path))),
        None => println!(
            "no toolvisor binary beside this bench (cargo build --release -p toolvisor, or TOOLVISOR_BENCH_SHIM): measuring without it"
        ),
    }
    println!(
        "load average at start: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    let mut per_round: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    for _ in 0..rounds {
        for (i, side) in sides.iter().enumerate() {
            let mut round = Vec::new();
            for _ in 0..spawns {
                round.push(side.once().await);
            }
            all[i].extend_from_slice(&round);
            per_round[i].push(median(&mut round));
        }
    }
    let base = median(&mut all[1].clone());
    for (i, side) in sides.iter().enumerate() {
        let m = median(&mut all[i]);
        let rounds: Vec<String> = per_round[i].iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{:<48} median {m:.2} ms ({:+.2} ms against kit with no shim); per round [{}]",
            side.name(),
            m - base,
            rounds.join(", ")
        );
    }
    println!(
        "load average at end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
