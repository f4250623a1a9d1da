//! The actor of one debug session, under the `debug_adapters` supervisor: it starts the
//! adapter child (or connects to a debug server), owns its process guard, so the adapter's
//! whole tree (the debuggee with it) is killed and reaped when it goes, watches the hard
//! TTL, and runs the event task ([`pump`]) that hands the adapter's events to the
//! [`Session`]. Its mailbox only takes short messages.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::mpsc;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard};

use super::streams::{connect_listening, read_program_output, read_stderr};
use super::{Connect, EndKind, Session};
use crate::client::{DapClient, Incoming};
use crate::config::Transport;

/// How often the actor looks at its TTL.
const TICK: Duration = Duration::from_millis(250);
/// Cap on one frame from an adapter.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// Reads the adapter's events and reverse requests until its stream ends.
async fn pump(
    session: Arc<Session>,
    mut incoming: mpsc::Receiver<Incoming>,
    actor: ActorRef<SessionMsg>,
) {
    while let Some(message) = incoming.recv().await {
        match message {
            Incoming::Event { event, body } => session.on_event(&event, &body),
            Incoming::Request { seq, command, .. } => {
                // The program runs inside the adapter (`console: internalConsole`): no
                // terminal to run it in, and no child sessions.
                tracing::debug!(session = session.id, command, "reverse request refused");
                if let Some(client) = session.client() {
                    let _ = client.respond(
                        seq,
                        &command,
                        Some(&format!(
                            "toolvisor does not support the reverse request `{command}`"
                        )),
                    );
                }
            }
            Incoming::Closed { reason } => {
                session.update(|s| s.closed = Some(reason.clone()));
                let _ = actor.cast(SessionMsg::Closed(reason));
                return;
            }
        }
    }
}

pub(crate) struct SessionActor;

pub(crate) struct SessionArgs {
    pub(crate) session: Arc<Session>,
    pub(crate) connect: Connect,
}

pub(crate) enum SessionMsg {
    /// Look at the hard TTL.
    Tick,
    /// The adapter child was reaped.
    Exited(ExitStatus),
    /// The adapter's stream ended.
    Closed(String),
}

pub(crate) struct SessionState {
    /// Kills and reaps the adapter's whole tree (the debuggee with it) when the actor goes,
    /// however it goes. `None` for a session attached over TCP (nothing of ours runs).
    _guard: Option<ProcessGuard>,
    session: Arc<Session>,
    expiring: bool,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = SessionArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SessionMsg>,
        args: SessionArgs,
    ) -> Result<SessionState, ActorProcessingErr> {
        let session = args.session;
        let label = format!("debug/{}", session.id);
        let (client, incoming, guard) = match args.connect {
            Connect::Spawn {
                resolved,
                cwd,
                launcher,
                address_wait,
            } => {
                let stdio = resolved.transport == Transport::Stdio;
                let mut spec = launcher.spec(
                    &resolved.program.display().to_string(),
                    &resolved.args,
                    &cwd,
                    stdio,
                    &label,
                );
                for (key, value) in &resolved.env {
                    spec.env.retain(|(k, _)| k != key);
                    spec.env.push((key.clone(), value.clone()));
                }
                let spawned = process::spawn(spec)
                    .await
                    .map_err(|e| format!("cannot start the {} adapter: {e}", resolved.name))?;
                let pid = spawned.guard.main_pid();
                session.adapter_pid.store(pid, Ordering::Relaxed);
                tokio::spawn(read_stderr(spawned.stderr, session.clone()));
                let _ = session.exit.set(spawned.exit.clone());
                let (client, incoming) = if stdio {
                    let stdin = spawned
                        .stdin
                        .ok_or_else(|| "the adapter's stdin pipe is missing".to_string())?;
                    DapClient::start(spawned.stdout, stdin, &label, MAX_FRAME)
                } else {
                    // Until it connects, a failure drops the guard: the adapter is killed and
                    // reaped like any child of a failed start.
                    let mut stdout = spawned.stdout;
                    let stream = match connect_listening(
                        &session,
                        &resolved,
                        &mut stdout,
                        spawned.exit.clone(),
                        address_wait,
                    )
                    .await
                    {
                        Ok((stream, rest)) => {
                            session.update(|s| s.program_output_open = true);
                            let (drain, drains) = tokio::sync::mpsc::channel(1);
                            let _ = session.output_drain.set(drain);
                            tokio::spawn(read_program_output(
                                stdout,
                                rest,
                                session.clone(),
                                drains,
                            ));
                            stream
                        }
                        Err(failure) => {
                            let message = failure.message.clone();
                            let _ = session.start_failure.set(failure);
                            return Err(message.into());
                        }
                    };
                    let (r, w) = stream.into_split();
                    DapClient::start(r, w, &label, MAX_FRAME)
                };
                let mut exit = spawned.exit.clone();
                let me = myself.clone();
                tokio::spawn(async move {
                    if let Ok(status) = exit.wait_for(Option::is_some).await
                        && let Some(status) = *status
                    {
                        let _ = me.cast(SessionMsg::Exited(status));
                    }
                });
                tracing::info!(
                    session = session.id,
                    pid,
                    command = session.command,
                    "debug adapter started"
                );
                (client, incoming, Some(spawned.guard))
            }
            Connect::Tcp { port } => {
                let stream = tokio::time::timeout(
                    Duration::from_secs(5),
                    tokio::net::TcpStream::connect(("127.0.0.1", port)),
                )
                .await
                .map_err(|_| format!("connecting to 127.0.0.1:{port} took longer than 5 s"))?
                .map_err(|e| format!("cannot connect to 127.0.0.1:{port}: {e}"))?;
                let _ = stream.set_nodelay(true);
                let (r, w) = stream.into_split();
                let (client, incoming) = DapClient::start(r, w, &label, MAX_FRAME);
                tracing::info!(session = session.id, port, "attached to a debug server");
                (client, incoming, None)
            }
        };
        let _ = session.client.set(client);
        tokio::spawn(pump(session.clone(), incoming, myself.clone()));
        let pid = session.adapter_pid();
        session.status.update(|i| i.pid = pid);
        session.show();
        myself.send_interval(TICK, || SessionMsg::Tick);
        Ok(SessionState {
            _guard: guard,
            session,
            expiring: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<SessionMsg>,
        msg: SessionMsg,
        state: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        let session = &state.session;
        match msg {
            SessionMsg::Tick => {
                if !state.expiring && session.deadline().is_some_and(|d| Instant::now() >= d) {
                    state.expiring = true;
                    let message = format!(
                        "the debug session {} expired: it reached its hard TTL of {} s and was terminated",
                        session.id,
                        session.ttl.as_secs()
                    );
                    toolvisor_kit::status::count_event("debug_adapters", "ttl_expiry");
                    tracing::info!(
                        session = session.id,
                        ttl_s = session.ttl.as_secs(),
                        "debug session TTL expired; terminating it"
                    );
                    let me = session.clone();
                    tokio::spawn(async move { me.shutdown(EndKind::Expired, message).await });
                }
                Ok(())
            }
            SessionMsg::Exited(status) => {
                if session.shutting_down.load(Ordering::SeqCst) {
                    myself.stop(Some(format!("adapter {status}")));
                    return Ok(());
                }
                let pid = session
                    .adapter_pid()
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default();
                let words = session.last_words();
                let mut message = format!(
                    "the debug adapter {}{pid} died: {status}; the session and the program it debugged are gone",
                    session.adapter
                );
                if !words.is_empty() {
                    message.push_str(&format!(". Its last words: {words}"));
                }
                tracing::warn!(session = session.id, %status, "debug adapter died");
                session.mark_end(EndKind::Crashed, message.clone());
                Err(message.into())
            }
            SessionMsg::Closed(reason) => {
                if session.exit.get().is_none() && !session.shutting_down.load(Ordering::SeqCst) {
                    // Attached over TCP: the server went away.
                    let message = format!(
                        "the debug server at {} closed the connection ({reason}); the session is over",
                        session.command
                    );
                    session.mark_end(EndKind::Crashed, message.clone());
                    myself.stop(Some(message));
                }
                Ok(())
            }
        }
    }
}
