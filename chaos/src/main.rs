//! `toolvisor-chaos`: a black-box chaos runner. It starts a built `toolvisor` daemon on a
//! temp socket, drives it with load clients while a chaos thread injects faults, stops it,
//! checks that no process it ever started survives, prints a figures table and exits
//! non-zero when an invariant broke (hung, lost data, leaked processes, daemon down).

#![forbid(unsafe_code)]

mod faults;
mod load;
mod net;
mod procs;
mod report;
mod rng;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::faults::{FaultCtx, FaultStats};
use crate::load::{ClientCtx, LoadStats};
use crate::procs::Watch;
use crate::report::Report;

/// Drive a built toolvisor daemon under load, inject faults, report what broke.
#[derive(Parser, Debug)]
#[command(name = "toolvisor-chaos", version)]
struct Args {
    /// The toolvisor binary to run (default: the `toolvisor` next to this executable).
    #[arg(long)]
    daemon: Option<PathBuf>,
    /// How long the load and the faults run, in seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Load clients, each with its own connection and conversation.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Seed of the fault and call choices (default: from the clock); printed to replay a run.
    #[arg(long)]
    seed: Option<u64>,
    /// Stop the daemon with SIGKILL instead of SIGTERM: its children must die with it.
    #[arg(long)]
    kill_daemon_at_end: bool,
    /// Load only, no faults: a baseline to tell a fault's effect from a bug under load.
    #[arg(long)]
    no_faults: bool,
}

/// How long the daemon has to accept connections after its start.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the daemon has to exit after SIGTERM or SIGKILL.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long after the daemon's exit its descendants have to be gone.
const LEAK_GRACE: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("toolvisor-chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The daemon under test; SIGKILLed on drop if still running (the runner failed early).
struct Daemon {
    child: Child,
    pid: i32,
    start: u64,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Daemon {
    fn spawn(bin: &Path, dir: &Path, socket: &Path, log: &Path) -> anyhow::Result<Daemon> {
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "state_dir = {:?}\n[restart]\nbackoff_ms = 20\n",
                dir.join("state").display().to_string()
            ),
        )
        .context("write the daemon config")?;
        let log = std::fs::File::create(log).context("create the daemon log")?;
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--socket")
            .arg(socket)
            .arg("--config")
            .arg(&config)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if std::env::var_os("TOOLVISOR_LOG").is_none() {
            cmd.env("TOOLVISOR_LOG", "info");
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        let pid = child.id() as i32;
        let start = procs::read_stat(pid).map(|s| s.start).unwrap_or(0);
        Ok(Daemon { child, pid, start })
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait until the socket answers a ping, or fail (the daemon exited, or took too long).
    fn wait_ready(&mut self, socket: &Path, workdir: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.exited() {
                bail!("the daemon exited at start ({status})");
            }
            if net::fresh_ping(socket, workdir, 1, Duration::from_secs(2)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the daemon did not answer a ping within {READY_TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Send `signal` and wait up to `EXIT_TIMEOUT`; SIGKILL it if it is still there.
    fn stop(&mut self, signal: Signal) -> (String, bool) {
        let started = Instant::now();
        let _ = kill(Pid::from_raw(self.pid), signal);
        while started.elapsed() < EXIT_TIMEOUT {
            if let Some(status) = self.exited() {
                return (
                    format!(
                        "{signal:?}: exited in {} ms ({status})",
                        started.elapsed().as_millis()
                    ),
                    true,
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        (
            format!("{signal:?}: still running after {EXIT_TIMEOUT:?}, SIGKILLed"),
            false,
        )
    }
}

fn default_daemon() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("find this executable")?;
    Ok(exe
        .parent()
        .context("this executable has no directory")?
        .join("toolvisor"))
}

fn clock_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// One whole run; `Ok(passed)`, or `Err` when the run itself could not happen.
fn run(args: Args) -> anyhow::Result<bool> {
    let bin = match args.daemon.clone() {
        Some(p) => p,
        None => default_daemon()?,
    };
    if !bin.exists() {
        bail!(
            "no daemon binary at {} (build it with `cargo build -p toolvisor`, or pass --daemon)",
            bin.display()
        );
    }
    let seed = args.seed.unwrap_or_else(clock_seed);
    eprintln!(
        "toolvisor-chaos: seed {seed} (replay with --seed {seed}), {} clients for {} s, daemon {}",
        args.clients,
        args.seconds,
        bin.display()
    );
    let dir = tempfile::Builder::new()
        .prefix("toolvisor-chaos-")
        .tempdir()
        .context("create a temp dir")?;
    let socket = dir.path().join("toolvisor.sock");
    let log = dir.path().join("daemon.log");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).context("create the work dir")?;

    let mut daemon = Daemon::spawn(&bin, dir.path(), &socket, &log)?;
    if let Err(e) = daemon.wait_ready(&socket, &workdir) {
        let kept = dir.keep();
        bail!(
            "{e:#}; temp dir kept at {}; daemon log tail:\n{}",
            kept.display(),
            log_tail(&log, 40)
        );
    }
    let rss_start_kib = procs::rss_kib(daemon.pid);

    // Watch the daemon's descendants for the whole run.
    let watch = Watch::new(daemon.pid);
    let watch_stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (watch, stop) = (watch.clone(), watch_stop.clone());
        std::thread::spawn(move || watch.run(Duration::from_millis(50), &stop))
    };

    // Load and faults.
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..args.clients)
        .map(|index| {
            let ctx = ClientCtx {
                index,
                socket: socket.clone(),
                workdir: workdir.clone(),
                seed,
                stop: stop.clone(),
            };
            std::thread::spawn(move || load::run_client(ctx))
        })
        .collect();
    let chaos = {
        let ctx = FaultCtx {
            socket: socket.clone(),
            workdir: workdir.clone(),
            seed,
            stop: stop.clone(),
            watch: watch.clone(),
            daemon_pid: daemon.pid,
            daemon_start: daemon.start,
            log: dir.path().join("faults.log"),
        };
        let no_faults = args.no_faults;
        std::thread::spawn(move || {
            if no_faults {
                FaultStats::default()
            } else {
                faults::run_chaos(ctx)
            }
        })
    };
    let until = Instant::now() + Duration::from_secs(args.seconds);
    while Instant::now() < until && daemon.exited().is_none() {
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("toolvisor-chaos: stopping the load");
    stop.store(true, Ordering::Relaxed);
    let mut fault_stats = chaos.join().unwrap_or_else(|_| FaultStats {
        problems: vec!["the chaos thread panicked".into()],
        failed_checks: 1,
        ..FaultStats::default()
    });
    let mut load_stats = LoadStats::default();
    for (i, c) in clients.into_iter().enumerate() {
        match c.join() {
            Ok(s) => load_stats.merge(s),
            Err(_) => {
                load_stats.broken += 1;
                load_stats
                    .problems
                    .push(format!("load client {i} panicked"));
            }
        }
    }

    let rss_end_kib = procs::rss_kib(daemon.pid);
    let mut problems = Vec::new();
    let daemon_up = match daemon.exited() {
        None => true,
        Some(status) => {
            problems.push(format!(
                "DAEMON DIED before it was asked to stop ({status})"
            ));
            fault_stats.daemon_died = true;
            false
        }
    };
    watch.scan();
    watch_stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();

    let signal = if args.kill_daemon_at_end {
        Signal::SIGKILL
    } else {
        Signal::SIGTERM
    };
    eprintln!("toolvisor-chaos: stopping the daemon with {signal:?}");
    let (stop_text, stop_ok) = if daemon_up {
        daemon.stop(signal)
    } else {
        ("the daemon was already gone".into(), false)
    };
    if !stop_ok {
        problems.push(format!("DAEMON STOP: {stop_text}"));
    }

    std::thread::sleep(LEAK_GRACE);
    let seen = watch.seen();
    let leaked: Vec<_> = seen
        .iter()
        .filter(|s| procs::alive(s.pid, s.start))
        .cloned()
        .collect();
    for l in &leaked {
        let ppid = procs::read_stat(l.pid).map(|s| s.ppid).unwrap_or(0);
        problems.push(format!(
            "LEAKED: pid {} ({}) ppid {ppid}: {}; SIGKILLed by the runner",
            l.pid, l.comm, l.cmdline
        ));
        let _ = kill(Pid::from_raw(l.pid), Signal::SIGKILL);
    }

    let report = Report {
        seed,
        seconds: args.seconds,
        clients: args.clients,
        load: load_stats,
        faults: fault_stats,
        descendants_seen: seen.len(),
        leaked,
        rss_start_kib,
        rss_end_kib,
        daemon_up,
        stop: stop_text,
        stop_ok,
        problems,
    };
    print!("{}", report.render());
    let passed = report.passed();
    if passed {
        drop(dir);
    } else {
        let kept = dir.keep();
        println!(
            "\nFAIL (seed {seed}): temp dir kept at {} (daemon log: {})",
            kept.display(),
            kept.join("daemon.log").display()
        );
        eprintln!(
            "--- daemon log tail ---\n{}",
            log_tail(&kept.join("daemon.log"), 40)
        );
    }
    Ok(passed)
}
