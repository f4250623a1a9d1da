//! Idle and hard time-to-live of a resource: the idle deadline moves with every use, the hard
//! one never does; whichever comes first ends the resource.

use std::time::{Duration, Instant};

/// Why a TTL ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    Idle,
    Hard,
}

impl std::fmt::Display for Expiry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expiry::Idle => "idle TTL expired",
            Expiry::Hard => "hard TTL expired",
        })
    }
}

#[derive(Clone, Debug)]
pub struct Ttl {
    idle: Option<Duration>,
    hard_deadline: Option<Instant>,
    last_touch: Instant,
}

impl Ttl {
    /// `idle`: how long the resource may go unused; `hard`: how long it may live at all.
    pub fn new(now: Instant, idle: Option<Duration>, hard: Option<Duration>) -> Self {
        Ttl {
            idle,
            hard_deadline: hard.map(|h| now + h),
            last_touch: now,
        }
    }

    /// Record a use.
    pub fn touch(&mut self, now: Instant) {
        self.last_touch = now;
    }

    /// When the resource ends unless touched again.
    pub fn deadline(&self) -> Option<Instant> {
        let idle = self.idle.map(|i| self.last_touch + i);
        match (idle, self.hard_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether (and why) the TTL has run out at `now`.
    pub fn expired(&self, now: Instant) -> Option<Expiry> {
        if self.hard_deadline.is_some_and(|d| now >= d) {
            return Some(Expiry::Hard);
        }
        if self.idle.is_some_and(|i| now >= self.last_touch + i) {
            return Some(Expiry::Idle);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_moves_with_use_and_hard_does_not() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut ttl = Ttl::new(t0, Some(s(10)), Some(s(25)));
        assert_eq!(ttl.deadline(), Some(t0 + s(10)));
        assert_eq!(ttl.expired(t0 + s(9)), None);
        ttl.touch(t0 + s(9));
        assert_eq!(ttl.expired(t0 + s(12)), None);
        assert_eq!(ttl.expired(t0 + s(19)), Some(Expiry::Idle));
        ttl.touch(t0 + s(18));
        assert_eq!(ttl.deadline(), Some(t0 + s(25)));
        assert_eq!(ttl.expired(t0 + s(25)), Some(Expiry::Hard));
        let none = Ttl::new(t0, None, None);
        assert_eq!(none.deadline(), None);
        assert_eq!(none.expired(t0 + s(1_000_000)), None);
    }
}
