//! The real location of a path: symbolic links of its existing part resolved by the kernel,
//! the part that does not exist yet appended. What `Scope` checks a path by, and what
//! `Protected` keeps its locations as.

use std::path::{Component, Path, PathBuf};

/// The real path of `path`: symlinks of the existing part resolved by the kernel, the part
/// that does not exist yet appended (`..` in it applied lexically: it cannot be a symlink).
pub(crate) fn real_path(path: &Path) -> std::io::Result<PathBuf> {
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
