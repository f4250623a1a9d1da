//! The accept loop: `serve` takes a bound listener and a shutdown future (the `serve`
//! command passes SIGTERM/SIGINT; the end-to-end tests run the real binary on a temp
//! socket), starts the daemon, admits connections under the session cap and hands each to
//! its session, tells a service manager it is ready (`NOTIFY_SOCKET`), serves the opt-in
//! metrics endpoint, and at shutdown drains: calls in flight finish up to
//! `limits.drain_timeout_s`, new ones get `shutting_down`, then resources stop in order.
//!
//! The drain, in order: the listener is dropped (a service manager's socket queues new connections
//! for the next start), `Daemon::begin_drain` makes every new call answer `shutting_down` (decided
//! where the session admits a call), the calls in flight run to their end or to
//! `limits.drain_timeout_s`, the answers already queued are flushed to their clients, and only then
//! does `Started::shutdown` stop the resources, kind by kind in `daemon::STOP_ORDER`, each kind's
//! processes killed and reaped by their guards (up to 5 s) before the next kind's turn. The accept
//! loop checks every peer's uid and keeps a reserve descriptor, so that when descriptors run out
//! (`EMFILE`) one client still gets in to hear `busy`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{UnixListener, UnixStream};
use toolvisor_kit::systemd::Notifier;
use toolvisor_protocol::error::{ErrorKind, ToolError};

use crate::admission::{Admission, ReserveFd, refuse};
use crate::config::Config;
use crate::daemon::Daemon;
pub use crate::daemon::ServeOptions;
use crate::listener::Bound;

/// How long a connection past `limits.max_sessions` waits for a place before it is told
/// `busy`.
const ADMIT_WAIT: Duration = Duration::from_secs(2);

/// The errno values of a process or system out of file descriptors.
mod libc_errno {
    pub const EMFILE: i32 = nix::errno::Errno::EMFILE as i32;
    pub const ENFILE: i32 = nix::errno::Errno::ENFILE as i32;
}

/// Run the daemon on `bound` until `shutdown` completes.
pub async fn serve(
    mut bound: Bound,
    config: Config,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let started = crate::daemon::start(&bound, config, &options).await?;
    let daemon = started.daemon.clone();
    let listener = tokio::net::UnixListener::from_std(
        bound
            .take_listener()
            .ok_or_else(|| anyhow::anyhow!("the socket's listener was already taken"))?,
    )?;
    let metrics = serve_metrics(&daemon).await?;
    let manager = Arc::new(toolvisor_kit::systemd::Notifier::from_env());
    let watchdog = start_watchdog(&manager);
    tracing::info!(socket = %bound.path.display(), pid = std::process::id(), config = daemon.config().source, inherited = bound.inherited, "toolvisor serving");
    manager.notify(&format!(
        "READY=1\nMAINPID={}\nSTATUS=serving on {}",
        std::process::id(),
        bound.path.display()
    ));
    let my_uid = nix::unistd::geteuid().as_raw();
    let admission = Admission::new(daemon.config().limits.max_sessions);
    let mut reserve = ReserveFd::new();
    tokio::pin!(shutdown);
    loop {
        reserve.refill();
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => admit(stream, &daemon, &admission, my_uid),
                Err(e) => accept_failed(e, &listener, &admission, &mut reserve).await,
            }
        }
    }
    // Drain: no new connections (a service manager's socket queues them for the next
    // start), new calls on open ones get `shutting_down`, calls in flight finish up to the
    // deadline, then the resources stop kind by kind.
    drop(listener);
    drain(&daemon, &manager).await;
    manager.notify("STATUS=stopping resources");
    if let Some(task) = watchdog {
        task.abort();
    }
    if let Some(task) = metrics {
        task.abort();
    }
    drop(daemon);
    started.shutdown().await;
    bound.cleanup();
    tracing::info!("drained and stopped");
    Ok(())
}

/// Starts the metrics endpoint when `[metrics] listen` names one.
async fn serve_metrics(
    daemon: &Arc<Daemon>,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    Ok(match &daemon.config().metrics.listen {
        Some(listen) => {
            let endpoint =
                crate::metrics::Endpoint::parse(listen).map_err(|e| anyhow::anyhow!(e))?;
            let metrics = crate::metrics::Listener::bind(&endpoint).await?;
            tracing::info!(endpoint = listen, "serving metrics at /metrics");
            Some(tokio::spawn(metrics.serve(daemon.clone())))
        }
        None => None,
    })
}

/// Starts the task that tells an active service manager's watchdog we are alive.
fn start_watchdog(manager: &Arc<Notifier>) -> Option<tokio::task::JoinHandle<()>> {
    toolvisor_kit::systemd::watchdog_interval()
        .filter(|_| manager.active())
        .map(|every| {
            let manager = manager.clone();
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    manager.notify("WATCHDOG=1");
                }
            })
        })
}

/// An accepted connection: our own user's goes to its session under the session cap (or
/// hears `busy`), another user's is refused.
fn admit(stream: UnixStream, daemon: &Arc<Daemon>, admission: &Arc<Admission>, my_uid: u32) {
    let cred = stream.peer_cred();
    match cred {
        Ok(cred) if cred.uid() == my_uid => {
            let daemon = daemon.clone();
            let pid = cred.pid().and_then(|p| u32::try_from(p).ok());
            match admission.try_admit() {
                Some(admitted) => {
                    tokio::spawn(crate::session::run(daemon, stream, pid, admitted));
                }
                None => {
                    // At the cap: a place may free up shortly (connections that
                    // never said Hello are shed); else `busy`, never a stall.
                    let admission = admission.clone();
                    tokio::spawn(async move {
                        match admission.admit_within(ADMIT_WAIT).await {
                            Some(admitted) => {
                                crate::session::run(daemon, stream, pid, admitted).await
                            }
                            None => {
                                tracing::warn!(
                                    cap = admission.cap,
                                    "session cap reached: refused a connection"
                                );
                                refuse(stream, admission.busy()).await;
                            }
                        }
                    });
                }
            }
        }
        other => {
            let who = match &other {
                Ok(c) => match c.pid() {
                    Some(pid) => format!("uid {} (pid {pid})", c.uid()),
                    None => format!("uid {}", c.uid()),
                },
                Err(e) => format!("unknown peer ({e})"),
            };
            tracing::warn!(
                peer = who,
                daemon_uid = my_uid,
                "refused a connection from another user"
            );
            tokio::spawn(crate::session::refuse_peer(stream, who, my_uid));
        }
    }
}

/// A failed accept: out of descriptors, room is made (or one client hears `busy`); then a
/// short pause before the next accept.
async fn accept_failed(
    e: std::io::Error,
    listener: &UnixListener,
    admission: &Admission,
    reserve: &mut ReserveFd,
) {
    if matches!(
        e.raw_os_error(),
        Some(libc_errno::EMFILE | libc_errno::ENFILE)
    ) {
        // Out of fds. Connections that never said Hello go first; if there
        // are none, the reserve fd lets one client in to hear `busy`.
        let shed = admission.shed(8, crate::admission::SHED_WHEN_OUT_OF_FDS);
        if shed == 0 {
            reserve.release();
            if let Ok((stream, _)) = listener.accept().await {
                tracing::warn!("out of file descriptors: refused a connection");
                tokio::spawn(refuse(
                    stream,
                    ToolError::new(
                        ErrorKind::Busy,
                        "the daemon has run out of file descriptors (RLIMIT_NOFILE)",
                        "close idle connections and retry, or raise the daemon's open-file limit (`ulimit -n`) or lower `max_sessions` under `[limits]`",
                    ),
                ));
            }
        } else {
            tracing::warn!(
                shed,
                "out of file descriptors: closed connections that had not said Hello"
            );
        }
        // Let the closed connections' fds go before accepting again.
        tokio::time::sleep(Duration::from_millis(10)).await;
        return;
    }
    tracing::warn!(error = %e, "accept failed");
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// New calls get `shutting_down`; the calls in flight run up to `limits.drain_timeout_s`,
/// then the answers already queued are flushed to their clients.
async fn drain(daemon: &Daemon, manager: &Notifier) {
    daemon.begin_drain();
    let running = daemon.calls_in_flight();
    let timeout = Duration::from_secs(daemon.config().limits.drain_timeout_s);
    tracing::info!(
        calls_in_flight = running,
        timeout_s = timeout.as_secs(),
        "draining"
    );
    manager.notify(&format!(
        "STOPPING=1\nSTATUS=draining {running} call(s) in flight"
    ));
    let left = daemon.calls_done(Instant::now() + timeout).await;
    if left > 0 {
        tracing::warn!(
            calls = left,
            timeout_s = timeout.as_secs(),
            "calls still running at the drain deadline; stopping their resources under them"
        );
    }
    // Answers already queued reach their clients before the connections close.
    daemon.outboxes_flushed(Instant::now() + OUTBOX_FLUSH).await;
}

/// How long a drain waits for queued answers to be written to their clients.
const OUTBOX_FLUSH: Duration = Duration::from_secs(2);
