//! One connection's life, in its phases: the handshake ([`handshake`]: the first frame is a
//! Hello the daemon accepts, or the connection gets a refusal in the client's codec), the
//! welcome ([`welcome`]: the session registered, its question port attached, the Welcome
//! sent), the reader loop ([`Session::read_frames`]: frames dispatched in arrival order,
//! each by [`Session::dispatch`]), and the close ([`close`]: what the client asked for
//! finished, then everything it held given back).

use super::*;

/// Serve one connection to the end.
///
/// `admitted` is the connection's place under `limits.max_sessions`, held to the end; its
/// pre-Hello part lets the accept loop shed this connection while it has not said Hello.
pub async fn run(
    daemon: Arc<Daemon>,
    stream: UnixStream,
    peer_pid: Option<u32>,
    admitted: Admitted,
) {
    let Admitted {
        slot: _slot,
        pre_hello,
    } = admitted;
    let (reader, mut writer) = stream.into_split();
    let budget = super::FrameBudget::new(
        daemon.partial_frames(),
        daemon.config().limits.max_partial_frame_bytes,
    );
    let mut reader = FrameReader::new(reader, budget);
    let Some((hello, conversation_pin)) =
        handshake(&daemon, &mut reader, &mut writer, pre_hello, peer_pid).await
    else {
        return;
    };
    let Some(open) = welcome(&daemon, hello, conversation_pin, writer, peer_pid).await else {
        return;
    };
    let Open {
        session,
        writer_task,
    } = open;
    let mut reading = Reading {
        tree_watch: None,
        // `tree` and `status` answers being built at once for this client; past it the
        // reader waits (a client sending them in a loop gets backpressure, not a task per
        // frame).
        snapshots: Arc::new(tokio::sync::Semaphore::new(SNAPSHOTS_IN_FLIGHT)),
        call_tasks: tokio::task::JoinSet::new(),
    };
    session
        .read_frames(&daemon, &mut reader, &mut reading)
        .await;
    close(&daemon, session, reading, writer_task).await;
}

/// Write a refusal in `codec` and give up on the connection.
async fn refuse(writer: &mut OwnedWriteHalf, codec: Codec, max: u32, err: ToolError) {
    let _ = write_one(writer, codec, &DaemonFrame::Refused(err), max).await;
}

/// Read the first frame and check it is a Hello this daemon accepts (version, workdir, run
/// token); with it, the conversation a run token pins the session's calls to. `None` after
/// the refusal is written.
async fn handshake(
    daemon: &Arc<Daemon>,
    reader: &mut FrameReader,
    writer: &mut OwnedWriteHalf,
    mut pre_hello: crate::admission::PreHello,
    peer_pid: Option<u32>,
) -> Option<(Hello, Option<String>)> {
    let max = daemon.config().max_frame;
    let first = first_frame(daemon, reader, writer, &mut pre_hello).await?;
    let sniffed = Codec::sniff(&first);
    let hello = decode_hello(&first, sniffed, writer, max).await?;
    // Refusals go out in the codec the client demonstrably speaks (that of its Hello).
    if hello.protocol_version != PROTOCOL_VERSION {
        let err = ToolError::new(
            ErrorKind::VersionMismatch,
            format!(
                "client speaks protocol version {}, this daemon speaks version {PROTOCOL_VERSION}",
                hello.protocol_version
            ),
            "upgrade the client or the daemon so both speak the same version",
        );
        refuse(writer, sniffed, max, err).await;
        tracing::warn!(
            client_version = hello.protocol_version,
            "refused a client of another protocol version"
        );
        return None;
    }
    let workdir = std::path::Path::new(&hello.workdir);
    let workdir_ok = hello.workdir.is_empty() || (workdir.is_absolute() && workdir.is_dir());
    if !workdir_ok {
        let err = ToolError::new(
            ErrorKind::InvalidArgs,
            format!("workdir {:?} is not a directory", hello.workdir),
            "send an existing absolute directory as workdir (or leave it empty)",
        );
        refuse(writer, sniffed, max, err).await;
        return None;
    }
    // A client that said Hello is no longer one to shed.
    drop(pre_hello);
    // A process the daemon started (a vibe worker) gets the surface its config sets.
    match pin_by_token(daemon, hello) {
        Ok(pinned) => Some(pinned),
        Err(err) => {
            tracing::warn!(peer_pid, "refused a client with an unknown run token");
            refuse(writer, sniffed, max, err).await;
            None
        }
    }
}

/// The first frame's payload; `None` when the client closed, or after the refusal of a
/// frame that did not come whole and in time, or of a connection shed before it came.
async fn first_frame(
    daemon: &Daemon,
    reader: &mut FrameReader,
    writer: &mut OwnedWriteHalf,
    pre_hello: &mut crate::admission::PreHello,
) -> Option<Vec<u8>> {
    let max = daemon.config().max_frame;
    let limits = &daemon.config().limits;
    let frame_deadline = Duration::from_secs(limits.frame_deadline_s);
    let hello_timeout = Duration::from_secs(limits.hello_timeout_s);
    // The first frame's first byte tells its codec.
    let first = tokio::select! {
        read = tokio::time::timeout(hello_timeout, reader.frame(max, frame_deadline)) => read,
        _ = &mut pre_hello.shed => {
            let err = ToolError::new(
                ErrorKind::Busy,
                "the daemon is at its connection limit and this connection had not sent its Hello",
                "send a Hello frame right after connecting, then retry",
            );
            // In the codec of the Hello if part of it is here (JSON otherwise).
            let codec = match reader.buf.get(4..5) {
                Some(first_byte) => Codec::sniff(first_byte),
                None => Codec::Json,
            };
            refuse(writer, codec, max, err).await;
            return None;
        }
    };
    let err = match first {
        Ok(Ok(payload)) => return Some(payload),
        Ok(Err(ReadError::Codec(CodecError::Closed))) => return None,
        Ok(Err(e)) => unread_hello(e, frame_deadline),
        Err(_) => ToolError::new(
            ErrorKind::Timeout,
            format!("no Hello within {} s", hello_timeout.as_secs()),
            "send a Hello frame right after connecting",
        ),
    };
    refuse(writer, Codec::Json, max, err).await;
    None
}

/// The refusal of a first frame that could not be read whole.
fn unread_hello(e: ReadError, frame_deadline: Duration) -> ToolError {
    match e {
        ReadError::Stalled { got, .. } => ToolError::new(
            ErrorKind::Timeout,
            format!(
                "the Hello frame was not complete within {} s ({got} bytes arrived)",
                frame_deadline.as_secs()
            ),
            "send each frame whole: its 4-byte length, then that many bytes",
        ),
        ReadError::OverBudget { got, want, budget } => {
            tracing::warn!(
                got,
                want,
                budget,
                "Hello frame past the daemon's budget for unfinished frames; closing the connection"
            );
            ReadError::over_budget(got, want, budget)
        }
        ReadError::Codec(e) => ToolError::new(
            ErrorKind::Protocol,
            format!("bad first frame: {e}"),
            "send a Hello frame first (see docs/PROTOCOL.md)",
        ),
    }
}

/// The Hello the first frame holds, in the codec it was `sniffed` to be; `None` after the
/// refusal of anything else.
async fn decode_hello(
    first: &[u8],
    sniffed: Codec,
    writer: &mut OwnedWriteHalf,
    max: u32,
) -> Option<Hello> {
    let err = match toolvisor_protocol::wire::decode_first(sniffed, first) {
        Ok(ClientFrame::Hello(hello)) => return Some(hello),
        Ok(other) => ToolError::new(
            ErrorKind::Protocol,
            format!(
                "the first frame must be a Hello, got {}",
                frame_name(&other)
            ),
            "send a Hello frame first (see docs/PROTOCOL.md)",
        ),
        Err(e) => ToolError::new(
            ErrorKind::Protocol,
            format!("cannot decode the Hello: {e}"),
            "send a Hello frame first, as JSON or bincode (see docs/PROTOCOL.md)",
        ),
    };
    refuse(writer, sniffed, max, err).await;
    None
}

/// A welcomed connection: its session, and the task writing the client's frames.
struct Open {
    session: Arc<Session>,
    writer_task: tokio::task::JoinHandle<()>,
}

/// Register the session, attach its question port, send the Welcome and start the writer;
/// `None` when the Welcome cannot be written (everything given back already).
async fn welcome(
    daemon: &Arc<Daemon>,
    hello: Hello,
    conversation_pin: Option<String>,
    mut writer: OwnedWriteHalf,
    peer_pid: Option<u32>,
) -> Option<Open> {
    let max = daemon.config().max_frame;
    let codec = hello.codec;
    let in_flight = Arc::new(AtomicU64::new(0));
    let (out_tx, drain) = crate::outbox::spooled(
        codec,
        max,
        daemon.config().limits.max_queued_output_bytes,
        daemon.spool(),
    );
    let session_id = daemon.add_session(SessionInfo {
        queued: out_tx.meter(),
        kind: hello.client_kind,
        run_id: hello.run_id.clone(),
        tier: hello.surface.max_tier,
        connected: Instant::now(),
        in_flight: in_flight.clone(),
        pid: peer_pid,
    });
    tracing::info!(session = session_id, kind = ?hello.client_kind, codec = %codec, tier = %hello.surface.max_tier, peer_pid, "client connected");
    // A client holding its Welcome is already a question port, so a question asked right
    // after finds it; frames queue in the channel until the writer task starts.
    if hello.surface.questions {
        daemon.services().questions.attach(
            session_id,
            hello.client_kind,
            &hello.run_id,
            out_tx.clone(),
        );
    }
    let welcome = DaemonFrame::Welcome(Welcome {
        protocol_version: PROTOCOL_VERSION,
        daemon_version: env!("CARGO_PKG_VERSION").into(),
        daemon_pid: std::process::id(),
        session_id,
        codec,
        max_frame: max,
        // Names, descriptions and tiers; the schemas (about 200 KB) come with `ListTools`,
        // so a connection that only calls pays nothing for them.
        tools: daemon.registry().welcome_list(&hello.surface),
    });
    let sent = write_one(&mut writer, codec, &welcome, max).await;
    drop(welcome);
    if sent.is_err() {
        daemon.services().questions.detach(session_id);
        daemon.remove_session(session_id);
        return None;
    }
    let writer_task = tokio::spawn(drain.run(writer));
    let viewer = TreeViewer::new(hello.client_kind);
    let session = Arc::new(Session {
        id: session_id,
        hello,
        out: out_tx,
        approvals: Mutex::new(HashMap::new()),
        bridges: Mutex::new(HashMap::new()),
        calls: Mutex::new(HashMap::new()),
        reader_closed: std::sync::atomic::AtomicBool::new(false),
        in_flight,
        viewer,
        conversation_pin,
    });
    Some(Open {
        session,
        writer_task,
    })
}

/// What the reader loop holds while it runs: the tree subscription, the budget of
/// snapshots being built, the calls' tasks.
struct Reading {
    tree_watch: Option<tokio::task::JoinHandle<()>>,
    snapshots: Arc<tokio::sync::Semaphore>,
    call_tasks: tokio::task::JoinSet<()>,
}

/// Whether the reader loop goes on after a frame.
enum Next {
    More,
    Stop,
}

impl Session {
    /// Read frames until the client closes, a frame breaks the protocol past recovery, or
    /// the writer cannot take more.
    async fn read_frames(
        self: &Arc<Self>,
        daemon: &Arc<Daemon>,
        reader: &mut FrameReader,
        reading: &mut Reading,
    ) {
        let max = daemon.config().max_frame;
        let frame_deadline = Duration::from_secs(daemon.config().limits.frame_deadline_s);
        let codec = self.hello.codec;
        let out_tx = &self.out;
        loop {
            // Backpressure: while the client has not read `max_queued_output_bytes` of what
            // it was sent, read nothing more from it (its calls' results are what it must
            // read).
            if out_tx.room().await.is_err() {
                break;
            }
            let payload = match reader.frame(max, frame_deadline).await {
                Ok(p) => p,
                Err(ReadError::Codec(CodecError::Closed)) => break,
                Err(ReadError::Stalled { got, want }) => {
                    tracing::warn!(
                        session = self.id,
                        got,
                        want,
                        "frame not finished within the deadline; closing the connection"
                    );
                    let want = want.map(|w| format!(" of {w}")).unwrap_or_default();
                    let _ = out_tx
                        .send(DaemonFrame::Error(ToolError::new(
                            ErrorKind::Timeout,
                            format!(
                                "a frame was started and not finished within {} s ({got}{want} bytes arrived); the connection is closed",
                                frame_deadline.as_secs()
                            ),
                            "send each frame whole and promptly, or raise `frame_deadline_s` under `[limits]` in the daemon's config",
                        )))
                        .await;
                    break;
                }
                Err(ReadError::OverBudget { got, want, budget }) => {
                    tracing::warn!(
                        session = self.id,
                        got,
                        want,
                        budget,
                        "frame past the daemon's budget for unfinished frames; closing the connection"
                    );
                    let _ = out_tx
                        .send(DaemonFrame::Error(ReadError::over_budget(
                            got, want, budget,
                        )))
                        .await;
                    break;
                }
                Err(ReadError::Codec(e @ CodecError::Oversized { .. })) => {
                    // The stream cannot be resynchronised past an unread payload: say why,
                    // close.
                    tracing::warn!(session = self.id, error = %e, "oversized frame; closing the connection");
                    let _ = out_tx
                        .send(DaemonFrame::Error(ToolError::new(
                            ErrorKind::Protocol,
                            e.to_string(),
                            format!("keep every frame's payload at most {max} bytes; the connection is closed"),
                        )))
                        .await;
                    break;
                }
                Err(ReadError::Codec(e)) => {
                    tracing::info!(session = self.id, error = %e, "connection ended mid-frame");
                    break;
                }
            };
            let frame = match codec::decode::<ClientFrame>(codec, &payload) {
                Ok(frame) => frame,
                Err(e) => {
                    self.malformed(codec, &payload, e).await;
                    continue;
                }
            };
            if let Next::Stop = self.dispatch(daemon, frame, reading).await {
                break;
            }
        }
    }

    /// A frame that does not decode: a JSON call whose id can still be read gets its answer
    /// as that call's result (so a client waiting on it never hangs), anything else an
    /// `error` frame; the connection stays open.
    async fn malformed(&self, codec: Codec, payload: &[u8], e: CodecError) {
        tracing::warn!(session = self.id, error = %e, "malformed frame");
        if let Some(id) = malformed_call_id(codec, payload) {
            let _ = self
                .out
                .send(DaemonFrame::Result {
                    id,
                    outcome: Outcome::Err(ToolError::new(
                        ErrorKind::Protocol,
                        format!("malformed call: {e}"),
                        "a call is {\"call\": {\"id\", \"conversation\", \"tool\", \"args\"}} (see docs/PROTOCOL.md)",
                    )),
                })
                .await;
            return;
        }
        let _ = self
            .out
            .send(DaemonFrame::Error(ToolError::new(ErrorKind::Protocol, e.to_string(), format!("frames must be {codec} encoded ClientFrame values (see docs/PROTOCOL.md); the connection stays open"))))
            .await;
    }

    /// One decoded frame, in arrival order.
    async fn dispatch(
        self: &Arc<Self>,
        daemon: &Arc<Daemon>,
        frame: ClientFrame,
        reading: &mut Reading,
    ) -> Next {
        let out_tx = &self.out;
        match frame {
            ClientFrame::Call(call) => self.call(daemon, call, reading).await,
            ClientFrame::Cancel { id } => {
                let cancel = lock(&self.calls).get_mut(&id).and_then(Option::take);
                if let Some(cancel) = cancel {
                    let _ = cancel.send(());
                }
            }
            ClientFrame::ApprovalAnswer(answer) => self.approval_answer(answer).await,
            ClientFrame::QuestionAnswer(a) => {
                // Valid: the asking call gets it. Invalid: the answerer hears why and the
                // question stays pending.
                if let Err(err) = daemon.services().questions.answer(self.id, a) {
                    let _ = out_tx.send(DaemonFrame::Error(err)).await;
                }
            }
            ClientFrame::BridgeResult { bridge_id, outcome } => {
                self.bridge_result(bridge_id, outcome).await
            }
            ClientFrame::ListTools { all } => {
                let tools = if all {
                    daemon.registry().everything(&self.hello.surface)
                } else {
                    daemon.registry().advertised(&self.hello.surface)
                };
                let _ = out_tx.send(DaemonFrame::Tools { tools }).await;
            }
            ClientFrame::Tree => return self.send_tree(daemon, reading).await,
            ClientFrame::Subscribe { topic: Topic::Tree } => {
                if reading.tree_watch.is_none() {
                    reading.tree_watch = Some(tokio::spawn(watch_tree(
                        daemon.clone(),
                        self.viewer.clone(),
                        out_tx.clone(),
                    )));
                }
            }
            ClientFrame::Unsubscribe { topic: Topic::Tree } => {
                if let Some(task) = reading.tree_watch.take() {
                    task.abort();
                }
            }
            ClientFrame::Status => return self.send_status(daemon, reading).await,
            ClientFrame::Ping { nonce } => {
                let _ = out_tx.send(DaemonFrame::Pong { nonce }).await;
            }
            ClientFrame::EndConversation { conversation } => {
                self.end_conversation(daemon, conversation).await
            }
            ClientFrame::Hello(_) => {
                let _ = out_tx
                    .send(DaemonFrame::Error(ToolError::new(
                        ErrorKind::Protocol,
                        "this connection already said Hello",
                        "send Hello once, as the first frame",
                    )))
                    .await;
            }
        }
        Next::More
    }

    /// Starts a call: run here until it first waits, then in its own task.
    async fn call(self: &Arc<Self>, daemon: &Arc<Daemon>, call: Call, reading: &mut Reading) {
        // Finished calls hold their task until joined: reap them as we go, or a
        // long-lived connection would keep every call it ever made.
        while reading.call_tasks.try_join_next().is_some() {}
        if let Some(mut task) = start_call(daemon, self, call).await {
            // Run here until the call first waits: a call that waits on nothing (a
            // listing, a lookup) ends in this one poll and costs no task (its spawn,
            // wakeups and join were a third of the daemon's own time per call); one that
            // waits goes on in its own task from where it stopped.
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            if task.as_mut().poll(&mut cx).is_pending() {
                reading.call_tasks.spawn(task);
            }
        }
    }

    /// Hands an approval answer to the call waiting for it, or says none is.
    async fn approval_answer(&self, answer: ApprovalAnswer) {
        let waiter = lock(&self.approvals).remove(&answer.request_id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(answer);
            }
            None => {
                let _ = self
                    .out
                    .send(DaemonFrame::Error(ToolError::new(
                        ErrorKind::NotFound,
                        format!("no approval request {} is pending", answer.request_id),
                        "answer only requests this connection received, once",
                    )))
                    .await;
            }
        }
    }

    /// Hands a bridge call's result to the cell waiting for it, or says none is.
    async fn bridge_result(&self, bridge_id: u64, outcome: Outcome) {
        let waiter = lock(&self.bridges).remove(&bridge_id);
        match waiter {
            Some(tx) => {
                let _ = tx.send(outcome);
            }
            None => {
                let _ = self
                    .out
                    .send(DaemonFrame::Error(ToolError::new(
                        ErrorKind::NotFound,
                        format!("no bridge call {bridge_id} is pending"),
                        "answer only bridge calls this connection received, once",
                    )))
                    .await;
            }
        }
    }

    /// Sends the tree as this connection may see it, from its own task (one of the
    /// connection's snapshot permits held meanwhile).
    async fn send_tree(&self, daemon: &Arc<Daemon>, reading: &mut Reading) -> Next {
        let Ok(permit) = reading.snapshots.clone().acquire_owned().await else {
            return Next::Stop;
        };
        let d = daemon.clone();
        let tx = self.out.clone();
        let viewer = self.viewer.clone();
        tokio::spawn(async move {
            let _ = tx.send(DaemonFrame::Tree(d.tree_for(&viewer).await)).await;
            drop(permit);
        });
        Next::More
    }

    /// Sends the daemon's status, from its own task (one of the connection's snapshot
    /// permits held meanwhile).
    async fn send_status(&self, daemon: &Arc<Daemon>, reading: &mut Reading) -> Next {
        let Ok(permit) = reading.snapshots.clone().acquire_owned().await else {
            return Next::Stop;
        };
        let d = daemon.clone();
        let tx = self.out.clone();
        tokio::spawn(async move {
            let _ = tx.send(DaemonFrame::Status(d.status().await)).await;
            drop(permit);
        });
        Next::More
    }

    /// Ends `conversation` when this connection made calls in it; otherwise says why not.
    async fn end_conversation(&self, daemon: &Arc<Daemon>, conversation: String) {
        // Only a conversation this connection made calls in: a client cannot end
        // another's (a vibe worker's calls all run in its pinned conversation).
        let own = self.conversation_pin.is_none()
            && lock(&self.viewer.conversations).contains(&conversation);
        if !own {
            let err = if self.conversation_pin.is_some() {
                ToolError::new(
                    ErrorKind::NotFound,
                    format!(
                        "a vibe worker's connection cannot end conversation {conversation:?}; nothing was ended"
                    ),
                    "a worker's conversation ends with the worker (vibe_kill, or its run ending)",
                )
            } else {
                ToolError::new(
                    ErrorKind::NotFound,
                    format!(
                        "conversation {conversation:?} made no call on this connection; nothing was ended"
                    ),
                    "send end_conversation for a conversation this connection made calls in, once its run is over",
                )
            };
            let _ = self.out.send(DaemonFrame::Error(err)).await;
            return;
        }
        // Its own task: the ending finishes after the connection closes (the client
        // sends this as it goes away).
        let d = daemon.clone();
        tokio::spawn(async move { d.end_conversation(&conversation).await });
    }
}

/// The client closed its side: finish what it asked for (it may still be reading), then
/// close. Approval requests can no longer be answered: deny them now.
async fn close(
    daemon: &Arc<Daemon>,
    session: Arc<Session>,
    mut reading: Reading,
    mut writer_task: tokio::task::JoinHandle<()>,
) {
    let session_id = session.id;
    if let Some(task) = reading.tree_watch.take() {
        task.abort();
    }
    session.reader_closed.store(true, Ordering::Relaxed);
    // No answer can arrive any more: questions pending on this client fail at once.
    daemon.services().questions.detach(session_id);
    lock(&session.approvals).clear();
    // Nor can a bridge result: the cells waiting on one get an error at once.
    lock(&session.bridges).clear();
    let call_tasks = &mut reading.call_tasks;
    let writer_done = tokio::select! {
        _ = async { while call_tasks.join_next().await.is_some() {} } => false,
        _ = &mut writer_task => true,
    };
    if writer_done {
        // The peer is gone for good (a write failed): cancel what is still running.
        for cancel in lock(&session.calls).values_mut().filter_map(Option::take) {
            let _ = cancel.send(());
        }
        while reading.call_tasks.join_next().await.is_some() {}
    }
    // The session holds the outbox: dropping the last handle ends the writer's input.
    drop(session);
    if !writer_done {
        let _ = writer_task.await;
    }
    daemon.remove_session(session_id);
    tracing::info!(session = session_id, "client disconnected");
}
