//! The one rule for reading an original, at start and live alike: the data hub follows no
//! symbolic link and reads nothing but a regular file inside its collection's real root.
//!
//! An original is opened once, `O_NOFOLLOW | O_NONBLOCK`, and judged on the descriptor: a
//! link as its last component fails the open (`ELOOP`); what the descriptor really is
//! (`/proc/self/fd/N`) must be the real root joined with the original's path below the
//! configured root, so a link anywhere on the way (a linked directory, a root swapped for a
//! link) is seen; and `fstat` must say a regular file (a FIFO, socket or device is never
//! read, and `O_NONBLOCK` keeps a FIFO's open from waiting for a writer). The bytes are read
//! from that descriptor, never by the path again.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::libc;

/// Why an original was not read.
#[derive(Debug)]
pub enum NotRead {
    /// A symbolic link is on its path (or is the original itself): never followed.
    Link,
    /// Not a regular file: what it is.
    Special(&'static str),
    /// The open or the read failed.
    Io(std::io::Error),
}

impl NotRead {
    /// In words, for a warning or an error.
    pub fn why(&self) -> String {
        match self {
            NotRead::Link => "a symbolic link (or reached through one): the data hub follows no links, so it is not indexed; put the file itself in the collection".into(),
            NotRead::Special(kind) => format!("{kind}, not a regular file: not indexed"),
            NotRead::Io(e) => e.to_string(),
        }
    }
}

/// An original opened under the rule: its descriptor and what `fstat` said of it.
pub struct Opened {
    pub file: File,
    pub meta: Metadata,
}

impl Opened {
    /// Its bytes, at most `max` (read from the descriptor).
    pub fn read(mut self, max: u64) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        (&mut self.file).take(max).read_to_end(&mut bytes)?;
        Ok(bytes)
    }
}

/// A folder of originals: as configured (the documents' keys are paths under it) and its
/// real, link-free form.
#[derive(Clone, Debug)]
pub struct Root {
    pub configured: PathBuf,
    pub real: PathBuf,
}

impl Root {
    /// `None` when the folder does not exist (yet).
    pub fn of(configured: &Path) -> Option<Root> {
        Some(Root {
            configured: configured.to_path_buf(),
            real: real_root(configured)?,
        })
    }

    /// Open `path`, an original under this root ([`open`]).
    pub fn open(&self, path: &Path) -> Result<Opened, NotRead> {
        open(&self.configured, &self.real, path)
    }
}

/// Open `path`, an original under the collection root `root` as configured, whose real
/// (link-free) form is `real_root`.
pub fn open(root: &Path, real_root: &Path, path: &Path) -> Result<Opened, NotRead> {
    let below = path.strip_prefix(root).map_err(|_| NotRead::Link)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                NotRead::Link
            } else {
                NotRead::Io(e)
            }
        })?;
    let meta = file.metadata().map_err(NotRead::Io)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(NotRead::Special(
            toolvisor_kit::special::kind_of(kind).unwrap_or(if kind.is_dir() {
                "a directory"
            } else {
                "a special file"
            }),
        ));
    }
    let really = real_path_of(&file).map_err(NotRead::Io)?;
    if really != real_root.join(below) {
        return Err(NotRead::Link);
    }
    Ok(Opened { file, meta })
}

/// The real form of a collection's root as configured (`None` when it does not exist).
pub fn real_root(root: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(root).ok()
}

/// What an open descriptor really is, as the kernel names it.
fn real_path_of(file: &File) -> std::io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_file_or_directory_a_fifo_and_a_path_outside_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("docs");
        let secret = dir.path().join("hr");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("salaries.md"), "secret").unwrap();
        std::fs::write(root.join("sub/a.md"), "open").unwrap();
        let real = real_root(&root).unwrap();

        let ok = open(&root, &real, &root.join("sub/a.md")).unwrap();
        assert_eq!(ok.read(1 << 20).unwrap(), b"open");

        symlink(secret.join("salaries.md"), root.join("pay.md")).unwrap();
        assert!(matches!(
            open(&root, &real, &root.join("pay.md")),
            Err(NotRead::Link)
        ));
        symlink(&secret, root.join("linked")).unwrap();
        assert!(matches!(
            open(&root, &real, &root.join("linked/salaries.md")),
            Err(NotRead::Link)
        ));
        // A link inside the root to another original is not followed either.
        symlink(root.join("sub/a.md"), root.join("again.md")).unwrap();
        assert!(matches!(
            open(&root, &real, &root.join("again.md")),
            Err(NotRead::Link)
        ));
        nix::unistd::mkfifo(&root.join("pipe.md"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        match open(&root, &real, &root.join("pipe.md")) {
            Err(NotRead::Special(kind)) => assert!(kind.contains("FIFO")),
            Err(e) => panic!("{}", e.why()),
            Ok(_) => panic!("a FIFO was opened"),
        }
        assert!(matches!(
            open(&root, &real, &secret.join("salaries.md")),
            Err(NotRead::Link)
        ));
    }
}
