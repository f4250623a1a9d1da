//! The load: client threads, each with its own connection and conversation, looping over a
//! mix of `bash` and `process` calls and checking every answer (wrong output is LOST data,
//! no answer before the deadline is HUNG).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Outcome;

use crate::net::{self, Miss};
use crate::rng::Rng;

/// How long one call may take before it counts as hung.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connect + handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Tracked `sleep` processes a client keeps at most (the daemon caps running processes per
/// conversation).
const MAX_SLEEPERS: usize = 4;
/// A `seq` process (50 echo lines) that has not ended after this long is stuck.
const SEQ_DEADLINE: Duration = Duration::from_secs(10);

const SEQ_COMMAND: &str = "for i in $(seq 1 50); do echo line$i; done";

/// What one client (or all of them, merged) saw.
#[derive(Default)]
pub struct LoadStats {
    pub calls: u64,
    pub ok: u64,
    /// Clear errors (kind and a non-empty message), by kind.
    pub clear_errors: BTreeMap<String, u64>,
    /// The first message seen of each kind of clear error.
    pub error_samples: BTreeMap<String, String>,
    /// Errors without a message.
    pub unclear: u64,
    pub hung: u64,
    /// Connections that broke (closed, undecodable answer) instead of answering.
    pub broken: u64,
    pub lost: u64,
    /// Answers that came back Ok but showed a fault hit the work (a signal, an exit code).
    pub hit_by_fault: u64,
    pub latencies_us: Vec<u64>,
    pub problems: Vec<String>,
}

impl LoadStats {
    pub fn merge(&mut self, other: LoadStats) {
        self.calls += other.calls;
        self.ok += other.ok;
        for (k, n) in other.clear_errors {
            *self.clear_errors.entry(k).or_default() += n;
        }
        for (k, m) in other.error_samples {
            self.error_samples.entry(k).or_insert(m);
        }
        self.unclear += other.unclear;
        self.hung += other.hung;
        self.broken += other.broken;
        self.lost += other.lost;
        self.hit_by_fault += other.hit_by_fault;
        self.latencies_us.extend(other.latencies_us);
        self.problems.extend(other.problems);
    }

    pub fn clear_total(&self) -> u64 {
        self.clear_errors.values().sum()
    }
}

/// What one load client needs.
pub struct ClientCtx {
    pub index: usize,
    pub socket: PathBuf,
    pub workdir: PathBuf,
    pub seed: u64,
    pub stop: Arc<AtomicBool>,
}

/// What to check in the answer of one call.
enum Check {
    Echo(String),
    Nothing,
    StartedSleeper,
    StartedSeq,
    ReadSeq(String),
    ReadSleeper(String),
    Killed(String),
}

/// Expected output of the `seq` process.
fn seq_expected() -> String {
    (1..=50).map(|i| format!("line{i}\n")).collect()
}

/// True for process states that mean "ended".
fn ended(state: &str) -> bool {
    !matches!(state, "starting" | "running" | "backoff" | "stopping")
}

struct Load {
    ctx: ClientCtx,
    conversation: String,
    codec: Codec,
    rng: Rng,
    client: Option<Client>,
    sleepers: Vec<String>,
    seqs: Vec<(String, Instant)>,
    stats: LoadStats,
    count: u64,
}

/// Run one load client until `stop`, then settle its `seq` processes and kill what it
/// started. Returns what it saw.
pub fn run_client(ctx: ClientCtx) -> LoadStats {
    let mut load = Load {
        conversation: format!("chaos-{}", ctx.index),
        codec: if ctx.index.is_multiple_of(2) {
            Codec::Bincode
        } else {
            Codec::Json
        },
        rng: Rng::new(ctx.seed ^ (ctx.index as u64 + 1).wrapping_mul(0x1000_0000_01B3)),
        ctx,
        client: None,
        sleepers: Vec::new(),
        seqs: Vec::new(),
        stats: LoadStats::default(),
        count: 0,
    };
    while !load.ctx.stop.load(Ordering::Relaxed) {
        load.step();
    }
    load.settle();
    load.stats
}

impl Load {
    fn step(&mut self) {
        let (tool, args, check) = self.choose();
        self.call(tool, args, check);
    }

    /// Pick the next call of the mix.
    fn choose(&mut self) -> (&'static str, Json, Check) {
        self.count += 1;
        match self.rng.below(100) {
            0..30 => {
                let token = format!(
                    "tok-{}-{}-{:x}",
                    self.ctx.index,
                    self.count,
                    self.rng.next_u64() & 0xffff_ffff
                );
                (
                    "bash",
                    json!({"command": format!("echo {token}")}),
                    Check::Echo(token),
                )
            }
            30..42 => ("bash", json!({"command": "sleep 0.05"}), Check::Nothing),
            42..52 if self.sleepers.len() < MAX_SLEEPERS => (
                "process",
                json!({"op": "start", "command": "sleep 30", "label": "sleeper"}),
                Check::StartedSleeper,
            ),
            42..62 => (
                "process",
                json!({"op": "start", "command": SEQ_COMMAND, "label": "seq"}),
                Check::StartedSeq,
            ),
            62..77 if !self.seqs.is_empty() => {
                let id = self
                    .rng
                    .pick(&self.seqs)
                    .map(|(id, _)| id.clone())
                    .unwrap_or_default();
                (
                    "process",
                    json!({"op": "read", "id": id, "offset": 0}),
                    Check::ReadSeq(id),
                )
            }
            62..77 if !self.sleepers.is_empty() => {
                let id = self.rng.pick(&self.sleepers).cloned().unwrap_or_default();
                (
                    "process",
                    json!({"op": "read", "id": id, "offset": 0}),
                    Check::ReadSleeper(id),
                )
            }
            77..90 if !self.sleepers.is_empty() => {
                let id = self.rng.pick(&self.sleepers).cloned().unwrap_or_default();
                (
                    "process",
                    json!({"op": "kill", "id": id}),
                    Check::Killed(id),
                )
            }
            _ => ("process", json!({"op": "list"}), Check::Nothing),
        }
    }

    /// The connection, (re)connecting when needed. `None` after a failure (already counted).
    fn client(&mut self) -> Option<&mut Client> {
        if self.client.is_none() {
            let opts = net::options(self.codec, true, &self.ctx.workdir);
            match net::connect(&self.ctx.socket, opts, CONNECT_TIMEOUT, CALL_TIMEOUT) {
                Ok(c) => self.client = Some(c),
                Err(miss) => {
                    self.stats.calls += 1;
                    self.note_miss(&format!("client {} connect", self.ctx.index), miss);
                    std::thread::sleep(Duration::from_millis(100));
                    return None;
                }
            }
        }
        self.client.as_mut()
    }

    fn note_miss(&mut self, what: &str, miss: Miss) {
        match miss {
            Miss::Hung(m) => {
                self.stats.hung += 1;
                self.stats.problems.push(format!("HUNG: {what}: {m}"));
            }
            Miss::Failed(m) => {
                self.stats.broken += 1;
                self.stats.problems.push(format!("BROKEN: {what}: {m}"));
            }
        }
    }

    /// Make one call and check its answer. Returns the value when it succeeded.
    fn call(&mut self, tool: &str, args: Json, check: Check) -> Option<Json> {
        let conversation = self.conversation.clone();
        let what = format!("client {} ({}) {tool} {args}", self.ctx.index, self.codec);
        let client = self.client()?;
        let started = Instant::now();
        let reply = client.call_with(&conversation, tool, args, |_| true);
        let elapsed = started.elapsed();
        self.stats.calls += 1;
        self.stats.latencies_us.push(elapsed.as_micros() as u64);
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // The connection is in an unknown state: start a new one.
                self.client = None;
                self.note_miss(&what, net::miss("call", e));
                return None;
            }
        };
        match reply.outcome {
            Outcome::Ok(v) => {
                self.stats.ok += 1;
                self.check(&what, &v.0, check);
                Some(v.0)
            }
            Outcome::Err(e) => {
                if e.message.trim().is_empty() {
                    self.stats.unclear += 1;
                    self.stats
                        .problems
                        .push(format!("UNCLEAR ERROR: {what}: {e:?}"));
                } else {
                    *self
                        .stats
                        .clear_errors
                        .entry(e.kind.to_string())
                        .or_default() += 1;
                    self.stats
                        .error_samples
                        .entry(e.kind.to_string())
                        .or_insert_with(|| format!("{what}: {e}"));
                }
                // A process we can no longer address is no longer ours to track.
                match check {
                    Check::ReadSeq(id) => self.seqs.retain(|(s, _)| *s != id),
                    Check::ReadSleeper(id) => self.sleepers.retain(|s| *s != id),
                    Check::Killed(id) => self.sleepers.retain(|s| *s != id),
                    _ => {}
                }
                None
            }
        }
    }

    fn check(&mut self, what: &str, v: &Json, check: Check) {
        match check {
            Check::Echo(token) => {
                let clean = v["exit_code"] == 0 && v["signal"].is_null();
                if !clean {
                    self.stats.hit_by_fault += 1;
                } else if v["stdout"].as_str() != Some(&format!("{token}\n")) {
                    self.stats.lost += 1;
                    self.stats.problems.push(format!(
                        "LOST: {what}: exit 0 but stdout is {}, expected {:?} (answer: {v})",
                        v["stdout"],
                        format!("{token}\n")
                    ));
                }
            }
            Check::Nothing => {}
            Check::StartedSleeper => {
                if let Some(id) = v["id"].as_str() {
                    self.sleepers.push(id.to_string());
                }
            }
            Check::StartedSeq => {
                if let Some(id) = v["id"].as_str() {
                    self.seqs.push((id.to_string(), Instant::now()));
                }
            }
            Check::ReadSeq(id) => {
                let state = v["state"].as_str().unwrap_or("");
                if !(ended(state) && v["eof"] == true) {
                    let age = self
                        .seqs
                        .iter()
                        .find(|(s, _)| *s == id)
                        .map(|(_, t)| t.elapsed())
                        .filter(|age| *age > SEQ_DEADLINE);
                    if let Some(age) = age {
                        // Fifty echo lines take milliseconds: this end was never reported.
                        self.seqs.retain(|(s, _)| *s != id);
                        self.stats.hung += 1;
                        let mut last = v.clone();
                        if let Some(text) = last.get_mut("text") {
                            let complete = text.as_str() == Some(&seq_expected());
                            *text = format!("<line1..line50 complete: {complete}>").into();
                        }
                        self.stats.problems.push(format!(
                            "HUNG: {what}: the seq process never reported its end: still {state} {age:.1?} after its start; last read: {last}"
                        ));
                    }
                    return;
                }
                self.seqs.retain(|(s, _)| *s != id);
                let clean = v["exit_code"] == 0 && v["signal"].is_null();
                if !clean {
                    self.stats.hit_by_fault += 1;
                    return;
                }
                let text = v["text"].as_str().unwrap_or("");
                if text != seq_expected() || v["dropped"] != 0 {
                    self.stats.lost += 1;
                    self.stats.problems.push(format!(
                        "LOST: {what}: the seq process exited 0 but its output is not line1..line50: {v}"
                    ));
                }
            }
            Check::ReadSleeper(id) => {
                // A sleeper only ends early when a fault hit it: the read must say how.
                if ended(v["state"].as_str().unwrap_or("")) {
                    self.sleepers.retain(|s| *s != id);
                    if v["signal"].is_null() && v["exit_code"].is_null() {
                        self.stats.unclear += 1;
                        self.stats.problems.push(format!(
                            "UNCLEAR: {what}: the sleeper ended without an exit code or signal: {v}"
                        ));
                    } else {
                        self.stats.hit_by_fault += 1;
                    }
                }
            }
            Check::Killed(id) => self.sleepers.retain(|s| *s != id),
        }
    }

    /// After the load: read every `seq` process to its end (a process that never reports
    /// its end is stuck: HUNG), then kill every process this conversation still runs.
    fn settle(&mut self) {
        // Each read either settles the process, finds it stuck past its deadline, or waits.
        while let Some((id, _)) = self.seqs.first().cloned() {
            let before = self.seqs.len();
            self.call(
                "process",
                json!({"op": "read", "id": id, "offset": 0}),
                Check::ReadSeq(id),
            );
            if self.seqs.len() == before {
                if self.client.is_none() {
                    // The broken connection is counted already; the process is untracked now.
                    self.seqs.remove(0);
                } else {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        let Some(list) = self.call("process", json!({"op": "list"}), Check::Nothing) else {
            return;
        };
        let running: Vec<String> = list["processes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| !ended(p["state"].as_str().unwrap_or("")))
            .filter_map(|p| p["id"].as_str().map(str::to_string))
            .collect();
        for id in running {
            self.call(
                "process",
                json!({"op": "kill", "id": id}),
                Check::Killed(id.clone()),
            );
        }
    }
}
