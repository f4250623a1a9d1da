//! What the pool reports: one model's status entry ([`Inference::describe`]), the whole
//! pool's (`get_inference_status`), and the load state of a stored model it serves.

use std::path::Path;
use std::sync::atomic::Ordering;

use toolvisor_downloads::fit;
use toolvisor_kit::process;
use toolvisor_protocol::results::{
    GoneAlias, InferenceStatusResult, LoadState, LoadedModel, MemoryFacts,
};

use super::{Inference, Served, State, lock};

impl Inference {
    /// One model's status entry.
    pub fn describe(&self, s: &Served, state: &State) -> LoadedModel {
        let live = s.live();
        let info = s.status.get();
        let pid = live.pid;
        let port = (live.port != 0).then_some(live.port);
        // How far a load is: the time since its spawn against the readiness timeout (a
        // model server reports no progress of its own while it loads).
        let loading = live.spawned.filter(|_| matches!(state, State::Loading));
        let troubled = matches!(state, State::Failed { .. } | State::Restarting { .. });
        LoadedModel {
            alias: s.alias.clone(),
            model: s.model.clone(),
            repo: s.repo.clone(),
            revision: s.revision.clone(),
            variant: s.variant.clone(),
            path: s.path.display().to_string(),
            format: s.format.clone(),
            context: s.context,
            size_bytes: s.size,
            state: state.model_state(),
            restarts: info.restarts,
            idle_s: s.idle_for().as_secs(),
            requests_in_flight: s.in_flight.load(Ordering::SeqCst) as u64,
            pinned: s.pinned,
            queue_depth: s.waiting.load(Ordering::SeqCst) as u64,
            slots_free: s.slots.available_permits() as u64,
            placement: s.placement.clone(),
            projector: s.projector.as_ref().map(|(p, _)| p.display().to_string()),
            projector_passed: s.projector.as_ref().map(|(_, passed)| *passed),
            port,
            url: port.map(|port| format!("http://127.0.0.1:{port}/v1")),
            pid,
            rss_bytes: pid.and_then(process::rss_bytes),
            load_ms: live.load_ms,
            loading_ms: loading.map(|at| at.elapsed().as_millis() as u64),
            ready_timeout_s: loading.map(|_| self.config.ready_timeout_s),
            last_error: match state {
                State::Failed { last_error } | State::Restarting { last_error } => {
                    Some(last_error.clone())
                }
                _ => None,
            },
            reason: match state {
                State::Unloaded { reason } => reason.clone(),
                _ => None,
            },
            stderr_tail: troubled.then(|| s.tail()),
        }
    }

    /// `get_inference_status`: every model the pool knows, the endpoint.
    pub async fn status(&self) -> InferenceStatusResult {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut out = Vec::new();
        for s in models {
            let state = self.state(&s).await;
            out.push(self.describe(&s, &state));
        }
        // Aliases unloaded or evicted are not gone without a word: each says why and what
        // a request for it does now.
        let gone = lock(&self.gone)
            .iter()
            .map(|(alias, g)| GoneAlias {
                alias: alias.clone(),
                model: g.model.clone(),
                why: g.why.clone(),
                gone_s: g.at.elapsed().as_secs(),
                reloads_on_request: self.config.on_demand,
            })
            .collect();
        // The memory the fit sees, as it is now: the host's, and each accelerator's in use
        // (what `nvidia-smi` or the kernel's amdgpu files say, whoever holds it).
        let memory = fit::read_memory(&self.meminfo).map(|m| MemoryFacts {
            total_bytes: m.total,
            available_bytes: m.available,
        });
        let accelerators: Vec<_> = self
            .accelerators
            .detect()
            .await
            .iter()
            .map(|a| {
                let mut shown = a.shown();
                if let (Some(total), Some(free)) = (a.memory_total, a.memory_free) {
                    shown.memory_used_bytes = Some(total.saturating_sub(free));
                }
                shown
            })
            .collect();
        InferenceStatusResult {
            models: out,
            memory,
            accelerators,
            gone,
            endpoint: lock(&self.endpoint).clone(),
            idle_ttl_s: self.config.idle_ttl_s,
            on_demand: self.config.on_demand,
            max_loaded: self.config.max_loaded as u64,
        }
    }

    /// The alias and state of the stored model `variant` in the model directory `dir` (its
    /// snapshot) if the pool serves it.
    pub async fn load_state(&self, dir: &Path, variant: &str) -> Option<(String, LoadState)> {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut found = None;
        for s in models {
            if s.dir == dir && s.variant == variant {
                let state = self.state(&s).await.load_state();
                if state != LoadState::Unloaded || found.is_none() {
                    found = Some((s.alias.clone(), state));
                }
            }
        }
        found
    }
}
