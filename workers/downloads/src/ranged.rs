//! One large file over several connections at once (`[models] connections_per_file`): the
//! file is cut into byte ranges (four per connection, at least 4 MiB each), taken in file
//! order by that many workers, each range fetched by its own request (`Range: bytes=S-E`)
//! into its place in one `.part` file, so a hub that limits each connection (the Hugging Face
//! CDN does) gives the sum of the connections.
//!
//! What each range has of its bytes is recorded in a range map beside the `.part` file
//! (`<name>.part.ranges`, JSON), written only after the bytes it counts were synced: every
//! second while the ranges run, and when they stop. So a transfer stopped any way — a
//! cancel, a retry, a SIGKILL of the daemon — resumes each range where its durable bytes end,
//! and never trusts bytes the disk may not have. A range whose connection stalls (no byte for
//! `stall_timeout_s`, or fewer than `min_rate_bytes_per_s` over it), is cut or answered with a 5xx is asked for again alone, from where it
//! stopped, with backoff; the other ranges go on. A hub that ignores ranges (a whole `200`
//! answer) gets the file over one connection at once: the map goes, the `.part` is emptied.
//!
//! sha256 follows the bytes: a hasher thread reads the file back from the page cache as far
//! as the ranges are complete from its start, so when the last range lands little is left to
//! hash. The file is renamed into place only when its hash (or, unlisted, its size) matched,
//! like a one-connection transfer (`transfer.rs`).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use nix::fcntl::Flock;
use sha2::{Digest, Sha256};
use tokio::task::JoinSet;

use crate::error::DownloadError;
use crate::hex;
use crate::hub::Hub;
use crate::partial::{RangeMap, Span, map_path, part_path, read_map, write_map};
use crate::progress::{FileProgress, FileState};
use crate::transfer::{blocking, hash_mismatch, into_place, open_part, range_start};

/// Bytes a range collects before they are written at their place.
const BLOCK: usize = 1 << 20;
/// The buffer the hasher reads the file back with.
const READ_BUF: usize = 4 << 20;
/// A range is at least this long: a file is never cut into more ranges than this allows.
const MIN_SPAN: u64 = 4 << 20;
/// Ranges per connection: a file is cut finer than the connections, taken in order.
const RANGES_PER_CONNECTION: usize = 4;
/// How often the range map is brought up to date (after a sync) while ranges run.
const CHECKPOINT: Duration = Duration::from_secs(1);

/// How a file is fetched over several connections.
#[derive(Clone, Copy, Debug)]
pub struct RangedConfig {
    /// Ranges fetched at once for one file; 1 turns ranged transfers off.
    pub connections: usize,
    /// Files smaller than this go over one connection.
    pub min_bytes: u64,
    /// Tries of one range after its first, on transient errors, before the file fails.
    pub retries: u32,
}

impl RangeMap {
    /// `size` cut into `n` ranges of equal length (the last takes the rest), none shorter
    /// than [`MIN_SPAN`] unless the file is.
    fn new(size: u64, n: usize) -> RangeMap {
        let n = (n as u64).clamp(1, size.div_ceil(MIN_SPAN).max(1));
        let each = size / n;
        let ranges = (0..n)
            .map(|i| Span {
                start: i * each,
                end: if i + 1 == n { size } else { (i + 1) * each },
                done: 0,
            })
            .collect();
        RangeMap { size, ranges }
    }
}

/// Whether `file` goes over several connections: ranged transfers are on, it is large
/// enough, and it is not a one-connection transfer's `.part` to continue (one with bytes and
/// no range map).
pub(crate) fn wanted(config: &RangedConfig, dir: &Path, name: &str, size: u64) -> bool {
    if config.connections < 2 || size < config.min_bytes.max(2 * MIN_SPAN) {
        return false;
    }
    let part = part_path(dir, name);
    map_path(&part).exists() || std::fs::metadata(&part).map_or(true, |m| m.len() == 0)
}

/// One range as the transfer tracks it: `written` counts the bytes from its start that are
/// written (not yet necessarily synced).
struct Live {
    start: u64,
    end: u64,
    written: AtomicU64,
}

impl Live {
    fn complete(&self) -> bool {
        self.start + self.written.load(Ordering::Acquire) >= self.end
    }
}

/// The map as far as the ranges are written now.
fn snapshot(size: u64, spans: &[Live]) -> RangeMap {
    RangeMap {
        size,
        ranges: spans
            .iter()
            .map(|s| Span {
                start: s.start,
                end: s.end,
                done: s.written.load(Ordering::Acquire),
            })
            .collect(),
    }
}

/// Sync the file, then record what was written before the sync began.
fn checkpoint(file: &File, part: &Path, size: u64, spans: &[Live]) -> Result<(), DownloadError> {
    let map = snapshot(size, spans);
    file.sync_data()
        .map_err(|e| DownloadError::io("cannot sync", part, e))?;
    write_map(part, &map)
}

/// Stops what a transfer started when it is dropped (a cancel drops it mid-flight): the
/// ranges' tasks, the checkpoints, the hasher.
struct Running {
    ranges: JoinSet<Result<(), RangeEnd>>,
    checkpoints: Option<tokio::task::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.ranges.abort_all();
        if let Some(c) = &self.checkpoints {
            c.abort();
        }
    }
}

/// Why one range's request ended early.
enum RangeEnd {
    Failed(DownloadError),
    /// The endpoint answered the whole file: it does not serve ranges.
    Whole,
}

/// What the ranges of one file share.
struct Shared {
    hub: Hub,
    repo: String,
    revision: String,
    name: String,
    file: Arc<Flock<File>>,
    progress: Arc<FileProgress>,
}

/// One attempt at one file over several connections; `Ok` once it is verified and in place.
pub(crate) async fn attempt(
    hub: &Hub,
    repo: &str,
    revision: &str,
    dir: &Path,
    progress: &Arc<FileProgress>,
    config: &RangedConfig,
) -> Result<(), DownloadError> {
    let file = &progress.file;
    let size = file.size;
    let final_path = dir.join(&file.name);
    let part = part_path(dir, &file.name);
    let n = config.connections;
    let p = part.clone();
    let out = blocking(move || open_mapped(&p, size, n)).await??;
    let (out, map) = out;
    let spans: Arc<Vec<Live>> = Arc::new(live_spans(&map));
    progress.done.store(map.have(), Ordering::Relaxed);
    progress.set_state(FileState::Downloading);
    let shared = Arc::new(Shared {
        hub: hub.clone(),
        repo: repo.to_string(),
        revision: revision.to_string(),
        name: file.name.clone(),
        file: Arc::new(out),
        progress: progress.clone(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut running = Running {
        ranges: JoinSet::new(),
        checkpoints: None,
        stop: stop.clone(),
    };
    let hashing = file.sha256.is_some().then(|| {
        let (file, spans, stop) = (shared.file.clone(), spans.clone(), stop.clone());
        let p = part.clone();
        tokio::task::spawn_blocking(move || follow(&file, &spans, &stop, size, &p))
    });
    spawn_workers(&mut running.ranges, &shared, &spans, n, config.retries);
    running.checkpoints = Some(spawn_checkpoints(&shared.file, &spans, &part, size));
    let failed = first_end(&mut running.ranges, &shared.name).await;
    if let Some(c) = running.checkpoints.take() {
        c.abort();
        let _ = c.await;
    }
    // What arrived is recorded either way: the next attempt resumes after it.
    let (f, s, p) = (shared.file.clone(), spans.clone(), part.clone());
    let recorded = blocking(move || checkpoint(&f, &p, size, &s)).await?;
    if let Some(end) = failed {
        stop.store(true, Ordering::SeqCst);
        if let RangeEnd::Failed(e) = end {
            return Err(e);
        }
        empty_part(&part, &shared, progress).await?;
        drop(running);
        drop(shared);
        return crate::transfer::one_connection(hub, repo, revision, dir, progress).await;
    }
    recorded?;
    progress.set_state(FileState::Verifying);
    if let (Some(expected), Some(hashing)) = (&file.sha256, hashing) {
        verify_hash(hashing, expected, &part, progress).await?;
    }
    drop(running);
    into_place(&part, &final_path, progress).await?;
    let _ = tokio::fs::remove_file(map_path(&part)).await;
    Ok(())
}

/// Opens the `.part` file with its range map, or with a fresh map and the file emptied to
/// its size when the map is missing or not for this file.
fn open_mapped(
    part: &Path,
    size: u64,
    connections: usize,
) -> Result<(Flock<File>, RangeMap), DownloadError> {
    let out = open_part(part)?;
    let len = out
        .metadata()
        .map_err(|e| DownloadError::io("cannot stat", part, e))?
        .len();
    // A map is trusted only with the file it describes.
    let map = match read_map(part, size) {
        Some(map) if len == size => map,
        _ => {
            let map = RangeMap::new(size, connections * RANGES_PER_CONNECTION);
            write_map(part, &map)?;
            out.set_len(0)
                .and_then(|()| out.set_len(size))
                .map_err(|e| DownloadError::io("cannot size", part, e))?;
            map
        }
    };
    Ok((out, map))
}

/// The ranges of `map` as the transfer tracks them, each written as far as the map says.
fn live_spans(map: &RangeMap) -> Vec<Live> {
    map.ranges
        .iter()
        .map(|s| Live {
            start: s.start,
            end: s.end,
            written: AtomicU64::new(s.done),
        })
        .collect()
}

/// Starts the workers that fetch the ranges not complete yet.
fn spawn_workers(
    ranges: &mut JoinSet<Result<(), RangeEnd>>,
    shared: &Arc<Shared>,
    spans: &Arc<Vec<Live>>,
    connections: usize,
    retries: u32,
) {
    // `connections` workers take the ranges in file order, so the ranges complete roughly in
    // order and the hash keeps up with them (with one range per connection the hash could
    // only start on the second range when the first was done, at the end).
    let next = Arc::new(AtomicUsize::new(0));
    let pending = spans.iter().filter(|s| !s.complete()).count();
    for _ in 0..connections.min(pending) {
        let (shared, spans, next) = (shared.clone(), spans.clone(), next.clone());
        ranges.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(span) = spans.get(i) else {
                    return Ok(());
                };
                if !span.complete() {
                    fetch_range(&shared, span, retries).await?;
                }
            }
        });
    }
}

/// Starts the task that brings the range map up to date every [`CHECKPOINT`].
fn spawn_checkpoints(
    file: &Arc<Flock<File>>,
    spans: &Arc<Vec<Live>>,
    part: &Path,
    size: u64,
) -> tokio::task::JoinHandle<()> {
    let (file, spans, p) = (file.clone(), spans.clone(), part.to_path_buf());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(CHECKPOINT).await;
            let (file, spans, p) = (file.clone(), spans.clone(), p.clone());
            match blocking(move || checkpoint(&file, &p, size, &spans)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) | Err(e) => {
                    tracing::warn!(error = %e, "a range map checkpoint failed")
                }
            }
        }
    })
}

/// Waits for every range worker; the first early end, when there was one (the other workers
/// are stopped for it).
async fn first_end(ranges: &mut JoinSet<Result<(), RangeEnd>>, name: &str) -> Option<RangeEnd> {
    let mut failed: Option<RangeEnd> = None;
    while let Some(joined) = ranges.join_next().await {
        let result = joined.unwrap_or_else(|e| {
            Err(RangeEnd::Failed(DownloadError::Http {
                what: name.to_string(),
                cause: format!("a range's task ended: {e}"),
                transient: true,
            }))
        });
        // The first end is the one said (the others were stopped for it).
        if let Err(end) = result
            && failed.is_none()
        {
            failed = Some(end);
            ranges.abort_all();
        }
    }
    failed
}

/// Back to one connection for an endpoint that ignores ranges: no map, an empty `.part`.
async fn empty_part(
    part: &Path,
    shared: &Shared,
    progress: &FileProgress,
) -> Result<(), DownloadError> {
    let p = part.to_path_buf();
    let f = shared.file.clone();
    blocking(move || {
        let _ = std::fs::remove_file(map_path(&p));
        f.set_len(0)
    })
    .await?
    .map_err(|e| DownloadError::io("cannot truncate", part, e))?;
    progress.done.store(0, Ordering::Relaxed);
    tracing::warn!(
        file = shared.name,
        "the endpoint ignores byte ranges (it answered the whole file); fetching it over one connection"
    );
    Ok(())
}

/// Checks the hasher's digest against `expected`; on a mismatch the `.part` file and its map
/// are removed.
async fn verify_hash(
    hashing: tokio::task::JoinHandle<Result<Sha256, DownloadError>>,
    expected: &str,
    part: &Path,
    progress: &FileProgress,
) -> Result<(), DownloadError> {
    let file = &progress.file;
    let digest = hashing.await.map_err(|e| DownloadError::Http {
        what: file.name.clone(),
        cause: format!("its hasher ended: {e}"),
        transient: true,
    })??;
    let got = hex(&digest.finalize());
    if got != expected {
        let p = part.to_path_buf();
        let _ = blocking(move || {
            let _ = std::fs::remove_file(map_path(&p));
            std::fs::remove_file(&p)
        })
        .await;
        progress.done.store(0, Ordering::Relaxed);
        return Err(hash_mismatch(&file.name, &got, expected));
    }
    Ok(())
}

/// One range to its end: asked again alone, from where it stopped, on transient errors.
async fn fetch_range(shared: &Shared, span: &Live, retries: u32) -> Result<(), RangeEnd> {
    let mut tries = 0u32;
    loop {
        if span.complete() {
            return Ok(());
        }
        match fetch_once(shared, span).await {
            Ok(()) => {}
            Err(RangeEnd::Whole) => return Err(RangeEnd::Whole),
            Err(RangeEnd::Failed(e)) if e.transient() && tries < retries => {
                tries += 1;
                let wait = e.retry_wait(
                    Duration::from_millis(200u64 << tries.min(5)).min(Duration::from_secs(5)),
                );
                tracing::warn!(file = shared.name, range_start = span.start, tries, error = %e,
                    "a range of a download failed; asking for the rest of it again");
                tokio::time::sleep(wait).await;
            }
            Err(end) => return Err(end),
        }
    }
}

/// One request for the rest of one range.
async fn fetch_once(shared: &Shared, span: &Live) -> Result<(), RangeEnd> {
    let from = span.start + span.written.load(Ordering::Acquire);
    let last = span.end - 1;
    let fail = |cause: String| {
        RangeEnd::Failed(DownloadError::Http {
            what: shared.name.clone(),
            cause,
            transient: true,
        })
    };
    let mut resp = shared
        .hub
        .file_range(&shared.repo, &shared.revision, &shared.name, from, last)
        .await
        .map_err(RangeEnd::Failed)?;
    match resp.status().as_u16() {
        206 => {
            if range_start(&resp) != Some(from) {
                return Err(fail(format!(
                    "the endpoint answered the range from byte {from} with {:?}",
                    resp.headers().get(reqwest::header::CONTENT_RANGE)
                )));
            }
        }
        200 => return Err(RangeEnd::Whole),
        s => {
            return Err(fail(format!(
                "the range from byte {from} was answered HTTP {s}"
            )));
        }
    }
    let mut at = from;
    let mut buf: Vec<u8> = Vec::with_capacity(BLOCK);
    let mut floor = shared.hub.rate_floor();
    loop {
        let chunk = resp.chunk().await.map_err(|e| {
            fail(format!(
                "the range {}-{last} broke at byte {}: {}",
                span.start,
                at + buf.len() as u64,
                crate::hub::body_error(&e)
            ))
        });
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                // What came before the break is kept.
                write_block(shared, span, &mut at, &mut buf).await?;
                return Err(e);
            }
        };
        let Some(chunk) = chunk else {
            break;
        };
        if at + (buf.len() + chunk.len()) as u64 > span.end {
            return Err(RangeEnd::Failed(DownloadError::Verify {
                file: shared.name.clone(),
                cause: format!(
                    "the endpoint sent more than the range {}-{last}",
                    span.start
                ),
            }));
        }
        buf.extend_from_slice(&chunk);
        if buf.len() >= BLOCK {
            write_block(shared, span, &mut at, &mut buf).await?;
        }
        // Too slow: cut like a stall; what came is kept, the retry asks for the rest.
        if let Err(why) = floor.add(chunk.len()) {
            write_block(shared, span, &mut at, &mut buf).await?;
            return Err(fail(format!(
                "the range {}-{last} was cut at byte {at}: {why}",
                span.start
            )));
        }
    }
    write_block(shared, span, &mut at, &mut buf).await?;
    if at < span.end {
        return Err(fail(format!(
            "the connection closed {} bytes before the end of the range {}-{last}",
            span.end - at,
            span.start
        )));
    }
    Ok(())
}

/// Write `buf` at `at`, count it, and empty it.
async fn write_block(
    shared: &Shared,
    span: &Live,
    at: &mut u64,
    buf: &mut Vec<u8>,
) -> Result<(), RangeEnd> {
    if buf.is_empty() {
        return Ok(());
    }
    let bytes = std::mem::replace(buf, Vec::with_capacity(BLOCK));
    let (file, offset) = (shared.file.clone(), *at);
    let n = bytes.len() as u64;
    let written = blocking(move || file.write_all_at(&bytes, offset))
        .await
        .map_err(RangeEnd::Failed)?;
    written.map_err(|e| {
        RangeEnd::Failed(DownloadError::io(
            "cannot write",
            Path::new(&shared.name),
            e,
        ))
    })?;
    *at += n;
    span.written.fetch_add(n, Ordering::AcqRel);
    shared.progress.add(n);
    Ok(())
}

/// How far the file is written without a gap from its start.
fn contiguous(spans: &[Live]) -> u64 {
    let mut at = 0;
    for s in spans {
        let end = s.start + s.written.load(Ordering::Acquire);
        if end < s.end {
            return end;
        }
        at = s.end;
    }
    at
}

/// sha256 of the file, read back as far as it is written from its start, until all of it is;
/// `Err` when reading fails, a stop ends it early as a transient error.
fn follow(
    file: &File,
    spans: &[Live],
    stop: &AtomicBool,
    size: u64,
    part: &Path,
) -> Result<Sha256, DownloadError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; READ_BUF];
    let mut at = 0u64;
    while at < size {
        if stop.load(Ordering::SeqCst) {
            return Err(DownloadError::Http {
                what: part.display().to_string(),
                cause: "the transfer stopped before the file was hashed".into(),
                transient: true,
            });
        }
        let frontier = contiguous(spans);
        if frontier <= at {
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        let n = (frontier - at).min(READ_BUF as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)
            .map_err(|e| DownloadError::io("cannot read", part, e))?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    Ok(hasher)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partial::have;

    #[test]
    fn a_file_is_cut_into_equal_ranges_that_cover_it_and_small_files_into_fewer() {
        let map = RangeMap::new(100 << 20, 4);
        assert_eq!(map.ranges.len(), 4);
        assert!(map.valid(100 << 20));
        assert_eq!(map.ranges[1].start, 25 << 20);
        assert_eq!(map.ranges[3].end, 100 << 20);
        // 9 MiB with 4 MiB at least per range: 3 ranges.
        let small = RangeMap::new(9 << 20, 8);
        assert_eq!(small.ranges.len(), 3);
        assert!(small.valid(9 << 20));
        let odd = RangeMap::new((64 << 20) + 3, 4);
        assert!(odd.valid((64 << 20) + 3));
    }

    #[test]
    fn a_map_that_does_not_describe_the_file_is_not_trusted() {
        let mut map = RangeMap::new(64 << 20, 4);
        assert!(!map.valid(65 << 20), "another size");
        map.ranges[2].done = map.ranges[2].end - map.ranges[2].start + 1;
        assert!(!map.valid(64 << 20), "more done than the range holds");
        let mut gap = RangeMap::new(64 << 20, 4);
        gap.ranges[1].start += 1;
        assert!(!gap.valid(64 << 20), "a gap");
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("m.gguf.part");
        std::fs::write(map_path(&part), b"{not json").unwrap();
        assert_eq!(have(&part, 64 << 20), None);
        write_map(&part, &RangeMap::new(64 << 20, 4)).unwrap();
        assert_eq!(have(&part, 64 << 20), Some(0));
        assert_eq!(have(&part, 63 << 20), None);
    }

    #[test]
    fn the_hash_follows_the_ranges_written_without_a_gap_from_the_start() {
        let spans = [
            Live {
                start: 0,
                end: 10,
                written: AtomicU64::new(10),
            },
            Live {
                start: 10,
                end: 20,
                written: AtomicU64::new(4),
            },
            Live {
                start: 20,
                end: 30,
                written: AtomicU64::new(10),
            },
        ];
        assert_eq!(contiguous(&spans), 14);
        spans[1].written.store(10, Ordering::SeqCst);
        assert_eq!(contiguous(&spans), 30);
        let first_short = [Live {
            start: 0,
            end: 10,
            written: AtomicU64::new(0),
        }];
        assert_eq!(contiguous(&first_short), 0);
    }
}
