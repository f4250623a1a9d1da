//! Pieces every benchmark shares: starting the daemon on a temp socket, a child process killed
//! and reaped when dropped, waiting for a socket to accept, and a process's resident memory. Included by each bench with
//! `#[path = "support/common.rs"] mod common;`.

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child (the daemon, a peer server) that is killed and reaped when dropped.
pub struct Guard(pub Child);

impl Guard {
    /// SIGTERM (a clean stop) and wait for the exit; SIGKILL after 5 s (llama-server has
    /// been seen to hang in its own shutdown when the signal lands right after its load).
    pub fn stop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        eprintln!("pid {} ignored SIGTERM for 5 s: SIGKILL", self.0.id());
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the daemon built with this bench (or `$TOOLVISOR_BENCH_DAEMON`) on `socket`, its config and state under `dir`, with
/// `extra_config` (TOML) after the `state_dir` line. Logs at `info`, the daemon's own default (so
/// a figure is what `toolvisor serve` gives), to nowhere.
pub fn start_daemon(dir: &Path, socket: &Path, extra_config: &str) -> Guard {
    let config = dir.join("config.toml");
    let state = dir.join("state").display().to_string();
    std::fs::write(&config, format!("state_dir = {state:?}\n{extra_config}")).unwrap();
    // `TOOLVISOR_BENCH_LOG=<filter>` keeps the daemon's log (at that filter) in the temporary
    // directory, and says where.
    let (filter, stderr) = match std::env::var("TOOLVISOR_BENCH_LOG") {
        Ok(filter) => {
            let log = std::env::temp_dir().join(format!(
                "toolvisor-bench-{}-{}.log",
                std::process::id(),
                dir.file_name().unwrap_or_default().to_string_lossy()
            ));
            println!("daemon log: {}", log.display());
            (filter, Stdio::from(std::fs::File::create(log).unwrap()))
        }
        Err(_) => ("info".to_owned(), Stdio::null()),
    };
    // `TOOLVISOR_BENCH_DAEMON=<path>` runs another build of the daemon (a before/after
    // comparison on the same machine at the same time).
    let program = std::env::var_os("TOOLVISOR_BENCH_DAEMON")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_toolvisor").into());
    Guard(
        Command::new(program)
            .args(["serve", "--socket"])
            .arg(socket)
            .arg("--config")
            .arg(&config)
            .env("TOOLVISOR_LOG", filter)
            .stderr(stderr)
            .spawn()
            .expect("start toolvisor"),
    )
}

/// Block until `path` accepts a connection (at most 20 s).
pub fn wait_socket(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(path).is_err() {
        assert!(
            Instant::now() < deadline,
            "{} never accepted",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Resident memory of `pid` in KiB (0 when unknown).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them ("?" when unknown):
/// printed beside every figure, since the machine is shared.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// "0.81× (0.74–0.86×)": the median of per-round ratios and their range.
pub fn summary(ratios: &[f64]) -> String {
    let mut v = ratios.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    format!(
        "{:.2}× ({:.2}–{:.2}×)",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1]
    )
}

/// The `Hello` of a read-surface harness in `workdir` (bincode, no approvals), naming `run_id`
/// ("" for none): what the search, file, language-server and memory benches connect with.
pub fn read_options(workdir: &Path, run_id: &str) -> toolvisor_protocol::client::ClientOptions {
    use toolvisor_protocol::wire::{ClientKind, Surface, Tier};
    toolvisor_protocol::client::ClientOptions {
        codec: toolvisor_protocol::codec::Codec::Bincode,
        client_kind: ClientKind::Harness,
        run_id: run_id.into(),
        workdir: workdir.display().to_string(),
        surface: Surface {
            max_tier: Tier::Read,
            approvals: false,
            questions: false,
            bridge_tools: vec![],
        },
        ..Default::default()
    }
}

/// A harness client of the bench daemon: bincode, exec surface, approving.
pub fn client(socket: &Path) -> toolvisor_protocol::client::Client {
    use toolvisor_protocol::wire::{ClientKind, Surface, Tier};
    toolvisor_protocol::client::Client::connect(
        socket,
        toolvisor_protocol::client::ClientOptions {
            codec: toolvisor_protocol::codec::Codec::Bincode,
            client_kind: ClientKind::Harness,
            surface: Surface {
                max_tier: Tier::Exec,
                approvals: true,
                questions: false,
                bridge_tools: vec![],
            },
            ..Default::default()
        },
    )
    .unwrap()
}

/// One call that must succeed (approving whatever it asks); its value.
pub fn call(
    c: &mut toolvisor_protocol::client::Client,
    tool: &str,
    args: serde_json::Value,
) -> serde_json::Value {
    match c.call_with("bench", tool, args, |_| true).unwrap().outcome {
        toolvisor_protocol::wire::Outcome::Ok(v) => v.0,
        toolvisor_protocol::wire::Outcome::Err(e) => panic!("{tool}: {e}"),
    }
}
