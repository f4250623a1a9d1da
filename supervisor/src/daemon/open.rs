//! What the daemon opens at start besides its actors: the private state directory, the
//! kind supervisors it looks up, the download jobs' manager and the inference pool with its
//! endpoint.

use super::*;

/// Makes `dir` the private state directory and returns it: staged edits hold whole files and
/// stored results whole outputs, so it must be ours alone. Created 0700; an existing one must
/// pass [`toolvisor_kit::private::check_private_dir`] (a symlink the user made is resolved
/// first) and is narrowed to 0700 if others could read it (state dirs of older versions were
/// 0755).
pub(super) fn private_state_dir(dir: &std::path::Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    toolvisor_kit::private::ensure_private_dir(&dir, "the state directory")?;
    let mode = std::fs::metadata(&dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| {
            anyhow::anyhow!(
                "cannot make the state directory {} private: {e}",
                dir.display()
            )
        })?;
        tracing::info!(state_dir = %dir.display(), old_mode = %format!("{:04o}", mode & 0o7777), "made the state directory private (0700)");
    }
    Ok(dir)
}

/// The kind supervisor `kind` the root started, or why not (the root did not answer within
/// 5 s, or has no such kind).
pub(super) async fn kind_supervisor(
    root: &ActorRef<RootMsg>,
    kind: &str,
) -> anyhow::Result<ActorRef<SupervisorMsg>> {
    let answer = root
        .call(
            |reply| RootMsg::Supervisor {
                kind: kind.to_string(),
                reply,
            },
            Some(Duration::from_secs(5)),
        )
        .await
        .map_err(|e| anyhow::anyhow!("cannot ask the root actor for the {kind} supervisor: {e}"))?;
    match answer {
        ractor::rpc::CallResult::Success(Some(sup)) => Ok(sup),
        ractor::rpc::CallResult::Success(None) => {
            Err(anyhow::anyhow!("the {kind} supervisor did not start"))
        }
        ractor::rpc::CallResult::Timeout => Err(anyhow::anyhow!(
            "the root actor did not hand out the {kind} supervisor within 5 s"
        )),
        ractor::rpc::CallResult::SenderError => Err(anyhow::anyhow!(
            "the root actor stopped before handing out the {kind} supervisor"
        )),
    }
}

/// The download manager over the model store, `[models]` as configured; its unfinished
/// jobs resume here.
pub(super) async fn open_downloads(
    config: &Config,
    state_dir: &std::path::Path,
    supervisor: ractor::ActorRef<toolvisor_kit::supervise::SupervisorMsg>,
    notifier: &TreeNotifier,
    accelerators: Arc<toolvisor_downloads::accel::Probe>,
) -> anyhow::Result<Arc<toolvisor_downloads::Downloads>> {
    let m = &config.models;
    let ids_path = state_dir.join("ids").join("downloads");
    let ids = IdCounter::open(&ids_path)
        .map_err(|e| anyhow::anyhow!("cannot open the id counter {}: {e}", ids_path.display()))?;
    let store = m.store.clone().unwrap_or_else(|| state_dir.join("models"));
    let cfg = toolvisor_downloads::DownloadsConfig {
        endpoint: m.endpoint(),
        token: m.token(),
        store: store.clone(),
        parallel_transfers: m.parallel_transfers,
        connect_timeout: Duration::from_secs(m.connect_timeout_s),
        retries: m.retries,
        stall_timeout: Duration::from_secs(m.stall_timeout_s),
        min_rate_bytes_per_s: m.min_rate_bytes_per_s,
        ranged: toolvisor_downloads::ranged::RangedConfig {
            connections: m.connections_per_file,
            min_bytes: m.ranged_min_bytes,
            retries: m.retries,
        },
        meminfo: config
            .testing
            .meminfo
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/meminfo")),
        accelerators,
        keep_finished: Duration::from_secs(m.keep_finished_s),
        free_bytes: config.testing.store_free_bytes,
    };
    toolvisor_downloads::Downloads::open(cfg, state_dir, supervisor, notifier.clone(), ids)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "the model store {} cannot be used: {e}; set `[models] store` to a private directory of this user",
                store.display()
            )
        })
}

/// The inference pool over the model store, `[inference]` as configured, and its endpoint
/// (`<socket>.inference`, or `[inference] socket`; a loopback port if `listen` is set).
pub(super) fn open_inference(
    config: &Config,
    state_dir: &std::path::Path,
    socket: &std::path::Path,
    supervisor: ractor::ActorRef<toolvisor_kit::supervise::SupervisorMsg>,
    launcher: &Launcher,
    notifier: &TreeNotifier,
    accelerators: Arc<toolvisor_downloads::accel::Probe>,
) -> anyhow::Result<Arc<toolvisor_inference::Inference>> {
    let pool = toolvisor_inference::Inference::new(toolvisor_inference::InferenceArgs {
        config: config.inference.clone(),
        store: config
            .models
            .store
            .clone()
            .unwrap_or_else(|| state_dir.join("models")),
        meminfo: config
            .testing
            .meminfo
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/meminfo")),
        accelerators,
        supervisor,
        launcher: launcher.clone(),
        notifier: notifier.clone(),
        policy: config.restart.policy(),
        state_dir: state_dir.join("inference"),
    })
    .map_err(|e| anyhow::anyhow!("the inference pool cannot start: {e}"))?;
    let pool = Arc::new(pool);
    let endpoint = config
        .inference
        .socket
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.inference", socket.display())));
    toolvisor_inference::endpoint::serve(
        pool.clone(),
        &endpoint,
        config.inference.listen.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("the inference endpoint cannot listen: {e}"))?;
    Ok(pool)
}
