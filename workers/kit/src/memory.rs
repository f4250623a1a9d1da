//! Giving freed memory back to the system. glibc's malloc keeps what a burst freed in its
//! arenas (a daemon that served 10,000 connections keeps their high-water mark); `trim` asks
//! it to return every free page. `tune` fixes the threshold above which an allocation gets its
//! own mapping, so a large buffer (an image, a big result) goes back to the system the moment it
//! is freed. Safe wrappers over the libc calls, so callers outside this crate need no `unsafe`.
//!
//! The daemon calls `trim` once a burst of sessions has ended (half the peak gone, at least 64),
//! when a client whose output queue filled has gone, after a waiting frame was spooled, and once no
//! call has run for `[limits] trim_after_idle_s` (10 s) after some did (one trim per idle spell,
//! never while a call is in flight; logged at debug with the RSS before and after: one `ast_grep`
//! over 13,000 files otherwise left ~200 MiB resident in its walker threads' arenas). `tune` (256
//! KiB, unless `GLIBC_TUNABLES` sets a threshold) runs at start-up before any thread. The allocator
//! stays the system one: these met the goals in `docs/BENCHMARKS.md` without a new dependency.

/// Allocations of at least this many bytes get their own mapping, returned to the system on
/// free. glibc's default starts at 128 KiB but *rises* to the size of each large block freed
/// (up to 32 MiB), after which multi-megabyte buffers come from the per-thread arenas and stay
/// there: a burst of 16 image reads on blocking threads left ~60 MiB resident in 8 arenas that
/// `malloc_trim` could not return (fragmented). Setting the threshold fixes it and turns the
/// dynamic rise off.
pub const MMAP_THRESHOLD: usize = 256 * 1024;

/// Tune the allocator for a long-lived daemon: a fixed mmap threshold (see
/// [`MMAP_THRESHOLD`]). Call once at start-up, before threads are spawned. Skipped when the
/// operator set `glibc.malloc.mmap_threshold` in `GLIBC_TUNABLES` (theirs wins). A no-op
/// where the C library is not glibc. True when the setting was applied.
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let operator_chose = std::env::var("GLIBC_TUNABLES")
            .is_ok_and(|t| t.contains("glibc.malloc.mmap_threshold"));
        if operator_chose {
            return false;
        }
        // SAFETY: mallopt takes two integers and only changes the allocator's parameters
        // under its own lock; M_MMAP_THRESHOLD with a value under HEAP_MAX/2 is accepted.
        unsafe { nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as i32) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Return free heap pages of every malloc arena to the system. True when some memory was
/// released. A no-op (false) where the C library is not glibc.
pub fn trim() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim takes no pointers and only walks the allocator's own arenas
        // under their locks; 0 keeps no padding at the top of the heap.
        unsafe { nix::libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_large_block_freed_after_tuning_leaves_no_resident_memory() {
        fn rss_kib() -> u64 {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .unwrap()
        }
        if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold")) {
            return;
        }
        assert!(super::tune(), "mallopt(M_MMAP_THRESHOLD) was refused");
        // Without the fixed threshold, freeing one 8 MiB mapped block raises glibc's threshold
        // to 8 MiB, and the next 8 MiB blocks come from the heap, where they stay after free
        // (each is followed by a small live allocation, so the heap's top cannot shrink).
        drop(vec![1u8; 8 << 20]);
        let before = rss_kib();
        let (blocks, pins): (Vec<Vec<u8>>, Vec<Vec<u8>>) = (0..8)
            .map(|i| (vec![i as u8 + 1; 8 << 20], vec![i as u8; 1024]))
            .unzip();
        assert!(
            rss_kib() >= before + 32 * 1024,
            "the blocks were not touched"
        );
        drop(blocks);
        let after = rss_kib();
        assert!(
            after < before + 8 * 1024,
            "64 MiB freed, but RSS went from {before} KiB to {after} KiB"
        );
        assert!(pins.iter().enumerate().all(|(i, p)| p[0] == i as u8));
    }

    #[test]
    fn trim_after_a_burst_does_not_disturb_live_memory() {
        let live = vec![7u8; 1 << 20];
        let burst: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop(burst);
        super::trim();
        assert!(live.iter().all(|&b| b == 7));
    }
}
