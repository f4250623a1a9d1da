//! `toolvisor-chaos`: a black-box chaos runner. It starts a built `toolvisor` daemon on a
//! temp socket with a config that points at the installed servers, generates a small
//! multi-language project, drives every kind of resource with load clients while a chaos
//! thread injects faults, SIGKILLs the daemon itself mid-run and restarts it on the same
//! socket and state dir (checking what must survive), stops it, checks that no process any
//! incarnation started survives, prints a figures table per kind and exits non-zero when an
//! invariant broke (hung, untyped, lost data, leaked processes, daemon down).

#![forbid(unsafe_code)]

mod faults;
mod fixture;
mod life;
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
use crate::fixture::Deps;
use crate::life::Life;
use crate::load::{ClientCtx, LoadStats};
use crate::procs::Watch;
use crate::report::{Report, Restart};
use crate::rng::Rng;

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
    /// The installed test dependencies (`scripts/install-test-deps`; default
    /// `$TOOLVISOR_TEST_DEPS`). A kind whose server is missing is skipped, and reported so.
    #[arg(long)]
    deps: Option<PathBuf>,
    /// Clients that also run kernels, debug sessions, staged edits and vibe workers.
    #[arg(long, default_value_t = 4)]
    heavy_clients: usize,
    /// Times the runner SIGKILLs the daemon mid-run and restarts it on the same socket and
    /// state dir (0: never; always 0 with --no-faults).
    #[arg(long, default_value_t = 1)]
    daemon_kills: u32,
    /// Self-test of the survival checks: delete the state dir between the SIGKILL and the
    /// restart, so staged edits, stored results and the id counters are gone and the run
    /// must report them lost (`chaos/tests/chaos_smoke.rs`).
    #[arg(long, hide = true)]
    wipe_state_at_restart: bool,
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
    /// Start an incarnation; its stderr is appended to `log` (every incarnation's, in order).
    fn spawn(bin: &Path, config: &Path, socket: &Path, log: &Path) -> anyhow::Result<Daemon> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .context("open the daemon log")?;
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--socket")
            .arg(socket)
            .arg("--config")
            .arg(config)
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

/// How long after a restarted daemon answers the old incarnation's descendants have to be
/// gone (its spawn ledger swept).
const SWEEP_GRACE: Duration = Duration::from_secs(10);
/// Shims SIGKILLed with the daemon stopped, just before each daemon kill.
const WINDOW_SHIMS: usize = 3;
/// How long a zombie below the daemon may stay unreaped before it counts as leaked.
const ZOMBIE_GRACE: Duration = Duration::from_secs(3);

/// When (seconds into the run) the runner SIGKILLs the daemon: spread over the middle of the
/// run, with seeded jitter.
fn kill_times(seed: u64, seconds: u64, kills: u32) -> Vec<Duration> {
    let mut rng = Rng::new(seed ^ 0x5eed_da3e_0000_0001);
    let span = seconds as f64 * 1000.0;
    (0..kills)
        .map(|i| {
            let at = span * f64::from(i + 1) / f64::from(kills + 1);
            let jitter = rng.range(0, (span / f64::from(kills + 1) / 4.0) as u64 + 1) as f64;
            Duration::from_millis((at + jitter - span / f64::from(kills + 1) / 8.0) as u64)
        })
        .collect()
}

/// SIGKILL the daemon, start the next incarnation on the same socket and state dir, and
/// check that every descendant of the old one is gone (the ledger swept).
fn restart(
    daemon: &mut Daemon,
    seed: u64,
    ctx: (&Path, &Path, &Path, &Path, &Path),
    wipe_state: Option<&Path>,
    life: &Life,
    watch: &Watch,
    problems: &mut Vec<String>,
) -> anyhow::Result<Restart> {
    let (bin, config, socket, log, workdir) = ctx;
    let old = watch.scan();
    life.going_down();
    let incarnation = life.epoch();
    // Aimed at the ledger-sweep window: the daemon stopped (its waiter threads and orphan
    // reaper run nothing), then some of its shims SIGKILLed, then the daemon. What those shims
    // leave alive has left every tree and group the next daemon could find it by; only the
    // mark of the incarnation that started it (`kit::process::ledger`) leads the sweep to it.
    let _ = kill(Pid::from_raw(daemon.pid), Signal::SIGSTOP);
    // SIGSTOP is asynchronous: wait (up to a second) until every thread of it has stopped.
    let stopping = Instant::now();
    while !procs::all_threads_stopped(daemon.pid) && stopping.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(2));
    }
    let shims: Vec<&procs::Stat> = old
        .iter()
        .filter(|s| s.ppid == daemon.pid && s.state != 'Z')
        .collect();
    let mut rng = Rng::new(seed ^ 0x5eed_da3e_0000_0002 ^ incarnation);
    let mut shot = Vec::new();
    for _ in 0..WINDOW_SHIMS {
        if let Some(s) = rng.pick(&shims)
            && !shot.contains(&s.pid)
        {
            let _ = kill(Pid::from_raw(s.pid), Signal::SIGKILL);
            shot.push(s.pid);
        }
    }
    let killed_at = Instant::now();
    let _ = kill(Pid::from_raw(daemon.pid), Signal::SIGKILL);
    let _ = daemon.child.wait();
    eprintln!(
        "toolvisor-chaos: SIGKILLed the daemon (pid {}, {} descendants) after stopping it and SIGKILLing shims {shot:?}; restarting it",
        daemon.pid,
        old.len()
    );
    if let Some(state) = wipe_state {
        std::fs::remove_dir_all(state)
            .with_context(|| format!("wipe {} (self-test)", state.display()))?;
    }
    let mut next = Daemon::spawn(bin, config, socket, log)?;
    next.wait_ready(socket, workdir)
        .context("the restarted daemon")?;
    let ready_ms = killed_at.elapsed().as_millis() as u64;
    watch.set_root(next.pid, incarnation);
    life.up(next.pid, next.start);
    *daemon = next;
    // The old incarnation's descendants: all gone within the grace (the shims' own
    // teardown, or the new daemon's ledger sweep).
    let seen_before: Vec<_> = watch
        .seen()
        .into_iter()
        .filter(|s| s.incarnation < incarnation)
        .collect();
    // Diagnosis: how many of them were zombies (exited, their parent gone) when the next
    // incarnation answered, i.e. when its ledger sweep had run.
    let zombies_at_ready = seen_before
        .iter()
        .filter(|s| procs::read_stat(s.pid).is_some_and(|t| t.start == s.start && t.state == 'Z'))
        .count();
    let until = Instant::now() + SWEEP_GRACE;
    let mut left: Vec<_> = seen_before.clone();
    while Instant::now() < until {
        left.retain(|s| procs::alive(s.pid, s.start));
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    left.retain(|s| procs::alive(s.pid, s.start));
    for l in &left {
        problems.push(format!(
            "LEAKED ACROSS RESTART: pid {} ({}) of incarnation {} still alive {SWEEP_GRACE:?} after the next daemon answered: {}; SIGKILLed by the runner",
            l.pid, l.comm, l.incarnation, l.cmdline
        ));
        let _ = kill(Pid::from_raw(l.pid), Signal::SIGKILL);
    }
    Ok(Restart {
        old_descendants: old.len(),
        shims_shot: shot.len(),
        zombies_at_ready,
        leaked: left.len(),
        ready_ms,
    })
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
    let deps = Arc::new(Deps::find(args.deps.clone()));
    let daemon_kills = if args.no_faults { 0 } else { args.daemon_kills };
    eprintln!(
        "toolvisor-chaos: seed {seed} (replay with --seed {seed}), {} clients ({} heavy) for {} s, {daemon_kills} daemon kill(s), daemon {}",
        args.clients,
        args.heavy_clients.min(args.clients),
        args.seconds,
        bin.display()
    );
    for (kind, why) in &deps.skipped {
        eprintln!("toolvisor-chaos: skipping {kind}: {why}");
    }
    let dir = tempfile::Builder::new()
        .prefix("toolvisor-chaos-")
        .tempdir()
        .context("create a temp dir")?;
    let socket = dir.path().join("toolvisor.sock");
    let log = dir.path().join("daemon.log");
    let workdir = dir.path().join("work");
    std::fs::create_dir_all(&workdir).context("create the work dir")?;
    let workdir = std::fs::canonicalize(&workdir).context("canonicalize the work dir")?;
    let worker = fixture::generate(dir.path(), &workdir, args.clients)?;
    let config = dir.path().join("config.toml");
    let state = dir.path().join("state");
    let hub = Arc::new(toolvisor_testhub::HfServer::start(None));
    hub.set_rate(load::HUB_RATE);
    std::fs::write(
        &config,
        deps.config(&state, &worker, &hub.url(), &dir.path().join("docs")),
    )
    .context("write the daemon config")?;

    let mut daemon = Daemon::spawn(&bin, &config, &socket, &log)?;
    if let Err(e) = daemon.wait_ready(&socket, &workdir) {
        let kept = dir.keep();
        bail!(
            "{e:#}; temp dir kept at {}; daemon log tail:\n{}",
            kept.display(),
            log_tail(&log, 40)
        );
    }
    if deps.has("inference") {
        let staged = deps
            .tiny_gguf(dir.path())
            .and_then(|gguf| load::inference::stage(&hub, &socket, &workdir, gguf));
        if let Err(e) = staged {
            let kept = dir.keep();
            bail!(
                "staging the inference kind's model: {e:#}; temp dir kept at {}; daemon log tail:\n{}",
                kept.display(),
                log_tail(&log, 40)
            );
        }
    }
    let rss_start_kib = procs::rss_kib(daemon.pid);
    let fds_start = procs::fd_count(daemon.pid);
    let life = Arc::new(Life::new(daemon.pid, daemon.start));

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
                life: life.clone(),
                deps: deps.clone(),
                heavy: index < args.heavy_clients,
                hub: hub.clone(),
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
            life: life.clone(),
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
    let began = Instant::now();
    let until = began + Duration::from_secs(args.seconds);
    let mut kills = kill_times(seed, args.seconds, daemon_kills);
    let mut restarts = Vec::new();
    let mut problems = Vec::new();
    let mut restart_failed = false;
    while Instant::now() < until && daemon.exited().is_none() {
        if kills.first().is_some_and(|at| began.elapsed() >= *at) {
            kills.remove(0);
            match restart(
                &mut daemon,
                seed,
                (&bin, &config, &socket, &log, &workdir),
                args.wipe_state_at_restart.then_some(state.as_path()),
                &life,
                &watch,
                &mut problems,
            ) {
                Ok(r) => restarts.push(r),
                Err(e) => {
                    problems.push(format!("DAEMON RESTART FAILED: {e:#}"));
                    restart_failed = true;
                    break;
                }
            }
        }
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
                load_stats.kind("client").broken += 1;
                load_stats
                    .problems
                    .push(format!("load client {i} panicked"));
            }
        }
    }

    let rss_end_kib = procs::rss_kib(daemon.pid);
    let fds_end = procs::fd_count(daemon.pid);
    let daemon_up = match daemon.exited() {
        None if !restart_failed => true,
        None => false,
        Some(status) => {
            problems.push(format!(
                "DAEMON DIED before it was asked to stop ({status})"
            ));
            fault_stats.daemon_died = true;
            false
        }
    };
    // Zombies: a child that ended must be reaped by its parent soon.
    let mut zombies: Vec<_> = procs::zombies(daemon.pid);
    let zombie_until = Instant::now() + ZOMBIE_GRACE;
    while !zombies.is_empty() && Instant::now() < zombie_until {
        std::thread::sleep(Duration::from_millis(100));
        zombies.retain(|z| {
            procs::read_stat(z.pid).is_some_and(|s| s.start == z.start && s.state == 'Z')
        });
    }
    for z in &zombies {
        problems.push(format!(
            "ZOMBIE: pid {} ({}) ppid {} stayed unreaped for {ZOMBIE_GRACE:?}",
            z.pid, z.comm, z.ppid
        ));
    }
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
            "LEAKED: pid {} ({}) ppid {ppid} of incarnation {}: {}; SIGKILLed by the runner",
            l.pid, l.comm, l.incarnation, l.cmdline
        ));
        let _ = kill(Pid::from_raw(l.pid), Signal::SIGKILL);
    }

    let report = Report {
        seed,
        seconds: args.seconds,
        clients: args.clients,
        heavy_clients: args.heavy_clients.min(args.clients),
        skipped: deps.skipped.clone(),
        load: load_stats,
        faults: fault_stats,
        restarts,
        descendants_seen: seen.len(),
        leaked,
        zombies: zombies.len(),
        rss_start_kib,
        rss_end_kib,
        fds_start,
        fds_end,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_kills_are_spread_over_the_run_and_replayed_by_the_seed() {
        let a = kill_times(7, 60, 3);
        assert_eq!(a, kill_times(7, 60, 3));
        assert_eq!(a.len(), 3);
        assert!(a.windows(2).all(|w| w[0] < w[1]), "{a:?}");
        assert!(
            a.iter()
                .all(|t| *t > Duration::from_secs(5) && *t < Duration::from_secs(55)),
            "{a:?}"
        );
        assert!(kill_times(7, 60, 0).is_empty());
    }
}
