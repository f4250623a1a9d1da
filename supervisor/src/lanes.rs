//! Per-conversation lanes: calls to tools that are not parallel-safe (`debug`, `eval`) run
//! strictly one after another in the order they arrived, per conversation; everything else
//! bypasses the lanes and runs concurrently.
//!
//! Order is fixed at enqueue time, which happens synchronously in the session's reader loop,
//! so a `continue` sent after a `stack` can never overtake it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::mpsc;

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A lane's worker exits, and its entry leaves the map, after this long without work.
const IDLE: Duration = Duration::from_secs(60);

/// One conversation's live lane. The queue is unbounded on purpose: enqueueing happens
/// synchronously in a session's reader loop (that is what fixes the order), and its depth
/// is bounded by the calls the sessions have in flight.
struct Lane {
    /// Tells this lane from a later one of the same conversation.
    id: u64,
    tx: mpsc::UnboundedSender<Job>,
}

type Map = Arc<Mutex<HashMap<String, Lane>>>;

fn lock(map: &Map) -> MutexGuard<'_, HashMap<String, Lane>> {
    map.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lanes of every conversation with lane work in the last [`IDLE`]: an idle, empty lane
/// retires and leaves the map, so conversations that come and go leave nothing behind.
pub struct Lanes {
    lanes: Map,
    next_id: AtomicU64,
    idle: Duration,
    /// Jobs enqueued and not yet started, over every lane (the metrics' queue depth).
    queued: Arc<AtomicU64>,
}

impl Default for Lanes {
    fn default() -> Self {
        Lanes::with_idle(IDLE)
    }
}

impl Lanes {
    /// Lanes whose workers retire after `idle` without work.
    pub fn with_idle(idle: Duration) -> Lanes {
        Lanes {
            lanes: Map::default(),
            next_id: AtomicU64::new(0),
            idle,
            queued: Arc::default(),
        }
    }

    /// Queue `job` behind every earlier job of `conversation`.
    pub fn enqueue(&self, conversation: &str, job: Job) {
        self.queued.fetch_add(1, Ordering::Relaxed);
        let mut lanes = lock(&self.lanes);
        let job = match lanes.get(conversation) {
            Some(lane) => match lane.tx.send(job) {
                Ok(()) => return,
                // Unreachable while retiring removes the entry under this lock; kept safe.
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        // No lane, or its worker just retired: start a fresh one.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(job);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        lanes.insert(conversation.to_string(), Lane { id, tx });
        tokio::spawn(run_lane(
            rx,
            self.lanes.clone(),
            conversation.to_string(),
            id,
            self.idle,
            self.queued.clone(),
        ));
    }

    /// Conversations with a live lane.
    pub fn len(&self) -> usize {
        lock(&self.lanes).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Jobs waiting for their turn, over every lane.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
}

async fn run_lane(
    mut rx: mpsc::UnboundedReceiver<Job>,
    lanes: Map,
    conversation: String,
    id: u64,
    idle: Duration,
    queued: Arc<AtomicU64>,
) {
    let started = |job: Job| {
        queued.fetch_sub(1, Ordering::Relaxed);
        job
    };
    loop {
        match tokio::time::timeout(idle, rx.recv()).await {
            Ok(Some(job)) => started(job).await,
            Ok(None) => return,
            Err(_) => {
                // Idle. Retire under the map lock, which `enqueue` holds while it sends: a
                // job either is already in the queue (run it and stay) or will find no lane
                // and start a fresh one. None is lost, and the entry leaves the map.
                let mut map = lock(&lanes);
                if let Ok(job) = rx.try_recv() {
                    drop(map);
                    started(job).await;
                    continue;
                }
                if map.get(&conversation).is_some_and(|lane| lane.id == id) {
                    map.remove(&conversation);
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::{Mutex as AsyncMutex, Notify};

    #[tokio::test]
    async fn one_conversation_runs_in_order_and_two_overlap() {
        let lanes = Lanes::default();
        let log = Arc::new(AsyncMutex::new(Vec::<String>::new()));
        let b_done = Arc::new(Notify::new());
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        for (conv, tag) in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")] {
            let log = log.clone();
            let done = done_tx.clone();
            let b_done = b_done.clone();
            lanes.enqueue(
                conv,
                Box::pin(async move {
                    log.lock().await.push(format!("start {tag}"));
                    match tag {
                        // a1 cannot finish until b1 has run: b1 must not wait behind lane a.
                        "a1" => b_done.notified().await,
                        "b1" => b_done.notify_one(),
                        _ => tokio::task::yield_now().await,
                    }
                    log.lock().await.push(format!("end {tag}"));
                    let _ = done.send(());
                }),
            );
        }
        for _ in 0..4 {
            tokio::time::timeout(Duration::from_secs(10), done_rx.recv())
                .await
                .expect("all four probe jobs finish (lane b must not wait behind lane a)");
        }
        let log = log.lock().await.clone();
        let a: Vec<_> = log.iter().filter(|l| l.contains(" a")).cloned().collect();
        assert_eq!(
            a,
            [
                "start a1", "end a1", "start a2", "end a2", "start a3", "end a3"
            ]
        );
    }

    /// Waits (in the test's paused time) until no lane is left.
    async fn until_no_lane_is_left(lanes: &Lanes) {
        tokio::time::timeout(Duration::from_secs(3600), async {
            while !lanes.is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{} idle lanes were never pruned", lanes.len()));
    }

    #[tokio::test(start_paused = true)]
    async fn conversations_that_come_and_go_leave_no_lanes_behind() {
        let lanes = Lanes::with_idle(Duration::from_secs(5));
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        for round in 0..2 {
            for i in 0..2000 {
                let done = done_tx.clone();
                lanes.enqueue(
                    &format!("conv-{round}-{i}"),
                    Box::pin(async move {
                        let _ = done.send(());
                    }),
                );
            }
            assert_eq!(lanes.len(), 2000);
            for _ in 0..2000 {
                done_rx.recv().await.expect("every probe job runs");
            }
            until_no_lane_is_left(&lanes).await;
        }
        // A conversation that comes back gets a fresh lane that works.
        let done = done_tx.clone();
        lanes.enqueue(
            "conv-0-0",
            Box::pin(async move {
                let _ = done.send(());
            }),
        );
        done_rx
            .recv()
            .await
            .expect("the returning conversation's job runs");
        until_no_lane_is_left(&lanes).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_enqueued_as_its_lane_retires_still_runs() {
        let idle = Duration::from_secs(5);
        let lanes = Lanes::with_idle(idle);
        let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for round in 0..300usize {
            let ran2 = ran.clone();
            lanes.enqueue(
                "a",
                Box::pin(async move {
                    ran2.fetch_add(1, Ordering::SeqCst);
                }),
            );
            // Wake exactly when the lane's idle timer fires (paused time: same instant),
            // with a varying number of scheduling rounds in between.
            tokio::time::sleep(idle).await;
            for _ in 0..(round % 7) {
                tokio::task::yield_now().await;
            }
        }
        until_no_lane_is_left(&lanes).await;
        assert_eq!(ran.load(Ordering::SeqCst), 300, "a job was lost");
    }
}
