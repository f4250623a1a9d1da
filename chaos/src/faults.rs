//! The faults: a chaos thread that, at seeded random intervals, SIGKILLs or SIGSTOPs a
//! random descendant of the daemon (shims, servers, adapters, debuggees, kernels, workers,
//! grandchildren: classified by command line), sends garbage, oversized or deeply nested
//! frames in both codecs, drops a client in the middle of a call, or leaves a client that
//! never reads a large answer, and after each one checks that a fresh connection still gets
//! a `Pong` within 5 s. It pauses while the runner restarts the daemon.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use toolvisor_protocol::wire::Call;
use toolvisor_protocol::{Value, codec};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use toolvisor_protocol::DEFAULT_MAX_FRAME;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::{ApprovalAnswer, ClientFrame, DaemonFrame};

use crate::life::Life;
use crate::net::{self, Miss};
use crate::procs::{self, Watch};
use crate::rng::Rng;

/// How long the daemon has to answer a probe after a fault.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The kinds of fault, as named in the report.
pub const KINDS: [&str; 7] = [
    "sigkill descendant",
    "sigstop descendant",
    "garbage frame",
    "oversized frame",
    "nested frame",
    "dropped client",
    "never-reading client",
];

/// Levels of nesting of the deep frames (the protocol's limit is far below).
const NEST_DEPTH: usize = 4000;

pub struct FaultCtx {
    pub socket: PathBuf,
    pub workdir: PathBuf,
    pub seed: u64,
    pub stop: Arc<AtomicBool>,
    pub watch: Watch,
    pub life: Arc<Life>,
    /// One line per fault (what, which pid), kept with the temp dir for diagnosis.
    pub log: PathBuf,
}

#[derive(Default)]
pub struct FaultStats {
    /// Faults injected, by kind.
    pub injected: BTreeMap<&'static str, u64>,
    /// Signalled processes by kind of fault and command name.
    pub victims: BTreeMap<(&'static str, String), u64>,
    /// Signalled processes by kind of resource (`procs::classify`) and kind of fault.
    pub by_resource: BTreeMap<(&'static str, &'static str), u64>,
    pub hung: u64,
    /// A fault's check got a wrong answer (no Error frame, no close, a refused ping).
    pub failed_checks: u64,
    pub problems: Vec<String>,
    pub daemon_died: bool,
}

impl FaultStats {
    fn note(&mut self, what: &str, result: Result<(), Miss>) {
        match result {
            Ok(()) => {}
            Err(Miss::Hung(m)) => {
                self.hung += 1;
                self.problems.push(format!("HUNG: {what}: {m}"));
            }
            Err(Miss::Failed(m)) => {
                self.failed_checks += 1;
                self.problems.push(format!("FAILED CHECK: {what}: {m}"));
            }
        }
    }
}

/// Inject faults until `stop`; every signalled process is continued before returning.
pub fn run_chaos(ctx: FaultCtx) -> FaultStats {
    let mut rng = Rng::new(ctx.seed);
    let mut stats = FaultStats::default();
    let mut nonce = 1_000_000u64;
    let began = std::time::Instant::now();
    let mut log = std::fs::File::create(&ctx.log).ok();
    let mut record = |line: String| {
        if let Some(f) = log.as_mut() {
            let _ = writeln!(f, "{:>9.3}s {line}", began.elapsed().as_secs_f64());
        }
    };
    loop {
        let pause = Duration::from_millis(rng.range(100, 600));
        let until = std::time::Instant::now() + pause;
        while std::time::Instant::now() < until && !ctx.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        if ctx.life.down() {
            continue;
        }
        let epoch = ctx.life.epoch();
        let (daemon_pid, daemon_start) = ctx.life.current();
        if !procs::alive(daemon_pid, daemon_start) && !ctx.life.down() && epoch == ctx.life.epoch()
        {
            stats.daemon_died = true;
            stats
                .problems
                .push("DAEMON DIED during the run (before it was asked to stop)".into());
            break;
        }
        let kind = match rng.below(100) {
            0..35 => 0,
            35..55 => 1,
            55..68 => 2,
            68..76 => 3,
            76..84 => 4,
            84..94 => 5,
            _ => 6,
        };
        let name = KINDS[kind];
        let result = match kind {
            0 | 1 => {
                let Some(victim) = rng.pick(&ctx.watch.scan()).cloned() else {
                    continue;
                };
                // The pid must still name the process we picked.
                if !procs::alive(victim.pid, victim.start) {
                    continue;
                }
                *stats
                    .victims
                    .entry((name, victim.comm.clone()))
                    .or_default() += 1;
                let line = procs::cmdline(victim.pid);
                *stats
                    .by_resource
                    .entry((procs::classify(&line, &victim.comm), name))
                    .or_default() += 1;
                let mut shown: String = line.escape_debug().take(200).collect();
                if shown.chars().count() < line.escape_debug().count() {
                    shown.push('…');
                }
                record(format!(
                    "{name}: pid {} ppid {} ({}): {shown}",
                    victim.pid, victim.ppid, victim.comm
                ));
                let pid = Pid::from_raw(victim.pid);
                if kind == 0 {
                    let _ = kill(pid, Signal::SIGKILL);
                } else {
                    let _ = kill(pid, Signal::SIGSTOP);
                    std::thread::sleep(Duration::from_millis(rng.range(50, 400)));
                    let _ = kill(pid, Signal::SIGCONT);
                }
                Ok(())
            }
            2 => garbage_frame(&ctx, &mut rng, nonce),
            3 => oversized_frame(&ctx, &mut rng),
            4 => nested_frame(&ctx, &mut rng, nonce),
            5 => dropped_client(&ctx, &mut rng),
            _ => never_reading_client(&ctx, &mut rng),
        };
        if ctx.life.down() || ctx.life.epoch() != epoch {
            // The runner took the daemon down meanwhile: the check says nothing.
            continue;
        }
        if kind > 1 {
            record(format!("{name}: {result:?}"));
        }
        *stats.injected.entry(name).or_default() += 1;
        stats.note(name, result);
        nonce += 1;
        let probe = net::fresh_ping(&ctx.socket, &ctx.workdir, nonce, PROBE_TIMEOUT);
        if ctx.life.down() || ctx.life.epoch() != epoch {
            continue;
        }
        stats.note(&format!("fresh-connection ping after {name}"), probe);
    }
    stats
}

/// Handshake, write a frame of random bytes with a valid length prefix: the daemon must
/// answer with an `Error` frame carrying a message, and keep serving that connection.
fn garbage_frame(ctx: &FaultCtx, rng: &mut Rng, nonce: u64) -> Result<(), Miss> {
    let codec = if rng.below(2) == 0 {
        Codec::Bincode
    } else {
        Codec::Json
    };
    // 0xff opens neither a JSON document nor a bincode variant index.
    let mut junk = vec![0xff, 0xfe];
    let n = rng.range(0, 64) as usize;
    junk.extend(rng.bytes(n));
    let opts = net::options(codec, false, &ctx.workdir);
    let socket = ctx.socket.clone();
    net::within(PROBE_TIMEOUT * 2, move || {
        let mut client = net::connect(&socket, opts, PROBE_TIMEOUT, PROBE_TIMEOUT)?;
        let mut raw = client
            .raw()
            .map_err(|e| Miss::Failed(format!("clone the socket: {e}")))?;
        raw.write_all(&(junk.len() as u32).to_be_bytes())
            .and_then(|()| raw.write_all(&junk))
            .map_err(|e| Miss::Failed(format!("write the garbage ({codec}): {e}")))?;
        match client.recv() {
            Ok(DaemonFrame::Error(e)) if !e.message.trim().is_empty() => {}
            Ok(other) => {
                return Err(Miss::Failed(format!(
                    "garbage {junk:02x?} ({codec}): expected an Error frame with a message, got {other:?}"
                )));
            }
            Err(e) => return Err(net::miss(&format!("garbage frame ({codec})"), e)),
        }
        net::ping_on(&mut client, nonce)
    })?
}

/// Handshake (either codec), then announce a frame above the 16 MiB cap: the daemon must
/// answer with an `Error` frame, then close the connection.
fn oversized_frame(ctx: &FaultCtx, rng: &mut Rng) -> Result<(), Miss> {
    let len = DEFAULT_MAX_FRAME + 1 + rng.below(1 << 24) as u32;
    let codec = if rng.below(2) == 0 {
        Codec::Bincode
    } else {
        Codec::Json
    };
    let opts = net::options(codec, false, &ctx.workdir);
    let socket = ctx.socket.clone();
    net::within(PROBE_TIMEOUT * 2, move || {
        let mut client = net::connect(&socket, opts, PROBE_TIMEOUT, PROBE_TIMEOUT)?;
        let mut raw = client
            .raw()
            .map_err(|e| Miss::Failed(format!("clone the socket: {e}")))?;
        raw.write_all(&len.to_be_bytes())
            .map_err(|e| Miss::Failed(format!("write the length prefix: {e}")))?;
        match client.recv() {
            Ok(DaemonFrame::Error(e)) if !e.message.trim().is_empty() => {}
            Ok(other) => {
                return Err(Miss::Failed(format!(
                    "length {len}: expected an Error frame with a message, got {other:?}"
                )));
            }
            Err(e) => return Err(net::miss(&format!("oversized length {len}"), e)),
        }
        match client.recv() {
            Err(e) if net::is_timeout(&e) => Err(Miss::Hung(format!(
                "length {len}: the connection stayed open after the Error frame"
            ))),
            Err(_) => Ok(()),
            Ok(other) => Err(Miss::Failed(format!(
                "length {len}: expected a close after the Error frame, got {other:?}"
            ))),
        }
    })?
}

/// Start a `bash sleep 5`, approve it, and disconnect while it runs.
fn dropped_client(ctx: &FaultCtx, rng: &mut Rng) -> Result<(), Miss> {
    let codec = if rng.below(2) == 0 {
        Codec::Bincode
    } else {
        Codec::Json
    };
    let linger = Duration::from_millis(rng.range(0, 300));
    let opts = net::options(codec, true, &ctx.workdir);
    let socket = ctx.socket.clone();
    net::within(PROBE_TIMEOUT * 2, move || {
        let mut client = net::connect(&socket, opts, PROBE_TIMEOUT, PROBE_TIMEOUT)?;
        client
            .start_call("chaos-dropper", "bash", json!({"command": "sleep 5"}))
            .map_err(|e| net::miss("start the call", e))?;
        match client.recv() {
            Ok(DaemonFrame::ApprovalRequest(req)) => client
                .send(&ClientFrame::ApprovalAnswer(ApprovalAnswer {
                    request_id: req.request_id,
                    approved: true,
                    reason: None,
                }))
                .map_err(|e| net::miss("approve", e))?,
            Ok(other) => {
                return Err(Miss::Failed(format!(
                    "expected an approval request, got {other:?}"
                )));
            }
            Err(e) => return Err(net::miss("wait for the approval request", e)),
        }
        std::thread::sleep(linger);
        drop(client);
        Ok(())
    })?
}

/// Handshake, then send a `bash` call whose arguments nest `NEST_DEPTH` lists (built byte by
/// byte: the encoder refuses such a value): the daemon must answer with an `Error` frame and
/// keep serving that connection.
fn nested_frame(ctx: &FaultCtx, rng: &mut Rng, nonce: u64) -> Result<(), Miss> {
    let codec = if rng.below(2) == 0 {
        Codec::Bincode
    } else {
        Codec::Json
    };
    let payload = match codec {
        Codec::Bincode => {
            let template = ClientFrame::Call(Call {
                id: 7,
                conversation: "chaos-nested".into(),
                tool: "bash".into(),
                args: Value(serde_json::Value::Null),
            });
            let mut p = codec::encode(Codec::Bincode, &template)
                .map_err(|e| Miss::Failed(format!("encode the template call: {e}")))?;
            // A null Value is its variant index 0, last; a list is variant 6 and a length.
            p.pop();
            for _ in 0..NEST_DEPTH - 1 {
                p.extend_from_slice(&[6, 1]);
            }
            p.extend_from_slice(&[6, 0]);
            p
        }
        Codec::Json => format!(
            r#"{{"call": {{"id": 7, "conversation": "chaos-nested", "tool": "bash", "args": {}{}}}}}"#,
            "[".repeat(NEST_DEPTH),
            "]".repeat(NEST_DEPTH)
        )
        .into_bytes(),
    };
    let opts = net::options(codec, false, &ctx.workdir);
    let socket = ctx.socket.clone();
    net::within(PROBE_TIMEOUT * 2, move || {
        let mut client = net::connect(&socket, opts, PROBE_TIMEOUT, PROBE_TIMEOUT)?;
        let mut raw = client
            .raw()
            .map_err(|e| Miss::Failed(format!("clone the socket: {e}")))?;
        raw.write_all(&(payload.len() as u32).to_be_bytes())
            .and_then(|()| raw.write_all(&payload))
            .map_err(|e| Miss::Failed(format!("write the nested frame ({codec}): {e}")))?;
        loop {
            match client.recv() {
                Ok(DaemonFrame::Error(e)) if !e.message.trim().is_empty() => break,
                // The call may be refused as a call (its own Result) instead.
                Ok(DaemonFrame::Result { outcome, .. }) => match outcome {
                    toolvisor_protocol::wire::Outcome::Err(e) if !e.message.trim().is_empty() => {
                        break;
                    }
                    other => {
                        return Err(Miss::Failed(format!(
                            "{NEST_DEPTH} nested lists ({codec}): expected a refusal with a message, got {other:?}"
                        )));
                    }
                },
                Ok(DaemonFrame::Event { .. } | DaemonFrame::TreeUpdate(_)) => {}
                Ok(other) => {
                    return Err(Miss::Failed(format!(
                        "{NEST_DEPTH} nested lists ({codec}): expected an Error frame with a message, got {other:?}"
                    )));
                }
                Err(e) => return Err(net::miss(&format!("nested frame ({codec})"), e)),
            }
        }
        net::ping_on(&mut client, nonce)
    })?
}

/// Start many calls with large answers (`read` of a 1 MiB file, no approval needed) and
/// never read them; hold the connection a while, then drop it. Meanwhile a fresh connection
/// must be served.
fn never_reading_client(ctx: &FaultCtx, rng: &mut Rng) -> Result<(), Miss> {
    let codec = if rng.below(2) == 0 {
        Codec::Bincode
    } else {
        Codec::Json
    };
    let hold = Duration::from_millis(rng.range(500, 3000));
    let opts = net::options(codec, true, &ctx.workdir);
    let socket = ctx.socket.clone();
    let workdir = ctx.workdir.clone();
    net::within(PROBE_TIMEOUT * 2 + hold, move || {
        let mut client = net::connect(&socket, opts, PROBE_TIMEOUT, PROBE_TIMEOUT)?;
        for _ in 0..100 {
            client
                .start_call(
                    "chaos-never-reads",
                    "read",
                    json!({"path": crate::fixture::BIG_FILE}),
                )
                .map_err(|e| net::miss("start a call", e))?;
        }
        let started = std::time::Instant::now();
        let mid = net::fresh_ping(&socket, &workdir, 7, PROBE_TIMEOUT);
        std::thread::sleep(hold.saturating_sub(started.elapsed()));
        drop(client);
        mid
    })?
}
