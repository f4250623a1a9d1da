//! One attempt of a vibe worker as an actor: it owns the worker program's process group
//! (spawned, fed its brief, its output captured) and reports the end to the roster.

use super::*;

/// The actor of one attempt of a vibe worker.
pub struct VibeActor;

pub struct VibeStart {
    pub(super) worker: Arc<Worker>,
    pub(super) roster: Arc<Roster>,
    pub(super) attempt: u32,
    pub(super) argv: Vec<String>,
    pub(super) brief: String,
}

pub enum VibeMsg {
    /// The worker program was reaped.
    Exited(ExitStatus),
    /// The attempt ran past its limit.
    TimeUp,
}

pub struct VibeActorState {
    /// Kills and reaps the worker's whole process group when the actor goes, however it goes.
    _guard: ProcessGuard,
    worker: Arc<Worker>,
    attempt: u32,
}

impl Actor for VibeActor {
    type Msg = VibeMsg;
    type State = VibeActorState;
    type Arguments = VibeStart;

    async fn pre_start(
        &self,
        myself: ActorRef<VibeMsg>,
        args: VibeStart,
    ) -> Result<VibeActorState, ActorProcessingErr> {
        let VibeStart {
            worker,
            roster,
            attempt,
            argv,
            brief,
        } = args;
        let mut spec = roster.launcher.spec(
            &argv[0],
            &argv[1..],
            &worker.cwd,
            true,
            &format!("vibe/{}", worker.id),
        );
        if let Some(socket) = &roster.limits.socket {
            spec.env.retain(|(k, _)| k != SOCKET_ENV && k != TOKEN_ENV);
            spec.env
                .push((SOCKET_ENV.into(), socket.display().to_string()));
            spec.env.push((TOKEN_ENV.into(), worker.token.0.clone()));
        }
        let spawned = process::spawn(spec).await.map_err(|e| e.to_string())?;
        let guard = spawned.guard;
        let pid = guard.main_pid();
        tracing::info!(
            id = worker.id,
            pid,
            attempt,
            conversation = worker.conversation,
            "vibe worker started"
        );
        lock(&worker.run).pid = Some(pid);
        worker.status.update(|i| {
            i.pid = Some(pid);
            i.state = NodeState::Ready;
        });
        worker.bump();
        if let Some(mut stdin) = spawned.stdin {
            tokio::spawn(async move {
                // A worker that does not read its stdin gets EPIPE here; that is fine.
                let _ = stdin.write_all(brief.as_bytes()).await;
                let _ = stdin.write_all(b"\n").await;
            });
        }
        let result_bytes = roster.limits.result_bytes;
        let attempt_timeout = roster.limits.attempt_timeout;
        let out_task = tokio::spawn(async move {
            let mut rx = spawned.stdout;
            let mut capture = HeadTail::new(result_bytes);
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = rx.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                capture.push(&buf[..n]);
            }
            capture
        });
        let err_task = tokio::spawn(async move {
            let mut rx = spawned.stderr;
            let mut tail = OutputLog::new(STDERR_TAIL_BYTES);
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = rx.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                tail.append(&buf[..n]);
            }
            let end = tail.end();
            tail.read(0, STDERR_TAIL_BYTES.min(end as usize)).text
        });
        let mut exit = spawned.exit;
        let waiter_worker = worker.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let status = match exit.wait_for(|s| s.is_some()).await {
                Ok(status) => *status,
                Err(_) => None,
            };
            // The pipes close once the whole group is gone; bound the wait in case something
            // that escaped still holds them.
            let stdout = tokio::time::timeout(Duration::from_secs(2), out_task)
                .await
                .ok()
                .and_then(Result::ok);
            let stderr_tail = tokio::time::timeout(Duration::from_secs(2), err_task)
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            roster.record_end(
                &waiter_worker,
                attempt,
                AttemptEnd {
                    exit: status,
                    error: None,
                    stdout,
                    stderr_tail,
                },
            );
            if let Some(status) = status {
                let _ = me.cast(VibeMsg::Exited(status));
            }
        });
        if let Some(limit) = attempt_timeout {
            myself.send_after(limit, || VibeMsg::TimeUp);
        }
        Ok(VibeActorState {
            _guard: guard,
            worker,
            attempt,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<VibeMsg>,
        msg: VibeMsg,
        state: &mut VibeActorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            VibeMsg::Exited(status) if status.success() => {
                myself.stop(Some(status.to_string()));
                Ok(())
            }
            VibeMsg::Exited(status) => {
                let tail = lock(&state.worker.run)
                    .stderr_tail
                    .as_deref()
                    .and_then(|t| t.lines().rev().find(|l| !l.trim().is_empty()))
                    .map(|l| format!(": {}", l.chars().take(200).collect::<String>()))
                    .unwrap_or_default();
                Err(format!("{status}{tail}").into())
            }
            VibeMsg::TimeUp => {
                {
                    let mut run = lock(&state.worker.run);
                    if run.live != Some(state.attempt) {
                        return Ok(());
                    }
                    run.timed_out = true;
                }
                tracing::warn!(
                    id = state.worker.id,
                    attempt = state.attempt,
                    "vibe worker ran past its attempt limit; killing it"
                );
                // Failing the actor drops the guard, which kills the whole group; the waiter
                // then records the end as failed.
                Err("ran past the limit for one attempt".into())
            }
        }
    }
}
