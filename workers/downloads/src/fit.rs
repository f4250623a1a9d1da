//! The fit label of a model on this machine (`fits|tight|too_large`), from its weights' size
//! and the memory `/proc/meminfo` reports. No accelerator is detected yet: the label is for
//! CPU inference from system memory.

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

#[cfg(test)]
mod tests {
    use super::*;

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
