//! Per-conversation lanes: calls to tools that are not parallel-safe (`debug`, `eval`) run
//! strictly one after another in the order they arrived, per conversation; everything else
//! bypasses the lanes and runs concurrently.
//!
//! Order is fixed at enqueue time, which happens synchronously in the session's reader loop,
//! so a `continue` sent after a `stack` can never overtake it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A lane's worker exits after this long without work.
const IDLE: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct Lanes {
    lanes: Mutex<HashMap<String, mpsc::UnboundedSender<Job>>>,
}

impl Lanes {
    /// Queue `job` behind every earlier job of `conversation`.
    pub fn enqueue(&self, conversation: &str, job: Job) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        let job = match lanes.get(conversation) {
            Some(tx) => match tx.send(job) {
                Ok(()) => return,
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        // No lane, or its worker just retired: start a fresh one.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(job);
        lanes.insert(conversation.to_string(), tx);
        tokio::spawn(run_lane(rx));
    }

    /// Conversations with a live lane.
    pub fn len(&self) -> usize {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

async fn run_lane(mut rx: mpsc::UnboundedReceiver<Job>) {
    loop {
        match tokio::time::timeout(IDLE, rx.recv()).await {
            Ok(Some(job)) => job.await,
            Ok(None) => return,
            Err(_) => {
                // Idle: stop accepting, then drain anything that raced in.
                rx.close();
                while let Some(job) = rx.recv().await {
                    job.await;
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
}
