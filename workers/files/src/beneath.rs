//! Opening beneath a directory handle: the kernel, not a path check done earlier, keeps an
//! open inside the directory, so a directory swapped for a symlink mid-call cannot lead out.
//!
//! Paths given here are relative and free of symlinks (the part below a root of a path that
//! `Scope::resolve` made real), so every open refuses any symlink on the way: `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` (which implies no magic links), or, on kernels
//! before 5.6 that lack `openat2`, a walk one component at a time with `O_NOFOLLOW`. Either
//! way a symlink met answers `ELOOP` and a step out answers `EXDEV`. (`openat2` blocked by a
//! seccomp filter, `EPERM` even for the root itself, counts as missing.)
//!
//! Reads go through [`open_read`], which never blocks on a special file: `O_NONBLOCK`, `fstat`,
//! refused unless regular (`toolvisor_kit::special`).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use toolvisor_kit::special;

/// Set once `openat2` answered `ENOSYS`: use the component walk from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// `openat2` answers `EAGAIN` when a rename raced the lookup; it is retried this often.
const AGAIN_RETRIES: usize = 32;

/// Whether an error from an open beneath a root means the path changed under the call: a
/// symlink where the resolved path had none (`ELOOP`), or a step out of the root (`EXDEV`).
pub fn is_escape(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == Errno::LOOP.raw_os_error() || code == Errno::XDEV.raw_os_error()
    )
}

/// Open `rel` (relative, no `..`; empty means the root itself) beneath `root` with `flags`
/// (`O_CLOEXEC` is added), refusing every symlink on the way.
pub fn open(root: BorrowedFd<'_>, rel: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::CLOEXEC;
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..AGAIN_RETRIES {
            match rustix::fs::openat2(root, rel, flags, mode, how) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                // Older seccomp filters (containers) answer EPERM for syscalls they do not
                // know: when even opening the root itself is refused, `openat2` is blocked.
                Err(Errno::PERM) if !openat2_works(root) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                    break;
                }
                other => return other.map_err(io::Error::from),
            }
        }
        if !NO_OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN.into());
        }
    }
    open_walk(root, rel, flags, mode)
}

/// Open `rel` beneath `root` for reading (see [`open`]) without blocking on a special file:
/// a FIFO, socket or device is refused (`toolvisor_kit::special::NotRegular`, naming its
/// type), a directory too unless `dirs`; a regular file comes back with `O_NONBLOCK` cleared.
pub fn open_read(root: BorrowedFd<'_>, rel: &Path, dirs: bool) -> io::Result<File> {
    match open(root, rel, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()) {
        Ok(fd) => special::checked(File::from(fd), dirs),
        Err(e) => Err(special::name_enxio(e, || {
            let fd = open(root, rel, OFlags::PATH, Mode::empty()).ok()?;
            Some(File::from(fd).metadata().ok()?.file_type())
        })),
    }
}

fn openat2_works(root: BorrowedFd<'_>) -> bool {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    rustix::fs::openat2(root, ".", flags, Mode::empty(), ResolveFlags::BENEATH).is_ok()
}

/// The fallback of [`open`]: one `openat` per component, none following a symlink.
pub(crate) fn open_walk(
    root: BorrowedFd<'_>,
    rel: &Path,
    flags: OFlags,
    mode: Mode,
) -> io::Result<OwnedFd> {
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            // Resolved paths have neither; anything else would step out.
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Errno::XDEV.into());
            }
        }
    }
    let Some((last, dirs)) = names.split_last() else {
        return Ok(rustix::fs::openat(
            root,
            ".",
            flags | OFlags::CLOEXEC,
            mode,
        )?);
    };
    let mut cur: Option<OwnedFd> = None;
    for name in dirs {
        let at = cur.as_ref().map_or(root, |fd| fd.as_fd());
        let fd = rustix::fs::openat(
            at,
            *name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) {
            FileType::Directory => {}
            FileType::Symlink => return Err(Errno::LOOP.into()),
            _ => return Err(Errno::NOTDIR.into()),
        }
        cur = Some(fd);
    }
    let at = cur.as_ref().map_or(root, |fd| fd.as_fd());
    let fd = rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode)?;
    // `O_PATH | O_NOFOLLOW` opens a symlink itself instead of failing: refuse it here.
    if flags.contains(OFlags::PATH)
        && FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) == FileType::Symlink
    {
        return Err(Errno::LOOP.into());
    }
    Ok(fd)
}

/// Open the directory `rel` beneath `root` for `*at` calls, creating what is missing of it
/// (mode 0777 less the umask), each directory made beneath the one before.
pub fn create_dirs(root: BorrowedFd<'_>, rel: &Path) -> io::Result<OwnedFd> {
    let dir = OFlags::RDONLY | OFlags::DIRECTORY;
    match open(root, rel, dir, Mode::empty()) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let mut cur = open(root, Path::new(""), dir, Mode::empty())?;
    for c in rel.components() {
        let Component::Normal(name) = c else {
            if c == Component::CurDir {
                continue;
            }
            return Err(Errno::XDEV.into());
        };
        let step = Path::new(name);
        cur = match open(cur.as_fd(), step, dir, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open(cur.as_fd(), step, dir, Mode::empty())?
            }
            Err(e) => return Err(e),
        };
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, OwnedFd) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("root/a/b")).unwrap();
        std::fs::create_dir_all(d.path().join("out/b")).unwrap();
        std::fs::write(d.path().join("root/a/b/f"), "in").unwrap();
        std::fs::write(d.path().join("out/b/f"), "out").unwrap();
        std::os::unix::fs::symlink(d.path().join("out"), d.path().join("root/up")).unwrap();
        std::os::unix::fs::symlink("a", d.path().join("root/rel")).unwrap();
        let root = rustix::fs::open(
            d.path().join("root"),
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        (d, root)
    }

    fn read(fd: OwnedFd) -> String {
        std::io::read_to_string(std::fs::File::from(fd)).unwrap()
    }

    #[test]
    fn both_ways_open_inside_and_refuse_every_symlink() {
        let (_d, root) = tree();
        type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> io::Result<OwnedFd>;
        for (way, open_fn) in [("openat2", open as Opener), ("walk", open_walk as Opener)] {
            let fd = open_fn(
                root.as_fd(),
                Path::new("a/b/f"),
                OFlags::RDONLY,
                Mode::empty(),
            );
            assert_eq!(read(fd.unwrap()), "in", "{way}");
            for p in ["up/b/f", "rel/b/f", "up", "../root/a/b/f"] {
                for flags in [OFlags::RDONLY, OFlags::PATH] {
                    let e = open_fn(root.as_fd(), Path::new(p), flags, Mode::empty()).unwrap_err();
                    assert!(is_escape(&e), "{way} {p} {flags:?}: {e}");
                }
            }
            let e = open_fn(
                root.as_fd(),
                Path::new("a/nope"),
                OFlags::RDONLY,
                Mode::empty(),
            );
            assert_eq!(e.unwrap_err().kind(), io::ErrorKind::NotFound, "{way}");
        }
    }

    /// Both ways, against a directory swapped for a symlink out as fast as it goes.
    #[test]
    fn both_ways_hold_against_a_swapping_directory() {
        let (d, root) = tree();
        let (dir, link) = (d.path().join("root/a"), d.path().join("root/up"));
        let stop = AtomicBool::new(false);
        type Opener = fn(BorrowedFd<'_>, &Path, OFlags, Mode) -> io::Result<OwnedFd>;
        /// Stops the swapper however the checks end, so a failed assertion fails the test
        /// instead of leaving the scope waiting for the swapper.
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let how = rustix::fs::RenameFlags::EXCHANGE;
                    rustix::fs::renameat_with(rustix::fs::CWD, &dir, rustix::fs::CWD, &link, how)
                        .unwrap();
                    std::thread::yield_now();
                }
            });
            let _stop = Stop(&stop);
            for (way, open_fn) in [("openat2", open as Opener), ("walk", open_walk as Opener)] {
                let (mut inside, mut escaped) = (0, 0);
                // At least 20,000 tries, and on until one landed while it was a directory (a
                // loaded machine may schedule the swapper so that none of the first did).
                for i in 0..400_000 {
                    if i >= 20_000 && inside > 0 {
                        break;
                    }
                    let got = open_fn(
                        root.as_fd(),
                        Path::new("a/b/f"),
                        OFlags::RDONLY,
                        Mode::empty(),
                    );
                    match got.map(read).as_deref() {
                        Ok("in") => inside += 1,
                        Ok(_) => escaped += 1,
                        Err(e) => assert!(is_escape(e), "{way}: {e}"),
                    }
                }
                assert_eq!(escaped, 0, "{way}: {inside} inside");
                assert!(inside > 0, "{way}: never opened while it was a directory");
            }
        });
    }

    #[test]
    fn create_dirs_makes_missing_dirs_and_refuses_symlinks() {
        let (d, root) = tree();
        create_dirs(root.as_fd(), Path::new("a/new/deeper")).unwrap();
        assert!(d.path().join("root/a/new/deeper").is_dir());
        let e = create_dirs(root.as_fd(), Path::new("up/b/new")).unwrap_err();
        assert!(is_escape(&e), "{e}");
        assert!(!d.path().join("out/b/new").exists());
    }
}
