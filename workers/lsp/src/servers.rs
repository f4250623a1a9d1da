//! The servers and their roots ([`Servers`]): one server per (language, root, mode), shared by
//! every conversation on that root whose run trusts it the same way (full or restricted mode),
//! each an actor under the `language_servers` supervisor. `Servers` decides whether a server may
//! start (the start rule), starts it through the supervisor, waits for it (bounded), and reports
//! why a server does not run. What touches only the servers and their documents is a method of
//! `Servers` beside its concern: document sync (`ops.rs`, `at.rs`, `outside.rs`), navigation
//! (`navigate.rs`, `symbols.rs`, `hierarchy.rs`…) and the checks that keep nothing across calls
//! (`diagnostics.rs`, `check.rs`, `checker.rs`, `workspace_diags.rs`); the manager
//! (`manager.rs`) adds what the other concerns keep across calls.
//!
//! A call's plan says which server answers it: the language and root by the start rule, the mode by
//! the run's trust in the root (`crate::trust`: restricted options and environment for an untrusted
//! root; a full-mode server is never shared with an untrusted run), and, for
//! typescript-language-server, its bundled tsserver and client-side file watching. The lsp worker's
//! file work never runs on an async worker thread: document sync with the watcher's catch-up before
//! it (one trip), the workspace edits and the bounded walks (`open_any`'s 5,000 entries, the
//! importers of `dependents.rs`, jedi's count in `coverage.rs`) run on the blocking pool.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorRef};
use serde_json::{Value, json};
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::restart::{Restart, RestartPolicy};
use toolvisor_kit::status::{NodeStatus, TreeNotifier};
use toolvisor_kit::supervise::{
    self, ChildSpec, Factory, Lookup, StartCtx, StartFailed, SupervisorMsg,
};
use toolvisor_protocol::error::{ErrorKind, ToolError};
use toolvisor_protocol::results::{
    LspLanguageStatus, LspMode, LspRootTrust, LspServerStatus, LspStatus, LspTrustedBy,
};

use crate::actor::{ServerActor, ServerStart};
use crate::config::{LanguageSpec, LspConfig};
use crate::locate::{self, NotFound};
use crate::lock;
use crate::server::{Conn, Readiness, ServerShared, Waits};
use crate::trust::{Trust, TrustedBy};

/// Why no server covers a file.
#[derive(Clone, Debug)]
pub enum NoServer {
    NoLanguage {
        path: PathBuf,
    },
    NoRoot {
        language: String,
        markers: Vec<String>,
        from: PathBuf,
    },
    NoBinary {
        language: String,
        root: PathBuf,
        not_found: NotFound,
    },
    /// The language's restricted mode is not valid JSON, or cannot be set up: an untrusted
    /// root gets no server rather than one in full mode.
    BadRestricted {
        language: String,
        error: String,
    },
    /// The server executes project code, has no restricted mode, and the calling run does
    /// not trust the root.
    Untrusted {
        language: String,
        root: PathBuf,
    },
}

impl std::fmt::Display for NoServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoServer::NoLanguage { path } => write!(
                f,
                "no language server is configured for {} (extension not covered)",
                path.display()
            ),
            NoServer::NoRoot {
                language,
                markers,
                from,
            } => write!(
                f,
                "{language}: root marker missing: none of {} in {} or any parent",
                markers.join(", "),
                from.display()
            ),
            NoServer::NoBinary {
                language,
                root,
                not_found,
            } => {
                write!(f, "{language} (root {}): {not_found}", root.display())
            }
            NoServer::BadRestricted { language, error } => write!(
                f,
                "{language}: no restricted mode: {error}; no server starts in an untrusted root"
            ),
            NoServer::Untrusted { language, root } => write!(
                f,
                "{language}: the server executes project code (e.g. analyzer plugins) and has no restricted mode, and {} is untrusted for this run",
                root.display()
            ),
        }
    }
}

impl NoServer {
    pub fn to_error(&self) -> ToolError {
        let hint = match self {
            NoServer::NoLanguage { .. } => {
                "`lsp {\"op\":\"status\"}` lists the configured languages"
            }
            NoServer::NoRoot { .. } => {
                "create the project's root marker (e.g. pyproject.toml, Cargo.toml, compile_commands.json), or use grep/read"
            }
            NoServer::NoBinary { .. } => {
                "install the server (on $PATH, or project-local node_modules/.bin or .venv/bin in a trusted root), or add its directory to [lsp] search_path"
            }
            NoServer::BadRestricted { .. } => {
                "fix [lsp.languages.<name>] untrusted_init_options in the daemon config, or trust the root"
            }
            NoServer::Untrusted { .. } => {
                "trust the root: `lsp {\"op\":\"trust\"}` (the user approves; for this run) or [trust] roots in the daemon config; grep/read work untrusted"
            }
        };
        let kind = match self {
            NoServer::Untrusted { .. } => ErrorKind::PolicyDenied,
            _ => ErrorKind::NotAvailable,
        };
        ToolError::new(kind, self.to_string(), hint)
    }
}

/// A server that may start for a file.
#[derive(Clone, Debug)]
pub struct Plan {
    pub language: String,
    pub root: PathBuf,
    pub spec: LanguageSpec,
    pub resolved: locate::Resolved,
    /// Whether the calling run trusts the root, and why.
    pub trust: TrustedBy,
}

impl Plan {
    /// The server runs in its restricted mode: the root is untrusted for the calling run
    /// and the language has one.
    pub fn restricted(&self) -> bool {
        !self.trust.trusted()
            && (self.spec.untrusted_init_options.is_some() || !self.spec.untrusted_env.is_empty())
    }

    /// One server per (language, root, mode): a restricted server is never shared with a
    /// run that trusts the root, nor a full one with a run that does not.
    pub fn id(&self) -> String {
        if self.restricted() {
            format!("{}:{} (restricted)", self.language, self.root.display())
        } else {
            format!("{}:{}", self.language, self.root.display())
        }
    }
}

fn is_typescript_language_server(program: &Path) -> bool {
    program.file_name().is_some_and(|n| {
        n.to_string_lossy()
            .starts_with("typescript-language-server")
    })
}

/// typescript-language-server's `initializationOptions` with `tsserver.useClientFileWatcher`
/// on, and the tsserver preferences that turn on its inlay hints (all off by default, so
/// `lsp inlay_hints` would be empty), unless they set them.
fn client_file_watcher(options: Option<Value>) -> Value {
    let mut options = options
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    if !options.get("tsserver").is_some_and(Value::is_object) {
        options["tsserver"] = json!({});
    }
    if options["tsserver"].get("useClientFileWatcher").is_none() {
        options["tsserver"]["useClientFileWatcher"] = json!(true);
    }
    if !options.get("preferences").is_some_and(Value::is_object) {
        options["preferences"] = json!({});
    }
    for (k, v) in [
        ("includeInlayParameterNameHints", json!("all")),
        ("includeInlayVariableTypeHints", json!(true)),
        ("includeInlayFunctionLikeReturnTypeHints", json!(true)),
        ("includeInlayPropertyDeclarationTypeHints", json!(true)),
        ("includeInlayEnumMemberValueHints", json!(true)),
    ] {
        if options["preferences"].get(k).is_none() {
            options["preferences"][k] = v;
        }
    }
    options
}

/// The `tsserver.js` Node would resolve from the server's real location (its own
/// `node_modules/typescript`, or one in a `node_modules` above it), never one inside `root`.
pub fn bundled_tsserver(program: &Path, root: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(program).ok()?;
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    real.ancestors()
        .skip(1)
        .filter(|dir| dir.file_name().is_none_or(|n| n != "node_modules"))
        .map(|dir| dir.join("node_modules/typescript/lib/tsserver.js"))
        .find(|p| p.is_file() && !p.starts_with(&root))
}

/// What an untrusted root withholds for a language, one phrase each.
pub fn untrusted_changes(spec: &LanguageSpec) -> Vec<String> {
    let mut changes = Vec::new();
    if spec.server_runs_project_code && spec.untrusted_init_options.is_none() {
        changes.push("the language server does not start: it executes project code".into());
    }
    if spec.untrusted_init_options.is_some() {
        changes.push(
            spec.untrusted_note
                .clone()
                .unwrap_or_else(|| "the server in its restricted mode".into()),
        );
    }
    if let Some(checker) = spec
        .checker
        .as_ref()
        .filter(|_| spec.checker_runs_project_code)
    {
        changes.push(format!(
            "`{}` (diagnostics \"*\") not run: it executes project code",
            checker.join(" ")
        ));
    }
    changes.push(format!(
        "no project-local binaries ({})",
        locate::LOCAL_DIRS.join(", ")
    ));
    changes
}

/// The servers and their roots: one server per (language, root, mode) in the table, the start
/// rule, the roots each run trusts, and starting, waiting for and stopping servers.
pub struct Servers {
    supervisor: ActorRef<SupervisorMsg>,
    launcher: Launcher,
    pub config: LspConfig,
    languages: BTreeMap<String, LanguageSpec>,
    notifier: TreeNotifier,
    policy: RestartPolicy,
    table: Mutex<HashMap<String, Arc<ServerShared>>>,
    /// Which roots each run may let servers and checkers execute code of.
    pub trust: Trust,
    /// rustup's default toolchain, for `{rustup_default_toolchain}` in `untrusted_env`.
    rustup_default: String,
}

pub fn not_ready(what: String) -> ToolError {
    ToolError::new(
        ErrorKind::NotReady,
        what,
        "the server is still starting or indexing; an empty answer now would be wrong. Retry shortly; `lsp {\"op\":\"status\"}` shows its state, and if it stays busy with that same work while idle, `lsp {\"op\":\"reload\"}` restarts it",
    )
}

/// What a server writes into its project root that toolvisor cannot keep out of it. clangd
/// keeps its background index in `.cache/clangd/` next to the `compile_commands.json`; no
/// flag or config moves that project index (only turning the background index off, which
/// would make every answer partial). Python's bytecode is kept out by `[env] set`
/// (`PYTHONDONTWRITEBYTECODE`).
pub fn writes_into_root(program: &Path) -> Vec<&'static str> {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    if name.starts_with("clangd") {
        vec![".cache/clangd/"]
    } else {
        Vec::new()
    }
}

pub fn failed(id: &str, error: &str) -> ToolError {
    ToolError::new(
        ErrorKind::ResourceFailed,
        format!("language server {id} failed: {error}"),
        "fix the cause, then `lsp {\"op\":\"reload\",\"file\":...}` starts it again",
    )
}

impl Servers {
    pub fn new(
        supervisor: ActorRef<SupervisorMsg>,
        launcher: Launcher,
        config: LspConfig,
        notifier: TreeNotifier,
        policy: RestartPolicy,
        trusted_roots: &[PathBuf],
    ) -> Self {
        let rustup_default = crate::config::rustup_default_toolchain(&launcher.env)
            .unwrap_or_else(|| "stable".into());
        Servers {
            supervisor,
            launcher,
            languages: config.languages(),
            config,
            notifier,
            policy: policy.with_restart(Restart::Transient),
            table: Mutex::new(HashMap::new()),
            trust: Trust::new(trusted_roots),
            rustup_default,
        }
    }

    pub fn languages(&self) -> &BTreeMap<String, LanguageSpec> {
        &self.languages
    }

    pub(crate) fn launcher(&self) -> &Launcher {
        &self.launcher
    }

    pub(crate) fn launcher_path(&self) -> String {
        self.path_var()
    }

    fn path_var(&self) -> String {
        self.launcher.path().to_string()
    }

    /// The start rule for `path` as `run` calls: a language, a root marker and a binary
    /// (project-local only where the run trusts the root).
    pub fn plan(&self, path: &Path, run: &str) -> Result<Plan, NoServer> {
        let Some((language, spec)) = locate::language_of(&self.languages, path) else {
            return Err(NoServer::NoLanguage {
                path: path.to_path_buf(),
            });
        };
        self.plan_for(language, spec, path, run)
    }

    pub(crate) fn plan_for(
        &self,
        language: &str,
        spec: &LanguageSpec,
        from: &Path,
        run: &str,
    ) -> Result<Plan, NoServer> {
        let Some(root) = locate::find_root(from, &spec.markers) else {
            return Err(NoServer::NoRoot {
                language: language.to_string(),
                markers: spec.markers.clone(),
                from: if from.is_dir() {
                    from.to_path_buf()
                } else {
                    from.parent().unwrap_or(from).to_path_buf()
                },
            });
        };
        let trust = self.trust.check(&root, run);
        let bad = |error: String| NoServer::BadRestricted {
            language: language.to_string(),
            error,
        };
        let mut restricted = None;
        if !trust.trusted()
            && let Some(text) = &spec.untrusted_init_options
        {
            restricted = Some(
                serde_json::from_str::<Value>(text)
                    .map_err(|e| bad(format!("untrusted_init_options is not valid JSON ({e})")))?,
            );
        }
        let resolved = locate::resolve_binary(
            spec,
            &root,
            &self.config.search_path,
            &self.path_var(),
            trust.trusted(),
        )
        .map_err(|not_found| NoServer::NoBinary {
            language: language.to_string(),
            root: root.clone(),
            not_found,
        })?;
        // After the binary: a server that is not installed says so first.
        if !trust.trusted()
            && spec.server_runs_project_code
            && spec.untrusted_init_options.is_none()
        {
            return Err(NoServer::Untrusted {
                language: language.to_string(),
                root,
            });
        }
        let mut spec = spec.clone();
        if let Some(mut options) = restricted {
            if is_typescript_language_server(&resolved.program) {
                // It prefers the project's node_modules/typescript (project code) unless told
                // which tsserver to run: the one bundled with it, outside the project.
                let tsserver = bundled_tsserver(&resolved.program, &root).ok_or_else(|| {
                    bad(format!(
                        "no TypeScript found beside {} outside the project, so it would run the project's own",
                        resolved.program.display()
                    ))
                })?;
                if !options.is_object() {
                    options = json!({});
                }
                options["tsserver"] = json!({"path": tsserver.display().to_string()});
            }
            spec.untrusted_init_options = Some(options.to_string());
        }
        Ok(Plan {
            language: language.to_string(),
            root,
            spec,
            resolved,
            trust,
        })
    }

    fn waits(&self) -> Waits {
        let c = &self.config;
        Waits {
            init: Duration::from_secs(c.init_timeout_s),
            request: Duration::from_secs(c.request_timeout_s),
            ready: Duration::from_secs(c.ready_wait_s),
            settle: Duration::from_millis(c.settle_ms),
            diagnostics: Duration::from_secs(c.diagnostics_wait_s),
        }
    }

    /// The shared state of the server for `plan`, created on first use.
    pub fn shared(&self, plan: &Plan) -> Arc<ServerShared> {
        let id = plan.id();
        let mut table = lock(&self.table);
        if let Some(s) = table.get(&id)
            && s.command == plan.resolved.command
            && s.program == plan.resolved.program
        {
            return s.clone();
        }
        let status = NodeStatus::new(
            "language_server",
            &id,
            format!("{}: not started", plan.resolved.command[0]),
            self.notifier.clone(),
        );
        let parse = |t: &Option<String>| {
            t.as_deref()
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
        };
        // Restricted: the restricted options replace the configured ones, for
        // `initialize` and for every `workspace/configuration` answer.
        let restricted = plan.restricted().then(|| {
            if plan.spec.untrusted_init_options.is_some() {
                parse(&plan.spec.untrusted_init_options).unwrap_or_else(|| json!({}))
            } else {
                parse(&plan.spec.init_options).unwrap_or(Value::Null)
            }
        });
        let mut init_options = match &restricted {
            Some(r) => Some(r.clone()).filter(|r| !r.is_null()),
            None => parse(&plan.spec.init_options),
        };
        if is_typescript_language_server(&plan.resolved.program) {
            // tsserver then asks for file watchers (registered with toolvisor, which sees
            // every change on disk before a query) instead of watching with its own delay.
            init_options = Some(client_file_watcher(init_options));
        }
        let env: Vec<(String, String)> = if plan.restricted() {
            plan.spec
                .untrusted_env
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.replace(
                            crate::config::RUSTUP_DEFAULT_TOOLCHAIN,
                            &self.rustup_default,
                        ),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        let shared = ServerShared::new(
            id.clone(),
            plan.language.clone(),
            plan.root.clone(),
            plan.resolved.command.clone(),
            plan.resolved.program.clone(),
            init_options,
            restricted,
            env,
            status,
            self.waits(),
            self.config.idle_ttl(),
            self.config.memory_limit(&plan.spec),
        );
        table.insert(id, shared.clone());
        shared
    }

    /// Every server known, running or not.
    pub fn all(&self) -> Vec<Arc<ServerShared>> {
        let mut v: Vec<_> = lock(&self.table).values().cloned().collect();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v
    }

    async fn lookup(&self, id: &str) -> Result<Lookup, ToolError> {
        match self
            .supervisor
            .call(
                |reply| SupervisorMsg::Lookup {
                    id: id.to_string(),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await
        {
            Ok(ractor::rpc::CallResult::Success(l)) => Ok(l),
            _ => Err(ToolError::new(
                ErrorKind::ResourceFailed,
                "the language_servers supervisor did not answer within 10 s",
                "the daemon is overloaded or stuck; `toolvisor tree` shows its state",
            )),
        }
    }

    fn child_spec(&self, shared: &Arc<ServerShared>) -> ChildSpec {
        let launcher = self.launcher.clone();
        let factory_shared = shared.clone();
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = ServerStart {
                shared: factory_shared.clone(),
                launcher: launcher.clone(),
                attempt: ctx.attempt,
            };
            let name = format!("lsp/{}#{}", args.shared.id, ctx.attempt);
            Box::pin(async move {
                Actor::spawn_linked(Some(name), ServerActor, args, ctx.supervisor)
                    .await
                    .map(|(actor, _)| actor.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        ChildSpec {
            id: shared.id.clone(),
            factory,
            policy: self.policy,
            status: shared.status.clone(),
        }
    }

    /// A live connection to the server, starting it if needed and waiting (bounded) while it
    /// starts or restarts.
    pub async fn ensure(&self, shared: &Arc<ServerShared>) -> Result<Arc<Conn>, ToolError> {
        self.ensure_inner(shared, false).await
    }

    /// Like [`ensure`](Self::ensure); `revive` also starts a server left `failed` (reload).
    pub async fn ensure_inner(
        &self,
        shared: &Arc<ServerShared>,
        mut revive: bool,
    ) -> Result<Arc<Conn>, ToolError> {
        shared.touch();
        let deadline = Instant::now() + shared.waits.ready.max(shared.waits.init);
        loop {
            if let Some(conn) = shared.conn() {
                return Ok(conn);
            }
            match self.lookup(&shared.id).await? {
                Lookup::Failed { last_error } if !revive => {
                    return Err(failed(&shared.id, &last_error));
                }
                Lookup::Missing | Lookup::Ended { .. } | Lookup::Failed { .. } => {
                    let _starting = shared.start_lock.lock().await;
                    if shared.conn().is_some() {
                        continue;
                    }
                    match self.lookup(&shared.id).await? {
                        Lookup::Missing | Lookup::Ended { .. } => {}
                        Lookup::Failed { .. } if revive => {}
                        _ => continue,
                    }
                    revive = false;
                    tracing::info!(server = shared.id, "starting language server");
                    let spec = self.child_spec(shared);
                    let wait = deadline.saturating_duration_since(Instant::now());
                    match supervise::start(&self.supervisor, spec, wait).await {
                        Ok(()) => continue,
                        Err(StartFailed::Child(e)) => {
                            return Err(failed(&shared.id, &e));
                        }
                        Err(StartFailed::NoAnswer(_)) => {
                            return Err(not_ready(format!(
                                "language server {} is still starting after {} s",
                                shared.id,
                                wait.as_secs()
                            )));
                        }
                    }
                }
                Lookup::Running(_) | Lookup::Starting | Lookup::Backoff { .. } => {
                    let wait_until = (Instant::now() + Duration::from_millis(500)).min(deadline);
                    if let Some(conn) = shared.wait_conn(wait_until).await {
                        return Ok(conn);
                    }
                    if Instant::now() >= deadline {
                        let last = shared.status.get().last_error.unwrap_or_default();
                        return Err(not_ready(format!(
                            "language server {} is (re)starting{}",
                            shared.id,
                            if last.is_empty() {
                                String::new()
                            } else {
                                format!("; last error: {last}")
                            }
                        )));
                    }
                }
            }
        }
    }

    /// Wait until the server is ready and settled (bounded), or `not_ready`.
    pub async fn ready(&self, shared: &Arc<ServerShared>) -> Result<(), ToolError> {
        let deadline = Instant::now() + shared.waits.ready;
        match shared.wait_ready(deadline).await {
            Ok(()) => Ok(()),
            Err(Readiness::Starting) => Err(not_ready(format!(
                "language server {} lost its connection and is restarting",
                shared.id
            ))),
            Err(Readiness::Indexing(what)) => Err(not_ready(format!(
                "language server {} is still indexing after {} s ({what})",
                shared.id,
                shared.waits.ready.as_secs()
            ))),
            Err(Readiness::Ready) => Ok(()),
        }
    }

    /// [`Servers::ready`] for an index-wide answer about document `uri`: also waits
    /// until a server that loads projects lazily has loaded the document's project
    /// (`ServerShared::wait_ready_for`).
    pub async fn ready_for(&self, shared: &Arc<ServerShared>, uri: &str) -> Result<(), ToolError> {
        let deadline = Instant::now() + shared.waits.ready;
        match shared.wait_ready_for(uri, deadline).await {
            Ok(()) | Err(Readiness::Ready) => Ok(()),
            Err(Readiness::Starting) => Err(not_ready(format!(
                "language server {} lost its connection and is restarting",
                shared.id
            ))),
            Err(Readiness::Indexing(what)) => Err(not_ready(format!(
                "language server {} is still indexing after {} s ({what}); an index-wide answer now would be partial",
                shared.id,
                shared.waits.ready.as_secs()
            ))),
        }
    }

    /// Stop a server for good (its record stays until collected); the next use starts it again.
    pub async fn stop(&self, shared: &Arc<ServerShared>, reason: &str) {
        let _ = self
            .supervisor
            .call(
                |reply| SupervisorMsg::Stop {
                    id: shared.id.clone(),
                    reason: reason.to_string(),
                    reply,
                },
                Some(Duration::from_secs(10)),
            )
            .await;
        // Wait (bounded) for the record to show the end, so a following start is not refused.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            match self.lookup(&shared.id).await {
                Ok(Lookup::Ended { .. } | Lookup::Missing | Lookup::Failed { .. }) | Err(_) => {
                    break;
                }
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// The state word of a known server, for status and answers.
    pub async fn state_of(&self, shared: &Arc<ServerShared>) -> (String, Option<String>) {
        match self.lookup(&shared.id).await {
            Ok(Lookup::Running(_)) => match shared.readiness() {
                Readiness::Indexing(what) => ("indexing".into(), Some(what)),
                r => (r.word().into(), None),
            },
            Ok(Lookup::Starting) => ("starting".into(), None),
            Ok(Lookup::Backoff {
                last_error,
                retry_in,
            }) => (
                "restarting".into(),
                Some(format!(
                    "{last_error}; retry in {} ms",
                    retry_in.as_millis()
                )),
            ),
            Ok(Lookup::Failed { last_error }) => ("failed".into(), Some(last_error)),
            Ok(Lookup::Ended { last_error }) => ("stopped".into(), last_error),
            Ok(Lookup::Missing) => ("not started".into(), None),
            Err(e) => ("unknown".into(), Some(e.message)),
        }
    }

    /// `status`: every known server, and for `from` (a file or the workdir) every configured
    /// language with whether it would start there for `run` and exactly why not, and whether
    /// `run` trusts its root and what that changes.
    pub async fn status(&self, from: &Path, run: &str, workdir: &Path) -> LspStatus {
        // Paths in the text are shown from the workdir (the JSON keeps them absolute).
        let dir = |p: &Path| crate::answers::show_dir(p, workdir);
        let (lines, servers) = self.running(workdir).await;
        let here = self.languages_here(from, run, workdir).await;
        let mut text = status_text(&lines, &here, &dir(from), run);
        let trust = self.roots_trust(&here, run);
        if !trust.iter().all(|t| t.trusted) {
            text.push_str(
                "untrusted roots: trust one with `lsp {\"op\":\"trust\"}` (asks the user; for this run) or list it in the daemon config's [trust] roots\n",
            );
        }
        LspStatus {
            text,
            servers,
            languages: here,
            trust,
        }
    }

    /// The servers started so far: one line each for the text (paths from `workdir`), and
    /// their JSON.
    async fn running(&self, workdir: &Path) -> (Vec<String>, Vec<LspServerStatus>) {
        let dir = |p: &Path| crate::answers::show_dir(p, workdir);
        let mut servers = Vec::new();
        let mut lines = Vec::new();
        for s in self.all() {
            let (state, why) = self.state_of(&s).await;
            let info = s.status.get();
            let conn = s.conn();
            lines.push(format!(
                "{}{} — {} (root {}): {state}{}{}",
                s.language,
                if s.restricted.is_some() {
                    " (restricted mode)"
                } else {
                    ""
                },
                s.command.join(" "),
                dir(&s.root),
                conn.as_ref()
                    .map(|c| format!(
                        ", pid {}, uptime {} s",
                        c.pid,
                        s.uptime().map_or(0, |u| u.as_secs())
                    ))
                    .unwrap_or_default(),
                why.as_ref().map(|w| format!(" — {w}")).unwrap_or_default()
            ));
            let writes = writes_into_root(&s.program);
            if !writes.is_empty() {
                lines.push(format!(
                    "  writes into its root: {} (it cannot be told to keep it elsewhere)",
                    writes.join(", ")
                ));
            }
            servers.push(LspServerStatus {
                writes: writes.iter().map(|w| w.to_string()).collect(),
                language: s.language.clone(),
                root: s.root.display().to_string(),
                command: s.command.clone(),
                mode: match s.restricted {
                    Some(_) => LspMode::Restricted,
                    None => LspMode::Full,
                },
                state,
                detail: why,
                pid: conn.as_ref().map(|c| c.pid),
                uptime_s: s.uptime().map(|u| u.as_secs()),
                restarts: info.restarts,
                last_error: info.last_error,
                position_encoding: conn.as_ref().map(|c| c.encoding.into()),
                server_name: conn.as_ref().map(|c| c.name.clone()),
            });
        }
        (lines, servers)
    }

    /// Each configured language as seen from `from` for `run`: its state there, why, its
    /// root and whether that is trusted.
    async fn languages_here(
        &self,
        from: &Path,
        run: &str,
        workdir: &Path,
    ) -> Vec<LspLanguageStatus> {
        let dir = |p: &Path| crate::answers::show_dir(p, workdir);
        let mut here = Vec::new();
        for (language, spec) in &self.languages {
            let (state, reason, root) = match self.plan_for(language, spec, from, run) {
                Ok(plan) => {
                    let running = lock(&self.table).get(&plan.id()).cloned();
                    let state = match running {
                        Some(s) => self.state_of(&s).await.0,
                        None => "not started".into(),
                    };
                    let program = plan.resolved.program.display();
                    let root = plan.root.display();
                    let shown = dir(&plan.root);
                    if state == "not started" {
                        (
                            "available".into(),
                            format!("root {shown}; starts on first use: {program}"),
                            Some(root.to_string()),
                        )
                    } else {
                        (
                            state.clone(),
                            format!("root {shown}; {state}: {program}"),
                            Some(root.to_string()),
                        )
                    }
                }
                Err(e @ NoServer::NoRoot { .. }) => ("no root".into(), e.to_string(), None),
                Err(e @ NoServer::NoBinary { .. }) => {
                    let root = match &e {
                        NoServer::NoBinary { root, .. } => Some(root.display().to_string()),
                        _ => None,
                    };
                    ("binary not found".into(), e.to_string(), root)
                }
                Err(ref e @ NoServer::Untrusted { ref root, .. }) => (
                    "untrusted".into(),
                    e.to_string(),
                    Some(root.display().to_string()),
                ),
                Err(e) => ("unavailable".into(), e.to_string(), None),
            };
            let trust = root.as_ref().map(|r| self.trust.check(Path::new(r), run));
            let changes = match &trust {
                Some(TrustedBy::No) => untrusted_changes(spec),
                _ => Vec::new(),
            };
            here.push(LspLanguageStatus {
                language: language.clone(),
                state,
                reason,
                root,
                trusted: trust.as_ref().map(TrustedBy::trusted),
                trust: trust.as_ref().map(TrustedBy::describe),
                untrusted_changes: changes,
            });
        }
        here
    }

    /// Every root of `here`, once: trusted for `run`, by what, and which runs an approval
    /// trusted it for.
    fn roots_trust(&self, here: &[LspLanguageStatus], run: &str) -> Vec<LspRootTrust> {
        let mut roots: Vec<String> = here.iter().filter_map(|h| h.root.clone()).collect();
        roots.sort();
        roots.dedup();
        roots
            .iter()
            .map(|r| {
                let t = self.trust.check(Path::new(r), run);
                LspRootTrust {
                    root: r.clone(),
                    trusted: t.trusted(),
                    by: match &t {
                        TrustedBy::Config(_) => LspTrustedBy::Config,
                        TrustedBy::Approval(_) => LspTrustedBy::Approval,
                        TrustedBy::No => LspTrustedBy::No,
                    },
                    detail: t.describe(),
                    approved_runs: self.trust.granted_runs(Path::new(r)),
                }
            })
            .collect()
    }
}

/// `lsp status`'s text: the servers started (`lines`), then each language from `shown` (a
/// language with no root there on one line for all).
fn status_text(lines: &[String], here: &[LspLanguageStatus], shown: &str, run: &str) -> String {
    let mut text = String::new();
    if lines.is_empty() {
        text.push_str("no language server has been started\n");
    } else {
        text.push_str("servers:\n");
        for l in lines {
            text.push_str(&format!("  {l}\n"));
        }
    }
    // The run: trust granted with `lsp trust` is for it.
    text.push_str(&format!("for {} (run {run}):\n", shown));
    // Languages with no root marker here are one line: a Python project's status is not
    // a page of "no root" for every other language (`languages` still lists them all).
    let absent: Vec<&str> = here
        .iter()
        .filter(|h| h.state == "no root")
        .map(|h| h.language.as_str())
        .collect();
    for h in here.iter().filter(|h| h.state != "no root") {
        text.push_str(&format!("  {}: {} — {}\n", h.language, h.state, h.reason));
        if let Some(trust) = &h.trust {
            let changes = &h.untrusted_changes;
            if changes.is_empty() {
                text.push_str(&format!("    {trust}: project code may run\n"));
            } else {
                text.push_str(&format!("    {trust}: {}\n", changes.join("; ")));
            }
        }
    }
    if !absent.is_empty() {
        text.push_str(&format!(
            "  no root marker here for: {} (`languages` in the answer says what each looks for)\n",
            absent.join(", ")
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_tsserver_is_the_one_beside_the_server_never_the_projects() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        let file = |p: &Path| {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        };
        let cli = t.join("tools/node_modules/typescript-language-server/lib/cli.mjs");
        file(&cli);
        let bundled = t.join("tools/node_modules/typescript/lib/tsserver.js");
        file(&bundled);
        let bin = t.join("tools/node_modules/.bin/typescript-language-server");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("../typescript-language-server/lib/cli.mjs", &bin).unwrap();
        let project = t.join("proj");
        file(&project.join("node_modules/typescript/lib/tsserver.js"));
        let real = std::fs::canonicalize(&bundled).unwrap();
        assert_eq!(bundled_tsserver(&bin, &project), Some(real));
        // A server installed inside the project has no TypeScript outside it.
        let inside = project.join("node_modules/typescript-language-server/lib/cli.mjs");
        file(&inside);
        assert_eq!(bundled_tsserver(&inside, &project), None);
    }
}
