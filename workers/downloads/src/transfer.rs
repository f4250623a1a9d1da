//! One file's transfer: resume from its `.part` file with HTTP `Range`, hash every byte (the
//! prefix already on disk first), verify sha256 (the size where the listing gives no hash),
//! then rename the `.part` over the file's name. A transient failure (5xx, a cut connection, a
//! bad hash) is retried with backoff by the caller.
//!
//! The bytes take three paths at once, so the network is never waiting for the disk or the
//! hash: this task receives the body and copies it into blocks of [`BLOCK`] bytes, each
//! passed, shared, to a writer thread (appends it to the `.part` file) and a hasher thread
//! (sha256). The blocks are a pool of [`BLOCKS`] buffers used over and over (warm in the
//! cache, never faulted in again), which also bounds what is in flight; a block goes out when
//! it is full or when the network has nothing more at the moment, so a slow download's bytes
//! reach the disk as they come. The `.part` file is locked (`flock`) while a transfer owns it,
//! so a transfer stopped by a cancel, whose writer is still writing what it had, and the next
//! transfer of the same file never write it at once.
//!
//! A file is renamed to its name only after its sha256 (or its size, where none is listed) matched,
//! so a file in place is verified and never fetched again; the bytes in flight live in its `.part`
//! file, and a resumed transfer (a retry, a cancel then a new start, a daemon restart) asks for the
//! rest by `Range`, hashing the prefix on disk first. Writeback starts early: every 16 MiB written
//! is handed to the disk (`posix_fadvise` `DONTNEED`), so the sync before the rename is short.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::choose::Chosen;
use crate::error::DownloadError;
use crate::hex;
use crate::hub::{Hub, RateFloor};
use crate::partial::part_path;
use crate::progress::{FileProgress, FileState};

/// The size of a block of the body.
const BLOCK: usize = 1 << 20;
/// Blocks per transfer: at most this many bytes received but not yet written and hashed.
const BLOCKS: usize = 8;
/// Written bytes handed to the disk's writeback at a time.
const WRITEBACK: u64 = 16 << 20;
/// The buffer the prefix on disk is read with when a transfer resumes.
const READ_BUF: usize = 4 << 20;

/// A block of the body, shared by the writer and the hasher; its buffer goes back to the pool
/// when both are done with it.
struct Piece {
    bytes: Vec<u8>,
    home: mpsc::UnboundedSender<Vec<u8>>,
}

impl Drop for Piece {
    fn drop(&mut self) {
        let _ = self.home.send(std::mem::take(&mut self.bytes));
    }
}

/// The blocks of one transfer: a free list, and the block being filled.
struct Blocks {
    free: mpsc::UnboundedReceiver<Vec<u8>>,
    home: mpsc::UnboundedSender<Vec<u8>>,
    filling: Vec<u8>,
}

impl Blocks {
    fn new() -> Blocks {
        let (home, free) = mpsc::unbounded_channel();
        for _ in 1..BLOCKS {
            let _ = home.send(Vec::new());
        }
        Blocks {
            free,
            home,
            filling: Vec::with_capacity(BLOCK),
        }
    }

    /// Send the block being filled to the writer and the hasher (nothing when it is empty),
    /// then wait for a free one. `false` when either has gone (the writer failed).
    async fn send(
        &mut self,
        writer: &mpsc::Sender<Arc<Piece>>,
        hasher: &mpsc::Sender<Arc<Piece>>,
    ) -> bool {
        if self.filling.is_empty() {
            return true;
        }
        let Some(mut next) = self.free.recv().await else {
            return false;
        };
        next.clear();
        next.reserve_exact(BLOCK);
        let piece = Arc::new(Piece {
            bytes: std::mem::replace(&mut self.filling, next),
            home: self.home.clone(),
        });
        writer.send(piece.clone()).await.is_ok() && hasher.send(piece).await.is_ok()
    }
}

/// Run `f` on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, DownloadError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| DownloadError::Http {
            what: "a file transfer".into(),
            cause: format!("its blocking task ended: {e}"),
            transient: true,
        })
}

/// The `.part` file, opened (never through a symlink) and locked for this transfer.
pub(crate) fn open_part(part: &Path) -> Result<Flock<File>, DownloadError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(part)
        .map_err(|e| DownloadError::io("cannot open", part, e))?;
    Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| DownloadError::io("cannot lock", part, e))
}

/// The sha256 state after the first `len` bytes of `file`.
fn hash_prefix(file: &mut File, len: u64, part: &Path) -> Result<Sha256, DownloadError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut left = len;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| DownloadError::io("cannot seek", part, e))?;
    while left > 0 {
        let n = file
            .read(&mut buf[..(left.min(READ_BUF as u64) as usize)])
            .map_err(|e| DownloadError::io("cannot read", part, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(hasher)
}

/// Empties the `.part` file (the endpoint does not continue it).
async fn truncate(
    file: Flock<File>,
    part: &Path,
    progress: &FileProgress,
) -> Result<Flock<File>, DownloadError> {
    let p = part.to_path_buf();
    let file = blocking(move || file.set_len(0).map(|()| file))
        .await?
        .map_err(|e| DownloadError::io("cannot truncate", &p, e))?;
    progress.done.store(0, Ordering::Relaxed);
    Ok(file)
}

/// Tells a writer still draining after its transfer was dropped (a cancel) to stop.
struct StopWriter {
    stop: Arc<AtomicBool>,
    armed: bool,
}

impl Drop for StopWriter {
    fn drop(&mut self) {
        if self.armed {
            self.stop.store(true, Ordering::SeqCst);
        }
    }
}

/// What the writer thread ends with: the file back, and the first write error.
type Written = (Flock<File>, Option<std::io::Error>);

/// Append every piece to `file` from `at` on, counting each in `progress` once written.
fn write_pieces(
    mut file: Flock<File>,
    at: u64,
    mut pieces: mpsc::Receiver<Arc<Piece>>,
    progress: Arc<FileProgress>,
    stop: Arc<AtomicBool>,
) -> Written {
    if let Err(e) = file.seek(SeekFrom::Start(at)) {
        return (file, Some(e));
    }
    let (mut at, mut flushed) = (at, at);
    while let Some(piece) = pieces.blocking_recv() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if let Err(e) = file.write_all(&piece.bytes) {
            return (file, Some(e));
        }
        at += piece.bytes.len() as u64;
        progress.add(piece.bytes.len() as u64);
        // Start writing what came to the disk now, in the background, so the sync before the
        // rename has little left to wait for (the kernel would otherwise hold gigabytes dirty).
        // For dirty pages `DONTNEED` is that and no more: they stay cached.
        if at - flushed >= WRITEBACK {
            let _ = nix::fcntl::posix_fadvise(
                &*file,
                flushed as i64,
                (at - flushed) as i64,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
            flushed = at;
        }
    }
    (file, None)
}

fn hash_pieces(mut hasher: Sha256, mut pieces: mpsc::Receiver<Arc<Piece>>) -> Sha256 {
    while let Some(piece) = pieces.blocking_recv() {
        hasher.update(&piece.bytes);
    }
    hasher
}

/// One attempt at one file over one connection, resuming its `.part` by `Range`.
pub(crate) async fn one_connection(
    hub: &Hub,
    repo: &str,
    revision: &str,
    dir: &Path,
    progress: &Arc<FileProgress>,
) -> Result<(), DownloadError> {
    let started = std::time::Instant::now();
    let file = &progress.file;
    let final_path = dir.join(&file.name);
    let part: PathBuf = part_path(dir, &file.name);
    // Open, lock, and hash what is on disk already (a resumed transfer).
    let mut held = resume(&part, progress).await?;
    progress.done.store(held.have, Ordering::Relaxed);
    if held.have < file.size {
        progress.set_state(FileState::Downloading);
        let mut resp = hub.file(repo, revision, &file.name, held.have).await?;
        held = meet_answer(&resp, held, &part, progress).await?;
        held = receive(hub, &mut resp, held, &part, progress).await?;
    }
    progress.set_state(FileState::Verifying);
    let received = started.elapsed();
    let p = part.clone();
    let Held {
        file: out, hasher, ..
    } = held;
    blocking(move || out.sync_data())
        .await?
        .map_err(|e| DownloadError::io("cannot sync", &p, e))?;
    tracing::debug!(
        file = file.name,
        bytes = file.size,
        received_ms = received.as_millis() as u64,
        synced_ms = (started.elapsed() - received).as_millis() as u64,
        "file transferred"
    );
    if let Some(expected) = &file.sha256 {
        let got = hex(&hasher.finalize());
        if &got != expected {
            let _ = tokio::fs::remove_file(&part).await;
            progress.done.store(0, Ordering::Relaxed);
            return Err(hash_mismatch(&file.name, &got, expected));
        }
    }
    into_place(&part, &final_path, progress).await
}

/// A locked `.part` file and what it holds: its length and the sha256 state of its bytes.
struct Held {
    file: Flock<File>,
    have: u64,
    hasher: Sha256,
}

/// The `.part` file opened and locked, and what is on disk already hashed (emptied when
/// longer than the file).
async fn resume(part: &Path, progress: &Arc<FileProgress>) -> Result<Held, DownloadError> {
    let (size, listed_sha) = (progress.file.size, progress.file.sha256.clone());
    let p = part.to_path_buf();
    let show = progress.clone();
    blocking(move || {
        let out = open_part(&p)?;
        let mut have = out
            .metadata()
            .map_err(|e| DownloadError::io("cannot stat", &p, e))?
            .len();
        if have > size {
            out.set_len(0)
                .map_err(|e| DownloadError::io("cannot truncate", &p, e))?;
            have = 0;
        }
        let mut out = out;
        let hasher = if have > 0 && listed_sha.is_some() {
            show.set_state(FileState::Verifying);
            hash_prefix(&mut out, have, &p)?
        } else {
            Sha256::new()
        };
        Ok::<_, DownloadError>(Held {
            file: out,
            have,
            hasher,
        })
    })
    .await?
}

/// What the endpoint's answer leaves of the `.part`: all of it when the range fits, nothing
/// when the answer is the whole file; a range that does not fit empties it and fails.
async fn meet_answer(
    resp: &reqwest::Response,
    held: Held,
    part: &Path,
    progress: &FileProgress,
) -> Result<Held, DownloadError> {
    let have = held.have;
    let name = &progress.file.name;
    match resp.status().as_u16() {
        206 => {
            // The part must start where ours ends, or the bytes would land in the wrong
            // place (a file listed without a hash would not notice).
            if range_start(resp) != Some(have) {
                truncate(held.file, part, progress).await?;
                return Err(DownloadError::Http {
                    what: name.clone(),
                    cause: format!(
                        "the endpoint answered the range from byte {have} with {:?}; fetching it again from the start",
                        resp.headers().get(reqwest::header::CONTENT_RANGE)
                    ),
                    transient: true,
                });
            }
            Ok(held)
        }
        416 => {
            // The endpoint does not take our offset: start the file again.
            truncate(held.file, part, progress).await?;
            Err(DownloadError::Http {
                what: name.clone(),
                cause: format!(
                    "the endpoint refused the range from byte {have}; fetching it again from the start"
                ),
                transient: true,
            })
        }
        _ => {
            // A whole answer (200): the range was ignored, so the file starts over.
            if have > 0 {
                return Ok(Held {
                    file: truncate(held.file, part, progress).await?,
                    hasher: Sha256::new(),
                    have: 0,
                });
            }
            Ok(held)
        }
    }
}

/// Receives the body into the `.part` after what it holds, through the writer and hasher
/// threads; the file back with its bytes hashed once every listed byte came.
async fn receive(
    hub: &Hub,
    resp: &mut reqwest::Response,
    held: Held,
    part: &Path,
    progress: &Arc<FileProgress>,
) -> Result<Held, DownloadError> {
    let file = &progress.file;
    let Held {
        file: out,
        have,
        hasher,
    } = held;
    let (to_writer, for_writer) = mpsc::channel::<Arc<Piece>>(BLOCKS);
    let (to_hasher, for_hasher) = mpsc::channel::<Arc<Piece>>(BLOCKS);
    let stop = Arc::new(AtomicBool::new(false));
    let mut stop_on_drop = StopWriter {
        stop: stop.clone(),
        armed: true,
    };
    let writer = {
        let (progress, stop) = (progress.clone(), stop.clone());
        tokio::task::spawn_blocking(move || write_pieces(out, have, for_writer, progress, stop))
    };
    let hashing = tokio::task::spawn_blocking(move || hash_pieces(hasher, for_hasher));
    let mut blocks = Blocks::new();
    let mut got = have;
    let floor = hub.rate_floor();
    let result = pump(
        resp,
        &mut blocks,
        &to_writer,
        &to_hasher,
        floor,
        &mut got,
        file,
    )
    .await;
    // A body longer than listed is not written at all (its file is dropped below).
    if !matches!(result, Err(DownloadError::Verify { .. })) {
        blocks.send(&to_writer, &to_hasher).await;
    }
    // What arrived is written either way: the next attempt resumes after it.
    drop((to_writer, to_hasher));
    let (file_back, write_error) = writer.await.map_err(|e| DownloadError::Http {
        what: file.name.clone(),
        cause: format!("its writer ended: {e}"),
        transient: true,
    })?;
    stop_on_drop.armed = false;
    let digest = hashing.await.map_err(|e| DownloadError::Http {
        what: file.name.clone(),
        cause: format!("its hasher ended: {e}"),
        transient: true,
    })?;
    if let Some(e) = write_error {
        return Err(DownloadError::io("cannot write", part, e));
    }
    if let Err(e) = result {
        if matches!(e, DownloadError::Verify { .. }) {
            let _ = tokio::fs::remove_file(part).await;
            progress.done.store(0, Ordering::Relaxed);
        }
        return Err(e);
    }
    if got < file.size {
        return Err(DownloadError::Http {
            what: file.name.clone(),
            cause: format!("the connection closed after {got} of {} bytes", file.size),
            transient: true,
        });
    }
    Ok(Held {
        file: file_back,
        have: got,
        hasher: digest,
    })
}

/// Copies the body into blocks for the writer and the hasher until it ends, breaks, runs
/// too slow or past the listed size, or they go (`Ok`: the writer says why); `got` counts it.
async fn pump(
    resp: &mut reqwest::Response,
    blocks: &mut Blocks,
    to_writer: &mpsc::Sender<Arc<Piece>>,
    to_hasher: &mpsc::Sender<Arc<Piece>>,
    mut floor: RateFloor,
    got: &mut u64,
    file: &Chosen,
) -> Result<(), DownloadError> {
    loop {
        // What has come is sent on before waiting for more: a slow download's bytes reach
        // the disk as they arrive, a fast one's in whole blocks.
        let next = resp.chunk();
        tokio::pin!(next);
        let chunk = match std::future::poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await {
            Poll::Ready(c) => c,
            Poll::Pending => {
                if !blocks.send(to_writer, to_hasher).await {
                    break Ok(());
                }
                next.await
            }
        };
        match chunk {
            Ok(Some(chunk)) => {
                if *got + chunk.len() as u64 > file.size {
                    break Err(DownloadError::Verify {
                        file: file.name.clone(),
                        cause: format!(
                            "the endpoint sent more than the listed {} bytes",
                            file.size
                        ),
                    });
                }
                *got += chunk.len() as u64;
                let slow = floor.add(chunk.len());
                // A closed queue is a writer that stopped on an error: it says which below.
                if !fill(blocks, &chunk, to_writer, to_hasher).await {
                    break Ok(());
                }
                // Too slow: cut like a stall; what came is kept, the retry asks for the rest.
                if let Err(why) = slow {
                    break Err(DownloadError::Http {
                        what: file.name.clone(),
                        cause: format!(
                            "the transfer was cut after {got} of {} bytes: {why}",
                            file.size
                        ),
                        transient: true,
                    });
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => {
                break Err(DownloadError::Http {
                    what: file.name.clone(),
                    cause: format!(
                        "the transfer broke after {got} of {} bytes: {}",
                        file.size,
                        crate::hub::body_error(&e)
                    ),
                    transient: true,
                });
            }
        }
    }
}

/// Copies `chunk` into the blocks, sending each one it fills; `false` when the writer or
/// the hasher has gone.
async fn fill(
    blocks: &mut Blocks,
    chunk: &[u8],
    to_writer: &mpsc::Sender<Arc<Piece>>,
    to_hasher: &mpsc::Sender<Arc<Piece>>,
) -> bool {
    let mut rest = chunk;
    while !rest.is_empty() {
        let room = BLOCK - blocks.filling.len();
        let (now, later) = rest.split_at(room.min(rest.len()));
        blocks.filling.extend_from_slice(now);
        rest = later;
        if blocks.filling.len() == BLOCK && !blocks.send(to_writer, to_hasher).await {
            return false;
        }
    }
    true
}

/// Where a `206` answer's `Content-Range` (`bytes S-E/N`) says its bytes start.
pub(crate) fn range_start(resp: &reqwest::Response) -> Option<u64> {
    resp.headers()
        .get(reqwest::header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes "))
        .and_then(|v| v.split('-').next())
        .and_then(|v| v.trim().parse::<u64>().ok())
}

/// A file whose sha256 is not the listed one (the caller has dropped its `.part`).
pub(crate) fn hash_mismatch(name: &str, got: &str, expected: &str) -> DownloadError {
    DownloadError::Verify {
        file: name.to_string(),
        cause: format!("sha256 {got} does not match the listed {expected}"),
    }
}

/// Rename a verified `.part` file over its name, make the rename durable, and count its
/// bytes. The file is shown `done` only once its verification is in the manifest
/// (`Downloads::run`), so a daemon killed in between finds it in place without a record and
/// hashes it again rather than showing it done and fetching it again.
pub(crate) async fn into_place(
    part: &Path,
    final_path: &Path,
    progress: &FileProgress,
) -> Result<(), DownloadError> {
    tokio::fs::rename(part, final_path)
        .await
        .map_err(|e| DownloadError::io("cannot rename into place", final_path, e))?;
    if let Some(parent) = final_path.parent()
        && let Ok(d) = std::fs::File::open(parent)
    {
        let _ = d.sync_all();
    }
    progress.done.store(progress.file.size, Ordering::Relaxed);
    Ok(())
}
