//! The actor of one incarnation of a language server ([`ServerActor`]): starts the process,
//! initializes it, re-opens the documents after a crash, answers the server's own requests
//! and records its notifications into [`ServerShared`], and fails when the server's stream
//! ends so the supervisor restarts it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use toolvisor_jsonrpc::{Incoming, ResponseError, RpcClient, Transport, TransportOptions};
use toolvisor_kit::launch::Launcher;
use toolvisor_kit::process::{self, ExitStatus, ProcessGuard};
use toolvisor_kit::supervise::SupervisorMsg;
use toolvisor_protocol::tree::NodeState;

use crate::lock;
use crate::position::Encoding;
use crate::server::{Conn, ServerShared};
use crate::uri;

/// The actor of one incarnation of a language server.
pub struct ServerActor;

pub struct ServerStart {
    pub shared: Arc<ServerShared>,
    pub launcher: Launcher,
    pub attempt: u32,
}

pub enum ServerMsg {
    /// The server's stream closed (it exited, crashed, or broke the protocol).
    Exited(String),
    CheckTtl,
}

pub struct ServerState {
    /// Kills and reaps the server's whole process group when the actor goes, however it goes.
    _guard: ProcessGuard,
    shared: Arc<ServerShared>,
    client: RpcClient,
    expiring: bool,
}

fn client_capabilities() -> Value {
    json!({
        "general": {"positionEncodings": ["utf-8", "utf-32", "utf-16"]},
        "offsetEncoding": ["utf-8", "utf-32", "utf-16"],
        "textDocument": {
            "synchronization": {"didSave": true, "dynamicRegistration": false},
            "publishDiagnostics": {"versionSupport": true, "relatedInformation": false},
            // Dynamic registration lets pyright answer pull diagnostics (it registers
            // `textDocument/diagnostic` only then): a pulled list is computed for the text
            // and imports as they are when asked, never one published earlier.
            "diagnostic": {"dynamicRegistration": true, "relatedDocumentSupport": false},
            "definition": {"linkSupport": true},
            "typeDefinition": {"linkSupport": true},
            "implementation": {"linkSupport": true},
            "references": {},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
            "documentSymbol": {"hierarchicalDocumentSymbolSupport": true},
            "codeAction": {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": [
                "", "quickfix", "refactor", "refactor.extract", "refactor.inline",
                "refactor.rewrite", "source", "source.organizeImports"]}},
                "isPreferredSupport": true},
            "rename": {"prepareSupport": true},
            // typescript-language-server offers call hierarchy only to a client that says it
            // takes it.
            "callHierarchy": {"dynamicRegistration": false},
            "typeHierarchy": {"dynamicRegistration": false},
            "signatureHelp": {"signatureInformation": {
                "documentationFormat": ["markdown", "plaintext"],
                "parameterInformation": {"labelOffsetSupport": true},
                "activeParameterSupport": true}},
            // No snippets: a label and its plain insert text are what `completions` shows.
            "completion": {"completionItem": {"snippetSupport": false,
                "documentationFormat": ["markdown", "plaintext"], "labelDetailsSupport": true},
                "contextSupport": true},
            "inlayHint": {"dynamicRegistration": false},
            "formatting": {"dynamicRegistration": false},
        },
        "workspace": {
            "symbol": {},
            "workspaceFolders": true,
            // Files changed on disk outside the daemon reach the servers that watch them
            // through toolvisor's own watcher (watch.rs, outside.rs).
            "didChangeWatchedFiles": {"dynamicRegistration": true, "relativePatternSupport": true},
            "configuration": true,
            "applyEdit": false,
            "workspaceEdit": {"documentChanges": true},
        },
        "window": {"workDoneProgress": true},
        "experimental": {"serverStatusNotification": true},
    })
}

/// Starts the server's process: the launcher's spec with the server's own environment, and
/// V8's heap limit for a node server with a memory limit.
async fn spawn_server(
    launcher: &Launcher,
    shared: &ServerShared,
) -> Result<process::Spawned, String> {
    let mut spec = launcher.spec(
        &shared.program.display().to_string(),
        &shared.command[1..],
        &shared.root,
        true,
        &format!("lsp/{}", shared.id),
    );
    // Its temporary files (clangd's preambles, pyright's and gopls's directories) go when
    // it does, however it ends.
    spec.scratch = true;
    for (k, v) in &shared.env {
        spec.env.retain(|(n, _)| n != k);
        spec.env.push((k.clone(), v.clone()));
    }
    if let Some(limit) = shared.memory_limit
        && crate::memory::is_node_program(&shared.program)
    {
        // V8 collects garbage before its heap grows past the limit (`crate::memory`).
        let existing = spec
            .env
            .iter()
            .find(|(n, _)| n == "NODE_OPTIONS")
            .map(|(_, v)| v.clone());
        spec.env.retain(|(n, _)| n != "NODE_OPTIONS");
        spec.env.push((
            "NODE_OPTIONS".into(),
            crate::memory::node_options(existing.as_deref(), limit),
        ));
    }
    process::spawn(spec)
        .await
        .map_err(|e| format!("cannot start {}: {e}", shared.program.display()))
}

/// The `initialize` request's parameters: the root as the one workspace folder, the client's
/// capabilities, the configured initialization options (clangd's file status asked for).
fn initialize_params(shared: &ServerShared) -> Value {
    let root_uri = uri::from_path(&shared.root);
    let name = shared
        .root
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "root".into());
    let mut params = json!({
        "processId": std::process::id(),
        "clientInfo": {"name": "toolvisor", "version": env!("CARGO_PKG_VERSION")},
        "rootUri": root_uri,
        "rootPath": shared.root.display().to_string(),
        "workspaceFolders": [{"uri": root_uri, "name": name}],
        "capabilities": client_capabilities(),
    });
    if let Some(opts) = &shared.init_options {
        params["initializationOptions"] = opts.clone();
    }
    // clangd reports each file's work (`textDocument/clangd.fileStatus`): a file sent again
    // with nothing changed is rebuilt without a publish (`ops::rebuilt`).
    if shared.flavor.clangd {
        match params.get_mut("initializationOptions") {
            Some(Value::Object(o)) => {
                o.entry("clangdFileStatus").or_insert(Value::Bool(true));
            }
            _ => params["initializationOptions"] = json!({"clangdFileStatus": true}),
        }
    }

    params
}

/// Sends `initialize`; a server that fails it is an error with the last lines of its stderr.
async fn initialize(
    client: &RpcClient,
    params: Value,
    shared: &ServerShared,
) -> Result<Value, ActorProcessingErr> {
    match client
        .request("initialize", params, shared.waits.init)
        .await
    {
        Ok(r) => Ok(r),
        Err(e) => {
            // Give the stderr logger a moment to catch the last lines of a dying server.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let tail = client.stderr_tail().text();
            Err(format!(
                "initialize failed: {e}{}",
                if tail.is_empty() {
                    String::new()
                } else {
                    format!("; stderr tail:\n{tail}")
                }
            )
            .into())
        }
    }
}

impl Actor for ServerActor {
    type Msg = ServerMsg;
    type State = ServerState;
    type Arguments = ServerStart;

    async fn pre_start(
        &self,
        myself: ActorRef<ServerMsg>,
        args: ServerStart,
    ) -> Result<ServerState, ActorProcessingErr> {
        let shared = args.shared;
        let generation = shared.generation.fetch_add(1, Ordering::SeqCst) + 1;
        // The new incarnation reads the disk itself: what changed before it starts is moot,
        // what changes from now on is watched.
        *lock(&shared.watch) = Some(Arc::new(crate::watch::RootWatch::start(&shared.root)));
        lock(&shared.unseen).clear();
        // An incarnation that never comes up keeps no watch (nor its inotify instance).
        let mut unwatch = Unwatch(Some(shared.clone()));
        let spawned = spawn_server(&args.launcher, &shared).await?;
        let guard = spawned.guard;
        let pid = guard.main_pid();
        if let Some(limit) = shared.memory_limit {
            tokio::spawn(crate::memory::watch(
                shared.clone(),
                generation,
                guard.pid(),
                pid,
                limit,
            ));
        }
        let stdin = spawned.stdin.ok_or("the server has no stdin pipe")?;
        let (client, incoming) = Transport::start(
            spawned.stdout,
            stdin,
            spawned.stderr,
            TransportOptions {
                label: format!("lsp/{}", shared.id),
                ..TransportOptions::default()
            },
        );
        *lock(&shared.stderr) = client.stderr_tail();
        shared.new_incarnation();
        tokio::spawn(serve_incoming(
            incoming,
            shared.clone(),
            client.clone(),
            generation,
            myself.clone(),
            spawned.exit,
        ));
        let params = initialize_params(&shared);
        let result = initialize(&client, params, &shared).await?;
        let caps = result.get("capabilities").cloned().unwrap_or(Value::Null);
        let encoding = caps
            .get("positionEncoding")
            .or_else(|| result.get("offsetEncoding"))
            .and_then(Value::as_str)
            .and_then(Encoding::from_name)
            .unwrap_or(Encoding::Utf16);
        let server_name = result
            .pointer("/serverInfo/name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| shared.command[0].clone());
        client.notify("initialized", json!({}))?;
        let conn = Arc::new(Conn {
            client: client.clone(),
            caps,
            encoding,
            pid,
            generation,
            name: server_name,
            legacy_type_hierarchy: Default::default(),
        });
        shared.reopen_all(&conn);
        *lock(&shared.started) = Some(Instant::now());
        shared.activity();
        shared.set_conn(Some(conn));
        shared.status.update(|i| {
            i.pid = Some(pid);
            i.state = NodeState::Ready;
        });
        shared.touch();
        shared.show_state();
        tracing::info!(
            server = shared.id,
            pid,
            attempt = args.attempt,
            encoding = encoding.name(),
            "language server initialized"
        );
        unwatch.0 = None;
        myself.send_interval(Duration::from_secs(5), || ServerMsg::CheckTtl);
        Ok(ServerState {
            _guard: guard,
            shared,
            client,
            expiring: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        state: &mut ServerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ServerMsg::Exited(reason) => Err(reason.into()),
            ServerMsg::CheckTtl => {
                let expired = lock(&state.shared.ttl).expired(Instant::now());
                if let (Some(why), false) = (expired, state.expiring) {
                    state.expiring = true;
                    tracing::info!(server = state.shared.id, reason = %why, "language server TTL expired");
                    if let Some(sup) = myself.try_get_supervisor() {
                        let _ = sup.send_message(SupervisorMsg::Expire {
                            id: state.shared.id.clone(),
                            reason: why.to_string(),
                        });
                    }
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
        // A polite goodbye when stopped (reload, TTL); the guard kills whatever remains.
        let client = &state.client;
        let generation = state.shared.conn().map(|c| c.generation).unwrap_or(0);
        if !client.is_closed() {
            client.begin_shutdown();
            let _ = client
                .request("shutdown", Value::Null, Duration::from_secs(2))
                .await;
            // Cleared before `exit`, so the end of its stream reads as the stop it is.
            let _ = state.shared.clear_conn(generation);
            let _ = client.notify("exit", Value::Null);
        }
        let _ = state.shared.clear_conn(generation);
        Ok(())
    }
}

/// Drops the server's file watch unless disarmed (a start that failed).
struct Unwatch(Option<Arc<ServerShared>>);

impl Drop for Unwatch {
    fn drop(&mut self) {
        if let Some(shared) = self.0.take() {
            lock(&shared.watch).take();
        }
    }
}

/// Answers the server's own requests and records its notifications; on end of stream, clears
/// the connection and tells the actor, with the exit status when the child was reaped.
async fn serve_incoming(
    mut incoming: mpsc::Receiver<Incoming>,
    shared: Arc<ServerShared>,
    client: RpcClient,
    generation: u64,
    actor: ActorRef<ServerMsg>,
    mut exit: watch::Receiver<Option<ExitStatus>>,
) {
    while let Some(msg) = incoming.recv().await {
        match msg {
            Incoming::Request { id, method, params } => {
                let answer = answer_request(&shared, &method, &params);
                let _ = client.respond(id, answer);
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "textDocument/publishDiagnostics" => shared.publish(&params),
                "$/progress" => shared.progress(&params),
                "experimental/serverStatus" => shared.server_status(&params),
                "textDocument/clangd.fileStatus" => shared.file_status(&params),
                "window/logMessage" | "window/showMessage" => shared.log_message(&params),
                _ => {}
            },
            Incoming::Closed { reason } => {
                let unexpected = shared.clear_conn(generation);
                let status =
                    tokio::time::timeout(Duration::from_secs(2), exit.wait_for(|s| s.is_some()))
                        .await
                        .ok()
                        .and_then(|r| r.ok().and_then(|s| *s));
                let killed = lock(&shared.memory_kill)
                    .as_ref()
                    .filter(|(g, _)| *g == generation)
                    .map(|(_, why)| why.clone());
                let why = match (killed, status) {
                    (Some(killed), _) => killed,
                    (None, Some(s))
                        if let Some(limit) = shared.memory_limit
                            && crate::memory::v8_out_of_heap(&client.stderr_tail().text()) =>
                    {
                        format!(
                            "{} ({s})",
                            crate::memory::killed_message(&shared.id, limit, None)
                        )
                    }
                    (None, Some(s)) => format!("the server exited ({s})"),
                    (None, None) => format!("the server's stream closed ({reason})"),
                };
                if unexpected {
                    tracing::warn!(server = shared.id, why, "language server ended");
                } else {
                    tracing::info!(server = shared.id, why, "language server stopped");
                }
                let _ = actor.cast(ServerMsg::Exited(why));
                return;
            }
        }
    }
}

pub(crate) fn answer_request(
    shared: &ServerShared,
    method: &str,
    params: &Value,
) -> Result<Value, ResponseError> {
    match method {
        "client/registerCapability" | "client/unregisterCapability" => {
            shared.register(params, method == "client/registerCapability");
            Ok(Value::Null)
        }
        "workspace/configuration" => {
            let n = params
                .get("items")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            // A restricted server gets its restricted settings wherever it looks, so settings
            // it reads later cannot turn build scripts or proc macros back on.
            let item = shared.restricted.clone().unwrap_or(Value::Null);
            Ok(Value::Array(vec![item; n]))
        }
        "workspace/workspaceFolders" => {
            let uri = uri::from_path(&shared.root);
            Ok(
                json!([{"uri": uri, "name": shared.root.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()}]),
            )
        }
        "window/workDoneProgress/create"
        | "window/showMessageRequest"
        | "window/showDocument"
        | "workspace/semanticTokens/refresh"
        | "workspace/codeLens/refresh"
        | "workspace/inlayHint/refresh"
        | "workspace/inlineValue/refresh"
        | "workspace/diagnostic/refresh" => Ok(Value::Null),
        "workspace/applyEdit" => Ok(json!({
            "applied": false,
            "failureReason": "toolvisor applies workspace edits only through lsp_rename"
        })),
        _ => Err(ResponseError {
            code: -32601,
            message: format!("toolvisor does not handle {method}"),
        }),
    }
}
