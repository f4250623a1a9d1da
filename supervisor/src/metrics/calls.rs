//! The call counters the daemon keeps as calls end: how many calls of each tool ended with each
//! outcome, and their latency. The endpoint (`crate::metrics`) registers them at each scrape.

use std::collections::HashMap;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

pub(super) type Labels = Vec<(String, String)>;

/// Call latency buckets, in seconds: from a cached `read` to a long `bash`.
const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0,
];

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// What the daemon counts as calls end. Labels are bounded: `tool` is a registered tool's
/// name (anything else counts as `unknown`), `outcome` is `ok` or an error kind.
pub struct Metrics {
    pub(super) calls: Family<Labels, Counter>,
    pub(super) durations: Family<Labels, Histogram, fn() -> Histogram>,
    /// Each tool's series, found by name without building its labels (the families' keys
    /// cost six strings and two hashes per call). The series are the families' own (a
    /// counter and a histogram are shared handles): bounded like the labels.
    handles: std::sync::RwLock<HashMap<String, ToolSeries>>,
}

/// One tool's duration histogram and its counter per outcome seen.
struct ToolSeries {
    duration: Histogram,
    outcomes: Vec<(String, Counter)>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            calls: Family::default(),
            durations: Family::new_with_constructor(histogram),
            handles: Default::default(),
        }
    }
}

impl Metrics {
    /// A call of `tool` ended with `outcome` after `elapsed`.
    pub fn call_ended(&self, tool: &str, outcome: &str, elapsed: Duration) {
        {
            let handles = self.handles.read().unwrap_or_else(|p| p.into_inner());
            if let Some(series) = handles.get(tool)
                && let Some((_, counter)) = series.outcomes.iter().find(|(o, _)| o == outcome)
            {
                counter.inc();
                series.duration.observe(elapsed.as_secs_f64());
                return;
            }
        }
        let mut handles = self.handles.write().unwrap_or_else(|p| p.into_inner());
        let series = handles
            .entry(tool.to_string())
            .or_insert_with(|| ToolSeries {
                duration: self
                    .durations
                    .get_or_create(&vec![("tool".into(), tool.into())])
                    .clone(),
                outcomes: Vec::new(),
            });
        if !series.outcomes.iter().any(|(o, _)| o == outcome) {
            let counter = self
                .calls
                .get_or_create(&vec![
                    ("tool".into(), tool.into()),
                    ("outcome".into(), outcome.into()),
                ])
                .clone();
            series.outcomes.push((outcome.to_string(), counter));
        }
        let (_, counter) = series
            .outcomes
            .iter()
            .find(|(o, _)| o == outcome)
            .expect("just added");
        counter.inc();
        series.duration.observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::{Registry, Unit};

    #[test]
    fn a_call_counts_once_under_its_tool_and_outcome_and_lands_in_a_latency_bucket() {
        let m = Metrics::default();
        m.call_ended("read", "ok", Duration::from_millis(3));
        m.call_ended("read", "ok", Duration::from_millis(700));
        m.call_ended("read", "not_found", Duration::from_millis(2));
        let mut registry = Registry::with_prefix("toolvisor");
        registry.register("calls", "calls", m.calls.clone());
        registry.register_with_unit("call_duration", "d", Unit::Seconds, m.durations.clone());
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"toolvisor_calls_total{tool="read",outcome="ok"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolvisor_calls_total{tool="read",outcome="not_found"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolvisor_call_duration_seconds_bucket{le="0.005",tool="read"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"toolvisor_call_duration_seconds_count{tool="read"} 3"#),
            "{text}"
        );
    }
}
