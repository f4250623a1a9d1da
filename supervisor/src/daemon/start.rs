//! `start`, in its phases: what a killed daemon left is swept (temp files, process groups),
//! the launcher every child starts through is made, the root actor with its kind supervisors
//! is spawned, the services are opened kind by kind (each tool family's attachment decided
//! as its service opens), and the daemon's shared state is assembled. Nothing is accepted
//! yet: that is `server.rs`.

use super::open::{open_downloads, open_inference, private_state_dir};
use std::path::Path;

use super::*;
use crate::tools::Attachments;
use crate::tools::spec::Attachment;

/// Start the daemon for `bound`: the private state directory, the sweeps of what a killed
/// daemon left (temp files, process groups, an interrupted `apply_patch`), the root actor
/// with its kind supervisors, and every service. Nothing is accepted yet.
pub async fn start(
    bound: &Bound,
    config: Config,
    options: &ServeOptions,
) -> anyhow::Result<Started> {
    let state_dir = private_state_dir(&config.state_dir())?;
    let ledger = sweep_leftovers(&state_dir, bound, &config)?;
    let launcher = launcher(&config, options, ledger);
    let notifier = TreeNotifier::default();
    let keep_ended = Duration::from_secs(config.limits.process_keep_s);
    let (root, root_handle) = Actor::spawn(
        Some("root".into()),
        Root,
        RootArgs {
            notifier: notifier.clone(),
            keep_ended,
        },
    )
    .await?;
    let config = Arc::new(config);
    let opened = Opening {
        root: &root,
        config: &config,
        state_dir: &state_dir,
        bound,
        notifier: &notifier,
    };
    let (services, registry) = opened.services(launcher).await?;
    let daemon = Arc::new(assemble(
        config, services, registry, root, notifier, state_dir, bound,
    ));
    let trimmer = tokio::spawn(daemon.clone().trim_task());
    Ok(Started {
        daemon,
        root_handle,
        trimmer,
    })
}

/// Before anything writes: temp files a killed daemon left in the user's tree go, and the
/// process groups its spawn ledger still names are killed. Returns the ledger children are
/// recorded in from now on.
fn sweep_leftovers(state_dir: &Path, bound: &Bound, config: &Config) -> anyhow::Result<Ledger> {
    let temps_dir = state_dir.join("temps");
    match toolvisor_files::temps::open(&temps_dir) {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            removed = n,
            "removed temp files left by a daemon killed mid-write"
        ),
        Err(e) => {
            tracing::error!(dir = %temps_dir.display(), error = %e, "cannot open the temp-file log: temp files of a write cut short by a crash will stay")
        }
    }
    if let Some(n) = config.testing.pause_after_writes {
        toolvisor_files::write::pause_after_writes(n);
    }
    let ledger_dir = PathBuf::from(format!("{}.ledger", bound.path.display()));
    let ledger = Ledger::open(&ledger_dir)?;
    let swept = ledger.sweep();
    let scratch = toolvisor_kit::process::scratch::sweep();
    if scratch > 0 {
        tracing::warn!(
            directories = scratch,
            "removed the children's temp directories of a daemon that died"
        );
    }
    // Escapees of our trees come back to us instead of pid 1, and die within a second.
    if let Err(e) = toolvisor_kit::process::adopt_orphans() {
        tracing::warn!(error = %e, "cannot become a child subreaper: a process that escapes a killed shim's tree will outlive it");
    }
    if swept > 0 {
        tracing::warn!(
            groups = swept,
            "killed process groups left behind by a daemon that died"
        );
    }
    Ok(ledger)
}

/// How every child starts: through the shim, with the allowlisted environment plus
/// `[env] set`, recorded in the spawn ledger.
fn launcher(config: &Config, options: &ServeOptions, ledger: Ledger) -> Launcher {
    let mut launcher =
        Launcher::from_current_env(options.shim.clone(), &config.env.allow, Some(ledger));
    for (key, value) in &config.env.set {
        launcher.set_var(key, value);
    }
    launcher
}

/// What opening the services needs to hand around.
struct Opening<'a> {
    root: &'a ActorRef<RootMsg>,
    config: &'a Arc<Config>,
    state_dir: &'a Path,
    bound: &'a Bound,
    notifier: &'a TreeNotifier,
}

/// What the model tools opened (either may be missing: then its tools are detached, saying
/// why).
struct ModelTools {
    downloads: Option<Arc<toolvisor_downloads::Downloads>>,
    inference: Option<Arc<toolvisor_inference::Inference>>,
}

impl Opening<'_> {
    /// Every service, kind supervisor by kind supervisor, and the registry of the tools
    /// their attachments allow.
    async fn services(&self, launcher: Launcher) -> anyhow::Result<(Services, Registry)> {
        let config = self.config;
        let processes_sup = kind_supervisor(self.root, "processes").await?;
        let vibe_sup = kind_supervisor(self.root, "vibe").await?;
        let (mut vibe_limits, vibe_attachment) = crate::tools::human::vibe_mode(config, &launcher);
        // Workers get the socket and a credential, so they can call the daemon's tools
        // through the same gates as the model, at the surface their tier's config sets.
        vibe_limits.socket = Some(self.bound.path.clone());
        let mut attached = Attachments {
            vibe: vibe_attachment,
            ..Default::default()
        };
        if config.data.enabled() {
            attached.data = Attachment::Attached;
        }
        let models = self.model_tools(&launcher, &mut attached).await?;
        let tools = crate::tools::all_with(config.testing.probe_tools, &attached);
        let registry = Registry::new(tools, config.policy.deny.clone());
        let lsp_sup = kind_supervisor(self.root, "language_servers").await?;
        let lsp = Arc::new(toolvisor_lsp::LanguageServers::new(
            lsp_sup,
            launcher.clone(),
            config.lsp.clone(),
            self.notifier.clone(),
            config.restart.policy(),
            &config.trust.roots,
        ));
        let (files, edits) = self.file_tools()?;
        let kernels_sup = kind_supervisor(self.root, "kernels").await?;
        let kernels = toolvisor_kernel::Kernels::new(
            kernels_sup,
            launcher.clone(),
            config.kernels.limits(),
            self.notifier.clone(),
        );
        let debug_sup = kind_supervisor(self.root, "debug_adapters").await?;
        let mut debug_config = config.debug.clone();
        if let Some(file) = &config.testing.ptrace_scope {
            debug_config.ptrace_scope_file = file.clone();
        }
        let debug = toolvisor_dap::Debuggers::new(
            debug_sup,
            launcher.clone(),
            debug_config,
            self.notifier.clone(),
            self.ids("debug_sessions")?,
        );
        let data = self.data_hub().await?;
        if let Some(pool) = &models.inference {
            data.start_embeddings(Arc::new(crate::tools::data::PoolEmbedder {
                pool: pool.clone(),
                model: config.data.embedding_model.clone().unwrap_or_default(),
            }));
        }
        let keep_ended = Duration::from_secs(config.limits.process_keep_s);
        let limits = ProcessLimits {
            buffer_bytes: config.limits.process_buffer_bytes,
            keep_ended,
            max_per_conversation: config.limits.processes_per_conversation,
            idle_ttl: (config.limits.process_idle_ttl_s > 0)
                .then(|| Duration::from_secs(config.limits.process_idle_ttl_s)),
            restart: config.restart.policy(),
        };
        let services = Services {
            config: config.clone(),
            files,
            kernels,
            debug,
            processes: Processes::new(
                processes_sup,
                launcher.clone(),
                limits,
                self.notifier.clone(),
                self.ids("processes")?,
            ),
            lsp,
            vibes: Vibes::new(
                vibe_sup,
                launcher.clone(),
                vibe_limits,
                self.notifier.clone(),
                self.ids("vibe_workers")?,
            ),
            questions: Default::default(),
            edits,
            launcher,
            data,
            search_cache: Arc::new(toolvisor_structural::cache::SearchCache::new(
                config.structural.cache_bytes,
            )),
            structural_limits: config.structural.limits(),
            downloads: models.downloads,
            inference: models.inference,
        };
        Ok((services, registry))
    }

    /// The download jobs' manager and the inference pool. Either failing to open detaches
    /// its tools (they answer why) and everything else serves.
    async fn model_tools(
        &self,
        launcher: &Launcher,
        attached: &mut Attachments,
    ) -> anyhow::Result<ModelTools> {
        let config = self.config;
        // One probe for both: what `list_models` says fits is what `load_model` offloads.
        let accelerators = Arc::new(toolvisor_downloads::accel::Probe::new(
            Some(launcher.clone()),
            config.testing.accelerator_roots.as_deref(),
        ));
        let downloads_sup = kind_supervisor(self.root, "downloads").await?;
        let opened = open_downloads(
            config,
            self.state_dir,
            downloads_sup,
            self.notifier,
            accelerators.clone(),
        );
        let downloads = match opened.await {
            Ok(d) => Some(d),
            Err(e) => {
                tracing::error!(error = %e, "the model tools are detached");
                attached.downloads = Attachment::Detached(e.to_string());
                None
            }
        };
        let inference_sup = kind_supervisor(self.root, "inference").await?;
        let inference = match open_inference(
            config,
            self.state_dir,
            &self.bound.path,
            inference_sup,
            launcher,
            self.notifier,
            accelerators,
        ) {
            Ok(pool) => Some(pool),
            Err(e) => {
                tracing::error!(error = %e, "the inference tools are detached");
                attached.inference = Attachment::Detached(e.to_string());
                None
            }
        };
        Ok(ModelTools {
            downloads,
            inference,
        })
    }

    /// The file tools' state, after undoing a multi-file write a crash cut short, and the
    /// staged structural edits (an accept a crash cut short is staged again).
    fn file_tools(
        &self,
    ) -> anyhow::Result<(
        Arc<toolvisor_files::Files>,
        Arc<toolvisor_structural::store::EditStore>,
    )> {
        let files = Arc::new(
            crate::tools::files::open(self.config, self.state_dir)
                .map_err(|e| anyhow::anyhow!("{e}"))?,
        );
        // An apply_patch a crash cut short is undone before any call runs.
        let rolled = files.roll_back_interrupted();
        if !rolled.is_empty() {
            let restored = rolled
                .iter()
                .filter(|o| matches!(o, toolvisor_files::journal::Outcome::Restored(_)))
                .count();
            tracing::warn!(
                files = rolled.len(),
                restored,
                "rolled back an apply_patch that a crash interrupted"
            );
        }
        // After the journal's rollback: an accept a crash cut short is staged again (its
        // files were put back by the journal; a record of an older version's accept is
        // rolled back here).
        let edits_dir = self.state_dir.join("structural").join("edits");
        let edits = Arc::new(
            toolvisor_structural::store::EditStore::open(&edits_dir, &|dir| files.scope(dir))
                .map_err(|e| anyhow::anyhow!("cannot open the staged edits: {e}"))?,
        );
        Ok((files, edits))
    }

    /// The data hub, started when `[data]` names collections. A store that cannot start
    /// stays failed with its error (shown in the tree and `status`); the data tools answer
    /// it; everything else serves.
    async fn data_hub(&self) -> anyhow::Result<Arc<toolvisor_data::DataHub>> {
        let config = self.config;
        let data_sup = kind_supervisor(self.root, "data").await?;
        let data = Arc::new(toolvisor_data::DataHub::new(
            config.data.clone(),
            &config.data_dir(self.state_dir),
            data_sup,
            self.notifier.clone(),
        ));
        if config.data.enabled()
            && let Err(e) = data.start().await
        {
            tracing::error!(error = %e, "the data hub did not start");
        }
        Ok(data)
    }

    /// Ids that outlive the daemon: `p1` must never name a different process after a
    /// restart.
    fn ids(&self, name: &str) -> anyhow::Result<IdCounter> {
        let path = self.state_dir.join("ids").join(name);
        IdCounter::open(&path)
            .map_err(|e| anyhow::anyhow!("cannot open the id counter {}: {e}", path.display()))
    }
}

/// The daemon's shared state around its services and registry.
fn assemble(
    config: Arc<Config>,
    services: Services,
    registry: Registry,
    root: ActorRef<RootMsg>,
    notifier: TreeNotifier,
    state_dir: PathBuf,
    bound: &Bound,
) -> Daemon {
    Daemon {
        services,
        registry,
        lanes: match config.testing.lane_idle_ms {
            Some(ms) => Lanes::with_idle(Duration::from_millis(ms)),
            None => Lanes::default(),
        },
        audit: AuditLog::new(&config.audit_log()),
        notifier,
        root,
        started: Instant::now(),
        socket: bound.path.clone(),
        spool: {
            let spool = state_dir.join("spool");
            match toolvisor_kit::private::ensure_private_dir(&spool, "the output spool directory") {
                Ok(()) => Some(spool),
                Err(e) => {
                    tracing::warn!(error = %e, "large results for slow clients will wait in memory");
                    None
                }
            }
        },
        state_dir,
        sessions: Mutex::new(BTreeMap::new()),
        peak_sessions: AtomicUsize::new(0),
        partial_frames: Arc::new(AtomicUsize::new(0)),
        trim_wanted: tokio::sync::Notify::new(),
        went_idle: tokio::sync::Notify::new(),
        conversations: crate::conversations::Conversations::new(
            config
                .testing
                .conversation_idle_ms
                .map_or(crate::conversations::IDLE, Duration::from_millis),
            crate::conversations::MAX,
        ),
        next_session: AtomicU64::new(0),
        next_request: AtomicU64::new(0),
        calls_total: AtomicU64::new(0),
        calls_failed: AtomicU64::new(0),
        calls_in_flight: AtomicU64::new(0),
        call_ended: tokio::sync::Notify::new(),
        draining: std::sync::atomic::AtomicBool::new(false),
        metrics: crate::metrics::calls::Metrics::default(),
        config,
    }
}
