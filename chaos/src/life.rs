//! What every thread of the runner shares about the daemon's incarnations: which one runs
//! (its pid and start time), whether it is down on purpose (the runner SIGKILLed it and is
//! starting the next one on the same socket and state dir), and the ids every incarnation
//! handed out, so an id reused after a restart is caught.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Default)]
pub struct Life {
    /// Incremented when the daemon is SIGKILLed by the runner (0: the first incarnation).
    epoch: AtomicU64,
    /// True from just before the runner's SIGKILL until the next incarnation answers.
    down: AtomicBool,
    /// The running incarnation: (pid, start time in clock ticks).
    current: Mutex<(i32, u64)>,
    /// Every process id a `process start` answered, with the epoch that gave it.
    ids: Mutex<HashMap<String, u64>>,
}

impl Life {
    pub fn new(pid: i32, start: u64) -> Life {
        let life = Life::default();
        *life.current.lock().unwrap_or_else(|e| e.into_inner()) = (pid, start);
        life
    }

    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    pub fn down(&self) -> bool {
        self.down.load(Ordering::SeqCst)
    }

    pub fn current(&self) -> (i32, u64) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The runner is about to SIGKILL the daemon: failures from now on are its doing.
    pub fn going_down(&self) {
        self.down.store(true, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The next incarnation answers.
    pub fn up(&self, pid: i32, start: u64) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = (pid, start);
        self.down.store(false, Ordering::SeqCst);
    }

    /// Record an id handed out in `epoch`; returns the epoch that handed it out before, if
    /// any (an id must never come twice).
    pub fn note_id(&self, id: &str, epoch: u64) -> Option<u64> {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        match ids.get(id) {
            Some(&before) => Some(before),
            None => {
                ids.insert(id.to_string(), epoch);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Life;

    #[test]
    fn an_id_handed_out_twice_is_caught_with_the_incarnation_that_gave_it_first() {
        let life = Life::new(1, 1);
        assert_eq!(life.note_id("p1", 0), None);
        assert_eq!(life.note_id("p2", 0), None);
        life.going_down();
        assert!(life.down());
        life.up(2, 2);
        assert_eq!(
            (life.epoch(), life.down(), life.current()),
            (1, false, (2, 2))
        );
        assert_eq!(life.note_id("p3", 1), None);
        assert_eq!(life.note_id("p1", 1), Some(0));
    }
}
