//! Path confinement: every path a file tool touches is resolved against the run's workdir,
//! symlinks included, and refused when its real location is outside the allowed roots.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

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
    /// Real paths of extra roots readable (and searchable) but never written.
    read_roots: Vec<PathBuf>,
    allow_outside: bool,
}

/// A path after resolution: the real path to use and the one to show.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub real: PathBuf,
    pub display: String,
}

impl Scope {
    /// `workdir` must be an existing absolute directory. Read roots that do not exist are
    /// skipped (they may appear later; a missing one confines nothing).
    pub fn new(workdir: &Path, read_roots: &[PathBuf], allow_outside: bool) -> Result<Scope> {
        let root = workdir
            .canonicalize()
            .map_err(|e| Error::io(workdir.display().to_string(), "resolve the workdir", e))?;
        let read_roots = read_roots
            .iter()
            .filter_map(|r| expand_home(r).canonicalize().ok())
            .collect();
        Ok(Scope {
            workdir: workdir.to_path_buf(),
            root,
            read_roots,
            allow_outside,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
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
                        .map(|r| r.display().to_string())
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
        let display = self.display(&real);
        Ok(Resolved { real, display })
    }

    fn allows(&self, real: &Path, access: Access) -> bool {
        if self.allow_outside || real.starts_with(&self.root) {
            return true;
        }
        access == Access::Read && self.read_roots.iter().any(|r| real.starts_with(r))
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

fn expand_home(path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty())
    {
        return PathBuf::from(home).join(rest);
    }
    path.to_path_buf()
}

/// The real path of `path`: symlinks of the existing part resolved by the kernel, the part
/// that does not exist yet appended (`..` in it applied lexically: it cannot be a symlink).
fn real_path(path: &Path) -> std::io::Result<PathBuf> {
    match path.canonicalize() {
        Ok(real) => return Ok(real),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        Err(_) => {}
    }
    // A dangling symlink: resolve where it points, so writing through it cannot escape.
    if let Ok(target) = std::fs::read_link(path) {
        let parent = path.parent().unwrap_or(Path::new("/"));
        let next = if target.is_absolute() {
            target
        } else {
            parent.join(target)
        };
        if next != path {
            return real_path_depth(&next, 1);
        }
    }
    let mut missing = Vec::new();
    let mut cur = path.to_path_buf();
    // Up to `/` or a trailing `..`; then normalise lexically from there.
    while let Some(name) = cur.file_name().map(|n| n.to_os_string()) {
        missing.push(name);
        if !cur.pop() {
            break;
        }
        match cur.canonicalize() {
            Ok(real) => {
                let mut out = real;
                for part in missing.iter().rev() {
                    push_lexical(&mut out, Path::new(part));
                }
                return Ok(out);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        }
    }
    // Nothing exists on the way up (or the path has `..` right after missing parts).
    let mut out = PathBuf::from("/");
    push_lexical(&mut out, path);
    Ok(out)
}

fn real_path_depth(path: &Path, depth: u32) -> std::io::Result<PathBuf> {
    if depth > 40 {
        return Err(std::io::Error::other("too many levels of symbolic links"));
    }
    match path.canonicalize() {
        Ok(real) => Ok(real),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        Err(_) => match std::fs::read_link(path) {
            Ok(target) => {
                let parent = path.parent().unwrap_or(Path::new("/"));
                let next = if target.is_absolute() {
                    target
                } else {
                    parent.join(target)
                };
                real_path_depth(&next, depth + 1)
            }
            Err(_) => real_path(path),
        },
    }
}

fn push_lexical(out: &mut PathBuf, rest: &Path) {
    for c in rest.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            Component::Normal(n) => out.push(n),
        }
    }
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
        assert!(s.resolve(&p, Access::Read).is_ok());
        assert!(matches!(
            s.resolve(&p, Access::Write),
            Err(Error::Outside { .. })
        ));
        let open = Scope::new(dir.path(), &[], true).unwrap();
        assert!(open.resolve("/etc/hostname", Access::Write).is_ok());
    }
}
