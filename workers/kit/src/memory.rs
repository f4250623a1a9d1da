//! Giving freed memory back to the system. glibc's malloc keeps what a burst freed in its
//! arenas (a daemon that served 10,000 connections keeps their high-water mark); `trim` asks
//! it to return every free page. A safe wrapper over the one libc call, so callers outside
//! this crate need no `unsafe`.

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
    #[test]
    fn trim_after_a_burst_does_not_disturb_live_memory() {
        let live = vec![7u8; 1 << 20];
        let burst: Vec<Vec<u8>> = (0..256).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop(burst);
        super::trim();
        assert!(live.iter().all(|&b| b == 7));
    }
}
