//! Private scratch directories: a child's `TMPDIR`, removed once the child is reaped.
//!
//! Language servers leave their temporary files behind when they die by a signal: clangd's
//! `preamble-*.pch` (hundreds of KB to many MB each), pyright's and gopls's directories. A
//! daemon that kills its servers at idle, at a crash or at its own stop would fill the
//! machine's temp directory over a day. A child spawned with [`SpawnSpec::scratch`] gets a
//! directory of its own as `TMPDIR`, `<temp>/toolvisor-<uid>-scratch/<daemon pid>.<daemon
//! start time>/<label>-<n>` (each level mode 0700), which the child's waiter removes after the
//! reap, under the same rule as its spawn ledger record. What a daemon killed too hard to do
//! that leaves (its whole `<pid>.<start>` directory) is removed by the next daemon's
//! [`sweep`]: a directory whose daemon is no longer running, told by pid and start time.
//!
//! [`SpawnSpec::scratch`]: super::SpawnSpec::scratch

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use nix::unistd::geteuid;

use super::procfs::start_time;
use crate::private::ensure_private_dir;

/// The directory every daemon of this user keeps its children's scratch directories in.
pub fn base() -> PathBuf {
    std::env::temp_dir().join(format!("toolvisor-{}-scratch", geteuid().as_raw()))
}

/// This daemon's directory in [`base`]: `<pid>.<start time>`.
fn incarnation() -> PathBuf {
    let (pid, start) = super::ledger::this_process();
    base().join(format!("{pid}.{start}"))
}

/// Scratch directories made and not yet removed: a child's waiter removes its directory
/// just after the reap, so [`finish`] waits for this, not only for the reaps.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Makes a new scratch directory for the child labelled `label`.
pub(crate) fn make(label: &str) -> io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let parent = incarnation();
    for dir in [base(), parent.clone()] {
        ensure_private_dir(&dir, "a scratch directory").map_err(io::Error::other)?;
    }
    let name: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(64)
        .collect();
    let dir = parent.join(format!("{name}-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    fs::DirBuilder::new().mode(0o700).create(&dir)?;
    LIVE.fetch_add(1, Ordering::SeqCst);
    Ok(dir)
}

/// Removes `dir` and everything in it; a process of the tree still finishing a write when
/// it was killed can add a file during the removal, so it is tried a few times.
pub(crate) fn remove(dir: &Path, label: &str) {
    struct Gone;
    impl Drop for Gone {
        fn drop(&mut self) {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let _gone = Gone;
    let mut last = None;
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(100));
        }
        match fs::remove_dir_all(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => last = Some(e),
        }
    }
    if let Some(error) = last {
        tracing::warn!(label, dir = %dir.display(), %error, "cannot remove a child's scratch directory");
    }
}

/// At a clean stop, once every child is reaped: removes this daemon's directory once its
/// children's are gone (each waiter removes its child's right after the reap), waiting at
/// most `wait`; a child still dying keeps it, for the next daemon's [`sweep`].
pub fn finish(wait: Duration) {
    let deadline = std::time::Instant::now() + wait;
    while LIVE.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = fs::remove_dir(incarnation());
}

/// Removes the scratch directories of daemons that no longer run (see the module doc);
/// returns how many.
pub fn sweep() -> usize {
    let Ok(entries) = fs::read_dir(base()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(|n| n.split_once('.')) else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
            continue;
        };
        if start_time(pid) == Some(start) {
            continue;
        }
        // `remove_dir_all` does not follow symbolic links; `base` is ours and private.
        match fs::remove_dir_all(entry.path()) {
            Ok(()) => removed += 1,
            Err(error) => {
                tracing::warn!(dir = %entry.path().display(), %error, "cannot remove the scratch directory of a daemon that stopped")
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_daemons_directory_is_swept_and_a_live_ones_kept() {
        let mine = make("lsp/python:/r").unwrap();
        fs::write(mine.join("preamble-1.pch"), b"x").unwrap();
        assert!(
            mine.starts_with(incarnation())
                && mine
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("lsp-python--r-")
        );
        // A daemon that died: a pid with another start time.
        let dead = base().join(format!("{}.1", std::process::id()));
        fs::create_dir_all(dead.join("lsp-c-0")).unwrap();
        fs::write(dead.join("lsp-c-0/preamble-2.pch"), b"x").unwrap();
        assert!(sweep() >= 1);
        assert!(!dead.exists());
        assert!(
            mine.join("preamble-1.pch").exists(),
            "a live daemon's is kept"
        );
        remove(&mine, "test");
        assert!(!mine.exists());
    }
}
