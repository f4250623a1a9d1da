//! One incarnation of a model's server as an actor: it owns the server's process guard,
//! reads its output into the tail, polls `GET /v1/models` until the server answers from a
//! socket of its own process tree (then `ready`), ticks for the idle TTL, and fails when the
//! server ends, so the `inference` supervisor restarts it within the policy.

use super::*;

/// One incarnation of a model's server.
pub struct ServerActor;

pub struct ServerArgs {
    pub(super) served: Arc<Served>,
    pub(super) spawned: Spawned,
    pub(super) port: u16,
    pub(super) supervisor: ActorRef<SupervisorMsg>,
    pub(super) ready_timeout: Duration,
    /// Ready only once the port's listening socket is the server's own.
    pub(super) check_owner: bool,
    pub(super) idle_ttl: Option<Duration>,
    pub(super) grace: Duration,
    pub(super) attempt: u32,
}

pub enum ServerMsg {
    Ready(Duration),
    /// No answer in time; `impostor`: something answered, but not from the server's socket.
    NotReady {
        impostor: bool,
    },
    Exited(ExitStatus),
    Tick,
}

pub struct ServerState {
    served: Arc<Served>,
    guard: Option<ProcessGuard>,
    exit: watch::Receiver<Option<ExitStatus>>,
    supervisor: ActorRef<SupervisorMsg>,
    ready_timeout: Duration,
    idle_ttl: Option<Duration>,
    grace: Duration,
    expiring: bool,
}

impl ServerState {
    /// This incarnation ends in error: `post_stop` does not run then, so the live facts are
    /// cleared here (the guard, dropped with the state, kills what is left).
    fn fail(&mut self, why: String) -> ActorProcessingErr {
        if let Some(guard) = self.guard.take() {
            drop(guard);
        }
        self.served.set_live(|l| {
            l.ready = false;
            l.port = 0;
            l.pid = None;
        });
        // The tree shows what happened, not the last "loading"/"ready" it said.
        let first = why.lines().next().unwrap_or_default();
        let repo = self.served.repo.clone();
        self.served
            .status
            .update(|i| i.detail = format!("{repo} failed: {first}"));
        why.into()
    }
}

async fn pump(pipe: tokio::net::unix::pipe::Receiver, served: Arc<Served>) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        served.push_line(&line);
    }
}

/// Whether the server at `port` answers `GET /v1/models` with a success.
async fn answers_models(port: u16) -> bool {
    use http_body_util::Empty;
    let Ok(stream) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    let _ = stream.set_nodelay(true);
    let io = hyper_util::rt::TokioIo::new(stream);
    let Ok((mut send, conn)) = hyper::client::conn::http1::handshake(io).await else {
        return false;
    };
    let conn = tokio::spawn(conn);
    let req = hyper::Request::get("/v1/models")
        .header("host", format!("127.0.0.1:{port}"))
        .body(Empty::<bytes::Bytes>::new());
    let ok = match req {
        Ok(req) => match send.send_request(req).await {
            // The status says it; the body (the model list) is not waited for.
            Ok(resp) => resp.status().is_success(),
            Err(_) => false,
        },
        Err(_) => false,
    };
    conn.abort();
    ok
}

impl Actor for ServerActor {
    type Msg = ServerMsg;
    type State = ServerState;
    type Arguments = ServerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ServerMsg>,
        args: ServerArgs,
    ) -> Result<ServerState, ActorProcessingErr> {
        let Spawned {
            guard,
            stdin: _,
            stdout,
            stderr,
            exit,
        } = args.spawned;
        let served = args.served;
        let pid = guard.main_pid();
        let port = args.port;
        served.set_live(|l| {
            l.port = port;
            l.pid = Some(pid);
            l.ready = false;
            l.incarnation = args.attempt + 1;
            l.spawned = Some(Instant::now());
        });
        served.status.update(|i| {
            i.pid = Some(pid);
            i.detail = format!(
                "{} loading on 127.0.0.1:{port} (waiting for GET /v1/models)",
                served.repo
            );
        });
        tokio::spawn(pump(stdout, served.clone()));
        tokio::spawn(pump(stderr, served.clone()));
        {
            let me = myself.clone();
            let exit = exit.clone();
            let timeout = args.ready_timeout;
            let check_owner = args.check_owner;
            tokio::spawn(async move {
                let began = Instant::now();
                let mut impostor = false;
                while began.elapsed() < timeout {
                    if exit.borrow().is_some() {
                        return;
                    }
                    let probe = timeout.saturating_sub(began.elapsed()).min(PROBE_LIMIT);
                    if tokio::time::timeout(probe, answers_models(port))
                        .await
                        .unwrap_or(false)
                    {
                        // What answered must be our server: the daemon picked the port by
                        // binding it and letting go, so another local process could have
                        // taken it in between — and would then be proxied to as this model.
                        let ours = !check_owner
                            || tokio::task::spawn_blocking(move || {
                                toolvisor_kit::process::tree_listens_on(pid, port)
                            })
                            .await
                            .unwrap_or(false);
                        if ours {
                            let _ = me.cast(ServerMsg::Ready(began.elapsed()));
                            return;
                        }
                        if !impostor {
                            impostor = true;
                            tracing::warn!(
                                port,
                                pid,
                                "something answers on the model server's port, but the socket is not the server's"
                            );
                        }
                    }
                    tokio::time::sleep(if began.elapsed() < READY_FAST_FOR {
                        READY_POLL_FAST
                    } else {
                        READY_POLL
                    })
                    .await;
                }
                let _ = me.cast(ServerMsg::NotReady { impostor });
            });
        }
        {
            let me = myself.clone();
            let mut exit = exit.clone();
            tokio::spawn(async move {
                if let Ok(status) = exit.wait_for(Option::is_some).await
                    && let Some(status) = *status
                {
                    let _ = me.cast(ServerMsg::Exited(status));
                }
            });
        }
        myself.send_interval(TICK, || ServerMsg::Tick);
        Ok(ServerState {
            served,
            guard: Some(guard),
            exit,
            supervisor: args.supervisor,
            ready_timeout: args.ready_timeout,
            idle_ttl: args.idle_ttl,
            grace: args.grace,
            expiring: false,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        let s = &state.served;
        match msg {
            ServerMsg::Ready(took) => {
                let port = s.live().port;
                s.set_live(|l| {
                    l.ready = true;
                    l.load_ms = Some(took.as_millis() as u64);
                });
                s.touch();
                s.status.update(|i| {
                    i.detail = format!("{} ready on 127.0.0.1:{port}", s.repo);
                });
                tracing::info!(
                    alias = s.alias,
                    port,
                    ms = took.as_millis() as u64,
                    "model server ready"
                );
                Ok(())
            }
            ServerMsg::NotReady { impostor } => {
                let port = s.live().port;
                let why = if impostor {
                    format!(
                        "another process holds 127.0.0.1:{port}, the port picked for this server, and answers on it (the server's own socket never listened there within {} s); the next start picks a new port (a server whose port a container runtime's proxy holds needs [inference] check_port_owner = false); the server's last output:\n{}",
                        state.ready_timeout.as_secs(),
                        s.tail_text(15)
                    )
                } else {
                    format!(
                        "the server did not answer GET /v1/models within {} s; its last output:\n{}",
                        state.ready_timeout.as_secs(),
                        s.tail_text(15)
                    )
                };
                Err(state.fail(why))
            }
            ServerMsg::Exited(status) => {
                // Let the output readers catch the last lines.
                tokio::time::sleep(Duration::from_millis(100)).await;
                tracing::warn!(alias = s.alias, %status, "model server exited");
                let why = format!(
                    "the server exited ({status}); its last output:\n{}",
                    s.tail_text(15)
                );
                Err(state.fail(why))
            }
            ServerMsg::Tick => {
                if let Some(ttl) = state.idle_ttl
                    && !state.expiring
                    && s.live().ready
                    && s.in_flight.load(Ordering::SeqCst) == 0
                    && s.idle_for() >= ttl
                {
                    state.expiring = true;
                    let why = format!("unloaded after {} s without a request", ttl.as_secs());
                    tracing::info!(alias = s.alias, "{why}");
                    *lock(&s.ended_by) = Some(why.clone());
                    let _ = state.supervisor.send_message(SupervisorMsg::Expire {
                        id: s.alias.clone(),
                        reason: why,
                    });
                }
                Ok(())
            }
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ServerMsg>,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(guard) = state.guard.take() {
            // Graceful first: the server's own SIGTERM handling, then the guard's kill.
            if guard.signal_main(Signal::SIGTERM).is_ok() {
                let _ =
                    tokio::time::timeout(state.grace, state.exit.wait_for(Option::is_some)).await;
            }
            drop(guard);
            let _ =
                tokio::time::timeout(Duration::from_secs(3), state.exit.wait_for(Option::is_some))
                    .await;
        }
        state.served.set_live(|l| {
            l.ready = false;
            l.port = 0;
            l.pid = None;
        });
        // Stopped (unloaded, evicted, the daemon's stop): no longer "ready" or "loading";
        // a failure's detail stays.
        let repo = state.served.repo.clone();
        let why = lock(&state.served.ended_by).clone();
        state.served.status.update(|i| {
            if i.detail.contains(" ready on ") || i.detail.contains(" loading on ") {
                i.detail = match &why {
                    Some(why) => format!("{repo} stopped: {why}"),
                    None => format!("{repo} stopped"),
                };
            }
        });
        Ok(())
    }
}
