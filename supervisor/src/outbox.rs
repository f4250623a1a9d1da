//! A connection's outgoing queue: frames are encoded as they are queued, and the encoded
//! bytes waiting for the client are bounded by a budget (`limits.max_queued_output_bytes`).
//! A sender waits for room instead of growing the queue; the session's reader waits for room
//! before it reads the client's next frame (backpressure: a client that does not read its
//! results stops being read).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{Semaphore, mpsc};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::DaemonFrame;

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
    /// Permits are free bytes of the budget; a queued frame holds its size (capped at the
    /// budget, so one frame larger than the budget still passes once the queue is empty).
    budget: Arc<Semaphore>,
    cap: u32,
    /// Senders waiting for room.
    waiting: Arc<AtomicUsize>,
    was_full: Arc<AtomicBool>,
    codec: Codec,
    max_frame: u32,
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
}

/// A queue for one connection that speaks `codec`, holding at most about `cap` bytes.
pub fn outbox(codec: Codec, max_frame: u32, cap: usize) -> (Outbox, Drain) {
    let cap = u32::try_from(cap)
        .unwrap_or(u32::MAX)
        .min(Semaphore::MAX_PERMITS as u32)
        .max(1);
    let (tx, rx) = mpsc::unbounded_channel();
    let budget = Arc::new(Semaphore::new(cap as usize));
    (
        Outbox {
            tx,
            budget: budget.clone(),
            cap,
            waiting: Arc::default(),
            was_full: Arc::default(),
            codec,
            max_frame,
        },
        Drain {
            #[cfg(test)]
            codec,
            rx,
            budget,
        },
    )
}

impl Outbox {
    /// Queue `frame`, waiting while the client's unread output is at the budget. A frame
    /// that cannot be encoded is replaced by an error saying so (never dropped silently).
    pub async fn send(&self, frame: DaemonFrame) -> Result<(), Closed> {
        let mut bytes = Vec::new();
        crate::session::encode_into(&mut bytes, self.codec, &frame, self.max_frame);
        drop(frame);
        let held = self.held(&bytes);
        let permit = match self.budget.try_acquire_many(held) {
            Ok(permit) => permit,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(Closed),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                self.was_full.store(true, Ordering::Relaxed);
                let _waiting = Waiting::new(&self.waiting);
                self.budget.acquire_many(held).await.map_err(|_| Closed)?
            }
        };
        permit.forget();
        self.push(bytes, held)
    }

    /// Queue `frame` only if the budget has room now (for notices that must not wait).
    pub fn try_send(&self, frame: DaemonFrame) -> Result<(), Closed> {
        let mut bytes = Vec::new();
        crate::session::encode_into(&mut bytes, self.codec, &frame, self.max_frame);
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

    fn push(&self, bytes: Vec<u8>, held: u32) -> Result<(), Closed> {
        if self.tx.send((bytes, held)).is_err() {
            self.budget.add_permits(held as usize);
            return Err(Closed);
        }
        Ok(())
    }
}

impl Drain {
    /// The next queued frame, decoded (for unit tests of what gets queued).
    #[cfg(test)]
    pub async fn next_frame(&mut self) -> Option<DaemonFrame> {
        let (bytes, held) = self.rx.recv().await?;
        self.budget.add_permits(held as usize);
        toolvisor_protocol::codec::decode(self.codec, &bytes[4..]).ok()
    }

    /// Write every queued frame until every [`Outbox`] is dropped (then shut the write half
    /// down) or a write fails. Either way the budget is closed, so no sender waits forever.
    pub async fn run(mut self, mut writer: OwnedWriteHalf) {
        let mut batch: Vec<u8> = Vec::new();
        while let Some((first, held)) = self.rx.recv().await {
            let mut held_total = held as usize;
            let ok = match self.rx.try_recv() {
                // One frame: write it as it is, no copy.
                Err(_) => writer.write_all(&first).await.is_ok(),
                Ok((second, held)) => {
                    // Several: one buffer, one syscall.
                    batch.extend_from_slice(&first);
                    drop(first);
                    batch.extend_from_slice(&second);
                    held_total += held as usize;
                    while batch.len() < BATCH_BYTES {
                        match self.rx.try_recv() {
                            Ok((more, held)) => {
                                batch.extend_from_slice(&more);
                                held_total += held as usize;
                            }
                            Err(_) => break,
                        }
                    }
                    let ok = writer.write_all(&batch).await.is_ok();
                    // An idle connection keeps no batch buffer.
                    batch = Vec::new();
                    ok
                }
            };
            self.budget.add_permits(held_total);
            if !ok {
                self.budget.close();
                return;
            }
        }
        self.budget.close();
        let _ = writer.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolvisor_protocol::wire::DaemonFrame;

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
