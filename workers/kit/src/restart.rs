//! Restart policy as data (permanent / transient / temporary, intensity window, backoff) and
//! the tracker that turns a child's exit into a decision.
//!
//! Semantics follow Erlang/OTP's supervisor: a child may be restarted at most `intensity`
//! times within any `period`; one more failure inside the window and the supervisor gives
//! up, leaving the child `failed` with its last error. Restarts wait an exponential backoff
//! that starts at `backoff_base` and doubles per restart still inside the window.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// When a child that ended is started again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Always restarted, whether it failed or ended normally.
    Permanent,
    /// Restarted only when it failed.
    Transient,
    /// Never restarted.
    Temporary,
}

/// A child's restart policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartPolicy {
    pub restart: Restart,
    /// Most restarts allowed within `period`.
    pub intensity: u32,
    pub period: Duration,
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            restart: Restart::Permanent,
            intensity: 5,
            period: Duration::from_secs(60),
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(30),
        }
    }
}

impl RestartPolicy {
    pub fn with_restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }
}

/// How a child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It finished or was stopped without error.
    Normal,
    /// It crashed, returned an error, or could not start.
    Failed,
}

/// What the supervisor does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Start it again after `after`; this is restart number `attempt` in the window.
    Restart { after: Duration, attempt: u32 },
    /// The restart intensity is exhausted: leave it failed.
    GiveUp,
    /// The policy does not restart this exit: leave it ended.
    Done,
}

/// Counts restarts within the intensity window for one child.
#[derive(Clone, Debug)]
pub struct RestartTracker {
    policy: RestartPolicy,
    recent: VecDeque<Instant>,
    total: u32,
}

impl RestartTracker {
    pub fn new(policy: RestartPolicy) -> Self {
        RestartTracker {
            policy,
            recent: VecDeque::new(),
            total: 0,
        }
    }

    pub fn policy(&self) -> &RestartPolicy {
        &self.policy
    }

    /// Restarts made over the child's whole life.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Decide what follows an exit observed at `now`, and count the restart if there is one.
    pub fn decide(&mut self, exit: Exit, now: Instant) -> Decision {
        let restart = match (self.policy.restart, exit) {
            (Restart::Permanent, _) => true,
            (Restart::Transient, Exit::Failed) => true,
            (Restart::Transient, Exit::Normal) | (Restart::Temporary, _) => false,
        };
        if !restart {
            return Decision::Done;
        }
        while let Some(&first) = self.recent.front() {
            if now.saturating_duration_since(first) >= self.policy.period {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        if self.recent.len() as u32 >= self.policy.intensity {
            return Decision::GiveUp;
        }
        self.recent.push_back(now);
        self.total += 1;
        let attempt = self.recent.len() as u32;
        let factor = 1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX);
        let after = self
            .policy
            .backoff_base
            .saturating_mul(factor)
            .min(self.policy.backoff_max);
        Decision::Restart { after, attempt }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(restart: Restart) -> RestartPolicy {
        RestartPolicy::default().with_restart(restart)
    }

    #[test]
    fn gives_up_after_intensity_within_the_period() {
        let mut t = RestartTracker::new(policy(Restart::Permanent));
        let t0 = Instant::now();
        let mut backoffs = Vec::new();
        for i in 0..5 {
            match t.decide(Exit::Failed, t0 + Duration::from_millis(i * 10)) {
                Decision::Restart { after, attempt } => {
                    assert_eq!(attempt, i as u32 + 1);
                    backoffs.push(after.as_millis());
                }
                other => panic!("restart {i} should be allowed, got {other:?}"),
            }
        }
        assert_eq!(backoffs, vec![100, 200, 400, 800, 1600]);
        assert_eq!(
            t.decide(Exit::Failed, t0 + Duration::from_secs(1)),
            Decision::GiveUp
        );
        assert_eq!(t.total(), 5);
    }

    #[test]
    fn the_window_slides() {
        let mut t = RestartTracker::new(policy(Restart::Permanent));
        let t0 = Instant::now();
        for i in 0..5 {
            assert!(matches!(
                t.decide(Exit::Failed, t0 + Duration::from_secs(i)),
                Decision::Restart { .. }
            ));
        }
        // 60.5 s after the first restart, exactly one slot is free again.
        match t.decide(Exit::Failed, t0 + Duration::from_millis(60_500)) {
            Decision::Restart { attempt, .. } => assert_eq!(attempt, 5),
            other => panic!("expected a restart, got {other:?}"),
        }
    }

    #[test]
    fn transient_and_temporary_follow_their_rules() {
        let now = Instant::now();
        let mut t = RestartTracker::new(policy(Restart::Transient));
        assert_eq!(t.decide(Exit::Normal, now), Decision::Done);
        assert!(matches!(
            t.decide(Exit::Failed, now),
            Decision::Restart { .. }
        ));
        let mut t = RestartTracker::new(policy(Restart::Temporary));
        assert_eq!(t.decide(Exit::Failed, now), Decision::Done);
        assert_eq!(t.decide(Exit::Normal, now), Decision::Done);
        let mut t = RestartTracker::new(policy(Restart::Permanent));
        assert!(matches!(
            t.decide(Exit::Normal, now),
            Decision::Restart { .. }
        ));
    }

    #[test]
    fn backoff_is_capped() {
        let mut p = policy(Restart::Permanent);
        p.intensity = 40;
        p.backoff_max = Duration::from_secs(2);
        let mut t = RestartTracker::new(p);
        let now = Instant::now();
        let mut last = Duration::ZERO;
        for _ in 0..40 {
            if let Decision::Restart { after, .. } = t.decide(Exit::Failed, now) {
                last = after;
            }
        }
        assert_eq!(last, Duration::from_secs(2));
    }
}
