//! What structural parsing may hold in memory: a daemon-wide budget of bytes being parsed at
//! once ([`ParseBudget`]) and the rule that leaves minified files unparsed ([`Limits`]).
//!
//! A syntax tree costs many times its source (a 28 MB minified file took 1.9 GiB), so the
//! budget counts source bytes: a file takes as many bytes as it is long (at most the whole
//! budget, so a file larger than the budget is parsed alone), from before it is read until
//! its tree is dropped. A call that finds no room waits a bounded time, then the call fails
//! as [`crate::Error::Busy`], naming the budget and its config key.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Config key of the budget, named in every `busy` answer.
pub const BUDGET_KEY: &str = "structural.parse_budget_bytes";
/// Config key of how long a file waits for room in the budget.
pub const WAIT_KEY: &str = "structural.parse_wait_ms";
/// Config key of the size above which a file's longest line is checked.
pub const MINIFIED_KEY: &str = "structural.max_minified_bytes";
/// Config key of the longest line such a file may have.
pub const LINE_KEY: &str = "structural.max_line_bytes";

/// Default budget: bytes of source parsed at once, daemon-wide.
pub const DEFAULT_BUDGET_BYTES: u64 = 64 * 1024 * 1024;
/// Default wait for room in the budget.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// Default size above which a file's longest line is checked.
pub const DEFAULT_MINIFIED_BYTES: u64 = 1024 * 1024;
/// Default longest line of a file above [`DEFAULT_MINIFIED_BYTES`].
pub const DEFAULT_LINE_BYTES: u64 = 64 * 1024;

/// How often a waiting file looks at its call's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// The bytes of source every structural call together may be parsing at once.
#[derive(Debug)]
pub struct ParseBudget {
    cap: u64,
    wait: Duration,
    used: Mutex<u64>,
    freed: Condvar,
}

/// Room taken in a [`ParseBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Permit<'a> {
    budget: &'a ParseBudget,
    bytes: u64,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

/// Why a file got no room.
#[derive(Debug)]
pub enum Refused {
    /// The wait ended with the budget still full.
    Busy { waited: Duration },
    /// The call was cancelled while it waited.
    Cancelled,
}

impl ParseBudget {
    /// A budget of `cap` bytes (at least 1); a file waits at most `wait` for room.
    pub fn new(cap: u64, wait: Duration) -> ParseBudget {
        ParseBudget {
            cap: cap.max(1),
            wait,
            used: Mutex::new(0),
            freed: Condvar::new(),
        }
    }

    pub fn cap(&self) -> u64 {
        self.cap
    }

    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// Bytes taken now, by every call.
    pub fn used(&self) -> u64 {
        *self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take room for a file of `bytes` (at most the whole budget), waiting up to the
    /// budget's wait; blocking.
    pub fn take(&self, bytes: u64, cancel: Option<&AtomicBool>) -> Result<Permit<'_>, Refused> {
        let bytes = bytes.clamp(1, self.cap);
        let start = Instant::now();
        let deadline = start + self.wait;
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if *used + bytes <= self.cap {
                *used += bytes;
                return Ok(Permit {
                    budget: self,
                    bytes,
                });
            }
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(Refused::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Refused::Busy {
                    waited: now - start,
                });
            }
            let slice = (deadline - now).min(CANCEL_POLL);
            used = self
                .freed
                .wait_timeout(used, slice)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// What a structural call may parse: the daemon's budget (none: unbounded, for tests and
/// tools outside the daemon) and when a file counts as minified.
#[derive(Clone, Debug)]
pub struct Limits {
    pub budget: Option<Arc<ParseBudget>>,
    /// A file larger than this whose longest line is longer than `line_bytes` is not parsed.
    pub minified_bytes: u64,
    pub line_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            budget: None,
            minified_bytes: DEFAULT_MINIFIED_BYTES,
            line_bytes: DEFAULT_LINE_BYTES,
        }
    }
}

impl Limits {
    /// Why a file of `size` bytes whose longest line is `longest` bytes is not parsed, if it
    /// is not.
    pub fn minified(&self, size: u64, longest: u64) -> Option<String> {
        (size > self.minified_bytes && longest > self.line_bytes).then(|| {
            format!(
                "minified: a {} file with a line of {}; files over {} with lines over {} are skipped ({MINIFIED_KEY}, {LINE_KEY})",
                human(size),
                human(longest),
                human(self.minified_bytes),
                human(self.line_bytes)
            )
        })
    }

    /// [`Limits::minified`] for a text already read.
    pub fn minified_text(&self, bytes: &[u8]) -> Option<String> {
        if bytes.len() as u64 <= self.minified_bytes {
            return None;
        }
        self.minified(bytes.len() as u64, longest_line(bytes))
    }

    /// [`Limits::minified`] for a file not read yet: read in chunks (never whole) only when
    /// it is over `minified_bytes`.
    pub fn minified_file(&self, file: &mut std::fs::File, size: u64) -> Option<String> {
        use std::io::Read as _;
        if size <= self.minified_bytes {
            return None;
        }
        let mut chunk = vec![0u8; 64 * 1024];
        let (mut longest, mut current) = (0u64, 0u64);
        loop {
            let n = match file.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for piece in chunk[..n].split_inclusive(|b| *b == b'\n') {
                current += piece.len() as u64;
                if piece.ends_with(b"\n") {
                    longest = longest.max(current - 1);
                    current = 0;
                }
            }
        }
        self.minified(size, longest.max(current))
    }
}

/// The length in bytes of the longest line of `bytes` (without its newline).
pub fn longest_line(bytes: &[u8]) -> u64 {
    let mut longest = 0usize;
    let mut start = 0usize;
    for nl in memchr::memchr_iter(b'\n', bytes) {
        longest = longest.max(nl - start);
        start = nl + 1;
    }
    longest.max(bytes.len() - start) as u64
}

/// `n` bytes for a person: `28.0 MiB`, `64 KiB`, `900 bytes`.
pub fn human(n: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if n >= MIB {
        if n.is_multiple_of(MIB) {
            format!("{} MiB", n / MIB)
        } else {
            format!("{:.1} MiB", n as f64 / MIB as f64)
        }
    } else if n >= KIB {
        if n.is_multiple_of(KIB) {
            format!("{} KiB", n / KIB)
        } else {
            format!("{:.1} KiB", n as f64 / KIB as f64)
        }
    } else {
        format!("{n} bytes")
    }
}

/// The `busy` answer's words for a file that found no room.
pub fn busy_message(budget: &ParseBudget, path: &Path, size: u64, waited: Duration) -> String {
    format!(
        "{} ({}) waited {} ms for room to be parsed: structural calls are parsing {} of {} at once already, the daemon-wide cap ({BUDGET_KEY}); nothing was parsed past the cap",
        path.display(),
        human(size),
        waited.as_millis(),
        human(budget.used()),
        human(budget.cap())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_the_cap_waits_then_is_refused_and_room_given_back_is_taken() {
        let budget = ParseBudget::new(100, Duration::from_millis(20));
        let held = budget.take(80, None).unwrap();
        assert_eq!(budget.used(), 80);
        match budget.take(30, None) {
            Err(Refused::Busy { waited }) => assert!(waited >= Duration::from_millis(20)),
            other => panic!("not refused: {other:?}"),
        }
        // A file larger than the whole budget takes all of it: parsed alone, not never.
        drop(held);
        assert_eq!(budget.used(), 0);
        let alone = budget.take(1_000, None).unwrap();
        assert_eq!(budget.used(), 100);
        assert!(matches!(budget.take(1, None), Err(Refused::Busy { .. })));
        drop(alone);
        let a = budget.take(60, None).unwrap();
        let b = budget.take(40, None).unwrap();
        assert_eq!(budget.used(), 100);
        drop((a, b));
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_waiting_file_gets_room_when_another_gives_it_back() {
        let budget = Arc::new(ParseBudget::new(100, Duration::from_secs(600)));
        let held = budget.take(100, None).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let budget = budget.clone();
            std::thread::spawn(move || {
                let got = budget.take(50, None).is_ok();
                tx.send(got).unwrap();
            })
        };
        // The waiter cannot have room while `held` lives.
        assert!(rx.try_recv().is_err());
        drop(held);
        assert!(rx.recv().unwrap());
        waiter.join().unwrap();
    }

    #[test]
    fn a_cancelled_call_stops_waiting() {
        let budget = ParseBudget::new(10, Duration::from_secs(600));
        let _held = budget.take(10, None).unwrap();
        let cancel = AtomicBool::new(true);
        assert!(matches!(
            budget.take(5, Some(&cancel)),
            Err(Refused::Cancelled)
        ));
    }

    #[test]
    fn busy_names_the_cap_and_its_key() {
        let budget = ParseBudget::new(64 * 1024 * 1024, Duration::ZERO);
        let text = busy_message(
            &budget,
            Path::new("/w/big.js"),
            3 * 1024 * 1024,
            Duration::from_millis(5),
        );
        assert!(text.contains("/w/big.js (3 MiB)"), "{text}");
        assert!(text.contains("of 64 MiB at once"), "{text}");
        assert!(text.contains("structural.parse_budget_bytes"), "{text}");
    }

    #[test]
    fn a_large_file_with_a_long_line_is_minified_and_states_the_rule() {
        let limits = Limits::default();
        let why = limits.minified(28_000_000, 28_000_000).unwrap();
        assert_eq!(
            why,
            "minified: a 26.7 MiB file with a line of 26.7 MiB; files over 1 MiB with lines over 64 KiB are skipped (structural.max_minified_bytes, structural.max_line_bytes)"
        );
        // Small files, and large files of short lines, are parsed.
        assert!(limits.minified(1024 * 1024, 1024 * 1024).is_none());
        assert!(limits.minified(30_000_000, 64 * 1024).is_none());
        let mut text = "x".repeat(70_000).into_bytes();
        text.push(b'\n');
        text.extend(std::iter::repeat_n(b'y', 1_000_000));
        assert_eq!(longest_line(&text), 1_000_000);
        assert!(limits.minified_text(&text).is_some());
        let lines = "let a = 1;\n".repeat(200_000);
        assert!(limits.minified_text(lines.as_bytes()).is_none());
    }

    #[test]
    fn the_longest_line_of_a_file_is_found_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.js");
        let mut text = "short\n".repeat(10);
        text.push_str(&"z".repeat(200_000));
        text.push('\n');
        text.push_str(&"q".repeat(1_500_000));
        std::fs::write(&path, &text).unwrap();
        let limits = Limits::default();
        let mut file = std::fs::File::open(&path).unwrap();
        let why = limits.minified_file(&mut file, text.len() as u64).unwrap();
        assert!(why.contains("with a line of 1.4 MiB"), "{why}");
        let small = Limits {
            minified_bytes: 10 * 1024 * 1024,
            ..Limits::default()
        };
        let mut file = std::fs::File::open(&path).unwrap();
        assert!(small.minified_file(&mut file, text.len() as u64).is_none());
    }
}
