//! The fit label of a model on this machine, from its weights' size, the memory
//! `/proc/meminfo` reports and the accelerators found (`crate::accel`). Two labels: the
//! seed's `fit` (`fits|tight|too_large`, `unknown` when memory is unknown), and `placement`,
//! which also says where it fits (`fits_gpu`: in one accelerator's free memory, all layers
//! offloaded; `fits_cpu`: in available system memory; `tight`: only in the machine's total
//! memory or an accelerator's total; `too_large`), with the numbers it was decided on.

use toolvisor_protocol::results::{self, Fit, PlacementLabel};

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
pub fn label(weights: u64, memory: Option<Memory>) -> Fit {
    let Some(m) = memory else {
        return Fit::Unknown;
    };
    let need = needed(weights);
    if need <= m.available {
        Fit::Fits
    } else if need <= m.total {
        Fit::Tight
    } else {
        Fit::TooLarge
    }
}

/// Where a model of `weights` bytes fits, and the numbers that says so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `fits_gpu` (every layer on accelerators: one, or split over several), `fits_partial`
    /// (some layers on accelerators, the rest in system memory), `fits_cpu`, `tight`,
    /// `too_large` or `unknown`.
    pub label: PlacementLabel,
    pub need: u64,
    /// The one accelerator it fits on whole (index into the list given), for `fits_gpu`.
    pub accelerator: Option<usize>,
    /// The accelerators it is split over (`fits_gpu` over several, `fits_partial`).
    pub split: Vec<usize>,
    /// `fits_partial` with the model's layers known: how many go on the accelerators.
    pub gpu_layers: Option<u32>,
    /// The KV cache of the context asked for, when the model's shape is known.
    pub kv_bytes: Option<u64>,
}

impl Placement {
    /// The seed's label: `fits` wherever it fits.
    pub fn fit(&self) -> Fit {
        self.label.fit()
    }

    /// The `-ngl` for llama.cpp: every layer (999, capped by llama.cpp at the model's) when
    /// it fits the accelerators whole, the layers that fit on a partial offload, else none.
    pub fn gpu_layers_flag(&self) -> u32 {
        match self.label {
            PlacementLabel::FitsGpu => 999,
            PlacementLabel::FitsPartial => self.gpu_layers.unwrap_or(0),
            _ => 0,
        }
    }

    /// As results show it, the accelerators named (`accelerators` is the list it was
    /// decided on).
    pub fn shown(&self, accelerators: &[crate::accel::Accelerator]) -> results::Placement {
        let gpu = self.accelerator.and_then(|i| accelerators.get(i));
        let split: Vec<String> = self
            .split
            .iter()
            .filter_map(|i| accelerators.get(*i))
            .map(|a| a.name.clone())
            .collect();
        results::Placement {
            label: self.label,
            need_bytes: self.need,
            accelerator: gpu.map(|a| a.name.clone()),
            split_over: (!split.is_empty()).then_some(split),
            gpu_layers: self.gpu_layers.map(u64::from),
            kv_cache_bytes: self.kv_bytes,
        }
    }
}

/// Free memory of the accelerators that say it: (index, free bytes).
fn free_gpus(accelerators: &[crate::accel::Accelerator]) -> Vec<(usize, u64)> {
    accelerators
        .iter()
        .enumerate()
        .filter_map(|(i, a)| a.memory_free.map(|f| (i, f)))
        .filter(|(_, f)| *f > 0)
        .collect()
}

/// Where `need` bytes fit on the accelerators whole: the one with the most free memory that
/// holds them, else split over all of them when their free memory together does.
fn on_gpus(
    need: u64,
    accelerators: &[crate::accel::Accelerator],
) -> Option<(Option<usize>, Vec<usize>)> {
    let free = free_gpus(accelerators);
    let one = free
        .iter()
        .filter(|(_, f)| need <= *f)
        .max_by_key(|(_, f)| *f)
        .map(|(i, _)| *i);
    if one.is_some() {
        return Some((one, Vec::new()));
    }
    let together: u64 = free.iter().map(|(_, f)| f).sum();
    (free.len() > 1 && need <= together).then(|| (None, free.iter().map(|(i, _)| *i).collect()))
}

/// The label when the model stays off the accelerators (or only some of its memory would fit
/// on them): system memory, else `tight` when the machine's memory and the accelerators'
/// totals together would hold it.
fn off_gpus(
    need: u64,
    weights_fit: Fit,
    memory: Option<Memory>,
    accelerators: &[crate::accel::Accelerator],
) -> PlacementLabel {
    let gpu_total: u64 = accelerators.iter().filter_map(|a| a.memory_total).sum();
    let all_total = memory.map_or(0, |m| m.total).saturating_add(gpu_total);
    match weights_fit {
        Fit::Fits => PlacementLabel::FitsCpu,
        Fit::Unknown if gpu_total > 0 && need <= gpu_total => PlacementLabel::Tight,
        Fit::Unknown => PlacementLabel::Unknown,
        _ if gpu_total > 0 && need <= all_total => PlacementLabel::Tight,
        Fit::Tight => PlacementLabel::Tight,
        Fit::TooLarge => PlacementLabel::TooLarge,
    }
}

/// Where `weights` fit, the model's shape unknown (a listing's sizes only): on one
/// accelerator with room, split over several, in system memory, or `tight` when only the
/// machine's total memory with the accelerators' would hold it.
pub fn placement(
    weights: u64,
    memory: Option<Memory>,
    accelerators: &[crate::accel::Accelerator],
) -> Placement {
    let need = needed(weights);
    let mut place = Placement {
        label: PlacementLabel::Unknown,
        need,
        accelerator: None,
        split: Vec::new(),
        gpu_layers: None,
        kv_bytes: None,
    };
    if let Some((one, split)) = on_gpus(need, accelerators) {
        place.label = PlacementLabel::FitsGpu;
        place.accelerator = one;
        place.split = split;
        return place;
    }
    // Some on the accelerators, the rest in available system memory.
    let gpu_free: u64 = free_gpus(accelerators).iter().map(|(_, f)| f).sum();
    if let Some(m) = memory
        && gpu_free > 0
        && need > m.available
        && need <= m.available.saturating_add(gpu_free)
    {
        place.label = PlacementLabel::FitsPartial;
        place.split = free_gpus(accelerators).iter().map(|(i, _)| *i).collect();
        return place;
    }
    place.label = off_gpus(need, label(weights, memory), memory, accelerators);
    place
}

/// Bytes beyond the weights and the KV cache that a loaded model takes (compute buffers, the
/// runtime): a tenth of the weights, at least 64 MiB.
pub fn runtime_bytes(weights: u64) -> u64 {
    (weights / 10).max(64 << 20)
}

/// Where the model of `shape` (from its GGUF header) fits with a context of `context`
/// tokens: what it needs is its weights, the KV cache of that context and the runtime
/// ([`runtime_bytes`]). On the accelerators whole (one, or split over several: llama.cpp
/// splits the layers by the devices' free memory), else as many layers as the accelerators'
/// free memory holds, each with its share of the KV cache (`-ngl N`), the rest in system
/// memory, else system memory alone.
pub fn placement_for(
    shape: &crate::gguf_header::Shape,
    weights: u64,
    context: u64,
    memory: Option<Memory>,
    accelerators: &[crate::accel::Accelerator],
) -> Placement {
    let kv = shape.kv_bytes(context);
    let runtime = runtime_bytes(weights);
    let need = weights.saturating_add(kv).saturating_add(runtime);
    let mut place = Placement {
        label: PlacementLabel::Unknown,
        need,
        accelerator: None,
        split: Vec::new(),
        gpu_layers: None,
        kv_bytes: Some(kv),
    };
    if let Some((one, split)) = on_gpus(need, accelerators) {
        place.label = PlacementLabel::FitsGpu;
        place.accelerator = one;
        place.split = split;
        return place;
    }
    let free = free_gpus(accelerators);
    let gpu_free: u64 = free.iter().map(|(_, f)| f).sum();
    let layers = shape.layers.max(1) as u64;
    // A split model's first file describes only its own tensors: the weights outside the
    // header's non-layer tensors are the layers'.
    let layer_bytes = (shape.layer_bytes.iter().sum::<u64>() / layers)
        .max(weights.saturating_sub(shape.other_bytes) / layers);
    let per_layer = layer_bytes.saturating_add(kv / layers).max(1);
    // The accelerators keep a share of the runtime's buffers too.
    let budget = gpu_free.saturating_sub(runtime / 2);
    let on_gpu = (budget / per_layer).min(layers);
    if on_gpu > 0
        && let Some(m) = memory
    {
        let rest = need.saturating_sub(on_gpu * per_layer + runtime / 2);
        if rest <= m.available {
            place.label = PlacementLabel::FitsPartial;
            place.gpu_layers = Some(on_gpu as u32);
            place.split = free.iter().map(|(i, _)| *i).collect();
            return place;
        }
    }
    let in_ram = match memory {
        None => Fit::Unknown,
        Some(m) if need <= m.available => Fit::Fits,
        Some(m) if need <= m.total => Fit::Tight,
        Some(_) => Fit::TooLarge,
    };
    place.label = off_gpus(need, in_ram, memory, accelerators);
    place
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolvisor_protocol::results::AcceleratorKind;

    #[test]
    fn placement_prefers_the_accelerator_with_room() {
        use crate::accel::Accelerator;
        let gpu = |name: &str, total: u64, free: u64| Accelerator {
            kind: AcceleratorKind::Nvidia,
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
            (PlacementLabel::FitsGpu, Some(1), Fit::Fits)
        );
        // Too big for any GPU's free memory: system memory decides.
        assert_eq!(
            placement(5_000, m, &gpus[..1]).label,
            PlacementLabel::FitsCpu
        );
        // Only a GPU's total would hold it (its memory is in use): tight, not too large.
        let busy = [gpu("busy", 24_000, 1_000)];
        assert_eq!(placement(15_000, m, &busy).label, PlacementLabel::Tight);
        assert_eq!(placement(15_000, m, &[]).label, PlacementLabel::TooLarge);
        // No accelerator: the seed's labels with where.
        assert_eq!(placement(1_000, m, &[]).label, PlacementLabel::FitsCpu);
        assert_eq!(placement(1, None, &[]).label, PlacementLabel::Unknown);
    }

    #[test]
    fn two_gpus_hold_what_one_cannot_and_a_partial_offload_counts_layers() {
        use crate::accel::Accelerator;
        use crate::gguf_header::Shape;
        const GB: u64 = 1 << 30;
        let gpu = |total: u64, free: u64| Accelerator {
            kind: AcceleratorKind::Nvidia,
            name: "H100".into(),
            memory_total: Some(total * GB),
            memory_free: Some(free * GB),
        };
        let ram = Some(Memory {
            total: 256 * GB,
            available: 200 * GB,
        });
        // A 70B Q8_0 (75 GB) on two 80 GB GPUs: too big for one, fits split over both.
        let p = placement(75 * GB, ram, &[gpu(80, 79), gpu(80, 79)]);
        assert_eq!(
            (p.label, p.accelerator, p.split.clone()),
            (PlacementLabel::FitsGpu, None, vec![0, 1])
        );
        assert_eq!(p.fit(), Fit::Fits);
        assert_eq!(p.gpu_layers_flag(), 999);
        // 80 layers of 0.9 GB, 3 GB outside them, GQA KV cache (8 KV heads of 128).
        let shape = Shape {
            layers: 80,
            layer_bytes: vec![GB * 9 / 10; 80],
            other_bytes: 3 * GB,
            kv_bytes_per_token: 80 * 8 * 256 * 2,
            context_trained: Some(131_072),
            pooling: None,
        };
        let weights = 75 * GB;
        let short = placement_for(&shape, weights, 2048, ram, &[gpu(80, 79), gpu(80, 79)]);
        let long = placement_for(&shape, weights, 131_072, ram, &[gpu(80, 79), gpu(80, 79)]);
        assert_eq!(short.label, PlacementLabel::FitsGpu);
        // The context's KV cache counts: 40 GiB more at 131,072 tokens.
        assert_eq!(long.need - short.need, shape.kv_bytes(131_072 - 2048));
        assert_eq!(long.kv_bytes, Some(80 * 8 * 256 * 2 * 131_072));
        // One 24 GB GPU: as many layers as it holds, the rest in system memory.
        let partial = placement_for(&shape, weights, 4096, ram, &[gpu(24, 23)]);
        assert_eq!(partial.label, PlacementLabel::FitsPartial, "{partial:?}");
        let n = partial.gpu_layers.unwrap();
        assert!((20..=25).contains(&n), "{n} layers of 0.9 GB in 23 GB");
        assert_eq!(partial.gpu_layers_flag(), n);
        // No room anywhere: the weights alone exceed every memory there is.
        let huge = placement_for(&shape, 900 * GB, 4096, ram, &[gpu(24, 23)]);
        assert_eq!(huge.label, PlacementLabel::TooLarge);
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
        assert_eq!(label(5_000, m), Fit::Fits);
        assert_eq!(label(5_001, m), Fit::Tight);
        assert_eq!(label(10_000, m), Fit::Tight);
        assert_eq!(label(10_001, m), Fit::TooLarge);
        assert_eq!(label(1, None), Fit::Unknown);
    }
}
