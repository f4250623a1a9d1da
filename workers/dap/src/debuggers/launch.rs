//! `debug launch` (and what `attach` shares with it): refusing a second session, starting the adapter under the
//! `debug_adapters` supervisor, and the DAP handshake (initialize, launch or attach,
//! breakpoints, configurationDone) up to the first stop.
//!
//! No option is dropped silently: debugpy-only options (`module`, `just_my_code`) given for another
//! adapter are `not_available` naming the adapter and the option, as breakpoint options the adapter
//! did not advertise are (`breakpoints.rs`). A launch's `env` is added on top of the allowlisted
//! environment the adapter already runs with (lldb-dap takes `KEY=VALUE` strings, the others an
//! object merged onto theirs), never instead of it.

use super::*;
use crate::client::DapClient;

impl Debuggers {
    // ---- launch and attach ----------------------------------------------------------------

    pub(super) fn refuse_second(&self, slot: &Slot, op: &str) -> Result<(), ToolError> {
        if let Some(running) = lock(&slot.current).clone().filter(|s| s.is_live()) {
            let what = match &running.target {
                Target::Launch {
                    module: Some(m), ..
                } => format!("-m {m}"),
                Target::Launch { program, .. } => program.display().to_string(),
                Target::Attach { port } => format!("127.0.0.1:{port}"),
                Target::AttachPid { pid } => format!("pid {pid}"),
            };
            return Err(err(
                ErrorKind::Busy,
                format!(
                    "debug {op}: this conversation already has a debug session: {} ({} {what}, {}); a second one is refused, not swapped in",
                    running.id,
                    running.adapter,
                    running.state_word()
                ),
                "`terminate` ends the running session first; `status` shows it",
            ));
        }
        Ok(())
    }

    pub(super) async fn launch(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        args: &DebugArgs,
    ) -> Result<DebugLaunchResult, ToolError> {
        self.refuse_second(slot, "launch")?;
        let cwd = launch_cwd(call, args)?;
        let env = launch_env(args.env.as_ref())?;
        let module = launch_module(args)?;
        // The program, or for a module the directory it runs in (which finds the module).
        let path = match &module {
            Some(_) => cwd.clone(),
            None => launch_program(call, args)?,
        };
        let (name, spec) = self.launch_adapter(args, module.is_some(), &path)?;
        let root = adapters::find_root(&path, &spec.markers);
        let project = root.unwrap_or_else(|| call.workdir.clone());
        let search = self.search(&project, &call.workdir);
        let resolved = adapters::resolve(name, spec, &search).map_err(|why| {
            err(
                ErrorKind::NotAvailable,
                format!("debug launch: the {name} adapter cannot run here: {why}"),
                "install it (scripts/install-test-deps installs debugpy, lldb-dap and delve), or point `[debug] search_path` at it; `adapters` shows what works",
            )
        })?;
        let flavor = resolved.flavor;
        let launch_args = args.args.clone().unwrap_or_default();
        let stop_on_entry = slot.nothing_set();
        let mut request = launch_request(
            &module,
            &path,
            &launch_args,
            &cwd,
            stop_on_entry,
            &env,
            flavor,
        );
        flavor_options(&mut request, &resolved, args);
        let target = Target::Launch {
            program: path.clone(),
            args: launch_args,
            module,
        };
        let command = resolved.command_line();
        let connect = Connect::Spawn {
            resolved: Box::new(resolved),
            cwd,
            launcher: self.launcher.clone(),
            address_wait: self.config.start_timeout(),
        };
        *lock(&slot.last_launch) = Some((call.clone(), args.clone()));
        let session = self
            .start_session(call, slot, name, flavor, target, command, connect)
            .await?;
        session
            .entry_pending
            .store(stop_on_entry, std::sync::atomic::Ordering::SeqCst);
        self.handshake(&session, slot, "launch", Value::Object(request), true)
            .await
    }

    /// The adapter a launch uses: the one named, debugpy for a module, else the one for the
    /// program's kind; debugpy-only options are refused for any other.
    fn launch_adapter(
        &self,
        args: &DebugArgs,
        module: bool,
        path: &Path,
    ) -> Result<(&String, &AdapterSpec), ToolError> {
        let by_name = match (&args.adapter, module) {
            (Some(name), _) => Some(name.clone()),
            (None, true) => Some("debugpy".to_string()),
            (None, false) => None,
        };
        let (name, spec) = match &by_name {
            Some(name) => match self.adapters.get_key_value(name) {
                Some(found) => found,
                None => {
                    return Err(err(
                        ErrorKind::InvalidArgs,
                        format!("debug launch: no adapter named {name:?}"),
                        format!("adapters here: {}", self.adapters.keys().cloned().collect::<Vec<_>>().join(", ")),
                    ));
                }
            },
            None => adapters::pick(&self.adapters, path).ok_or_else(|| {
                err(
                    ErrorKind::InvalidArgs,
                    format!("debug launch: cannot tell which adapter debugs {}", path.display()),
                    "name one with `adapter` (`adapters` lists them); .py goes to debugpy, native executables to lldb",
                )
            })?,
        };
        // Options only debugpy has: refused by name for any other adapter.
        if Flavor::of(name) != Flavor::Debugpy {
            for (given, what) in [
                (module, "running a Python module (`module`)"),
                (args.just_my_code.is_some(), "`just_my_code`"),
            ] {
                if given {
                    return Err(err(
                        ErrorKind::NotAvailable,
                        format!("debug launch: the {name} adapter does not support {what}"),
                        "`module` and `just_my_code` are debugpy's (Python); launch the program by path",
                    ));
                }
            }
        }
        Ok((name, spec))
    }

    /// `restart`: ends the current session (if it still runs) and launches the last launch
    /// again, same caller and arguments; breakpoints carry over. A new session id.
    pub(super) async fn restart(&self, slot: &Arc<Slot>) -> Result<DebugLaunchResult, ToolError> {
        let current = lock(&slot.current).clone();
        if let Some(session) = &current {
            let hint =
                "`terminate` (which detaches), restart the program yourself, and `attach` again";
            match session.target {
                Target::Attach { port } => {
                    return Err(err(
                        ErrorKind::InvalidArgs,
                        format!(
                            "debug restart: session {} is attached to 127.0.0.1:{port}; restart launches a program again",
                            session.id
                        ),
                        hint,
                    ));
                }
                Target::AttachPid { pid } => {
                    return Err(err(
                        ErrorKind::InvalidArgs,
                        format!(
                            "debug restart: session {} is attached to process {pid}; restart launches a program again",
                            session.id
                        ),
                        hint,
                    ));
                }
                Target::Launch { .. } => {}
            }
        }
        let Some((call, args)) = lock(&slot.last_launch).clone() else {
            return Err(err(
                ErrorKind::NotFound,
                "debug restart: nothing was launched in this conversation",
                "`launch {program}` starts a session; `restart` repeats the last launch",
            ));
        };
        let previous = current.as_ref().map(|s| s.id.clone());
        if let Some(session) = current {
            match session.ended() {
                Some(end) => session.shutdown(end.kind, end.message.clone()).await,
                None => {
                    session
                        .shutdown(
                            EndKind::Terminated,
                            "terminated by `restart` (adapter and program killed)".into(),
                        )
                        .await
                }
            }
        }
        let mut out = self.launch(&call, slot, &args).await?;
        out.restarted_from = Some(previous);
        Ok(out)
    }

    /// Creates the session, starts its actor under the supervisor and makes it current.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn start_session(
        &self,
        call: &DebugCall,
        slot: &Arc<Slot>,
        name: &str,
        flavor: Flavor,
        target: Target,
        command: String,
        connect: Connect,
    ) -> Result<Arc<Session>, ToolError> {
        let n = self.ids.next().map_err(|e| {
            ToolError::new(
                ErrorKind::Io,
                format!("cannot reserve an id for the new debug session: {e}"),
                "check that the daemon's state dir is writable (disk full?); nothing was started",
            )
        })?;
        let id = format!("{}#{n}", call.conversation);
        let status = NodeStatus::owned(
            "debug_session",
            &id,
            &call.conversation,
            format!("{}: {name}", call.conversation),
            self.notifier.clone(),
        );
        let session = Session::new(
            id.clone(),
            &call.conversation,
            name,
            flavor,
            target,
            command,
            status.clone(),
            self.config.session_ttl(),
            self.config.output_bytes,
            self.supervisor.clone(),
        );
        let args = Arc::new(Mutex::new(Some(SessionArgs {
            session: session.clone(),
            connect,
        })));
        let factory: Factory = Arc::new(move |ctx: StartCtx| {
            let args = lock(&args).take();
            Box::pin(async move {
                let args = args.ok_or_else(|| "a debug session is started once".to_string())?;
                let name = format!("debug/{}", args.session.id);
                Actor::spawn_linked(Some(name), SessionActor, args, ctx.supervisor)
                    .await
                    .map(|(actor, _)| actor.get_cell())
                    .map_err(|e| e.to_string())
            })
        });
        let spec = ChildSpec {
            id: id.clone(),
            factory,
            policy: RestartPolicy::default().with_restart(Restart::Temporary),
            status,
        };
        // Current before the start is awaited: a call cancelled meanwhile (a `tcp-listen`
        // adapter may take `start_timeout_s` to print its port) leaves a session that
        // `terminate`, `status` and the conversation's end still reach, not an unowned adapter.
        *lock(&slot.current) = Some(session.clone());
        let wait = self.config.start_timeout() + Duration::from_secs(10);
        match supervise::start(&self.supervisor, spec, wait).await {
            Ok(()) => {}
            Err(StartFailed::Child(message)) => {
                let hint = match &session.target {
                    Target::Attach { port } => format!(
                        "start the program as `python -m debugpy --listen 127.0.0.1:{port} --wait-for-client prog.py` first (the server takes one client)"
                    ),
                    Target::Launch { .. } | Target::AttachPid { .. } => {
                        "`adapters` shows which adapters work here".to_string()
                    }
                };
                session.mark_end(EndKind::Failed, message.clone());
                if let Some(mut failure) = session.start_failure() {
                    failure.message = format!(
                        "debug: could not start the debug session: {}",
                        failure.message
                    );
                    return Err(failure);
                }
                return Err(err(
                    ErrorKind::Io,
                    format!("debug: could not start the debug session: {message}"),
                    hint,
                ));
            }
            Err(StartFailed::NoAnswer(_)) => {
                return Err(err(
                    ErrorKind::ResourceFailed,
                    "debug: the debug_adapters supervisor did not answer a start request in time",
                    "the daemon is overloaded or stuck; `toolvisor tree` shows its state",
                ));
            }
        }
        Ok(session)
    }

    /// `initialize`, then `launch`/`attach`, breakpoints and `configurationDone` once the
    /// adapter says `initialized`, then the answer to `launch`/`attach` (debugpy answers only
    /// after `configurationDone`, lldb-dap at once), then — when a stop is expected — the
    /// first stop. A failure ends the session and says why.
    pub(super) async fn handshake(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        request: &str,
        arguments: Value,
        expect_stop: bool,
    ) -> Result<DebugLaunchResult, ToolError> {
        match self
            .handshake_inner(session, slot, request, arguments, expect_stop)
            .await
        {
            Ok(value) => Ok(value),
            Err(mut e) => {
                if session.is_live() {
                    session
                        .shutdown(EndKind::Failed, format!("{request} failed: {}", e.message))
                        .await;
                }
                let words = session.last_words();
                if e.kind != ErrorKind::Expired && !words.is_empty() && !e.message.contains(&words)
                {
                    e.message.push_str(&format!(". The adapter said: {words}"));
                }
                Err(e)
            }
        }
    }

    pub(super) async fn handshake_inner(
        &self,
        session: &Arc<Session>,
        slot: &Slot,
        request: &str,
        arguments: Value,
        expect_stop: bool,
    ) -> Result<DebugLaunchResult, ToolError> {
        let client = session.client().cloned().ok_or_else(|| {
            err(
                ErrorKind::Internal,
                "the session has no adapter connection",
                "report this as a bug",
            )
        })?;
        let start = self.config.start_timeout();
        let started = Instant::now();
        let caps = self.initialize(session, &client, request, start).await?;
        let pending = match client.send(request, Some(arguments)) {
            Ok(p) => p,
            Err(e) => return Err(self.dap_error(session, request, e).await),
        };
        let answer = pending.wait(start);
        tokio::pin!(answer);
        let mut answered: Option<Result<Value, DapError>> = None;
        tokio::select! {
            a = &mut answer => answered = Some(a),
            _ = session.wait_until(start, |s| s.initialized || s.closed.is_some()) => {}
        }
        if let Some(Err(e)) = answered {
            return Err(self.dap_error(session, request, e).await);
        }
        self.await_initialized(session, request, start, started)
            .await?;
        // Configuration: breakpoints, function breakpoints, exception filters, done.
        let (verdicts, function_verdicts) = self.configure(session, slot, request).await?;
        if caps["supportsConfigurationDoneRequest"]
            .as_bool()
            .unwrap_or(false)
        {
            self.request(session, request, "configurationDone", None)
                .await?;
        }
        if answered.is_none() {
            self.late_answer(session, request, answer, start, started)
                .await?;
        }
        session.update(|s| {
            if s.phase == Phase::Starting {
                s.phase = if s.stops > 0 {
                    Phase::Stopped
                } else {
                    Phase::Running
                };
            }
        });
        session.arm_ttl();
        tracing::info!(session = session.id, request, "debug session configured");
        let stop = if expect_stop {
            self.settle(session, request, 0).await?
        } else {
            self.describe(session, request, None).await
        };
        Ok(DebugLaunchResult {
            stop,
            breakpoints: (!verdicts.is_empty()).then_some(verdicts),
            functions: function_verdicts,
            session: summary(session),
            restarted_from: None,
        })
    }

    /// `initialize`: the adapter's capabilities, kept on the session.
    async fn initialize(
        &self,
        session: &Arc<Session>,
        client: &DapClient,
        request: &str,
        start: Duration,
    ) -> Result<Value, ToolError> {
        let mut init = Map::new();
        init.insert("clientID".into(), json!("toolvisor"));
        init.insert("clientName".into(), json!("toolvisor"));
        init.insert("adapterID".into(), json!(session.adapter));
        init.insert("locale".into(), json!("en-US"));
        init.insert("linesStartAt1".into(), json!(true));
        init.insert("columnsStartAt1".into(), json!(true));
        init.insert("pathFormat".into(), json!("path"));
        init.insert("supportsVariableType".into(), json!(true));
        let caps = client
            .request("initialize", Some(Value::Object(init)), start)
            .await;
        let caps = match caps {
            Ok(c) => c,
            Err(e) => return Err(self.dap_error(session, request, e).await),
        };
        client.set_supports_cancel(caps["supportsCancelRequest"].as_bool().unwrap_or(false));
        *lock(&session.capabilities) = caps.clone();
        Ok(caps)
    }

    /// Waits for the adapter's `initialized` event, within what is left of the start timeout.
    async fn await_initialized(
        &self,
        session: &Arc<Session>,
        request: &str,
        start: Duration,
        started: Instant,
    ) -> Result<(), ToolError> {
        let left = start.saturating_sub(started.elapsed());
        if !session
            .wait_until(left, |s| s.initialized || s.closed.is_some())
            .await
        {
            return Err(err(
                ErrorKind::Timeout,
                format!(
                    "debug {request}: the adapter did not say `initialized` within {} s",
                    start.as_secs()
                ),
                "the adapter may be hung or the program may not start; `[debug] start_timeout_s` sets the wait",
            ));
        }
        if session.state().closed.is_some() {
            return Err(self
                .dap_error(session, request, DapError::Closed(String::new()))
                .await);
        }
        Ok(())
    }

    /// Waits for the answer to `request` that had not come before the configuration, for
    /// what is left of the start timeout (at least a second).
    async fn late_answer(
        &self,
        session: &Arc<Session>,
        request: &str,
        answer: std::pin::Pin<&mut impl std::future::Future<Output = Result<Value, DapError>>>,
        start: Duration,
        started: Instant,
    ) -> Result<(), ToolError> {
        let left = start
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        let a = tokio::time::timeout(left, answer).await;
        match a {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.dap_error(session, request, e).await),
            Err(_) => Err(err(
                ErrorKind::Timeout,
                format!(
                    "debug {request}: the adapter did not answer `{request}` within {} s",
                    start.as_secs()
                ),
                "`[debug] start_timeout_s` sets the wait",
            )),
        }
    }
}

/// The directory a launched program runs in: `cwd` (made absolute and real), else the workdir.
fn launch_cwd(call: &DebugCall, args: &DebugArgs) -> Result<PathBuf, ToolError> {
    Ok(match &args.cwd {
        Some(dir) => {
            let dir = absolute(&call.workdir, dir);
            if !dir.is_dir() {
                return Err(err(
                    ErrorKind::NotFound,
                    format!("debug launch: no such directory {} (`cwd`)", dir.display()),
                    "`cwd` is relative to the workdir and must be an existing directory",
                ));
            }
            std::fs::canonicalize(&dir).unwrap_or(dir)
        }
        None => call.workdir.clone(),
    })
}

/// The Python module a launch runs, when it names one (and no `program`).
fn launch_module(args: &DebugArgs) -> Result<Option<String>, ToolError> {
    Ok(match (&args.module, &args.program) {
        (Some(_), Some(_)) => {
            return Err(err(
                ErrorKind::InvalidArgs,
                "debug launch: give `program` or `module`, not both",
                "`module` runs `python -m MODULE` in `cwd`; `program` runs a file",
            ));
        }
        (Some(m), None) => Some(module_name(m)?),
        (None, _) => None,
    })
}

/// The program a launch runs: `program`, made absolute and real, which must be a file.
fn launch_program(call: &DebugCall, args: &DebugArgs) -> Result<PathBuf, ToolError> {
    let program = need("launch", "program", &args.program)?;
    let path = absolute(&call.workdir, &program);
    if !path.is_file() {
        return Err(err(
            ErrorKind::NotFound,
            format!("debug launch: no such program {}", path.display()),
            "paths are relative to the workdir; build the program first (e.g. `gcc -g`)",
        ));
    }
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// The `launch` request's arguments every adapter takes: what runs, with which arguments,
/// where, whether it stops on entry, and its added environment.
fn launch_request(
    module: &Option<String>,
    path: &Path,
    launch_args: &[String],
    cwd: &Path,
    stop_on_entry: bool,
    env: &BTreeMap<String, String>,
    flavor: Flavor,
) -> Map<String, Value> {
    let mut request = Map::new();
    match module {
        Some(m) => {
            request.insert("module".into(), json!(m));
        }
        None => {
            request.insert("program".into(), json!(path.display().to_string()));
        }
    }
    request.insert("args".into(), json!(launch_args));
    request.insert("cwd".into(), json!(cwd.display().to_string()));
    if stop_on_entry {
        request.insert("stopOnEntry".into(), json!(true));
    }
    if !env.is_empty() {
        // lldb-dap takes `KEY=VALUE` strings (and adds them to the environment it
        // inherited); the others take an object merged onto theirs.
        let value = match flavor {
            Flavor::Lldb => json!(
                env.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
            ),
            _ => json!(env),
        };
        request.insert("env".into(), value);
    }
    request
}

/// Adds the `launch` arguments only the resolved adapter's kind takes.
fn flavor_options(
    request: &mut Map<String, Value>,
    resolved: &adapters::Resolved,
    args: &DebugArgs,
) {
    match resolved.flavor {
        Flavor::Debugpy => {
            request.insert("console".into(), json!("internalConsole"));
            if let Some(python) = &resolved.python {
                request.insert("python".into(), json!([python.display().to_string()]));
            }
            if let Some(mine) = args.just_my_code {
                request.insert("justMyCode".into(), json!(mine));
            }
        }
        Flavor::Delve => {
            request.insert("mode".into(), json!("debug"));
        }
        Flavor::Lldb | Flavor::Dart | Flavor::Generic => {}
    }
}

/// `env` checked: names non-empty without `=` or NUL, values without NUL.
fn launch_env(
    env: Option<&BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, ToolError> {
    let env = env.cloned().unwrap_or_default();
    for (k, v) in &env {
        if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
            return Err(err(
                ErrorKind::InvalidArgs,
                format!(
                    "debug launch: {k:?} is not an environment variable name (or its value holds a NUL)"
                ),
                "`env` maps names (no `=`, not empty) to values",
            ));
        }
    }
    Ok(env)
}

/// A dotted Python module name (`pkg.mod`), or `invalid_args`.
fn module_name(m: &str) -> Result<String, ToolError> {
    let m = m.trim();
    let ok = !m.is_empty()
        && m.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_')
        });
    if !ok {
        return Err(err(
            ErrorKind::InvalidArgs,
            format!("debug launch: {m:?} is not a Python module name"),
            "`module` is dotted, like `pkg.mod` (what `python -m` takes), found from `cwd`",
        ));
    }
    Ok(m.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_are_dotted_identifiers() {
        assert_eq!(module_name(" pkg.mod ").unwrap(), "pkg.mod");
        assert_eq!(module_name("_private.m2").unwrap(), "_private.m2");
        for bad in ["", "pkg/mod.py", "pkg..mod", "1pkg", "pkg.", "-m"] {
            assert_eq!(
                module_name(bad).unwrap_err().kind,
                ErrorKind::InvalidArgs,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn env_names_without_equals_or_nul() {
        let ok: BTreeMap<String, String> = [("A_1".to_string(), "x=y".to_string())].into();
        assert_eq!(launch_env(Some(&ok)).unwrap(), ok);
        assert!(launch_env(None).unwrap().is_empty());
        for (k, v) in [("", "x"), ("A=B", "x"), ("A", "x\0y")] {
            let env: BTreeMap<String, String> = [(k.to_string(), v.to_string())].into();
            assert_eq!(
                launch_env(Some(&env)).unwrap_err().kind,
                ErrorKind::InvalidArgs,
                "{k:?}"
            );
        }
    }
}
