//! The end of a run: the figures table (markdown, on stdout), the problems behind any
//! non-zero figure, and the verdict that decides the exit code.

use std::fmt::Write;

use crate::faults::{FaultStats, KINDS};
use crate::load::LoadStats;
use crate::procs::Seen;

pub struct Report {
    pub seed: u64,
    pub seconds: u64,
    pub clients: usize,
    pub load: LoadStats,
    pub faults: FaultStats,
    pub descendants_seen: usize,
    pub leaked: Vec<Seen>,
    pub rss_start_kib: Option<u64>,
    pub rss_end_kib: Option<u64>,
    /// The daemon was still running when the load ended.
    pub daemon_up: bool,
    /// How the stop went, in words.
    pub stop: String,
    /// The daemon exited within its deadline after being told to.
    pub stop_ok: bool,
    /// Problems found by the runner itself (shutdown, leaks).
    pub problems: Vec<String>,
}

impl Report {
    pub fn hung(&self) -> u64 {
        self.load.hung + self.faults.hung
    }

    pub fn passed(&self) -> bool {
        self.hung() == 0
            && self.load.lost == 0
            && self.leaked.is_empty()
            && self.load.unclear == 0
            && self.load.broken == 0
            && self.faults.failed_checks == 0
            && self.daemon_up
            && !self.faults.daemon_died
            && self.stop_ok
    }

    pub fn render(&self) -> String {
        let mut rows: Vec<(String, String)> = Vec::new();
        let mut row = |k: &str, v: String| rows.push((k.to_string(), v));
        let load = &self.load;
        row("seed", self.seed.to_string());
        row(
            "load",
            format!("{} clients for {} s", self.clients, self.seconds),
        );
        row("calls made", load.calls.to_string());
        row(
            "answered ok",
            format!(
                "{} ({} showed a fault: a signal or exit code)",
                load.ok, load.hit_by_fault
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
                format!("{} ({})", load.clear_total(), kinds.join(", "))
            },
        );
        row("answered with an unclear error", load.unclear.to_string());
        row("broken connections", load.broken.to_string());
        row("hung", self.hung().to_string());
        row("lost data", load.lost.to_string());
        row("leaked processes", self.leaked.len().to_string());
        row("fault checks failed", self.faults.failed_checks.to_string());
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
        row("daemon descendants seen", self.descendants_seen.to_string());
        row("daemon RSS at start", mib(self.rss_start_kib));
        row("daemon RSS at end", mib(self.rss_end_kib));
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
