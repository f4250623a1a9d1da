//! How fast a job goes, said only when it means something: bytes per second over the last
//! few seconds of the run (a sliding window of samples of the bytes fetched), and nothing until
//! the window spans a second — a rate from a tiny time delta (a resumed job's bytes already on
//! disk, a first chunk) is the "4 TiB/s" no one should see. Also the order jobs are listed in
//! (`dl2` before `dl10`) and byte counts for people (`1.5 GiB`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// The rate is over this much of the recent run.
const WINDOW: Duration = Duration::from_secs(5);
/// No rate before the samples span this long.
const MIN_SPAN: Duration = Duration::from_secs(1);
/// Samples closer than this to the last one are not kept.
const STEP: Duration = Duration::from_millis(250);
/// At most this many samples (WINDOW / STEP, and some).
const MAX_SAMPLES: usize = 32;

/// Samples of a run's fetched-bytes counter.
#[derive(Debug, Default)]
pub(crate) struct RateWindow {
    samples: VecDeque<(Instant, u64)>,
}

impl RateWindow {
    /// A new run starts: forget the last one's samples.
    pub(crate) fn restart(&mut self, now: Instant) {
        self.samples.clear();
        self.samples.push_back((now, 0));
    }

    /// Note `fetched` (this run's bytes so far) at `now`; bytes per second over the window,
    /// `None` while it spans less than a second (or no run is going).
    pub(crate) fn rate(&mut self, now: Instant, fetched: u64) -> Option<f64> {
        let last = *self.samples.back()?;
        if now.saturating_duration_since(last.0) >= STEP {
            self.samples.push_back((now, fetched));
        }
        while self.samples.len() > MAX_SAMPLES
            || (self.samples.len() > 2
                && now.saturating_duration_since(self.samples[1].0) >= WINDOW)
        {
            self.samples.pop_front();
        }
        let (t0, f0) = *self.samples.front()?;
        let span = now.saturating_duration_since(t0);
        if span < MIN_SPAN {
            return None;
        }
        Some(fetched.saturating_sub(f0) as f64 / span.as_secs_f64())
    }
}

/// The order of job ids: their text before the number, then the number (`dl2` < `dl10`).
pub fn id_order(id: &str) -> (&str, u64, &str) {
    let digits_at = id.find(|c: char| c.is_ascii_digit()).unwrap_or(id.len());
    let (prefix, rest) = id.split_at(digits_at);
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (number, tail) = rest.split_at(end);
    (prefix, number.parse().unwrap_or(u64::MAX), tail)
}

/// `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rate_from_a_tiny_time_delta_then_the_rate_of_the_last_seconds() {
        let t = Instant::now();
        let mut w = RateWindow::default();
        assert_eq!(w.rate(t, 0), None, "no run, no rate");
        w.restart(t);
        // A resumed job's first chunk: 64 KiB after a millisecond is no 64 MiB/s.
        assert_eq!(w.rate(t + Duration::from_millis(1), 65_536), None);
        assert_eq!(w.rate(t + Duration::from_millis(900), 900_000), None);
        // 1 MB/s for 3 s.
        let mut got = None;
        for i in 1..=12 {
            got = w.rate(t + Duration::from_millis(250 * i), 250_000 * i);
        }
        let r = got.unwrap();
        assert!((r - 1_000_000.0).abs() < 1.0, "{r}");
        // Then 4 MB/s for 10 s: the window forgets the slow start.
        let base = t + Duration::from_secs(3);
        for i in 1..=40 {
            got = w.rate(
                base + Duration::from_millis(250 * i),
                3_000_000 + 1_000_000 * i,
            );
        }
        let r = got.unwrap();
        assert!((r - 4_000_000.0).abs() < 1.0, "{r}");
        assert!(w.samples.len() <= MAX_SAMPLES);
        // A stall: the rate falls to nothing moving.
        let stalled = base + Duration::from_secs(30);
        assert_eq!(w.rate(stalled, 43_000_000), Some(0.0));
    }

    #[test]
    fn ids_sort_by_their_number() {
        let mut ids = vec!["dl10", "dl129", "dl2", "dl13", "dl1"];
        ids.sort_by_key(|i| id_order(i));
        assert_eq!(ids, ["dl1", "dl2", "dl10", "dl13", "dl129"]);
        assert!(id_order("x") < id_order("y1"));
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }
}
