//! Special files (FIFOs, sockets, devices) are never opened for their content: an `open` of a
//! FIFO for reading waits for a writer for ever, past any cancel, and holds its thread.
//!
//! Every open of a project file is made with `O_NONBLOCK` (a FIFO then opens at once, a socket
//! answers `ENXIO`), the descriptor is checked with `fstat`, and anything but a regular file
//! (or a directory, where the caller lists one) is refused with [`NotRegular`], which names
//! the file's type; `O_NONBLOCK` is cleared before the caller reads. `toolvisor-files` applies
//! this to every open beneath a root (`beneath::open_checked`); [`open_read`] is the same rule
//! for the few reads by name (`.editorconfig`, the data hub's originals, a language server's
//! project scan).

use std::fs::{File, FileType};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

/// `O_NONBLOCK`, for `OpenOptionsExt::custom_flags`.
pub const O_NONBLOCK: i32 = OFlag::O_NONBLOCK.bits();

const FIFO: &str = "a FIFO (named pipe)";
const SOCKET: &str = "a Unix socket";
const CHAR_DEVICE: &str = "a character device";
const BLOCK_DEVICE: &str = "a block device";

/// What a special file is, as an error names it; `None` for a regular file, a directory or a
/// symbolic link.
pub fn kind_of(t: FileType) -> Option<&'static str> {
    if t.is_fifo() {
        Some(FIFO)
    } else if t.is_socket() {
        Some(SOCKET)
    } else if t.is_char_device() {
        Some(CHAR_DEVICE)
    } else if t.is_block_device() {
        Some(BLOCK_DEVICE)
    } else {
        None
    }
}

/// [`kind_of`] for a `stat`'s `st_mode`.
pub fn kind_of_mode(mode: u32) -> Option<&'static str> {
    use nix::sys::stat::SFlag;
    let format = mode & SFlag::S_IFMT.bits();
    [
        (SFlag::S_IFIFO, FIFO),
        (SFlag::S_IFSOCK, SOCKET),
        (SFlag::S_IFCHR, CHAR_DEVICE),
        (SFlag::S_IFBLK, BLOCK_DEVICE),
    ]
    .into_iter()
    .find_map(|(flag, kind)| (format == flag.bits()).then_some(kind))
}

/// A special file refused: the error inside the `io::Error` an open answers (kind
/// `InvalidInput`); [`not_regular`] finds it again.
#[derive(Debug, thiserror::Error)]
#[error("{kind}, not a regular file")]
pub struct NotRegular {
    pub kind: &'static str,
}

impl NotRegular {
    pub fn io(kind: &'static str) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, NotRegular { kind })
    }
}

/// The kind of special file `e` refused (see [`NotRegular`]), if that is what it is.
pub fn not_regular(e: &io::Error) -> Option<&'static str> {
    e.get_ref()?.downcast_ref::<NotRegular>().map(|n| n.kind)
}

/// Check a file opened with `O_NONBLOCK`: a special file is refused ([`NotRegular`]), a
/// directory too unless `dirs`; otherwise `O_NONBLOCK` is cleared and the file handed back.
pub fn checked(file: File, dirs: bool) -> io::Result<File> {
    let t = file.metadata()?.file_type();
    if let Some(kind) = kind_of(t) {
        return Err(NotRegular::io(kind));
    }
    if t.is_dir() && !dirs {
        return Err(io::ErrorKind::IsADirectory.into());
    }
    let flags = OFlag::from_bits_retain(fcntl(&file, FcntlArg::F_GETFL)?);
    if flags.contains(OFlag::O_NONBLOCK) {
        fcntl(&file, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    }
    Ok(file)
}

/// An open's error `e`, named as [`NotRegular`] when it is `ENXIO` (what opening a socket
/// answers) and `kind_now` (a stat of the path, never an open) finds a special file.
pub fn name_enxio(e: io::Error, kind_now: impl FnOnce() -> Option<FileType>) -> io::Error {
    if e.raw_os_error() == Some(nix::errno::Errno::ENXIO as i32)
        && let Some(kind) = kind_now().and_then(kind_of)
    {
        return NotRegular::io(kind);
    }
    e
}

/// Open `path` by name (symbolic links followed) for reading, refusing a special file without
/// blocking on it, and a directory.
pub fn open_read(path: &Path) -> io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|e| name_enxio(e, || std::fs::metadata(path).ok().map(|m| m.file_type())))?;
    checked(file, false)
}

/// `std::fs::read_to_string` through [`open_read`].
pub fn read_to_string(path: &Path) -> io::Result<String> {
    io::read_to_string(open_read(path)?)
}

/// `std::fs::read` through [`open_read`].
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut open_read(path)?, &mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Runs `f` on a thread of its own and fails when it has not answered in `secs`: an open
    /// that blocks on a FIFO fails the test instead of hanging it.
    fn bounded<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{what} blocked"))
    }

    fn mkfifo(path: &Path) {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }

    #[test]
    fn fifos_sockets_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let sock = dir.path().join("sock");
        let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        for (path, kind) in [
            (fifo, "a FIFO (named pipe)"),
            (sock, "a Unix socket"),
            ("/dev/null".into(), "a character device"),
        ] {
            let at = path.clone();
            let e = bounded("opening a special file", move || open_read(&at)).unwrap_err();
            assert_eq!(not_regular(&e), Some(kind), "{}: {e}", path.display());
            assert_eq!(e.to_string(), format!("{kind}, not a regular file"));
            let at = path.clone();
            let e = bounded("reading a special file", move || read_to_string(&at)).unwrap_err();
            assert_eq!(not_regular(&e), Some(kind), "{}: {e}", path.display());
        }
    }

    #[test]
    fn regular_files_read_blocking_and_directories_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f.txt");
        std::fs::write(&f, "text").unwrap();
        let file = open_read(&f).unwrap();
        let flags = OFlag::from_bits_retain(fcntl(&file, FcntlArg::F_GETFL).unwrap());
        assert!(!flags.contains(OFlag::O_NONBLOCK), "O_NONBLOCK left set");
        assert_eq!(read_to_string(&f).unwrap(), "text");
        assert_eq!(read(&f).unwrap(), b"text");
        let e = open_read(dir.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory);
        let d = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open(dir.path())
            .unwrap();
        assert!(checked(d, true).is_ok());
        assert_eq!(not_regular(&io::Error::other("x")), None);
        use std::os::unix::fs::MetadataExt;
        for (p, kind) in [
            (f.as_path(), None),
            (dir.path(), None),
            (Path::new("/dev/null"), Some(CHAR_DEVICE)),
        ] {
            assert_eq!(
                kind_of_mode(std::fs::metadata(p).unwrap().mode()),
                kind,
                "{}",
                p.display()
            );
        }
    }
}
