//! The fit label of a model on this machine, from its weights' size, the memory
//! `/proc/meminfo` reports and the accelerators found (`crate::accel`). Two labels: the
//! seed's `fit` (`fits|tight|too_large`, `unknown` when memory is unknown), and `placement`,
//! which also says where it fits (`fits_gpu`: in one accelerator's free memory, all layers
//! offloaded; `fits_cpu`: in available system memory; `tight`: only in the machine's total
//! memory or an accelerator's total; `too_large`), with the numbers it was decided on.

/// Memory facts the label is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub available: u64,
}

/// Parse `MemTotal` and `MemAvailable` (kB) from `/proc/meminfo` text.
pub fn parse_meminfo(text: &str) -> Option<Memory> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kb * 1024)
        })
    };
    let total = field("MemTotal")?;
    Some(Memory {
        total,
        available: field("MemAvailable").unwrap_or(total),
    })
}

/// Read `path` (normally `/proc/meminfo`).
pub fn read_memory(path: &std::path::Path) -> Option<Memory> {
    parse_meminfo(&std::fs::read_to_string(path).ok()?)
}

/// Bytes a model of `weights` bytes needs to run: the weights plus a fifth for the context
/// and the runtime.
pub fn needed(weights: u64) -> u64 {
    weights.saturating_add(weights / 5)
}

/// `fits` when it fits in what is available now, `tight` when only in the machine's total
/// memory, `too_large` otherwise (or when the memory is unknown and nothing can be said,
/// `unknown`).
pub fn label(weights: u64, memory: Option<Memory>) -> &'static str {
    let Some(m) = memory else {
        return "unknown";
    };
    let need = needed(weights);
    if need <= m.available {
        "fits"
    } else if need <= m.total {
        "tight"
    } else {
        "too_large"
    }
}

/// Where a model of `weights` bytes fits, and the numbers that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `fits_gpu`, `fits_cpu`, `tight`, `too_large` or `unknown`.
    pub label: &'static str,
    pub need: u64,
    /// The accelerator it fits on (index into the list given), for `fits_gpu`.
    pub accelerator: Option<usize>,
}

impl Placement {
    /// The seed's label: `fits` wherever it fits.
    pub fn fit(&self) -> &'static str {
        match self.label {
            "fits_gpu" | "fits_cpu" => "fits",
            other => other,
        }
    }

    pub fn to_json(&self, accelerators: &[crate::accel::Accelerator]) -> serde_json::Value {
        let gpu = self.accelerator.and_then(|i| accelerators.get(i));
        serde_json::json!({"label": self.label, "need_bytes": self.need,
            "accelerator": gpu.map(|a| &a.name)})
    }
}

/// Where `weights` fit: the accelerator with the most free memory that holds it whole (its
/// free memory known), else system memory, else `tight` when the machine's total memory or an
/// accelerator's total would hold it.
pub fn placement(
    weights: u64,
    memory: Option<Memory>,
    accelerators: &[crate::accel::Accelerator],
) -> Placement {
    let need = needed(weights);
    let place = |label, accelerator| Placement {
        label,
        need,
        accelerator,
    };
    let on_gpu = accelerators
        .iter()
        .enumerate()
        .filter(|(_, a)| a.memory_free.is_some_and(|free| need <= free))
        .max_by_key(|(_, a)| a.memory_free)
        .map(|(i, _)| i);
    if on_gpu.is_some() {
        return place("fits_gpu", on_gpu);
    }
    let gpu_total = accelerators
        .iter()
        .any(|a| a.memory_total.is_some_and(|t| need <= t));
    match label(weights, memory) {
        "fits" => place("fits_cpu", None),
        "unknown" if gpu_total => place("tight", None),
        "unknown" => place("unknown", None),
        "too_large" if gpu_total => place("tight", None),
        other => place(other, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_prefers_the_accelerator_with_room() {
        use crate::accel::Accelerator;
        let gpu = |name: &str, total: u64, free: u64| Accelerator {
            kind: "nvidia",
            name: name.into(),
            memory_total: Some(total),
            memory_free: Some(free),
        };
        let m = Some(Memory {
            total: 12_000,
            available: 6_000,
        });
        let gpus = [gpu("small", 4_000, 3_000), gpu("big", 24_000, 20_000)];
        // 6,000 needed: the big GPU, not the small one, not the CPU.
        let p = placement(5_000, m, &gpus);
        assert_eq!(
            (p.label, p.accelerator, p.fit()),
            ("fits_gpu", Some(1), "fits")
        );
        // Too big for any GPU's free memory: system memory decides.
        assert_eq!(placement(5_000, m, &gpus[..1]).label, "fits_cpu");
        // Only a GPU's total would hold it (its memory is in use): tight, not too large.
        let busy = [gpu("busy", 24_000, 1_000)];
        assert_eq!(placement(15_000, m, &busy).label, "tight");
        assert_eq!(placement(15_000, m, &[]).label, "too_large");
        // No accelerator: the seed's labels with where.
        assert_eq!(placement(1_000, m, &[]).label, "fits_cpu");
        assert_eq!(placement(1, None, &[]).label, "unknown");
    }

    #[test]
    fn meminfo_is_read_in_kilobytes() {
        let m =
            parse_meminfo("MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    8000 kB\n")
                .unwrap();
        assert_eq!(
            m,
            Memory {
                total: 16_384_000,
                available: 8_192_000
            }
        );
        assert!(parse_meminfo("nothing").is_none());
    }

    #[test]
    fn labels_follow_available_then_total_memory() {
        let m = Some(Memory {
            total: 12_000,
            available: 6_000,
        });
        assert_eq!(label(5_000, m), "fits");
        assert_eq!(label(5_001, m), "tight");
        assert_eq!(label(10_000, m), "tight");
        assert_eq!(label(10_001, m), "too_large");
        assert_eq!(label(1, None), "unknown");
    }
}
