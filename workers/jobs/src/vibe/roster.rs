//! The vibe roster's work: the queue pumped into `max_running` slots, each attempt launched
//! as a [`VibeActor`] under the `vibe` kind supervisor (temporary: never restarted) once the
//! supervisor recorded the previous attempt's end, stopped through the supervisor and waited
//! for (bounded), and the end of each attempt recorded on its worker; finished workers are
//! collected after `keep_idle`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::Actor;
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{self, ChildSpec, Factory, StartCtx, StartFailed, SupervisorMsg};
use toolvisor_protocol::tools::{VibeInfo, VibeState};
use toolvisor_protocol::tree::NodeState;

use super::{AttemptEnd, Roster, STEP_LIMIT, VibeActor, VibeStart, Worker, command_line, lock};

impl Roster {
    /// Drop finished workers nobody asked about for `keep_idle`.
    pub(super) fn collect(&self) {
        let keep = self.limits.keep_idle;
        lock(&self.table).workers.retain(|_, w| {
            let run = lock(&w.run);
            let idle = run.last_touch.max(run.ended_at.unwrap_or(run.last_touch));
            let gone = run.state.is_final() && run.live.is_none() && idle.elapsed() > keep;
            if gone {
                tracing::info!(
                    id = w.id,
                    conversation = w.conversation,
                    "collected finished vibe worker"
                );
            }
            !gone
        });
    }

    /// Start queued workers while slots are free.
    pub(super) fn pump(self: &Arc<Self>) {
        loop {
            let next = {
                let mut table = lock(&self.table);
                if table.active >= self.limits.max_running.max(1) {
                    return;
                }
                let Some(worker) = table.queue.pop_front() else {
                    return;
                };
                let mut run = lock(&worker.run);
                if run.state != VibeState::Queued {
                    continue;
                }
                table.active += 1;
                run.attempts += 1;
                run.live = Some(run.attempts);
                run.launching = true;
                run.state = VibeState::Running;
                run.since = Instant::now();
                run.ended_at = None;
                run.timed_out = false;
                run.pid = None;
                let attempt = run.attempts;
                let brief = run.brief.clone();
                drop(run);
                (worker, attempt, brief)
            };
            let (worker, attempt, brief) = next;
            worker.bump();
            tokio::spawn(self.clone().launch(worker, attempt, brief));
        }
    }

    /// Run one attempt under the supervisor.
    async fn launch(self: Arc<Self>, worker: Arc<Worker>, attempt: u32, brief: String) {
        // A previous attempt's supervisor record must have ended before the same id starts.
        if lock(&worker.run).in_supervisor {
            let ended = wait_node_ended(&worker.status, &self.notifier, STEP_LIMIT).await;
            if !ended {
                self.record_end(
                    &worker,
                    attempt,
                    AttemptEnd::error(
                        "could not start: its previous attempt did not stop within 10 s",
                    ),
                );
                return;
            }
        }
        {
            let mut run = lock(&worker.run);
            if run.killed || run.live != Some(attempt) {
                drop(run);
                self.record_end(
                    &worker,
                    attempt,
                    AttemptEnd::error("stopped before it started"),
                );
                return;
            }
            run.in_supervisor = true;
        }
        let Some(template) = self.limits.tiers.get(&worker.tier).cloned() else {
            self.record_end(
                &worker,
                attempt,
                AttemptEnd::error("could not start: its tier has no command"),
            );
            return;
        };
        let argv = command_line(&template, &brief);
        worker.status.update(|i| {
            i.detail = format!(
                "{}: {} [{}] attempt {attempt}",
                worker.conversation, worker.label, worker.tier
            );
            i.last_error = None;
        });
        let factory_worker = worker.clone();
        let roster = self.clone();
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = VibeStart {
                worker: factory_worker.clone(),
                roster: roster.clone(),
                attempt,
                argv: argv.clone(),
                brief: brief.clone(),
            };
            let name = format!("vibe/{}#{attempt}", args.worker.id);
            Box::pin(async move {
                Actor::spawn_linked(Some(name), VibeActor, args, ctx.supervisor)
                    .await
                    .map(|(actor, _)| actor.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        let spec = ChildSpec {
            id: worker.id.clone(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status: worker.status.clone(),
        };
        let failure = match supervise::start(&self.supervisor, spec, Duration::from_secs(30)).await
        {
            Ok(()) => None,
            Err(StartFailed::Child(e)) => Some(format!("could not start: {e}")),
            Err(StartFailed::NoAnswer(_)) => {
                Some("could not start: the vibe supervisor did not answer within 30 s".into())
            }
        };
        // A start overtaken by a stop (kill, or a send's rerun) may be answered late, or only
        // when a newer attempt replaces the record: then it concerns nothing live any more.
        let (current, killed) = {
            let mut run = lock(&worker.run);
            let current = run.live == Some(attempt);
            if current {
                run.launching = false;
            }
            (current, run.killed)
        };
        if !current {
            return;
        }
        worker.bump();
        match failure {
            // Killed while its start was in flight: the stop may have found no record.
            None if killed => self.stop_child(&worker, "killed by vibe_kill").await,
            None => {}
            Some(error) => {
                self.stop_child(&worker, "its start failed").await;
                self.record_end(&worker, attempt, AttemptEnd::error(&error));
            }
        }
    }

    /// Ask the supervisor to stop the worker's current incarnation.
    async fn stop_child(&self, worker: &Worker, reason: &str) {
        let _ = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id: worker.id.clone(),
                    reason: reason.to_string(),
                    reply,
                },
                Some(STEP_LIMIT),
            )
            .await;
    }

    /// Stop the live attempt and wait (bounded) until its end is recorded.
    pub(super) async fn stop_live(&self, worker: &Worker, reason: &str) {
        let Some(attempt) = lock(&worker.run).live else {
            return;
        };
        let mut rx = worker.changed.subscribe();
        self.stop_child(worker, reason).await;
        let _ = tokio::time::timeout(STEP_LIMIT, async {
            loop {
                rx.borrow_and_update();
                if lock(&worker.run).live != Some(attempt) {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
    }

    /// Wait (bounded) until the worker is no longer starting: running, queued, or ended.
    pub(super) async fn settled(&self, worker: &Worker) -> VibeInfo {
        let mut rx = worker.changed.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(35), async {
            loop {
                rx.borrow_and_update();
                if !lock(&worker.run).launching {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        worker.info(false)
    }

    /// Record how attempt `attempt` ended, free its slot, and start what waits. Only the
    /// first record of an attempt counts.
    pub(super) fn record_end(
        self: &Arc<Self>,
        worker: &Arc<Worker>,
        attempt: u32,
        end: AttemptEnd,
    ) {
        {
            let mut table = lock(&self.table);
            let mut run = lock(&worker.run);
            if run.live != Some(attempt) {
                return;
            }
            run.live = None;
            run.launching = false;
            run.pid = None;
            table.active = table.active.saturating_sub(1);
            if run.rerun && !run.killed {
                // Stopped to rerun with a new message: what it printed is not a result.
                run.rerun = false;
                run.state = VibeState::Queued;
                run.since = Instant::now();
                table.queue.push_front(worker.clone());
            } else {
                let stderr_tail = Some(end.stderr_tail.clone()).filter(|t| !t.trim().is_empty());
                run.exit = end.exit;
                if let Some(stdout) = &end.stdout {
                    run.result = Some(stdout.text());
                    run.result_cut = stdout.truncated();
                }
                run.state = if run.killed {
                    run.error = None;
                    run.stderr_tail = None;
                    VibeState::Killed
                } else if let Some(error) = end.error.clone() {
                    run.error = Some(error);
                    run.stderr_tail = stderr_tail;
                    VibeState::Failed
                } else if run.timed_out {
                    let limit = self.limits.attempt_timeout.unwrap_or_default().as_secs();
                    run.error = Some(format!(
                        "ran past the limit of {limit} s for one attempt and was killed"
                    ));
                    run.stderr_tail = stderr_tail;
                    VibeState::Failed
                } else {
                    match end.exit {
                        Some(exit) if exit.success() => {
                            run.error = None;
                            run.stderr_tail = None;
                            VibeState::Done
                        }
                        exit => {
                            run.error = Some(match exit {
                                Some(exit) => format!("the worker ended with {exit}"),
                                None => "the worker ended with an unknown status".into(),
                            });
                            run.stderr_tail = stderr_tail;
                            VibeState::Failed
                        }
                    }
                };
                run.ended_at = Some(Instant::now());
                run.last_touch = Instant::now();
                tracing::info!(
                    id = worker.id,
                    conversation = worker.conversation,
                    attempt,
                    state = run.state.as_str(),
                    error = run.error.as_deref().unwrap_or(""),
                    "vibe worker attempt ended"
                );
            }
        }
        worker.bump();
        self.pump();
    }
}

impl AttemptEnd {
    fn error(message: &str) -> AttemptEnd {
        AttemptEnd {
            exit: None,
            error: Some(message.to_string()),
            stdout: None,
            stderr_tail: String::new(),
        }
    }
}

/// Wait until the supervisor has recorded the end of the node's incarnation.
async fn wait_node_ended(status: &NodeStatus, notifier: &TreeNotifier, limit: Duration) -> bool {
    let mut tree = notifier.subscribe();
    tokio::time::timeout(limit, async {
        loop {
            tree.borrow_and_update();
            if matches!(status.state(), NodeState::Exited | NodeState::Failed) {
                return;
            }
            if tree.changed().await.is_err() {
                return;
            }
        }
    })
    .await
    .is_ok()
}
