//! The load: client threads, each with its own connection and conversation, looping over a
//! mix of calls that reaches every kind of resource (bash, tracked processes, stored results
//! paged through `tool_result_read`, multi-file `apply_patch`, `ast_grep`, `ast_edit` +
//! `resolve`, language servers, Python and JavaScript kernels with a `tool()` bridge call,
//! debugpy sessions, vibe workers) and checking every answer: wrong output is LOST data, no
//! answer before the kind's deadline is HUNG, an error without a message is UNCLEAR. After
//! the runner kills and restarts the daemon, each client checks what must survive.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use toolvisor_protocol::ToolError;
use toolvisor_protocol::client::Client;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Outcome;

use crate::fixture::{self, DOC_WORDS, Deps};
use crate::life::Life;
use crate::net::{self, Miss};
use crate::rng::Rng;

mod code;
mod files;
mod hubs;
pub mod inference;

pub use hubs::HUB_RATE;

/// How long a connect + handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Tracked `sleep` processes a client keeps at most (the daemon caps running processes per
/// conversation).
const MAX_SLEEPERS: usize = 4;
/// A `seq` process (50 echo lines) that has not ended after this long is stuck.
const SEQ_DEADLINE: Duration = Duration::from_secs(20);
/// Stored results a client keeps to read back after a daemon restart.
const KEPT_REFS: usize = 2;
/// Lines of the large `bash` output (about 169,000 characters: stored and projected).
const BIG_LINES: u32 = 30000;

/// Shell builtins only: a `$(seq …)` whose `seq` the fault thread SIGKILLed would expand to
/// nothing and the loop would exit 0 having printed nothing (a 30-minute run counted that as
/// lost output).
const SEQ_COMMAND: &str = "i=1; while [ $i -le 50 ]; do echo line$i; i=$((i+1)); done";
/// A description that passes eval's 5-10 words rule.
const EVAL_DESCRIPTION: &str = "echo a token through the tool bridge";

/// How long one call of `kind` may take before it counts as hung: generous, for a loaded
/// 2-core machine (index-wide language-server ops wait up to 60 s for readiness).
pub fn deadline(kind: &str) -> Duration {
    Duration::from_secs(match kind {
        "lsp_pyright" | "lsp_clangd" => 180,
        "eval_python" | "eval_javascript" | "debug_debugpy" => 120,
        "vibe" | "ast_grep" | "ast_edit" | "inference" => 60,
        _ => 45,
    })
}

/// What the calls of one kind saw.
#[derive(Default, Clone)]
pub struct KindStats {
    pub calls: u64,
    pub ok: u64,
    /// Clear errors (kind and a non-empty message).
    pub clear: u64,
    /// Errors without a message.
    pub unclear: u64,
    pub hung: u64,
    /// Connections that broke (closed, undecodable answer) instead of answering.
    pub broken: u64,
    /// Calls cut by the runner's own SIGKILL of the daemon (expected, not a violation).
    pub cut: u64,
    pub lost: u64,
    /// Answers that came back but showed a fault hit the work (a signal, an exit code).
    pub hit_by_fault: u64,
    /// The resource behind the kind came back as a new process (server, kernel, adapter pid
    /// changed between two answers of one client).
    pub restarts: u64,
    pub max_latency_us: u64,
}

impl KindStats {
    fn merge(&mut self, o: &KindStats) {
        self.calls += o.calls;
        self.ok += o.ok;
        self.clear += o.clear;
        self.unclear += o.unclear;
        self.hung += o.hung;
        self.broken += o.broken;
        self.cut += o.cut;
        self.lost += o.lost;
        self.hit_by_fault += o.hit_by_fault;
        self.restarts += o.restarts;
        self.max_latency_us = self.max_latency_us.max(o.max_latency_us);
    }
}

/// What one client (or all of them, merged) saw.
#[derive(Default)]
pub struct LoadStats {
    pub kinds: BTreeMap<&'static str, KindStats>,
    /// Clear errors by error kind.
    pub clear_errors: BTreeMap<String, u64>,
    /// The first message seen of each kind of clear error.
    pub error_samples: BTreeMap<String, String>,
    pub latencies_us: Vec<u64>,
    /// After a daemon restart: what was checked to survive, (survived, lost) by item.
    pub survived: BTreeMap<&'static str, (u64, u64)>,
    /// Ids handed out twice (across incarnations or not).
    pub reused_ids: u64,
    /// Faults the model hub was told to inject: (connection cut mid-file, corrupted transfer).
    pub hub_faults: (u64, u64),
    /// The final serve check per kind: `Ok(())` served, or why not.
    pub serve: BTreeMap<&'static str, Result<(), String>>,
    pub problems: Vec<String>,
}

impl LoadStats {
    pub fn merge(&mut self, other: LoadStats) {
        for (k, s) in &other.kinds {
            self.kinds.entry(k).or_default().merge(s);
        }
        for (k, n) in other.clear_errors {
            *self.clear_errors.entry(k).or_default() += n;
        }
        for (k, m) in other.error_samples {
            self.error_samples.entry(k).or_insert(m);
        }
        for (k, (a, b)) in other.survived {
            let e = self.survived.entry(k).or_default();
            e.0 += a;
            e.1 += b;
        }
        self.reused_ids += other.reused_ids;
        self.hub_faults.0 += other.hub_faults.0;
        self.hub_faults.1 += other.hub_faults.1;
        self.serve.extend(other.serve);
        self.latencies_us.extend(other.latencies_us);
        self.problems.extend(other.problems);
    }

    pub fn sum(&self, f: impl Fn(&KindStats) -> u64) -> u64 {
        self.kinds.values().map(f).sum()
    }

    pub fn kind(&mut self, kind: &'static str) -> &mut KindStats {
        self.kinds.entry(kind).or_default()
    }
}

/// What one load client needs.
pub struct ClientCtx {
    pub index: usize,
    pub socket: PathBuf,
    pub workdir: PathBuf,
    pub seed: u64,
    pub stop: Arc<AtomicBool>,
    pub life: Arc<Life>,
    pub deps: Arc<Deps>,
    /// A heavy client also runs kernels, debug sessions and staged edits (one each per
    /// conversation: a machine with 2 cores cannot run sixteen of each).
    pub heavy: bool,
    /// The loopback model hub the download jobs fetch from.
    pub hub: Arc<toolvisor_testhub::HfServer>,
}

/// Expected output of the `seq` process.
fn seq_expected() -> String {
    (1..=50).map(|i| format!("line{i}\n")).collect()
}

fn big_expected() -> String {
    (1..=BIG_LINES).map(|i| format!("{i}\n")).collect()
}

/// True for process states that mean "ended".
fn ended(state: &str) -> bool {
    !matches!(state, "starting" | "running" | "backoff" | "stopping")
}

/// A call's answer: `None` when it did not come (already counted), else the outcome.
type Answer = Option<Result<Json, ToolError>>;

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
    /// The daemon incarnation this client last worked with.
    epoch: u64,
    /// Generation every file of this client's patch directory holds; `None` when unknown
    /// (a patch call whose answer did not come).
    patch_gen: Option<u64>,
    /// An edit staged and left unresolved, to resolve after a daemon restart:
    /// (edit id, directory, files).
    parked: Option<(String, String, Vec<String>)>,
    /// Stored results to read back after a daemon restart: (ref, expected text).
    kept_refs: Vec<(String, String)>,
    debug_breakpoints: bool,
    debug_live: bool,
    /// Vibe workers spawned and not yet waited for: (id, brief).
    workers: Vec<(String, String)>,
    /// Last pid seen per kind (to count restarts of the resource).
    pids: BTreeMap<&'static str, u64>,
    /// The download job in flight, and how many models this client has asked for.
    job: Option<hubs::Job>,
    models: u64,
    /// Notes written to the data hub, newest last.
    notes: Vec<hubs::Note>,
}

/// Run one load client until `stop`, then settle what it started and (client 0) check that
/// every kind still serves. Returns what it saw.
pub fn run_client(ctx: ClientCtx) -> LoadStats {
    let mut load = Load {
        conversation: format!("chaos-{}", ctx.index),
        codec: if ctx.index.is_multiple_of(2) {
            Codec::Bincode
        } else {
            Codec::Json
        },
        rng: Rng::new(ctx.seed ^ (ctx.index as u64 + 1).wrapping_mul(0x1000_0000_01B3)),
        epoch: ctx.life.epoch(),
        ctx,
        client: None,
        sleepers: Vec::new(),
        seqs: Vec::new(),
        stats: LoadStats::default(),
        count: 0,
        patch_gen: Some(0),
        parked: None,
        kept_refs: Vec::new(),
        debug_breakpoints: false,
        debug_live: false,
        workers: Vec::new(),
        pids: BTreeMap::new(),
        job: None,
        models: 0,
        notes: Vec::new(),
    };
    while !load.ctx.stop.load(Ordering::Relaxed) {
        load.step();
    }
    while load.ctx.life.down() {
        std::thread::sleep(Duration::from_millis(50));
    }
    load.catch_up();
    load.settle();
    if load.ctx.index == 0 {
        load.final_serve();
    }
    load.stats
}

impl Load {
    fn step(&mut self) {
        if self.ctx.life.down() {
            std::thread::sleep(Duration::from_millis(50));
            return;
        }
        self.catch_up();
        self.count += 1;
        let heavy = self.ctx.heavy;
        let deps = self.ctx.deps.clone();
        match self.rng.below(116) {
            100..105 => self.downloads(),
            105..110 => self.data(),
            110..116 if deps.has("inference") => self.inference(),
            0..16 => self.bash_echo(),
            16..20 => {
                self.call("bash", "bash", json!({"command": "sleep 0.05"}));
            }
            20..38 => self.process_op(),
            38..42 => self.big_result(),
            42..49 => self.apply_patch(),
            49..56 => self.ast_grep(),
            56..64 if heavy => self.ast_edit(),
            64..72 if deps.has("lsp_pyright") => self.lsp_pyright(),
            72..75 if deps.has("lsp_clangd") => self.lsp_clangd(),
            75..82 if heavy && deps.has("eval_python") => self.eval("eval_python"),
            82..87 if heavy && deps.has("eval_javascript") => self.eval("eval_javascript"),
            87..95 if heavy && deps.has("debug_debugpy") => self.debug(),
            95..100 if heavy => self.vibe(),
            _ => self.process_op(),
        }
    }

    /// After the runner restarted the daemon: check what must have survived, forget what
    /// could not (processes, sessions, workers of the old incarnation).
    fn catch_up(&mut self) {
        let epoch = self.ctx.life.epoch();
        if epoch == self.epoch || self.ctx.life.down() {
            return;
        }
        self.epoch = epoch;
        self.client = None;
        self.sleepers.clear();
        self.seqs.clear();
        self.debug_live = false;
        self.workers.clear();
        self.pids.clear();
        self.job_crossed_restart();
        self.notes_after_restart();
        self.check_patch_dir("after the daemon restart", true);
        for (r, expected) in std::mem::take(&mut self.kept_refs) {
            match self.read_stored(&r) {
                Some(Ok(text)) if text == expected => self.survived("stored result", true),
                Some(Ok(text)) => {
                    self.survived("stored result", false);
                    self.lost(
                        "result_read",
                        format!(
                            "stored result {r} read back after the daemon restart is not byte-identical: {} chars, expected {}",
                            text.chars().count(),
                            expected.chars().count()
                        ),
                    );
                }
                Some(Err(e)) => {
                    self.survived("stored result", false);
                    self.lost(
                        "result_read",
                        format!("stored result {r} did not survive the daemon restart: {e}"),
                    );
                }
                None => {}
            }
        }
        if let Some((id, dir, files)) = self.parked.take() {
            let answer = self.call(
                "ast_edit",
                "resolve",
                json!({"edit_id": id, "action": "accept"}),
            );
            match answer {
                Some(Ok(_)) => {
                    let all_new = files.iter().all(|f| {
                        std::fs::read_to_string(self.ctx.workdir.join(&dir).join(f))
                            .is_ok_and(|t| t == edit_text(true))
                    });
                    self.survived("staged edit", all_new);
                    if !all_new {
                        self.lost(
                            "ast_edit",
                            format!("staged edit {id} accepted after the restart, but {dir} does not hold the rewrite"),
                        );
                    }
                }
                Some(Err(e)) => {
                    self.survived("staged edit", false);
                    self.lost(
                        "ast_edit",
                        format!("staged edit {id} is not resolvable after the daemon restart: {e}"),
                    );
                }
                None => {}
            }
        }
    }

    fn survived(&mut self, what: &'static str, ok: bool) {
        let e = self.stats.survived.entry(what).or_default();
        if ok {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }

    fn lost(&mut self, kind: &'static str, message: String) {
        self.stats.kind(kind).lost += 1;
        self.stats
            .problems
            .push(format!("LOST: client {} {kind}: {message}", self.ctx.index));
    }

    fn hit(&mut self, kind: &'static str) {
        self.stats.kind(kind).hit_by_fault += 1;
    }

    fn note_pid(&mut self, kind: &'static str, pid: &Json) {
        if let Some(pid) = pid.as_u64()
            && self.pids.insert(kind, pid).is_some_and(|old| old != pid)
        {
            self.stats.kind(kind).restarts += 1;
        }
    }

    /// The connection, (re)connecting when needed. `None` after a failure (counted unless
    /// the runner took the daemon down).
    fn client(&mut self, kind: &'static str) -> Option<&mut Client> {
        if self.client.is_none() {
            let epoch = self.ctx.life.epoch();
            let opts = net::options(self.codec, true, &self.ctx.workdir);
            match net::connect(&self.ctx.socket, opts, CONNECT_TIMEOUT, deadline(kind)) {
                Ok(c) => self.client = Some(c),
                Err(miss) => {
                    if self.ctx.life.down() || self.ctx.life.epoch() != epoch {
                        std::thread::sleep(Duration::from_millis(100));
                        return None;
                    }
                    self.stats.kind(kind).calls += 1;
                    self.note_miss(kind, &format!("client {} connect", self.ctx.index), miss);
                    std::thread::sleep(Duration::from_millis(100));
                    return None;
                }
            }
        }
        self.client.as_mut()
    }

    fn note_miss(&mut self, kind: &'static str, what: &str, miss: Miss) {
        match miss {
            Miss::Hung(m) => {
                self.stats.kind(kind).hung += 1;
                self.stats.problems.push(format!("HUNG: {what}: {m}"));
            }
            Miss::Failed(m) => {
                self.stats.kind(kind).broken += 1;
                self.stats.problems.push(format!("BROKEN: {what}: {m}"));
            }
        }
    }

    /// Count one call of `kind` that took `elapsed` (answered or not).
    fn count_call(&mut self, kind: &'static str, elapsed: Duration) {
        let us = elapsed.as_micros() as u64;
        self.stats.latencies_us.push(us);
        let ks = self.stats.kind(kind);
        ks.calls += 1;
        ks.max_latency_us = ks.max_latency_us.max(us);
    }

    /// Make one call of `kind`; the answer, or `None` when none came (counted).
    fn call(&mut self, kind: &'static str, tool: &str, args: Json) -> Answer {
        let conversation = self.conversation.clone();
        let epoch = self.ctx.life.epoch();
        let limit = deadline(kind);
        let mut shown = args.to_string();
        if shown.len() > 300 {
            shown = format!("{}…", &shown[..shown.floor_char_boundary(300)]);
        }
        let what = format!("client {} ({}) {tool} {shown}", self.ctx.index, self.codec);
        let client = self.client(kind)?;
        let _ = client.set_read_timeout(Some(limit));
        let started = Instant::now();
        let reply = client.call_with(&conversation, tool, args, |_| true);
        let elapsed = started.elapsed();
        self.count_call(kind, elapsed);
        let reply = match reply {
            Ok(reply) => reply,
            Err(e) => {
                // The connection is in an unknown state: start a new one.
                self.client = None;
                if self.ctx.life.down() || self.ctx.life.epoch() != epoch {
                    self.stats.kind(kind).cut += 1;
                } else {
                    self.note_miss(kind, &what, net::miss("call", e));
                }
                return None;
            }
        };
        if elapsed > limit {
            self.stats.kind(kind).hung += 1;
            self.stats.problems.push(format!(
                "HUNG: {what}: answered after {elapsed:.1?}, past its deadline of {limit:?}"
            ));
        }
        match reply.outcome {
            Outcome::Ok(v) => {
                self.stats.kind(kind).ok += 1;
                Some(Ok(v.0))
            }
            Outcome::Err(e) => {
                if e.message.trim().is_empty() {
                    self.stats.kind(kind).unclear += 1;
                    self.stats
                        .problems
                        .push(format!("UNCLEAR ERROR: {what}: {e:?}"));
                } else {
                    self.stats.kind(kind).clear += 1;
                    let k = e.kind.to_string();
                    *self.stats.clear_errors.entry(k.clone()).or_default() += 1;
                    self.stats
                        .error_samples
                        .entry(format!("{kind} {k}"))
                        .or_insert_with(|| format!("{what}: {e}"));
                }
                Some(Err(e))
            }
        }
    }

    fn token(&mut self) -> String {
        format!(
            "tok-{}-{}-{:x}",
            self.ctx.index,
            self.count,
            self.rng.next_u64() & 0xffff_ffff
        )
    }

    /// After the load: read every `seq` process to its end (a process that never reports
    /// its end is stuck: HUNG), then kill every process this conversation still runs, end
    /// its debug session and drop its parked edit.
    fn settle(&mut self) {
        while let Some((id, _)) = self.seqs.first().cloned() {
            let before = self.seqs.len();
            self.read_seq(&id);
            if self.seqs.len() == before {
                if self.client.is_none() {
                    // The broken connection is counted already; the process is untracked now.
                    self.seqs.remove(0);
                } else {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        if self.debug_live {
            self.call("debug_debugpy", "debug", json!({"op": "terminate"}));
        }
        if let Some((id, _, _)) = self.parked.take() {
            self.call(
                "ast_edit",
                "resolve",
                json!({"edit_id": id, "action": "discard"}),
            );
        }
        let Some(Ok(list)) = self.call("process", "process", json!({"op": "list"})) else {
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
            self.call("process", "process", json!({"op": "kill", "id": id}));
        }
    }

    /// After the faults stopped: every kind must serve again (a few tries, for a server
    /// restarting after its last kill), or say clearly that it failed for good.
    fn final_serve(&mut self) {
        let deps = self.ctx.deps.clone();
        let mut kinds: Vec<&'static str> = vec!["bash", "ast_grep", "vibe", "downloads", "data"];
        for k in [
            "lsp_pyright",
            "lsp_clangd",
            "eval_python",
            "eval_javascript",
            "debug_debugpy",
            "inference",
        ] {
            if deps.has(k) {
                kinds.push(k);
            }
        }
        for kind in kinds {
            let mut last = String::from("no answer");
            let mut served = false;
            for _ in 0..5 {
                match self.serve_once(kind) {
                    Ok(()) => {
                        served = true;
                        break;
                    }
                    Err(e) => last = e,
                }
                std::thread::sleep(Duration::from_secs(2));
            }
            let verdict = if served {
                Ok(())
            } else if last.contains("failed") {
                // Past its restart intensity, said clearly: allowed.
                Ok(())
            } else {
                self.stats.problems.push(format!(
                    "NOT SERVING: {kind} did not serve again after the faults stopped: {last}"
                ));
                Err(last)
            };
            self.stats.serve.insert(kind, verdict);
        }
    }

    fn serve_once(&mut self, kind: &'static str) -> Result<(), String> {
        if kind == "inference" {
            return self.inference_serves();
        }
        let args = match kind {
            "bash" => ("bash", json!({"command": "echo serve"})),
            "ast_grep" => (
                "ast_grep",
                json!({"pattern": "$A.unwrap()", "path": "rs", "language": "rust"}),
            ),
            "vibe" => ("vibe_spawn", json!({"brief": "serve", "label": "serve"})),
            "downloads" => ("list_models", json!({})),
            "data" => ("search_data", json!({"query": DOC_WORDS})),
            "lsp_pyright" => (
                "lsp",
                json!({"op": "definition", "file": "py/app/main.py", "line": 2, "symbol": "make"}),
            ),
            "lsp_clangd" => (
                "lsp",
                json!({"op": "definition", "file": "c/main.c", "line": 6, "symbol": "twice"}),
            ),
            "eval_python" | "eval_javascript" => (
                "eval",
                json!({"code": "1 + 1", "description": EVAL_DESCRIPTION,
                       "language": if kind == "eval_python" { "python" } else { "javascript" }}),
            ),
            _ => ("debug", json!({"op": "launch", "program": "dbg/prog.py"})),
        };
        let v = match self.call(kind, args.0, args.1) {
            Some(Ok(v)) => v,
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err("no answer".into()),
        };
        match kind {
            "vibe" => {
                let id = v["worker_id"].as_str().unwrap_or("").to_string();
                match self.call(
                    kind,
                    "vibe_wait",
                    json!({"worker_id": id, "timeout_seconds": 30}),
                ) {
                    Some(Ok(w)) if w["state"] == "done" => Ok(()),
                    Some(Ok(w)) => Err(format!("worker {id} ended {}", w["state"])),
                    Some(Err(e)) => Err(e.to_string()),
                    None => Err("no answer".into()),
                }
            }
            "debug_debugpy" => {
                self.call(kind, "debug", json!({"op": "terminate"}));
                Ok(())
            }
            "eval_python" | "eval_javascript" if v["status"] != "ok" => {
                Err(format!("the cell failed: {}", v["text"]))
            }
            _ => Ok(()),
        }
    }
}

/// The two-line file of an `ast_edit` directory, before or after the rewrite.
fn edit_text(rewritten: bool) -> String {
    let f = if rewritten { "new_fn" } else { "old_fn" };
    format!("x = {f}(1)\ny = {f}(2)\n")
}

/// What an eval cell's bridged `echo` came to.
#[derive(Debug, PartialEq, Eq)]
enum Bridged {
    Echoed,
    /// The bash ended by a signal or a non-zero exit (a fault this runner injected).
    Faulted,
    Lost,
}

/// Judge a cell's text: `got TOKEN` then `bash ended EXIT SIGNAL` (Python prints `0 None`,
/// JavaScript `0 null` for a clean end).
fn bridged_echo(text: &str, token: &str) -> Bridged {
    if text.contains(&format!("got {token}")) {
        return Bridged::Echoed;
    }
    let ended = text
        .lines()
        .find_map(|l| l.strip_prefix("bash ended "))
        .map(str::trim);
    match ended {
        Some("0 None" | "0 null") | None => Bridged::Lost,
        Some(_) => Bridged::Faulted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bridged bash the runner's own SIGKILL ended printed nothing: that is a fault it
    /// caused, not lost output (a 75 s run once failed on exactly this).
    #[test]
    fn a_bridged_echo_killed_by_a_fault_is_a_fault_and_a_clean_empty_one_is_lost() {
        assert_eq!(
            bridged_echo("got tok-1\nbash ended 0 None\n", "tok-1"),
            Bridged::Echoed
        );
        assert_eq!(
            bridged_echo("got \nbash ended None 9\n", "tok-1"),
            Bridged::Faulted
        );
        assert_eq!(
            bridged_echo("got \nbash ended null 9\n", "tok-1"),
            Bridged::Faulted
        );
        assert_eq!(
            bridged_echo("got \nbash ended 0 None\n", "tok-1"),
            Bridged::Lost
        );
        assert_eq!(bridged_echo("got \n", "tok-1"), Bridged::Lost);
    }
}
