//! Loading a model into the pool: resolving it, its fit on this machine (from its GGUF
//! header's shape when there is one, else its weights; `too_large` past the machine's
//! memory), the context and command its server gets, making room at `max_loaded` (evicting
//! the least recently used model that is not pinned and serves no request), and starting its
//! [`ServerActor`] under the `inference` kind supervisor on a fresh loopback port.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ractor::Actor;
use tokio::sync::watch;
use toolvisor_downloads::fit;
use toolvisor_downloads::gguf_header::Shape;
use toolvisor_downloads::store::Manifest;
use toolvisor_kit::process;
use toolvisor_kit::status::NodeStatus;
use toolvisor_kit::supervise::{self, ChildSpec, Factory, StartCtx, StartFailed};
use toolvisor_protocol::results::{Evicted, Fit, LoadModelResult};

use super::actor::{ServerActor, ServerArgs};
use super::{Inference, Live, Served, State, gpu_layers, lock};
use crate::config::{ModelParams, render};
use crate::error::InferenceError;
use crate::resolve::ModelFiles;

/// Where the model runs (from its header's shape when there is one, else its weights);
/// an error when it is too large for this machine's memory.
fn placement_of(
    manifest: &Manifest,
    shape: Option<&Shape>,
    weights: u64,
    context: u32,
    memory: Option<fit::Memory>,
    accelerators: &[toolvisor_downloads::accel::Accelerator],
) -> Result<fit::Placement, InferenceError> {
    let placement = match shape {
        Some(shape) => fit::placement_for(shape, weights, context as u64, memory, accelerators),
        None => fit::placement(weights, memory, accelerators),
    };
    if placement.fit() == Fit::TooLarge
        && let Some(m) = memory
    {
        return Err(InferenceError::TooLarge {
            model: format!("{}:{}", manifest.repo, manifest.variant),
            weights,
            need: placement.need,
            total: m.total,
            available: m.available,
        });
    }
    Ok(placement)
}

/// A GGUF's shape from its header: its layers and KV cache, so the fit counts the context
/// asked for and can offload part of the layers; `None` (the weights alone decide) for
/// another format or a header that cannot be read.
async fn model_shape(files: &ModelFiles) -> Option<Shape> {
    let path = &files.path;
    match files.format == "gguf" {
        true => {
            let p = path.clone();
            tokio::task::spawn_blocking(move || toolvisor_downloads::gguf_header::read(&p))
                .await
                .ok()
                .and_then(|r| {
                    r.map_err(|e| tracing::info!(path = %path.display(), error = %e, "no model shape from its header"))
                        .ok()
                })
        }
        false => None,
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port())
}

impl Inference {
    /// Room for one more model than the live ones (other than `alias`): below `max_loaded`
    /// nothing happens; at it, the least recently used model that is not pinned and has no
    /// request in flight is unloaded and described (what was evicted, idle how long), or the
    /// load is refused `busy` saying why none could be.
    async fn make_room(&self, alias: &str) -> Result<Option<Evicted>, InferenceError> {
        let models: Vec<_> = lock(&self.models).values().cloned().collect();
        let mut live = Vec::new();
        for m in models {
            if m.alias != alias && !matches!(self.state(&m).await, State::Unloaded { .. }) {
                live.push(m);
            }
        }
        let max = self.config.max_loaded;
        if live.len() < max {
            return Ok(None);
        }
        if !self.config.evict {
            return Err(InferenceError::TooMany {
                max,
                why: "[inference] evict is off".into(),
            });
        }
        let victim = live
            .iter()
            .filter(|m| !m.pinned && m.in_flight.load(Ordering::SeqCst) == 0)
            .max_by_key(|m| m.idle_for());
        let Some(victim) = victim else {
            let pinned: Vec<&str> = live
                .iter()
                .filter(|m| m.pinned)
                .map(|m| m.alias.as_str())
                .collect();
            let busy: Vec<&str> = live
                .iter()
                .filter(|m| !m.pinned)
                .map(|m| m.alias.as_str())
                .collect();
            let mut why = Vec::new();
            if !pinned.is_empty() {
                why.push(format!("pinned: {}", pinned.join(", ")));
            }
            if !busy.is_empty() {
                why.push(format!("serving requests: {}", busy.join(", ")));
            }
            return Err(InferenceError::TooMany {
                max,
                why: format!("none can be unloaded to make room ({})", why.join("; ")),
            });
        };
        let idle_s = victim.idle_for().as_secs();
        let (victim_alias, victim_model) = (victim.alias.clone(), victim.model.clone());
        tracing::info!(
            evicted = victim_alias,
            for_alias = alias,
            idle_s,
            "unloading the least recently used model to make room"
        );
        self.unload_because(
            &victim_alias,
            format!("evicted to make room for {alias:?} (inference.max_loaded {max})"),
        )
        .await?;
        Ok(Some(Evicted {
            alias: victim_alias,
            model: victim_model,
            idle_s,
            why: format!(
                "max_loaded ({max}) reached; it was the least recently used model not pinned and not serving"
            ),
        }))
    }

    /// `load_model`: check, then start the server and answer at once with `loading`. At
    /// `max_loaded` the least recently used model that is not pinned and serves no request
    /// is unloaded first (`[inference] evict`), and the answer says which (`evicted`).
    pub async fn load(
        &self,
        model: &str,
        alias: Option<&str>,
        context: Option<u32>,
        pin: bool,
    ) -> Result<LoadModelResult, InferenceError> {
        self.load_with(model, alias, context, pin, false).await
    }

    /// [`Inference::load`], the server started for embeddings only when `embeddings` is set
    /// (its command given `[inference] embedding_args`, or the flags of llama-server and
    /// llama-cpp-python that turn embeddings on).
    pub async fn load_with(
        &self,
        model: &str,
        alias: Option<&str>,
        context: Option<u32>,
        pin: bool,
        embeddings: bool,
    ) -> Result<LoadModelResult, InferenceError> {
        let (manifest, dir) = crate::resolve::resolve(&self.store, model)?;
        let alias = match alias {
            Some(a) => a.to_string(),
            None => manifest
                .repo
                .rsplit('/')
                .next()
                .unwrap_or(&manifest.repo)
                .to_string(),
        };
        crate::resolve::check_alias(&alias)?;
        let _serial = self.loading.lock().await;
        if let Some(answer) = self
            .loaded_already(&alias, &dir, &manifest, embeddings)
            .await?
        {
            return Ok(answer);
        }
        let evicted = self.make_room(&alias).await?;
        let weights: u64 = manifest.files.iter().map(|f| f.size).sum();
        let memory = fit::read_memory(&self.meminfo);
        let accelerators = self.accelerators.detect().await;
        let files = crate::resolve::model_files(&dir, &manifest, model)?;
        let shape = model_shape(&files).await;
        let params = self
            .config
            .params(&manifest.repo, &manifest.variant)
            .cloned()
            .unwrap_or_default();
        let context = self.context_for(context, &params, embeddings, shape.as_ref());
        let placement = placement_of(
            &manifest,
            shape.as_ref(),
            weights,
            context,
            memory,
            &accelerators,
        )?;
        let label = placement.fit();
        let (command, projector_passed) = self.command_for(
            model,
            &files,
            embeddings,
            shape.as_ref(),
            &params,
            &[
                ("path", files.path.display().to_string()),
                ("dir", dir.display().to_string()),
                ("context", context.to_string()),
                ("alias", alias.clone()),
                // Every layer on the accelerator when the model fits one whole, else none.
                ("gpu_layers", gpu_layers(&placement).to_string()),
            ],
        )?;
        let status = NodeStatus::new(
            "model",
            &alias,
            format!("{} ({label})", manifest.repo),
            self.notifier.clone(),
        );
        let (changed, _) = watch::channel(0);
        let served = Arc::new(Served {
            alias: alias.clone(),
            model: model.to_string(),
            repo: manifest.repo.clone(),
            revision: manifest.revision.clone(),
            variant: manifest.variant.clone(),
            path: files.path,
            projector: files.projector.map(|p| (p, projector_passed)),
            dir,
            context,
            size: weights,
            format: files.format,
            command,
            embeddings,
            placement: placement.shown(&accelerators),
            status: status.clone(),
            live: Mutex::new(Live::default()),
            changed,
            tail: Mutex::new(VecDeque::new()),
            last_used: Mutex::new(Instant::now()),
            in_flight: AtomicUsize::new(0),
            pinned: pin,
            slots: Arc::new(tokio::sync::Semaphore::new(self.config.parallel.max(1))),
            waiting: AtomicUsize::new(0),
            ended_by: Mutex::new(None),
        });
        self.start_served(&served, status).await?;
        tracing::info!(alias, model, context, "model server started; loading");
        Ok(self.loading_answer(&served, label, evicted).await)
    }

    /// The answer to a load just started: the model's state, its fit, what was evicted.
    async fn loading_answer(
        &self,
        served: &Served,
        fit: Fit,
        evicted: Option<Evicted>,
    ) -> LoadModelResult {
        let state = self.state(served).await;
        LoadModelResult {
            model: self.describe(served, &state),
            fit: Some(fit),
            evicted,
            hint: Some(
                "get_inference_status shows when it is ready; requests go to the endpoint with \"model\": the alias".into(),
            ),
            note: None,
        }
    }

    /// The answer when `alias` already serves this model (nothing to start); an error when
    /// it serves another one; `None` when it is free or unloaded.
    async fn loaded_already(
        &self,
        alias: &str,
        dir: &Path,
        manifest: &Manifest,
        embeddings: bool,
    ) -> Result<Option<LoadModelResult>, InferenceError> {
        let Some(existing) = self.get(alias) else {
            return Ok(None);
        };
        let state = self.state(&existing).await;
        let same = existing.dir == dir
            && existing.variant == manifest.variant
            && existing.embeddings == embeddings;
        match state {
            State::Unloaded { .. } => Ok(None),
            _ if same => Ok(Some(LoadModelResult {
                model: self.describe(&existing, &state),
                fit: None,
                evicted: None,
                hint: None,
                note: Some("already loaded; nothing started".into()),
            })),
            _ => Err(InferenceError::AliasTaken {
                alias: alias.to_string(),
                model: existing.model.clone(),
            }),
        }
    }

    /// The context the server gets: the one asked for, else the model's configured one,
    /// else (for embeddings) the model's own, else `[inference] context`.
    fn context_for(
        &self,
        asked: Option<u32>,
        params: &ModelParams,
        embeddings: bool,
        shape: Option<&Shape>,
    ) -> u32 {
        // An embeddings server gets the model's own context (its batch is set to it), so a
        // text the model can take is never refused for the server's defaults.
        match (asked.or(params.context), embeddings) {
            (Some(c), _) => c,
            (None, true) => crate::embedding_server::embedding_context(
                shape.and_then(|s| s.context_trained),
                self.config.context,
            ),
            (None, false) => self.config.context,
        }
    }

    /// The server's command for `files`, its placeholders filled from `vars`, and whether
    /// it was given the model's projector.
    fn command_for(
        &self,
        model: &str,
        files: &ModelFiles,
        embeddings: bool,
        shape: Option<&Shape>,
        params: &ModelParams,
        vars: &[(&str, String)],
    ) -> Result<(Vec<String>, bool), InferenceError> {
        let path_has = |p: &str| self.launcher.finds(p);
        let mut template = self
            .config
            .command(&files.format, path_has)
            .ok_or_else(|| InferenceError::NoCommand {
                model: model.to_string(),
                format: files.format.clone(),
            })?;
        let projector_passed = crate::resolve::give_projector(&mut template, &files.projector);
        if embeddings {
            let pooling = shape.and_then(|s| s.pooling);
            let declared = crate::embedding_server::pooling_usable(pooling);
            let args = crate::embedding_server::embedding_args(&template, &self.config, declared)
                .ok_or_else(|| InferenceError::NoEmbeddingArgs {
                model: model.to_string(),
                program: template[0].clone(),
            })?;
            template.extend(args);
        }
        // The model's own arguments last: where a flag is given twice, the servers take the
        // last one, so they override the fit's `-ngl` or the embedding defaults.
        template.extend(params.args.iter().cloned());
        Ok((render(&template, vars), projector_passed))
    }

    /// Registers `served` and has the kind supervisor start its server actor.
    async fn start_served(
        &self,
        served: &Arc<Served>,
        status: Arc<NodeStatus>,
    ) -> Result<(), InferenceError> {
        let alias = served.alias.clone();
        lock(&self.models).insert(alias.clone(), served.clone());
        lock(&self.gone).remove(&alias);
        let factory = self.factory(served.clone());
        let spec = ChildSpec {
            id: alias.clone(),
            factory,
            policy: self.policy,
            status,
        };
        match supervise::start(&self.supervisor, spec, Duration::from_secs(60)).await {
            Ok(()) => Ok(()),
            Err(StartFailed::Child(error)) => Err(InferenceError::Start { alias, error }),
            Err(StartFailed::NoAnswer(why)) => {
                Err(InferenceError::Supervisor(format!("start: {why}")))
            }
        }
    }

    fn factory(&self, served: Arc<Served>) -> Factory {
        let launcher = self.launcher.clone();
        let supervisor = self.supervisor.clone();
        let ready_timeout = Duration::from_secs(self.config.ready_timeout_s);
        let check_owner = self.config.check_port_owner;
        let idle_ttl =
            (self.config.idle_ttl_s > 0).then(|| Duration::from_secs(self.config.idle_ttl_s));
        let grace = Duration::from_secs(self.config.stop_grace_s);
        Arc::new(move |ctx: StartCtx| {
            let served = served.clone();
            let launcher = launcher.clone();
            let supervisor = supervisor.clone();
            Box::pin(async move {
                let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
                let argv = render(&served.command, &[("port", port.to_string())]);
                let spec = launcher.spec(
                    &argv[0],
                    &argv[1..],
                    &served.dir,
                    false,
                    &format!("inference/{}", served.alias),
                );
                let spawned = process::spawn(spec)
                    .await
                    .map_err(|e| format!("cannot start {:?}: {e}", argv[0]))?;
                let (actor, _) = Actor::spawn_linked(
                    None,
                    ServerActor,
                    ServerArgs {
                        served,
                        spawned,
                        port,
                        supervisor,
                        ready_timeout,
                        check_owner,
                        idle_ttl,
                        grace,
                        attempt: ctx.attempt,
                    },
                    ctx.supervisor,
                )
                .await
                .map_err(|e| e.to_string())?;
                Ok(actor.get_cell())
            })
        })
    }
}
