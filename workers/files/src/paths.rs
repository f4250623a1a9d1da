//! Path confinement: every path a file tool touches is resolved against the run's workdir,
//! symlinks included, and refused when its real location is outside the allowed roots; the
//! I/O is then done beneath an open handle of the root it lies in, so a directory swapped
//! for a symlink after the check cannot lead the open outside (see `beneath`).
//!
//! A path given to a file tool is resolved to its real location (symbolic links followed) and
//! refused when that lies outside the workdir (and, for reads, the read roots) unless
//! `[files] allow_outside_workdir`; the real path is then only checked and shown, never opened by
//! name. Every open, stat, listing, temp file, rename, `mkdir` and delete is done relative to a
//! directory handle the `Scope` opened once per call on its root (the workdir or a read root), with
//! the real path's part below that root (`Resolved`, through `beneath::open`). A directory swapped
//! for a symbolic link after the check is therefore never followed: the call answers `out_of_scope`
//! (`Error::Moved`). Only `allow_outside_workdir = true` does plain path I/O.
//!
//! Every path any tool takes or produces goes through the one `Scope` of its call
//! (`Files::scope(workdir)`), with the same `out_of_scope` answer and `[files]` switches:
//! `ast_grep`, `lsp` and `synced_write` resolve their path for reading; `ast_edit`, `lsp_rename`,
//! `lsp_edit` (every file of a server's workspace edit, create, rename and delete included, before
//! anything is read or written) and `resolve accept` (every staged file again, at accept time) for
//! writing. A location outside the scope that a language server names is shown by name only: no
//! text is read from it. A walk's finds are opened with `open_found` or kept by `found_beneath`,
//! beneath the root, never by name.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use crate::beneath;
use crate::error::{Error, Result};
use crate::protect::Protected;
use crate::real::real_path;

/// What a tool does with a path: reads may reach the extra read roots, writes may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// The run's workdir and what may be reached from it.
#[derive(Clone, Debug)]
pub struct Scope {
    /// The workdir as the client gave it (absolute).
    workdir: PathBuf,
    /// Its real path.
    root: PathBuf,
    /// A handle of the workdir, opened at `root`: I/O inside it goes beneath this.
    root_fd: Arc<OwnedFd>,
    /// Real paths of extra roots readable (and searchable) but never written, with handles.
    read_roots: Vec<(PathBuf, Arc<OwnedFd>)>,
    allow_outside: bool,
    /// Locations refused and left out of walks wherever they lie, `allow_outside` or not.
    protected: Protected,
}

/// A path after resolution: the real path (for checks and display) and where its I/O goes.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub real: PathBuf,
    pub display: String,
    at: At,
}

/// Where the I/O of a resolved path is done.
#[derive(Clone, Debug)]
enum At {
    /// Beneath a root's handle, by the real path's part below that root (empty: the root).
    Beneath { root: Arc<OwnedFd>, rel: PathBuf },
    /// By the real path itself (`allow_outside_workdir`: nothing to confine).
    Path,
}

impl Scope {
    /// `workdir` must be an existing absolute directory. Read roots that do not exist are
    /// skipped (they may appear later; a missing one confines nothing).
    pub fn new(workdir: &Path, read_roots: &[PathBuf], allow_outside: bool) -> Result<Scope> {
        let root = workdir
            .canonicalize()
            .map_err(|e| Error::io(workdir.display().to_string(), "resolve the workdir", e))?;
        let root_fd = open_root(&root)
            .map_err(|e| Error::io(workdir.display().to_string(), "open the workdir", e))?;
        let read_roots = read_roots
            .iter()
            .filter_map(|r| {
                let real = expand_home(r).canonicalize().ok()?;
                let fd = open_root(&real).ok()?;
                Some((real, Arc::new(fd)))
            })
            .collect();
        Ok(Scope {
            workdir: workdir.to_path_buf(),
            root,
            root_fd: Arc::new(root_fd),
            read_roots,
            allow_outside,
            protected: Protected::default(),
        })
    }

    /// The same scope, with `paths` (absolute) and everything beneath them unreachable.
    pub fn protecting(mut self, paths: &[PathBuf]) -> Scope {
        self.protected = Protected::new(paths);
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The locations this scope refuses and leaves out of walks.
    pub fn protected(&self) -> &Protected {
        &self.protected
    }

    /// Resolve `path` (relative to the workdir, `~/` to the daemon's home) for `access`.
    pub fn resolve(&self, path: &str, access: Access) -> Result<Resolved> {
        if path.is_empty() {
            return Err(Error::bad("path", "is empty"));
        }
        if path.contains('\0') {
            return Err(Error::bad("path", "contains a NUL byte"));
        }
        let given = expand_home(Path::new(path));
        let joined = if given.is_absolute() {
            given
        } else {
            self.workdir.join(given)
        };
        let real = real_path(&joined).map_err(|e| Error::io(path, "resolve", e))?;
        if !self.allows(&real, access) {
            let allowed = match access {
                Access::Write => format!("the workdir {}", self.root.display()),
                Access::Read if self.read_roots.is_empty() => {
                    format!("the workdir {}", self.root.display())
                }
                Access::Read => format!(
                    "the workdir {} and the read roots {}",
                    self.root.display(),
                    self.read_roots
                        .iter()
                        .map(|(r, _)| r.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(Error::Outside {
                path: path.to_string(),
                real: real.display().to_string(),
                allowed,
            });
        }
        // Named as given, never by its real path: that would show where the location is.
        if self.protected.covers(&real) {
            return Err(Error::Protected {
                path: path.to_string(),
            });
        }
        let display = self.display(&real);
        let at = self.anchor(&real, access).unwrap_or(At::Path);
        Ok(Resolved { real, display, at })
    }

    fn allows(&self, real: &Path, access: Access) -> bool {
        self.allow_outside || self.anchor(real, access).is_some()
    }

    /// The root `real` lies in (the workdir, or for reads a read root) and its part below
    /// that root; `None` when it lies in none, or when nothing is confined.
    fn anchor(&self, real: &Path, access: Access) -> Option<At> {
        if self.allow_outside {
            return None;
        }
        let beneath = |root: &Path, fd: &Arc<OwnedFd>| {
            real.strip_prefix(root).ok().map(|rel| At::Beneath {
                root: fd.clone(),
                rel: rel.to_path_buf(),
            })
        };
        beneath(&self.root, &self.root_fd).or_else(|| {
            (access == Access::Read)
                .then(|| self.read_roots.iter().find_map(|(r, fd)| beneath(r, fd)))
                .flatten()
        })
    }

    /// Whether `path`, an entry a search walk found with inode `ino`, is that same entry
    /// when looked up beneath its root: false when a directory swapped for a symlink led
    /// the walk outside.
    pub fn found_beneath(&self, path: &Path, ino: Option<u64>) -> bool {
        if self.protected.covers(path) {
            return false;
        }
        match self.anchor(path, Access::Read) {
            Some(At::Beneath { root, rel }) => {
                beneath::open(root.as_fd(), &rel, OFlags::PATH, Mode::empty())
                    .and_then(|fd| Ok(rustix::fs::fstat(fd)?))
                    .is_ok_and(|st| ino.is_none_or(|ino| st.st_ino == ino))
            }
            _ => self.allow_outside,
        }
    }

    /// Open, for reading, a file a search walk found under a resolved directory: beneath the
    /// root it lies in, like every other open, so a directory swapped for a symlink while
    /// the walk ran is not followed out. A special file (FIFO, socket, device) or a directory
    /// is refused without blocking (`toolvisor_kit::special`).
    pub fn open_found(&self, path: &Path) -> std::io::Result<File> {
        if self.protected.covers(path) {
            return Err(rustix::io::Errno::ACCESS.into());
        }
        match self.anchor(path, Access::Read) {
            Some(At::Beneath { root, rel }) => beneath::open_read(root.as_fd(), &rel, false),
            _ if self.allow_outside => toolvisor_kit::special::open_read(path),
            _ => Err(rustix::io::Errno::XDEV.into()),
        }
    }

    /// How a real path is shown: relative to the workdir when inside it, else absolute.
    pub fn display(&self, real: &Path) -> String {
        match real.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => real.display().to_string(),
        }
    }
}

impl Resolved {
    /// An I/O error on this path: a symlink met, or a step out of the root, beneath a root
    /// means the path changed (a directory was swapped for a symlink) after it was checked.
    pub fn error(&self, op: &'static str, e: std::io::Error) -> Error {
        match self.at {
            At::Beneath { .. } if beneath::is_escape(&e) => Error::Moved {
                path: self.display.clone(),
            },
            _ => Error::io(&self.display, op, e),
        }
    }

    fn open_fd(&self, flags: OFlags) -> std::io::Result<OwnedFd> {
        match &self.at {
            At::Beneath { root, rel } => beneath::open(root.as_fd(), rel, flags, Mode::empty()),
            At::Path => Ok(rustix::fs::open(
                &self.real,
                flags | OFlags::CLOEXEC,
                Mode::empty(),
            )?),
        }
    }

    /// Open the file (or directory) for reading. A special file (FIFO, socket, device) is
    /// refused without blocking on it (`Error::NotRegular`, see `toolvisor_kit::special`).
    pub fn open(&self) -> Result<File> {
        let opened = match &self.at {
            At::Beneath { root, rel } => beneath::open_read(root.as_fd(), rel, true),
            At::Path => std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(toolvisor_kit::special::O_NONBLOCK)
                .open(&self.real)
                .map_err(|e| {
                    toolvisor_kit::special::name_enxio(e, || {
                        Some(std::fs::metadata(&self.real).ok()?.file_type())
                    })
                })
                .and_then(|f| toolvisor_kit::special::checked(f, true)),
        };
        opened.map_err(|e| self.error("open", e))
    }

    /// The file's metadata. The real path has no symlink; beneath a root one that appeared
    /// since is refused (`Error::Moved`), by path (`allow_outside_workdir`) it is followed.
    pub fn metadata(&self) -> Result<std::fs::Metadata> {
        self.open_fd(OFlags::PATH)
            .and_then(|fd| File::from(fd).metadata())
            .map_err(|e| self.error("stat", e))
    }

    /// The directory holding this path and the name in it, for `*at` calls; the directory
    /// and its missing ancestors are created (beneath the root) when `create` is set.
    pub(crate) fn parent(&self, create: bool) -> Result<(OwnedFd, std::ffi::OsString)> {
        let (dir, name) = match &self.at {
            At::Beneath { rel, .. } => (rel.parent(), rel.file_name()),
            At::Path => (self.real.parent(), self.real.file_name()),
        };
        let (Some(dir), Some(name)) = (dir, name) else {
            return Err(Error::IsDir {
                path: self.display.clone(),
            });
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY;
        let fd = match &self.at {
            At::Beneath { root, .. } if create => beneath::create_dirs(root.as_fd(), dir),
            At::Beneath { root, .. } => beneath::open(root.as_fd(), dir, flags, Mode::empty()),
            At::Path => (|| -> std::io::Result<OwnedFd> {
                if create {
                    std::fs::create_dir_all(dir)?;
                }
                Ok(rustix::fs::open(
                    dir,
                    flags | OFlags::CLOEXEC,
                    Mode::empty(),
                )?)
            })(),
        };
        let fd = fd.map_err(|e| match e.kind() {
            // Some ancestor is a file: name the directory that is not one.
            std::io::ErrorKind::NotADirectory => Error::NotDir {
                path: Path::new(&self.display)
                    .parent()
                    .map(|p| p.display().to_string())
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| ".".into()),
            },
            _ if create => self.error("create the parent directory", e),
            _ => self.error("open the parent directory", e),
        })?;
        Ok((fd, name.to_os_string()))
    }

    /// Delete the file (`apply_patch` deleting, or undoing a creation).
    pub fn remove_file(&self) -> Result<()> {
        let (dir, name) = self.parent(false)?;
        rustix::fs::unlinkat(&dir, name.as_os_str(), rustix::fs::AtFlags::empty())
            .map_err(|e| self.error("delete", e.into()))
    }
}

/// A handle of a root directory: what `beneath` opens under.
fn open_root(real: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        real,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn expand_home(path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty())
    {
        return PathBuf::from(home).join(rest);
    }
    path.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Scope) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.txt"), "a").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
        std::os::unix::fs::symlink("src/a.txt", root.join("inside-link")).unwrap();
        std::os::unix::fs::symlink("/nonexistent-dir/x", root.join("dangling-out")).unwrap();
        let scope = Scope::new(&root, &[], false).unwrap();
        (dir, scope)
    }

    #[test]
    fn relative_paths_resolve_inside() {
        let (_d, s) = tree();
        let r = s.resolve("src/a.txt", Access::Read).unwrap();
        assert_eq!(r.display, "src/a.txt");
        let r = s.resolve("src/../src/new/b.txt", Access::Write).unwrap();
        assert_eq!(r.display, "src/new/b.txt");
        assert_eq!(s.resolve(".", Access::Read).unwrap().display, ".");
        assert_eq!(
            s.resolve("inside-link", Access::Write).unwrap().display,
            "src/a.txt"
        );
    }

    #[test]
    fn escapes_are_refused() {
        let (_d, s) = tree();
        for p in [
            "../../etc/passwd",
            "/etc/passwd",
            "etc-link/passwd",
            "src/../../outside.txt",
            "dangling-out",
            "missing/../../../../x",
        ] {
            for access in [Access::Read, Access::Write] {
                let err = s.resolve(p, access).unwrap_err();
                assert!(matches!(err, Error::Outside { .. }), "{p}: {err}");
            }
        }
    }

    #[test]
    fn read_roots_are_readable_not_writable() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("lib.rs"), "x").unwrap();
        let s = Scope::new(dir.path(), &[other.path().to_path_buf()], false).unwrap();
        let p = other.path().join("lib.rs").display().to_string();
        let r = s.resolve(&p, Access::Read).unwrap();
        assert!(r.open().is_ok() && r.metadata().unwrap().is_file());
        assert!(matches!(
            s.resolve(&p, Access::Write),
            Err(Error::Outside { .. })
        ));
        let open = Scope::new(dir.path(), &[], true).unwrap();
        assert!(open.resolve("/etc/hostname", Access::Write).is_ok());
    }

    /// The check-then-use race with its window held open: a path checked while `d` is a
    /// directory, then `d` swapped for a symlink out before the I/O.
    #[test]
    fn a_directory_swapped_after_the_check_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (root, out) = (dir.path().join("root"), dir.path().join("out"));
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(root.join("d/f.txt"), "inside").unwrap();
        std::fs::write(out.join("f.txt"), "outside").unwrap();
        let s = Scope::new(&root, &[], false).unwrap();
        let read = s.resolve("d/f.txt", Access::Read).unwrap();
        let write = s.resolve("d/f.txt", Access::Write).unwrap();
        let create = s.resolve("d/new/g.txt", Access::Write).unwrap();
        std::fs::rename(root.join("d"), root.join("d.old")).unwrap();
        std::os::unix::fs::symlink(&out, root.join("d")).unwrap();

        let moved = |r: Result<()>| match r {
            Err(e @ Error::Moved { .. }) => {
                let t = e.to_tool_error("t");
                assert_eq!(t.kind, toolvisor_protocol::ErrorKind::OutOfScope);
                assert!(t.message.contains("d/f.txt") || t.message.contains("d/new/g.txt"));
            }
            other => panic!("not refused as moved: {other:?}"),
        };
        moved(read.open().map(drop));
        moved(read.metadata().map(drop));
        moved(crate::write::write_atomic(&write, b"escaped"));
        moved(crate::write::write_atomic(&create, b"escaped"));
        moved(write.remove_file());
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
        assert_eq!(
            std::fs::read_to_string(out.join("f.txt")).unwrap(),
            "outside"
        );
        assert!(!s.found_beneath(&root.join("d/f.txt"), None));
        assert!(s.open_found(&root.join("d/f.txt")).is_err());

        // Swapped back, the same resolved paths work again, beneath the same handle.
        std::fs::remove_file(root.join("d")).unwrap();
        std::fs::rename(root.join("d.old"), root.join("d")).unwrap();
        crate::write::write_atomic(&create, b"made").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("d/new/g.txt")).unwrap(),
            "made"
        );
        let mut body = String::new();
        std::io::Read::read_to_string(&mut read.open().unwrap(), &mut body).unwrap();
        assert_eq!(body, "inside");
    }

    /// A FIFO or socket under the root: every open for its content is refused at once, naming
    /// the type, confined or not (`allow_outside_workdir`); nothing replaces it. On the old
    /// code the open of the FIFO blocked for ever; the bound fails the test instead.
    #[test]
    fn special_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        mkfifo(&dir.path().join("pipe"));
        let _sock = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
        for allow_outside in [false, true] {
            let s = Scope::new(dir.path(), &[], allow_outside).unwrap();
            for (name, kind) in [("pipe", "a FIFO (named pipe)"), ("sock", "a Unix socket")] {
                let (s2, real) = (s.clone(), s.root().join(name));
                let (opened, found, written) = bounded(name, move || {
                    let r = s2.resolve(name, Access::Write).unwrap();
                    (
                        r.open().map(drop),
                        s2.open_found(&real).map(drop),
                        crate::write::write_atomic(&r, b"x"),
                    )
                });
                for got in [opened, written] {
                    match got {
                        Err(e @ Error::NotRegular { .. }) => {
                            let t = e.to_tool_error("read");
                            assert_eq!(t.kind, toolvisor_protocol::ErrorKind::InvalidArgs);
                            assert_eq!(
                                t.message,
                                format!("read: {name} is {kind}, not a regular file")
                            );
                            assert!(t.hint.contains("`bash`"), "{}", t.hint);
                        }
                        other => panic!("{name} ({allow_outside}): not refused: {other:?}"),
                    }
                }
                let e = found.unwrap_err();
                assert_eq!(toolvisor_kit::special::not_regular(&e), Some(kind), "{e}");
                let t = std::fs::symlink_metadata(dir.path().join(name)).unwrap();
                assert!(
                    toolvisor_kit::special::kind_of(t.file_type()).is_some(),
                    "{name} replaced"
                );
            }
        }
    }

    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", path.display());
    }

    /// `f` on a thread of its own, failing the test when it has not answered in 20 s.
    fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{what}: blocked"))
    }

    #[test]
    fn allow_outside_keeps_plain_path_io() {
        let dir = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(out.path().join("f.txt"), "outside").unwrap();
        let s = Scope::new(dir.path(), &[], true).unwrap();
        let r = s.resolve("d/f.txt", Access::Write).unwrap();
        std::fs::remove_dir(dir.path().join("d")).unwrap();
        std::os::unix::fs::symlink(out.path(), dir.path().join("d")).unwrap();
        crate::write::write_atomic(&r, b"through").unwrap();
        assert_eq!(
            std::fs::read_to_string(out.path().join("f.txt")).unwrap(),
            "through"
        );
    }
}
