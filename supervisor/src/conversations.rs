//! The daemon's roster of recent conversations (the `conversations` count of `status`): the
//! last time each conversation made a call, pruned of those idle longer than a window and
//! bounded in count, so a long-lived daemon that sees many conversations come and go keeps
//! only the recent ones.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A conversation without a call for this long leaves the roster.
pub const IDLE: Duration = Duration::from_secs(3600);
/// At most this many conversations are kept; past it the least recently seen leaves.
pub const MAX: usize = 10_000;

pub struct Conversations {
    seen: Mutex<HashMap<String, Instant>>,
    idle: Duration,
    max: usize,
}

impl Default for Conversations {
    fn default() -> Self {
        Conversations::new(IDLE, MAX)
    }
}

impl Conversations {
    pub fn new(idle: Duration, max: usize) -> Conversations {
        Conversations {
            seen: Mutex::new(HashMap::new()),
            idle,
            max: max.max(1),
        }
    }

    /// `conversation` made a call now.
    pub fn touch(&self, conversation: &str) {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = seen.get_mut(conversation) {
            *at = now;
            return;
        }
        if seen.len() >= self.max {
            let idle = self.idle;
            seen.retain(|_, at| now.duration_since(*at) < idle);
        }
        if seen.len() >= self.max {
            // Still full of recent ones: the least recently seen makes room.
            if let Some(oldest) = seen
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(name, _)| name.clone())
            {
                seen.remove(&oldest);
            }
        }
        seen.insert(conversation.to_string(), now);
    }

    /// Conversations that made a call within the idle window (the stale ones are pruned).
    pub fn active(&self) -> usize {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let idle = self.idle;
        seen.retain(|_, at| now.duration_since(*at) < idle);
        seen.len()
    }

    /// Entries held, stale ones included (what the pruning keeps in check).
    pub fn held(&self) -> usize {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_conversations_leave_and_the_roster_is_bounded() {
        let roster = Conversations::new(Duration::from_secs(60), 100);
        for i in 0..2000 {
            roster.touch(&format!("c{i}"));
        }
        assert_eq!(roster.held(), 100, "bounded while every one is recent");
        // The most recent ones are kept.
        roster.touch("c1999");
        assert_eq!(roster.held(), 100);
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(roster.active(), 0, "idle conversations are pruned");
        assert_eq!(roster.held(), 0);
        roster.touch("back");
        roster.touch("back");
        assert_eq!(roster.active(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_conversation_still_calling_is_not_evicted_for_an_idle_one() {
        let roster = Conversations::new(Duration::from_secs(60), 2);
        roster.touch("old");
        tokio::time::advance(Duration::from_secs(10)).await;
        roster.touch("busy");
        tokio::time::advance(Duration::from_secs(10)).await;
        roster.touch("old");
        roster.touch("new");
        // "busy" was the least recently seen: it made room, "old" (seen again) stayed.
        let seen = roster.seen.lock().unwrap();
        let mut names: Vec<_> = seen.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["new", "old"]);
    }
}
