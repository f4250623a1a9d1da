//! The end of a run: the figures table (markdown, on stdout), the problems behind any
//! non-zero figure, and the verdict that decides the exit code.

use std::fmt::Write;

use crate::faults::{FaultStats, KINDS};
use crate::load::LoadStats;
use crate::procs::Seen;

/// One SIGKILL of the daemon by the runner and the restart after it.
pub struct Restart {
    /// Descendants the old incarnation had when it was killed.
    pub old_descendants: usize,
    /// Shims SIGKILLed while the daemon was stopped, just before its SIGKILL.
    pub shims_shot: usize,
    /// Of those, zombies when the next incarnation answered (exited, not yet reaped).
    pub zombies_at_ready: usize,
    /// Of those, still alive after the grace (also in the problems).
    pub leaked: usize,
    /// From the SIGKILL to the next incarnation's first Pong.
    pub ready_ms: u64,
}

pub struct Report {
    pub seed: u64,
    pub seconds: u64,
    pub clients: usize,
    pub heavy_clients: usize,
    /// Kinds not exercised, with why (their server is not installed).
    pub skipped: Vec<(&'static str, String)>,
    pub load: LoadStats,
    pub faults: FaultStats,
    pub restarts: Vec<Restart>,
    pub descendants_seen: usize,
    pub leaked: Vec<Seen>,
    pub zombies: usize,
    pub rss_start_kib: Option<u64>,
    pub rss_end_kib: Option<u64>,
    pub fds_start: Option<usize>,
    pub fds_end: Option<usize>,
    /// The daemon was still running when the load ended.
    pub daemon_up: bool,
    /// How the stop went, in words.
    pub stop: String,
    /// The daemon exited within its deadline after being told to.
    pub stop_ok: bool,
    /// Problems found by the runner itself (shutdown, leaks, restarts).
    pub problems: Vec<String>,
}

impl Report {
    pub fn hung(&self) -> u64 {
        self.load.sum(|k| k.hung) + self.faults.hung
    }

    pub fn lost(&self) -> u64 {
        self.load.sum(|k| k.lost)
    }

    /// Processes alive after shutdown, after a restart's grace, or zombies left unreaped.
    pub fn leaked(&self) -> usize {
        self.leaked.len() + self.restarts.iter().map(|r| r.leaked).sum::<usize>() + self.zombies
    }

    pub fn passed(&self) -> bool {
        self.hung() == 0
            && self.lost() == 0
            && self.leaked() == 0
            && self.load.sum(|k| k.unclear) == 0
            && self.load.sum(|k| k.broken) == 0
            && self.load.reused_ids == 0
            && self.load.serve.values().all(Result::is_ok)
            && self.faults.failed_checks == 0
            && self.daemon_up
            && !self.faults.daemon_died
            && self.stop_ok
            && !self
                .problems
                .iter()
                .any(|p| p.starts_with("DAEMON RESTART FAILED"))
    }

    /// The per-kind table: calls, answers, faults that hit the kind's processes, restarts
    /// seen, worst latency, and the invariants.
    fn kinds_table(&self) -> String {
        let mut out = String::from(
            "| kind | calls | ok | clear errors | cut by daemon kill | faults on its processes | restarts seen | max latency | hung | untyped | lost | broken | final serve |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for kind in crate::fixture::KINDS {
            if let Some((_, why)) = self.skipped.iter().find(|(k, _)| *k == kind) {
                let _ = writeln!(out, "| {kind} | skipped: {why} |||||||||||| ");
                continue;
            }
            let k = self.load.kinds.get(kind).cloned().unwrap_or_default();
            let faults: u64 = self
                .faults
                .by_resource
                .iter()
                .filter(|((r, _), _)| *r == kind)
                .map(|(_, n)| n)
                .sum();
            let serve = match self.load.serve.get(kind) {
                Some(Ok(())) => "yes",
                Some(Err(_)) => "NO",
                None => "-",
            };
            let _ = writeln!(
                out,
                "| {kind} | {} | {} | {} | {} | {faults} | {} | {:.1} s | {} | {} | {} | {} | {serve} |",
                k.calls,
                k.ok,
                k.clear,
                k.cut,
                k.restarts,
                k.max_latency_us as f64 / 1e6,
                k.hung,
                k.unclear,
                k.lost,
                k.broken
            );
        }
        let shims: u64 = self
            .faults
            .by_resource
            .iter()
            .filter(|((r, _), _)| *r == "shim")
            .map(|(_, n)| n)
            .sum();
        let _ = writeln!(
            out,
            "| shims (every kind's) | | | | | {shims} | | | | | | | |"
        );
        out
    }

    pub fn render(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        let load = &self.load;
        row("seed", self.seed.to_string());
        row(
            "load",
            format!(
                "{} clients ({} heavy) for {} s",
                self.clients, self.heavy_clients, self.seconds
            ),
        );
        row("calls made", load.sum(|k| k.calls).to_string());
        row(
            "answered ok",
            format!(
                "{} ({} showed a fault: a signal, an exit code, a failed cell)",
                load.sum(|k| k.ok),
                load.sum(|k| k.hit_by_fault)
            ),
        );
        let kinds: Vec<String> = load
            .clear_errors
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        row(
            "answered with a clear error",
            if kinds.is_empty() {
                "0".into()
            } else {
                format!("{} ({})", load.sum(|k| k.clear), kinds.join(", "))
            },
        );
        row(
            "cut by the runner's daemon kill",
            load.sum(|k| k.cut).to_string(),
        );
        row(
            "answered with an untyped error",
            load.sum(|k| k.unclear).to_string(),
        );
        row("broken connections", load.sum(|k| k.broken).to_string());
        row("hung", self.hung().to_string());
        row("lost data", self.lost().to_string());
        row("leaked processes", self.leaked().to_string());
        row(
            "leaked: after shutdown / across restarts / zombies",
            format!(
                "{} / {} / {}",
                self.leaked.len(),
                self.restarts.iter().map(|r| r.leaked).sum::<usize>(),
                self.zombies
            ),
        );
        row("ids reused", load.reused_ids.to_string());
        row("fault checks failed", self.faults.failed_checks.to_string());
        row(
            "faults: model hub (connection cut mid-file / corrupted transfer)",
            format!("{} / {}", load.hub_faults.0, load.hub_faults.1),
        );
        for kind in KINDS {
            let n = self.faults.injected.get(kind).copied().unwrap_or(0);
            let victims: Vec<String> = self
                .faults
                .victims
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .map(|((_, comm), n)| format!("{comm} {n}"))
                .collect();
            let value = if victims.is_empty() {
                n.to_string()
            } else {
                format!("{n} ({})", victims.join(", "))
            };
            row(&format!("faults: {kind}"), value);
        }
        let restarts: Vec<String> = self
            .restarts
            .iter()
            .map(|r| {
                format!(
                    "{} descendants, {} shims SIGKILLed with the daemon stopped, serving again after {} ms ({} of them zombies then), {} left alive",
                    r.old_descendants, r.shims_shot, r.ready_ms, r.zombies_at_ready, r.leaked
                )
            })
            .collect();
        row(
            "faults: daemon SIGKILL + restart",
            if restarts.is_empty() {
                "0".into()
            } else {
                format!("{} ({})", restarts.len(), restarts.join("; "))
            },
        );
        let survived: Vec<String> = load
            .survived
            .iter()
            .map(|(k, (ok, bad))| format!("{k} {ok} ok, {bad} lost"))
            .collect();
        row(
            "survived the restart",
            if survived.is_empty() {
                "nothing checked (no restart)".into()
            } else {
                survived.join("; ")
            },
        );
        row("daemon descendants seen", self.descendants_seen.to_string());
        row("daemon RSS at start", mib(self.rss_start_kib));
        row("daemon RSS at end", mib(self.rss_end_kib));
        row(
            "daemon fds at start / end",
            format!(
                "{} / {}",
                self.fds_start.map_or("?".into(), |n| n.to_string()),
                self.fds_end.map_or("?".into(), |n| n.to_string())
            ),
        );
        let (p50, p99) = percentiles(&load.latencies_us);
        row("call latency p50", p50);
        row("call latency p99", p99);
        row(
            "daemon up until asked to stop",
            if self.daemon_up && !self.faults.daemon_died {
                "yes"
            } else {
                "NO"
            }
            .into(),
        );
        row("daemon stop", self.stop.clone());
        row(
            "verdict",
            if self.passed() { "PASS" } else { "FAIL" }.into(),
        );

        let mut out = String::from("| figure | value |\n|---|---|\n");
        for (k, v) in rows {
            let _ = writeln!(out, "| {k} | {v} |");
        }
        let _ = writeln!(out, "\nper kind:\n\n{}", self.kinds_table());
        if !load.error_samples.is_empty() {
            let _ = writeln!(out, "\nclear errors, first of each kind:");
            for (kind, sample) in &load.error_samples {
                let _ = writeln!(out, "- {kind}: {sample}");
            }
        }
        let problems: Vec<&String> = self
            .problems
            .iter()
            .chain(&self.faults.problems)
            .chain(&load.problems)
            .collect();
        if !problems.is_empty() {
            let _ = writeln!(out, "\nproblems ({}):", problems.len());
            for p in problems.iter().take(50) {
                let _ = writeln!(out, "- {p}");
            }
            if problems.len() > 50 {
                let _ = writeln!(out, "- ... and {} more", problems.len() - 50);
            }
        }
        out
    }
}

fn mib(kib: Option<u64>) -> String {
    match kib {
        Some(k) => format!("{:.1} MiB", k as f64 / 1024.0),
        None => "unknown".into(),
    }
}

/// p50 and p99 of latencies in microseconds, as milliseconds.
fn percentiles(us: &[u64]) -> (String, String) {
    if us.is_empty() {
        return ("n/a".into(), "n/a".into());
    }
    let mut v = us.to_vec();
    v.sort_unstable();
    let at = |p: usize| {
        let i = (v.len() * p / 100).min(v.len() - 1);
        format!("{:.1} ms", v[i] as f64 / 1000.0)
    };
    (at(50), at(99))
}

#[cfg(test)]
mod tests {
    use super::percentiles;

    #[test]
    fn percentiles_pick_the_right_ranks() {
        let us: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert_eq!(
            percentiles(&us),
            ("51.0 ms".to_string(), "100.0 ms".to_string())
        );
        assert_eq!(percentiles(&[]).0, "n/a");
    }
}
