//! A connection's outgoing queue: frames are encoded as they are queued, and the encoded
//! bytes waiting for the client are bounded by a budget (`limits.max_queued_output_bytes`).
//! A sender waits for room instead of growing the queue; the session's reader waits for room
//! before it reads the client's next frame (backpressure: a client that does not read its
//! results stops being read). A large frame that has to wait waits on disk, in an unlinked
//! file of the spool directory, not in memory: what a client that never reads costs is the
//! budget, not the budget plus every result still waiting for room.
//!
//! Backpressure only ever stalls the client that does not read: the reader waits for room only in
//! its own connection's queue, and a frame the client must answer (an approval request, a bridge
//! call) waits in that queue like any other, so its answer is read as soon as the client has read
//! enough. The writer task writes several queued frames in one write; when it fails the budget
//! closes, so no sender waits forever. A frame too big to encode is replaced by an error naming it
//! (`encode_into`), never dropped silently.
//!
//! The straight path: while nothing is queued, a sender writes its frame to the socket itself
//! (a non-blocking `try_write` under the queue's lock, [`Wire`]), so a call's result reaches the
//! client without waking the writer task (that wake, and the worker it could unpark, cost a
//! context switch per call). What the socket does not take at once is queued after it, and
//! once anything is queued every sender queues until the writer has written it all, so frames
//! leave in the order they were queued, whichever way they go.
//!
//! The spool: a frame of 64 KiB or more (`SPILL_MIN`) that has to wait for room waits in an
//! unlinked file of `<state_dir>/spool` (0700), or in memory when the spool cannot be used
//! (logged). Frames are masked before they are queued (every result leaves through
//! `tools::files::finish`), so no secret reaches the spool, and an unlinked file leaves no name
//! behind a crash. Memory is given back (`kit::memory::trim`) once a frame is spooled.

use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Semaphore, mpsc};
use toolvisor_protocol::codec;
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::{DaemonFrame, Event, Outcome};

/// The client is gone: nothing queued will be written any more.
#[derive(Debug, thiserror::Error)]
#[error("the client's connection is closed")]
pub struct Closed;

/// Most bytes one write carries when several frames are queued.
const BATCH_BYTES: usize = 1024 * 1024;

/// The sending side, cloned by everything that answers the client (calls, the reader, tree
/// watches, question ports). When every clone is dropped the writer flushes and closes.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<(Vec<u8>, u32)>,
    wire: Arc<Wire>,
    /// Permits are free bytes of the budget; a queued frame holds its size (capped at the
    /// budget, so one frame larger than the budget still passes once the queue is empty).
    budget: Arc<Semaphore>,
    cap: u32,
    /// Senders waiting for room.
    waiting: Arc<AtomicUsize>,
    was_full: Arc<AtomicBool>,
    codec: Codec,
    max_frame: u32,
    /// Where a large frame waits for room (`<state_dir>/spool`, 0700); `None`: in memory.
    spool: Option<Arc<PathBuf>>,
}

/// Frames at least this large wait for room on disk rather than in memory.
const SPILL_MIN: usize = 64 * 1024;

/// The way out shared by every sender and the writer task: how much is queued, and the
/// socket's write half once the writer runs. A sender writes straight to the socket only while
/// nothing is queued; the lock makes that check and the write (or the queueing) one step. It
/// holds no sender of the queue: the writer must see the queue end when the last [`Outbox`]
/// goes.
struct Wire {
    lock: std::sync::Mutex<WireState>,
}

struct WireState {
    /// Set by the writer task when it starts; `None` before and after it runs.
    half: Option<Arc<OwnedWriteHalf>>,
    /// Frames queued and not yet wholly written by the writer task.
    queued: usize,
}

impl Wire {
    fn state(&self) -> std::sync::MutexGuard<'_, WireState> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Counts a sender as waiting while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How full a connection's queue is (for the tree).
#[derive(Clone, Debug)]
pub struct QueueMeter {
    budget: Arc<Semaphore>,
    cap: u32,
    waiting: Arc<AtomicUsize>,
    was_full: Arc<AtomicBool>,
}

impl QueueMeter {
    /// Bytes queued and not yet written (0 once the connection is closed).
    pub fn queued(&self) -> usize {
        if self.budget.is_closed() {
            return 0;
        }
        (self.cap as usize).saturating_sub(self.budget.available_permits())
    }

    /// True once the budget was ever spent (a sender had to wait): the connection held up
    /// to the budget, and its end leaves that much freed.
    pub fn was_full(&self) -> bool {
        self.was_full.load(Ordering::Relaxed)
    }

    /// How many senders (calls, the reader) wait for the client to read its output. While
    /// the reader is among them, none of the client's frames is read.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// The receiving side, owned by the writer task.
pub struct Drain {
    #[cfg(test)]
    codec: Codec,
    rx: mpsc::UnboundedReceiver<(Vec<u8>, u32)>,
    budget: Arc<Semaphore>,
    wire: Arc<Wire>,
}

/// A queue for one connection that speaks `codec`, holding at most about `cap` bytes.
pub fn outbox(codec: Codec, max_frame: u32, cap: usize) -> (Outbox, Drain) {
    spooled(codec, max_frame, cap, None)
}

/// [`outbox`] whose large frames wait for room in `spool` (a private directory).
pub fn spooled(
    codec: Codec,
    max_frame: u32,
    cap: usize,
    spool: Option<PathBuf>,
) -> (Outbox, Drain) {
    let cap = u32::try_from(cap)
        .unwrap_or(u32::MAX)
        .min(Semaphore::MAX_PERMITS as u32)
        .max(1);
    let (tx, rx) = mpsc::unbounded_channel();
    let budget = Arc::new(Semaphore::new(cap as usize));
    let wire = Arc::new(Wire {
        lock: std::sync::Mutex::new(WireState {
            half: None,
            queued: 0,
        }),
    });
    (
        Outbox {
            tx,
            wire: wire.clone(),
            budget: budget.clone(),
            cap,
            waiting: Arc::default(),
            was_full: Arc::default(),
            codec,
            max_frame,
            spool: spool.map(Arc::new),
        },
        Drain {
            #[cfg(test)]
            codec,
            rx,
            budget,
            wire,
        },
    )
}

/// Append one frame to `out`. A frame that cannot be encoded (too big) is replaced by an
/// error the caller can act on, so an answer is never silently dropped.
pub(crate) fn encode_into(out: &mut Vec<u8>, codec: Codec, frame: &DaemonFrame, max: u32) {
    match codec::encode_frame(codec, frame, max) {
        Ok(bytes) if out.is_empty() => *out = bytes,
        Ok(bytes) => out.extend_from_slice(&bytes),
        Err(e) => {
            let err = ToolError::new(
                ErrorKind::Internal,
                format!("the answer could not be sent: {e}"),
                "ask for less (a narrower query or a smaller limit)",
            );
            let replacement = match frame {
                DaemonFrame::Result { id, .. } => DaemonFrame::Result {
                    id: *id,
                    outcome: Outcome::Err(err),
                },
                // An event is not the end of its call: say what was dropped, as an event.
                DaemonFrame::Event { id, .. } => DaemonFrame::Event {
                    id: *id,
                    event: Event::Output {
                        stream: toolvisor_protocol::wire::Stream::Stderr,
                        text: format!("[toolvisor: an output event was dropped: {e}]\n"),
                    },
                },
                _ => DaemonFrame::Error(err),
            };
            if let Ok(bytes) = codec::encode_frame(codec, &replacement, max) {
                out.extend_from_slice(&bytes);
            }
        }
    }
}

impl Outbox {
    /// Queue `frame`, waiting while the client's unread output is at the budget. A frame
    /// that cannot be encoded is replaced by an error saying so (never dropped silently).
    pub async fn send(&self, frame: DaemonFrame) -> Result<(), Closed> {
        self.send_then(frame, || {}).await
    }

    /// Like [`Outbox::send`], running `before` once the frame has its room and just before
    /// the writer can see it: a call's result frees its in-flight slot there, so a client that
    /// has read the result never finds the slot still taken (it once did, under load).
    pub async fn send_then(&self, frame: DaemonFrame, before: impl FnOnce()) -> Result<(), Closed> {
        let mut bytes = Vec::new();
        encode_into(&mut bytes, self.codec, &frame, self.max_frame);
        drop(frame);
        let held = self.held(&bytes);
        let permit = match self.budget.try_acquire_many(held) {
            Ok(permit) => permit,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Closed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                self.was_full.store(true, Ordering::Relaxed);
                let _waiting = Waiting::new(&self.waiting);
                match self.spool.clone().filter(|_| bytes.len() >= SPILL_MIN) {
                    Some(dir) => {
                        // Off the heap while it waits; back when there is room.
                        let file = spill(dir, bytes).await.ok_or_else(|| {
                            tracing::error!("the task spooling a waiting frame failed");
                            Closed
                        })?;
                        let permit = self.budget.acquire_many(held).await.map_err(|_| Closed)?;
                        let bytes = unspill(file).await.map_err(|e| {
                            tracing::error!(error = %e, "cannot read back a frame that waited on disk");
                            Closed
                        })?;
                        permit.forget();
                        before();
                        return self.push(bytes, held);
                    }
                    None => self.budget.acquire_many(held).await.map_err(|_| Closed)?,
                }
            }
        };
        permit.forget();
        before();
        self.push(bytes, held)
    }

    /// Queue `frame` only if the budget has room now (for notices that must not wait).
    pub fn try_send(&self, frame: DaemonFrame) -> Result<(), Closed> {
        let mut bytes = Vec::new();
        encode_into(&mut bytes, self.codec, &frame, self.max_frame);
        let held = self.held(&bytes);
        let permit = self.budget.try_acquire_many(held).map_err(|_| Closed)?;
        permit.forget();
        self.push(bytes, held)
    }

    /// Wait until the client's unread output is below the budget (the reader calls this
    /// before reading the client's next frame).
    pub async fn room(&self) -> Result<(), Closed> {
        match self.budget.try_acquire() {
            Ok(_) => return Ok(()),
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Closed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {}
        }
        let _waiting = Waiting::new(&self.waiting);
        self.budget.acquire().await.map(drop).map_err(|_| Closed)
    }

    /// A gauge of the bytes queued, which does not keep the queue open.
    pub fn meter(&self) -> QueueMeter {
        QueueMeter {
            budget: self.budget.clone(),
            cap: self.cap,
            waiting: self.waiting.clone(),
            was_full: self.was_full.clone(),
        }
    }

    fn held(&self, bytes: &[u8]) -> u32 {
        u32::try_from(bytes.len()).unwrap_or(u32::MAX).min(self.cap)
    }

    /// Write `bytes` to the socket now if nothing is queued before them and the socket takes
    /// them; queue what it does not take. `held` permits of the budget are given back once the
    /// bytes are written.
    fn push(&self, mut bytes: Vec<u8>, held: u32) -> Result<(), Closed> {
        let mut state = self.wire.state();
        if state.queued == 0
            && let Some(half) = &state.half
        {
            match half.try_write(&bytes) {
                Ok(n) if n == bytes.len() => {
                    drop(state);
                    self.budget.add_permits(held as usize);
                    return Ok(());
                }
                // The rest waits for the writer, first in line.
                Ok(n) => drop(bytes.drain(..n)),
                // Full (the writer waits for room), or failed: the writer finds out which
                // and, on an error, closes the budget.
                Err(_) => {}
            }
        }
        if self.tx.send((bytes, held)).is_err() {
            drop(state);
            self.budget.add_permits(held as usize);
            return Err(Closed);
        }
        state.queued += 1;
        Ok(())
    }
}

/// A frame waiting for room: on disk when it could be written there, else in memory.
enum Spilled {
    Disk(std::fs::File, usize),
    Memory(Vec<u8>),
}

/// Move `bytes` to an unlinked file in `dir` (no name survives a crash); on any error keep
/// them in memory, which is only the budget's bound lost, never the frame.
async fn spill(dir: Arc<PathBuf>, bytes: Vec<u8>) -> Option<Spilled> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let work = move || {
        let path = dir.join(format!(
            "{}-{}.frame",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(spool = %dir.display(), error = %e, "cannot spool a waiting frame; it waits in memory");
                return Spilled::Memory(bytes);
            }
        };
        let _ = std::fs::remove_file(&path);
        if let Err(e) = file.write_all(&bytes) {
            tracing::warn!(spool = %dir.display(), error = %e, "cannot spool a waiting frame; it waits in memory");
            return Spilled::Memory(bytes);
        }
        let len = bytes.len();
        drop(bytes);
        // What this result (and the work that made it) took is free now; give it back, or a
        // client that never reads keeps it in glibc's arenas for the daemon's life.
        toolvisor_kit::memory::trim();
        Spilled::Disk(file, len)
    };
    // `None` only if the blocking task itself failed (the frame is then lost with it, and
    // the caller closes the connection rather than send something else in its place).
    tokio::task::spawn_blocking(work).await.ok()
}

async fn unspill(spilled: Spilled) -> std::io::Result<Vec<u8>> {
    match spilled {
        Spilled::Memory(bytes) => Ok(bytes),
        Spilled::Disk(mut file, len) => tokio::task::spawn_blocking(move || {
            file.rewind()?;
            let mut bytes = Vec::with_capacity(len);
            file.read_to_end(&mut bytes)?;
            if bytes.len() != len {
                return Err(std::io::Error::other(format!(
                    "read back {} of {len} bytes",
                    bytes.len()
                )));
            }
            Ok(bytes)
        })
        .await
        .map_err(std::io::Error::other)?,
    }
}

impl Drain {
    /// The next queued frame, decoded (for unit tests of what gets queued).
    #[cfg(test)]
    pub async fn next_frame(&mut self) -> Option<DaemonFrame> {
        let (bytes, held) = self.rx.recv().await?;
        self.wire.state().queued -= 1;
        self.budget.add_permits(held as usize);
        toolvisor_protocol::codec::decode(self.codec, &bytes[4..]).ok()
    }

    /// Write every queued frame until every [`Outbox`] is dropped (then shut the write half
    /// down) or a write fails. Either way the budget is closed, so no sender waits forever.
    /// While it runs, senders write straight to `writer` whenever nothing is queued.
    pub async fn run(mut self, writer: OwnedWriteHalf) {
        let writer = Arc::new(writer);
        self.wire.state().half = Some(writer.clone());
        let mut batch: Vec<u8> = Vec::new();
        while let Some((first, held)) = self.rx.recv().await {
            let mut held_total = held as usize;
            let mut frames = 1;
            let ok = match self.rx.try_recv() {
                // One frame: write it as it is, no copy.
                Err(_) => write_all(&writer, &first).await.is_ok(),
                Ok((second, held)) => {
                    // Several: one buffer, one syscall.
                    batch.extend_from_slice(&first);
                    drop(first);
                    batch.extend_from_slice(&second);
                    held_total += held as usize;
                    frames += 1;
                    while batch.len() < BATCH_BYTES {
                        match self.rx.try_recv() {
                            Ok((more, held)) => {
                                batch.extend_from_slice(&more);
                                held_total += held as usize;
                                frames += 1;
                            }
                            Err(_) => break,
                        }
                    }
                    let ok = write_all(&writer, &batch).await.is_ok();
                    // An idle connection keeps no batch buffer.
                    batch = Vec::new();
                    ok
                }
            };
            if !ok {
                // No sender writes to a broken socket any more; what they queue is dropped
                // with the queue.
                self.wire.state().half = None;
                self.budget.close();
                return;
            }
            self.wire.state().queued -= frames;
            self.budget.add_permits(held_total);
        }
        self.budget.close();
        self.wire.state().half = None;
        match Arc::try_unwrap(writer) {
            Ok(mut writer) => {
                let _ = writer.shutdown().await;
            }
            // Not reached (every sender is gone and the state let go of it); dropping the
            // last handle shuts the write half down all the same.
            Err(writer) => drop(writer),
        }
    }
}

/// Write all of `bytes` to a write half shared with the senders' straight path.
///
/// # Cancel safety
///
/// Not cancel safe: a dropped write leaves part of a frame on the socket.
async fn write_all(writer: &OwnedWriteHalf, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        writer.writable().await?;
        match writer.try_write(bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pong(nonce: u64) -> DaemonFrame {
        DaemonFrame::Pong { nonce }
    }

    #[tokio::test]
    async fn a_full_queue_makes_senders_and_the_reader_wait_and_loses_nothing() {
        // A pong is ~30 bytes of JSON with its header: two fill a 64-byte budget.
        let (out, mut drain) = outbox(Codec::Json, 1 << 20, 64);
        let sender = {
            let out = out.clone();
            tokio::spawn(async move {
                for nonce in 0..10 {
                    out.send(pong(nonce)).await.unwrap();
                }
            })
        };
        let meter = out.meter();
        while meter.waiting() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(meter.was_full());
        assert!(meter.queued() >= 32, "queued {}", meter.queued());
        let reader = {
            let out = out.clone();
            tokio::spawn(async move { out.room().await })
        };
        tokio::task::yield_now().await;
        assert!(
            !reader.is_finished(),
            "the reader waits while a sender waits for room"
        );
        // The client reads: every frame arrives, in order, and the waiting ends.
        for nonce in 0..10 {
            match drain.next_frame().await {
                Some(DaemonFrame::Pong { nonce: got }) => assert_eq!(got, nonce),
                other => panic!("expected pong {nonce}, got {other:?}"),
            }
        }
        sender.await.unwrap();
        reader.await.unwrap().unwrap();
        assert_eq!(meter.waiting(), 0);
        assert_eq!(meter.queued(), 0);
    }

    /// Results waiting for a client that does not read cost no more memory than the budget:
    /// large ones wait on disk, nameless, and come back whole and in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn large_frames_wait_on_disk_and_come_back_whole() {
        let spool = tempfile::tempdir().unwrap();
        let (out, mut drain) = spooled(
            Codec::Json,
            8 << 20,
            256 * 1024,
            Some(spool.path().to_path_buf()),
        );
        let big = |i: usize| {
            DaemonFrame::Error(toolvisor_protocol::ToolError::new(
                toolvisor_protocol::error::ErrorKind::Io,
                format!("{i}:{}", "x".repeat(200 * 1024)),
                "h",
            ))
        };
        // One sender per frame, in order: the first fills the budget, the rest wait.
        let mut senders = Vec::new();
        let meter = out.meter();
        for i in 0..6 {
            let out = out.clone();
            senders.push(tokio::spawn(async move { out.send(big(i)).await }));
            if i > 0 {
                while meter.waiting() < i {
                    tokio::task::yield_now().await;
                }
            }
        }
        // Five wait; their bytes are on disk in unlinked files. A waiting sender counts before
        // its spill is done: wait (bounded) until all five are open and unlinked.
        assert_eq!(out.meter().waiting(), 5);
        let spilled = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|t| {
                    t.starts_with(spool.path()) && t.to_string_lossy().ends_with(" (deleted)")
                })
                .count()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while spilled() < 5 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(spilled(), 5, "the waiting frames are not on disk");
        // Nameless: the spool directory shows nothing.
        assert_eq!(std::fs::read_dir(spool.path()).unwrap().count(), 0);
        let mut seen = Vec::new();
        for _ in 0..6 {
            match drain.next_frame().await {
                Some(DaemonFrame::Error(e)) => {
                    let (n, rest) = e.message.split_once(':').unwrap();
                    assert_eq!(rest.len(), 200 * 1024, "a frame came back cut");
                    seen.push(n.parse::<usize>().unwrap());
                }
                other => panic!("expected an error frame, got {other:?}"),
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
        for s in senders {
            s.await.unwrap().unwrap();
        }
    }

    /// Frames written straight and frames queued behind a full socket reach the peer whole
    /// and in order, and the writer ends (shutting the socket) once the last sender is gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn straight_and_queued_frames_arrive_in_order_and_the_writer_ends_with_the_senders() {
        use tokio::io::AsyncReadExt;
        let (daemon_side, mut peer) = tokio::net::UnixStream::pair().unwrap();
        let (_read, write) = daemon_side.into_split();
        let (out, drain) = outbox(Codec::Json, 1 << 20, 64 << 20);
        let writer = tokio::spawn(drain.run(write));
        // Big frames fill the socket's buffer while the peer reads nothing: the later ones
        // queue behind the part the socket did not take.
        let big = |i: usize| {
            DaemonFrame::Error(toolvisor_protocol::ToolError::new(
                toolvisor_protocol::error::ErrorKind::Io,
                format!("{i}:{}", "x".repeat(100 * 1024)),
                "h",
            ))
        };
        for i in 0..20 {
            out.send(big(i)).await.unwrap();
            out.send(pong(i as u64)).await.unwrap();
        }
        drop(out);
        let mut bytes = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            peer.read_to_end(&mut bytes),
        )
        .await
        .expect("the writer shut the socket once every sender was gone")
        .unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), writer)
            .await
            .expect("the writer ended")
            .unwrap();
        let mut rest = &bytes[..];
        for i in 0..20 {
            for want_pong in [false, true] {
                let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
                let frame: DaemonFrame = codec::decode(Codec::Json, &rest[4..4 + len]).unwrap();
                rest = &rest[4 + len..];
                match (want_pong, frame) {
                    (false, DaemonFrame::Error(e)) => {
                        assert!(e.message.starts_with(&format!("{i}:")), "out of order");
                        assert_eq!(e.message.len(), format!("{i}:").len() + 100 * 1024);
                    }
                    (true, DaemonFrame::Pong { nonce }) => assert_eq!(nonce, i as u64),
                    (_, other) => panic!("frame {i}: unexpected {other:?}"),
                }
            }
        }
        assert!(rest.is_empty());
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_budget_passes_alone() {
        let (out, mut drain) = outbox(Codec::Json, 1 << 20, 16);
        out.send(pong(1)).await.unwrap();
        assert!(matches!(
            drain.next_frame().await,
            Some(DaemonFrame::Pong { nonce: 1 })
        ));
    }

    #[tokio::test]
    async fn senders_waiting_on_a_closed_connection_fail_instead_of_hanging() {
        let (out, drain) = outbox(Codec::Json, 1 << 20, 40);
        out.send(pong(1)).await.unwrap();
        let waiting = {
            let out = out.clone();
            tokio::spawn(async move { out.send(pong(2)).await })
        };
        tokio::task::yield_now().await;
        // The writer ends (a failed write closes the budget the same way).
        drain.budget.close();
        drop(drain);
        assert!(waiting.await.unwrap().is_err());
        assert!(out.room().await.is_err());
    }
}
