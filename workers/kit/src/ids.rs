//! Resource ids that never repeat across daemon restarts (`p1`, `w1`, debug `c1#1`): a caller
//! holding `p1` from before a restart must never reach a different process by it.
//!
//! The counter reserves ids in blocks: the end of the current block is written (fsynced) to
//! its file before any id of the block is handed out, so a daemon killed at any instant
//! restarts past every id it ever gave out, at the cost of skipping the unused rest of a
//! block. A counter dropped on a clean stop gives the rest back: it writes the next id in
//! place of the block's end (when the file still holds that end), so ids go on `dl2` after
//! `dl1` across a restart instead of jumping by a block. Without a file (tests, a state dir
//! that cannot be written) it counts from 1 and says so in the log.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Ids reserved per write of the counter file.
const BLOCK: u64 = 64;

#[derive(Debug)]
pub struct IdCounter {
    path: Option<PathBuf>,
    state: Mutex<Block>,
}

#[derive(Debug)]
struct Block {
    next: u64,
    /// First id past the reserved block.
    end: u64,
}

impl IdCounter {
    /// A counter kept only in memory, starting at 1.
    pub fn in_memory() -> IdCounter {
        IdCounter {
            path: None,
            state: Mutex::new(Block {
                next: 1,
                end: u64::MAX,
            }),
        }
    }

    /// The counter persisted in `path` (created 0600 with its directory 0700 when missing).
    /// A file that holds no number is an error: ids could repeat.
    pub fn open(path: &Path) -> std::io::Result<IdCounter> {
        if let Some(dir) = path.parent() {
            crate::private::ensure_private_dir(dir, "the id counter directory")
                .map_err(std::io::Error::other)?;
            crate::private::remove_stale_temps(dir);
        }
        let next = match crate::special::read_to_string(path) {
            Ok(text) => text.trim().parse::<u64>().map_err(|_| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "{} holds {:?}, not a number: remove it only if no client holds an id from before",
                        path.display(),
                        text.trim()
                    ),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
            Err(e) => return Err(e),
        };
        let counter = IdCounter {
            path: Some(path.to_path_buf()),
            state: Mutex::new(Block {
                next: next.max(1),
                end: next.max(1),
            }),
        };
        Ok(counter)
    }

    /// The next id. Fails only when the counter file cannot be written, in which case no
    /// id is handed out.
    pub fn next(&self) -> std::io::Result<u64> {
        let mut block = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if block.next >= block.end
            && let Some(path) = &self.path
        {
            let end = block.next.saturating_add(BLOCK);
            crate::private::write_private_file(
                path,
                end.to_string().as_bytes(),
                "the id counter",
                crate::private::Durability::Synced,
            )
            .map_err(std::io::Error::other)?;
            block.end = end;
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

impl Drop for IdCounter {
    /// A clean stop: the ids of the block not handed out are given back (see the module doc).
    fn drop(&mut self) {
        let Some(path) = &self.path else { return };
        let block = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if block.next >= block.end {
            return;
        }
        // Only while the file still holds this counter's reservation: never below an end
        // another counter on the same file wrote.
        let held = crate::special::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok());
        if held != Some(block.end) {
            return;
        }
        if let Err(e) = crate::private::write_private_file(
            path,
            block.next.to_string().as_bytes(),
            "the id counter",
            crate::private::Durability::Synced,
        ) {
            tracing::warn!(path = %path.display(), error = %e, "could not give back the unused ids");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_never_repeat_across_reopen_even_mid_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ids/processes");
        let a = IdCounter::open(&path).unwrap();
        let first: Vec<u64> = (0..3).map(|_| a.next().unwrap()).collect();
        assert_eq!(first, [1, 2, 3]);
        // A crash: the counter is never dropped (the process dies), the next daemon
        // reopens it and goes on past the block.
        std::mem::forget(a);
        let b = IdCounter::open(&path).unwrap();
        let next = b.next().unwrap();
        assert!(
            next > 3,
            "id {next} repeats one handed out before the restart"
        );
        // Past a block boundary too.
        let many: Vec<u64> = (0..200).map(|_| b.next().unwrap()).collect();
        drop(b);
        let c = IdCounter::open(&path).unwrap();
        assert!(c.next().unwrap() > *many.last().unwrap());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_clean_stop_gives_the_rest_of_the_block_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jobs");
        let a = IdCounter::open(&path).unwrap();
        assert_eq!(a.next().unwrap(), 1);
        drop(a);
        let b = IdCounter::open(&path).unwrap();
        assert_eq!(b.next().unwrap(), 2, "the next id, not one a block further");
        // Another counter reserved past this one's block: nothing is written back over it.
        let c = IdCounter::open(&path).unwrap();
        let from_c = c.next().unwrap();
        drop(b);
        drop(c);
        let d = IdCounter::open(&path).unwrap();
        assert!(d.next().unwrap() > from_c);
    }

    #[test]
    fn a_corrupt_counter_is_an_error_not_a_restart_from_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n");
        std::fs::write(&path, "garbage").unwrap();
        let err = IdCounter::open(&path).unwrap_err();
        assert!(err.to_string().contains("not a number"), "{err}");
    }

    #[test]
    fn in_memory_counts_from_one() {
        let c = IdCounter::in_memory();
        assert_eq!((c.next().unwrap(), c.next().unwrap()), (1, 2));
    }

    /// A FIFO in the counter's place (a `bash` call can make one) is an error naming it, at
    /// once: the old code opened it and the daemon never finished starting.
    #[test]
    fn a_fifo_in_place_of_the_counter_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("processes");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(IdCounter::open(&path).map(drop));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("opening the counter waited on the FIFO");
        let e = got.expect_err("a FIFO was read as the counter");
        assert_eq!(
            crate::special::not_regular(&e),
            Some("a FIFO (named pipe)"),
            "{e}"
        );
    }
}
