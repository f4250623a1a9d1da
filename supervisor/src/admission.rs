//! Who may connect: a cap on connections served at once (`limits.max_sessions`, counting
//! those still before their Hello), the connections still waiting for their Hello (the first
//! to be shed when the cap is reached or file descriptors run out), and a reserve file
//! descriptor so the accept loop can always answer a new client, if only with `busy`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use toolvisor_protocol::codec::{self, Codec};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::wire::DaemonFrame;

/// File descriptors left for everything but sessions (language servers, kernels, processes,
/// files) when the session cap is fitted to a low `RLIMIT_NOFILE`.
const FD_HEADROOM: u64 = 48;

/// A connection waiting this long for its Hello may be shed to make room for a new one.
pub const SHED_AFTER: Duration = Duration::from_secs(1);

/// When fds run out, connections silent this long are shed (a client sends its Hello right
/// after connecting; one just accepted is not shed for being slow by a few milliseconds).
pub const SHED_WHEN_OUT_OF_FDS: Duration = Duration::from_millis(250);

/// The session cap and the connections that have not said Hello yet.
pub struct Admission {
    slots: Arc<Semaphore>,
    /// The cap in force (the configured one, fitted to the fd limit).
    pub cap: usize,
    waiting: Mutex<BTreeMap<u64, (Instant, oneshot::Sender<()>)>>,
    next: AtomicU64,
}

/// A connection's place under the cap, held until it closes.
pub struct Admitted {
    pub slot: OwnedSemaphorePermit,
    pub pre_hello: PreHello,
}

/// A connection that has not said Hello yet; `shed` fires when it must make room. Dropped
/// once the Hello is in.
pub struct PreHello {
    admission: Arc<Admission>,
    id: u64,
    pub shed: oneshot::Receiver<()>,
}

impl Drop for PreHello {
    fn drop(&mut self) {
        lock(&self.admission.waiting).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Admission {
    /// A cap of `max_sessions`, lowered to fit the process's fd limit (each session holds
    /// one fd; [`FD_HEADROOM`] stay for the tools).
    pub fn new(max_sessions: usize) -> Arc<Admission> {
        let nofile = nofile();
        let fitted = nofile
            .map(|n| usize::try_from(n.saturating_sub(FD_HEADROOM)).unwrap_or(usize::MAX))
            .unwrap_or(usize::MAX)
            .max(1);
        let cap = max_sessions.min(fitted);
        if cap < max_sessions {
            tracing::warn!(
                max_sessions,
                cap,
                nofile,
                "limits.max_sessions lowered to fit the open-file limit (RLIMIT_NOFILE)"
            );
        }
        Arc::new(Admission {
            slots: Arc::new(Semaphore::new(cap)),
            cap,
            waiting: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
        })
    }

    fn admitted(self: &Arc<Self>, slot: OwnedSemaphorePermit) -> Admitted {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id, (Instant::now(), tx));
        Admitted {
            slot,
            pre_hello: PreHello {
                admission: self.clone(),
                id,
                shed: rx,
            },
        }
    }

    /// A place under the cap now, if one is free.
    pub fn try_admit(self: &Arc<Self>) -> Option<Admitted> {
        let slot = self.slots.clone().try_acquire_owned().ok()?;
        Some(self.admitted(slot))
    }

    /// A place under the cap within `wait`, shedding connections that have waited
    /// [`SHED_AFTER`] without a Hello to make room. None at once when every place is held
    /// by a client that said Hello (nothing to shed: `busy` now, not after a wait).
    pub async fn admit_within(self: &Arc<Self>, wait: Duration) -> Option<Admitted> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(admitted) = self.try_admit() {
                return Some(admitted);
            }
            if lock(&self.waiting).is_empty() {
                return None;
            }
            self.shed(1, SHED_AFTER);
            let retry = (tokio::time::Instant::now() + SHED_AFTER / 4).min(deadline);
            match tokio::time::timeout_at(retry, self.slots.clone().acquire_owned()).await {
                Ok(Ok(slot)) => return Some(self.admitted(slot)),
                Ok(Err(_)) => return None,
                Err(_) if retry >= deadline => return None,
                Err(_) => {}
            }
        }
    }

    /// Close up to `n` of the oldest connections that have waited at least `min_wait` for
    /// their Hello; returns how many were told to go.
    pub fn shed(&self, n: usize, min_wait: Duration) -> usize {
        let mut waiting = lock(&self.waiting);
        let now = Instant::now();
        let ids: Vec<u64> = waiting
            .iter()
            .filter(|(_, (since, _))| now.duration_since(*since) >= min_wait)
            .take(n)
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            if let Some((_, tx)) = waiting.remove(id) {
                let _ = tx.send(());
            }
        }
        ids.len()
    }

    /// The refusal a connection gets when every place is taken.
    pub fn busy(&self) -> ToolError {
        ToolError::new(
            ErrorKind::Busy,
            format!(
                "the daemon is serving its maximum of {} connections (limits.max_sessions)",
                self.cap
            ),
            "close idle connections and retry, or raise `max_sessions` under `[limits]` in the daemon's config (and the open-file limit, `ulimit -n`)",
        )
    }
}

/// The soft open-file limit in force. It is not raised: children inherit it, and some
/// programs walk every possible fd up to it when they spawn.
/// Read from `/proc/self/limits` (no `unsafe`, no extra dependency).
fn nofile() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A file descriptor held in reserve: when `accept` fails for want of fds, it is released
/// so one connection can be accepted and told `busy`, then taken again.
pub struct ReserveFd(Option<std::fs::File>);

impl ReserveFd {
    pub fn new() -> ReserveFd {
        ReserveFd(std::fs::File::open("/dev/null").ok())
    }

    /// Give the fd back to the process.
    pub fn release(&mut self) {
        self.0 = None;
    }

    /// Take an fd in reserve again, if none is held (fails quietly while fds are short).
    pub fn refill(&mut self) {
        if self.0.is_none() {
            self.0 = std::fs::File::open("/dev/null").ok();
        }
    }
}

impl Default for ReserveFd {
    fn default() -> Self {
        ReserveFd::new()
    }
}

/// Answer a connection that cannot be served with `err` in a `refused` frame, then close.
/// The frame is in the codec of the client's Hello, told by its first payload byte (JSON
/// when nothing arrives within a second; see docs/PROTOCOL.md).
pub async fn refuse(mut stream: UnixStream, err: ToolError) {
    let mut head = [0u8; 5];
    let codec =
        match tokio::time::timeout(Duration::from_secs(1), stream.read_exact(&mut head)).await {
            Ok(Ok(_)) => Codec::sniff(&head[4..]),
            _ => Codec::Json,
        };
    if let Ok(bytes) = codec::encode_frame(codec, &DaemonFrame::Refused(err), 1 << 20) {
        let _ = stream.write_all(&bytes).await;
    }
    let _ = stream.shutdown().await;
    // Keep reading (and discarding) for a moment: a client still sending its Hello must not
    // get EPIPE before it can read why it was refused.
    let mut sink = [0u8; 512];
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}
