//! The `toolvisor` binary: `serve` runs the daemon; `call`, `tools`, `status`, `tree` and
//! `downloads` talk to a running one; `operator` answers questions at a terminal; `__shim` is the hidden
//! process-group leader every child runs under.
//!
//! Also `drain` (drain a running daemon and wait for it to exit), `data trash|restore` (open the
//! data hub's database directly), `mcp` (into `toolvisor-mcp`) and the hidden `__pty` relay.
//! `serve` adopts a socket passed by socket activation or binds its own. Before anything else it
//! fixes glibc's mmap threshold (`kit::memory::tune`, before any thread starts) and makes the
//! daemon non-dumpable (`PR_SET_DUMPABLE` 0, as ssh-agent): no same-uid non-root process, a child
//! included, can then read its environment or memory through `/proc` or ptrace. The shim and every
//! child become dumpable again at `execve`, which the spawn ledger's sweep relies on to read a
//! shim's environment.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use serde_json::json;
use toolvisor::config::Config;
use toolvisor::server::{ServeOptions, serve};
use toolvisor::{listener, treeview};
use toolvisor_protocol::client::{Client, ClientOptions};
use toolvisor_protocol::wire::{ClientFrame, ClientKind, DaemonFrame, Outcome, Surface, Tier};

/// Print a line to stdout, ignoring a closed pipe (`toolvisor call ... | head` must not panic).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

mod cli;
use cli::{Cli, Command, Conn, DataOp, McpArgs};

fn data_main(op: DataOp, config: Option<PathBuf>) -> ExitCode {
    let config = match Config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("toolvisor: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = config.data_dir(&config.state_dir());
    let db = dir.join("hub.sqlite3");
    if !db.exists() {
        eprintln!(
            "toolvisor: no data hub database at {} (the daemon makes it when [data.collections] names one)",
            db.display()
        );
        return ExitCode::from(2);
    }
    let mut store = match toolvisor_data::store::Store::open(&db) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("toolvisor: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match op {
        DataOp::List => store.operator_list().map(|items| {
            if items.is_empty() {
                out!("the hub holds no documents");
            }
            for (handle, collection, title) in items {
                out!("{handle}\t{collection}\t{title}");
            }
        }),
        DataOp::Trash => store.trash_list().map(|items| {
            if items.is_empty() {
                out!("the trash is empty");
            }
            for t in items {
                out!(
                    "{}\t{}\t{}\t{}",
                    t.handle,
                    t.collection,
                    t.title,
                    t.deleted_ms
                );
            }
        }),
        DataOp::Restore { handle } => store
            .id_of(&handle)
            .and_then(|id| {
                store.restore(
                    id,
                    &toolvisor_data::store::Who::operator("toolvisor data restore"),
                )
            })
            .map(|()| out!("restored {handle}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolvisor: {e}");
            ExitCode::from(1)
        }
    }
}

fn connect(conn: &Conn, surface: Tier, approvals: bool) -> Result<Client, ExitCode> {
    let socket = conn
        .socket
        .clone()
        .unwrap_or_else(toolvisor::config::default_socket_path);
    let options = ClientOptions {
        codec: conn.codec,
        client_kind: ClientKind::Ops,
        surface: Surface {
            max_tier: surface,
            approvals,
            questions: false,
            bridge_tools: vec![],
        },
        ..ClientOptions::default()
    };
    Client::connect(&socket, options).map_err(|e| {
        out!("{}", json!({"ok": false, "error": {"kind": "unreachable", "message": e.to_string(), "hint": format!("start the daemon with `toolvisor serve --socket {}`", socket.display())}}));
        ExitCode::from(2)
    })
}

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "__shim") {
        toolvisor_kit::process::shim_main(args[2..].to_vec());
    }
    if args
        .get(1)
        .is_some_and(|a| a == toolvisor_kit::process::pty::PTY_ARG)
    {
        toolvisor_kit::process::pty::pty_main(args[2..].to_vec());
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            socket,
            config,
            log_format,
        } => serve_main(socket, config, &log_format),
        Command::Call {
            tool,
            args,
            conversation,
            surface,
            approve,
            stream,
            conn,
        } => {
            let args: serde_json::Value = match serde_json::from_str(&args) {
                Ok(v) => v,
                Err(e) => {
                    out!(
                        "{}",
                        json!({"ok": false, "error": {"kind": "invalid_args", "message": format!("--args is not valid JSON: {e}"), "hint": "pass a JSON object, e.g. --args '{\"command\":\"ls\"}'"}})
                    );
                    return ExitCode::from(1);
                }
            };
            let mut client = match connect(&conn, surface, approve) {
                Ok(c) => c,
                Err(code) => return code,
            };
            call_main(&mut client, &conversation, &tool, args, approve, stream)
        }
        Command::Tools {
            surface,
            all,
            json,
            conn,
        } => tools_main(surface, all, json, &conn),
        Command::Status { json, conn } => status_main(json, &conn),
        Command::Data { op, config } => data_main(op, config),
        Command::Mcp(args) => mcp_command(args),
        Command::Drain { timeout, conn } => drain_main(&conn, Duration::from_secs(timeout)),
        Command::Doctor {
            socket,
            config,
            workdir,
        } => doctor_main(socket, config, workdir),
        Command::Operator { run, conn } => operator_main(run, &conn),
        Command::Downloads { watch, json, conn } => downloads_main(watch, json, &conn),
        Command::Tree { json, watch, conn } => tree_main(json, watch, &conn),
    }
}

/// `toolvisor call`: start the call, answer its approval requests, print its outcome.
fn call_main(
    client: &mut Client,
    conversation: &str,
    tool: &str,
    args: serde_json::Value,
    approve: bool,
    stream: bool,
) -> ExitCode {
    let id = match client.start_call(conversation, tool, args) {
        Ok(id) => id,
        Err(e) => return lost(e),
    };
    loop {
        match client.recv() {
            Ok(DaemonFrame::Result { id: got, outcome }) if got == id => {
                return match outcome {
                    Outcome::Ok(v) => {
                        out!("{}", json!({"ok": true, "result": v.0}));
                        ExitCode::SUCCESS
                    }
                    Outcome::Err(e) => {
                        out!(
                            "{}",
                            json!({"ok": false, "error": {"kind": e.kind.as_str(), "message": e.message, "hint": e.hint}})
                        );
                        ExitCode::from(1)
                    }
                };
            }
            Ok(DaemonFrame::Event {
                event: toolvisor_protocol::wire::Event::Output { text, .. },
                ..
            }) if stream => eprint!("{text}"),
            Ok(DaemonFrame::ApprovalRequest(req)) => {
                eprintln!(
                    "approval {}: {}",
                    if approve { "granted" } else { "declined" },
                    req.summary
                );
                let answer =
                    ClientFrame::ApprovalAnswer(toolvisor_protocol::wire::ApprovalAnswer {
                        request_id: req.request_id,
                        approved: approve,
                        reason: (!approve)
                            .then(|| "declined: run `toolvisor call` with --approve".into()),
                    });
                if let Err(e) = client.send(&answer) {
                    return lost(e);
                }
            }
            Ok(DaemonFrame::Error(e)) => {
                out!(
                    "{}",
                    json!({"ok": false, "error": {"kind": e.kind.as_str(), "message": e.message, "hint": e.hint}})
                );
                return ExitCode::from(1);
            }
            Ok(_) => {}
            Err(e) => return lost(e),
        }
    }
}

/// `toolvisor tools`: the surface's tools as a table or as JSON.
fn tools_main(surface: Tier, all: bool, json: bool, conn: &Conn) -> ExitCode {
    let mut client = match connect(conn, surface, false) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.request(&ClientFrame::ListTools { all }) {
        Ok(DaemonFrame::Tools { tools }) => {
            if json {
                out!(
                    "{}",
                    serde_json::to_string_pretty(&tools).unwrap_or_default()
                );
            } else {
                for t in tools {
                    let why = t
                        .unavailable_reason
                        .map(|r| format!("  [unavailable: {r}]"))
                        .unwrap_or_default();
                    out!(
                        "{:<18} {:<5} {:<8} {}{}",
                        t.name,
                        t.tier.as_str(),
                        if t.parallel_safe {
                            "parallel"
                        } else {
                            "serial"
                        },
                        t.description,
                        why
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Ok(other) => unexpected(other),
        Err(e) => lost(e),
    }
}

/// `toolvisor status`: the daemon's facts, and the resources that cannot serve.
fn status_main(json: bool, conn: &Conn) -> ExitCode {
    let mut client = match connect(conn, Tier::Read, false) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.request(&ClientFrame::Status) {
        Ok(DaemonFrame::Status(s)) => {
            if json {
                out!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
            } else {
                out!(
                    "toolvisor {} (protocol {}) pid {} up {} s",
                    s.daemon_version,
                    s.protocol_version,
                    s.pid,
                    s.uptime_ms / 1000
                );
                out!(
                    "socket    {}\nstate     {}\nconfig    {}",
                    s.socket,
                    s.state_dir,
                    s.config
                );
                out!(
                    "sessions {}  conversations {}  lanes {}  calls {} ({} failed)  rss {} KiB",
                    s.sessions,
                    s.conversations,
                    s.lanes,
                    s.calls_total,
                    s.calls_failed,
                    s.rss_bytes / 1024
                );
                // Resources that cannot serve, with why (a corrupt data hub database,
                // a language server past its restart intensity).
                if let Ok(DaemonFrame::Tree(tree)) = client.request(&ClientFrame::Tree) {
                    let mut failed = Vec::new();
                    collect_failed(&tree.root, &mut failed);
                    for line in failed {
                        out!("problem   {line}");
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Ok(other) => unexpected(other),
        Err(e) => lost(e),
    }
}

/// `toolvisor mcp`: print a harness's config, or make sure a daemon runs and serve MCP.
fn mcp_command(args: McpArgs) -> ExitCode {
    if let Some(harness) = args.print_config {
        return mcp_print_config(args, harness);
    }
    let McpArgs {
        socket,
        surface,
        conversation,
        run,
        workdir,
        listen,
        token_file,
        token_env,
        allow_origin,
        max_sessions,
        max_sessions_per_client,
        run_idle_secs,
        poll,
        approvals,
        config,
        questions,
        structured,
        images,
        print_config: _,
        headless: _,
    } = args;
    let approvals = match approvals {
        Some(a) => a,
        None => match mcp_config_approvals(config.as_deref()) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("toolvisor mcp: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let socket = socket.unwrap_or_else(toolvisor::config::default_socket_path);
    let workdir = match mcp_workdir(workdir) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("toolvisor mcp: {e}");
            return ExitCode::from(2);
        }
    };
    // Over stdio a harness started us for its run: no daemon is no use. (An HTTP
    // listener outlives daemons and connects to one per session, when it is there.)
    if listen.is_none() {
        match toolvisor::autostart::ensure_daemon(&socket, config.as_deref()) {
            Ok(toolvisor::autostart::Daemon::Started(pid)) => {
                eprintln!(
                    "toolvisor mcp: no daemon answered on {}; started one (pid {pid}, `toolvisor serve`)",
                    socket.display()
                );
            }
            Ok(toolvisor::autostart::Daemon::Running) => {}
            Err(e) => {
                eprintln!("toolvisor mcp: no daemon answers and none could be started: {e}");
                return ExitCode::from(2);
            }
        }
    }
    mcp_main(
        toolvisor_mcp::Options {
            socket,
            surface,
            conversation,
            run_id: run,
            workdir,
            poll: Duration::from_secs_f64(poll.clamp(0.1, 3600.0)),
            approvals,
            questions,
            structured,
            images,
            // A vibe worker's harness starts us with the worker's environment: its
            // credential makes the daemon pin the session to the worker's tier.
            run_token: std::env::var(toolvisor_jobs::vibe::TOKEN_ENV)
                .ok()
                .filter(|t| !t.is_empty()),
            // Each tool's rendering, from its result type: the specs say which.
            renderer: toolvisor_mcp::render::Renderer::new(
                toolvisor::tools::all(false)
                    .into_iter()
                    .map(|spec| (spec.name.to_string(), spec.render)),
            ),
        },
        listen.map(|listen| toolvisor_mcp::http::HttpOptions {
            listen,
            token: token_file
                .map(toolvisor_mcp::gate::TokenSource::File)
                .or(token_env.map(toolvisor_mcp::gate::TokenSource::Value)),
            allowed_origins: allow_origin,
            caps: toolvisor_mcp::gate::SessionCaps {
                total: max_sessions.max(1),
                per_client: max_sessions_per_client.max(1),
                run_idle: Duration::from_secs_f64(run_idle_secs.clamp(0.1, 86_400.0)),
            },
        }),
    )
}

/// `toolvisor mcp --print-config`: the harness's config for this command line.
fn mcp_print_config(args: McpArgs, harness: toolvisor::mcpconfig::Harness) -> ExitCode {
    let McpArgs {
        socket,
        surface,
        workdir,
        approvals,
        config,
        headless,
        ..
    } = args;
    let mut args: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            args.push(name.to_string());
            args.push(v);
        }
    };
    // The harness starts `toolvisor mcp` in a directory of its choosing: paths
    // go into the config absolute.
    let absolute = |p: PathBuf| std::path::absolute(&p).unwrap_or(p).display().to_string();
    let workdir = match workdir.map(|w| mcp_workdir(Some(w))).transpose() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("toolvisor mcp --print-config: {e}");
            return ExitCode::from(2);
        }
    };
    flag("--socket", socket.map(absolute));
    flag("--workdir", workdir);
    flag("--config", config.map(absolute));
    flag(
        "--surface",
        (surface != Tier::Exec).then(|| surface.as_str().to_string()),
    );
    let approvals = approvals.or(headless.then_some(toolvisor_mcp::Approvals::Harness));
    flag("--approvals", approvals.map(|a| a.as_str().to_string()));
    let tools = toolvisor::mcpconfig::tool_names(
        surface,
        approvals == Some(toolvisor_mcp::Approvals::Deny),
    );
    print!(
        "{}",
        toolvisor::mcpconfig::render(harness, headless, &args, &tools)
    );
    ExitCode::SUCCESS
}

/// `toolvisor operator`: answer questions at this terminal until stdin ends.
fn operator_main(run: Option<String>, conn: &Conn) -> ExitCode {
    let options = toolvisor::operator::OperatorOptions {
        socket: conn
            .socket
            .clone()
            .unwrap_or_else(toolvisor::config::default_socket_path),
        run_id: run.unwrap_or_default(),
        codec: conn.codec,
    };
    let stdin = Box::new(std::io::BufReader::new(std::io::stdin()));
    match toolvisor::operator::run(options, stdin, &mut std::io::stdout()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolvisor operator: {e}");
            ExitCode::from(2)
        }
    }
}

/// `toolvisor tree`: the supervisor tree once, as text or JSON, or redrawn with --watch.
fn tree_main(json: bool, watch: bool, conn: &Conn) -> ExitCode {
    let mut client = match connect(conn, Tier::Read, false) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if watch {
        return match treeview::watch(client) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("toolvisor tree: {e}");
                ExitCode::from(2)
            }
        };
    }
    match client.request(&ClientFrame::Tree) {
        Ok(DaemonFrame::Tree(snap)) => {
            if json {
                out!(
                    "{}",
                    serde_json::to_string_pretty(&snap).unwrap_or_default()
                );
            } else {
                print!("{}", treeview::render_text(&snap));
            }
            ExitCode::SUCCESS
        }
        Ok(other) => unexpected(other),
        Err(e) => lost(e),
    }
}

fn doctor_main(
    socket: Option<PathBuf>,
    config: Option<PathBuf>,
    workdir: Option<PathBuf>,
) -> ExitCode {
    let workdir = match mcp_workdir(workdir) {
        Ok(w) => PathBuf::from(w),
        Err(e) => {
            eprintln!("toolvisor doctor: {e}");
            return ExitCode::from(2);
        }
    };
    let socket = socket.unwrap_or_else(toolvisor::config::default_socket_path);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let report = toolvisor::doctor::run(&socket, config.as_deref(), &workdir, home.as_deref());
    print!("{}", report.text);
    if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn downloads_main(watch: bool, json: bool, conn: &Conn) -> ExitCode {
    let mut client = match connect(conn, Tier::Read, false) {
        Ok(c) => c,
        Err(code) => return code,
    };
    if watch {
        return match toolvisor::downloadview::watch(client) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("toolvisor downloads: {e}");
                ExitCode::from(2)
            }
        };
    }
    match toolvisor::downloadview::fetch(&mut client) {
        Ok(jobs) if json => {
            out!(
                "{}",
                serde_json::to_string_pretty(&jobs).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(jobs) => {
            print!("{}", toolvisor::downloadview::render_text(&jobs));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("toolvisor downloads: {e}");
            ExitCode::from(2)
        }
    }
}

fn lost(e: impl std::fmt::Display) -> ExitCode {
    out!(
        "{}",
        json!({"ok": false, "error": {"kind": "unreachable", "message": format!("lost the daemon: {e}"), "hint": "check `toolvisor status`; the daemon may have stopped"}})
    );
    ExitCode::from(2)
}

fn unexpected(frame: DaemonFrame) -> ExitCode {
    eprintln!("toolvisor: unexpected answer from the daemon: {frame:?}");
    ExitCode::from(2)
}

fn collect_failed(node: &toolvisor_protocol::tree::TreeNode, out: &mut Vec<String>) {
    if node.state == toolvisor_protocol::tree::NodeState::Failed {
        out.push(format!(
            "{} {} failed: {}",
            node.kind,
            node.id,
            node.last_error.as_deref().unwrap_or("no error recorded")
        ));
    }
    for child in &node.children {
        collect_failed(child, out);
    }
}

/// `toolvisor drain`: SIGTERM to the daemon behind the socket, then wait until it released
/// its lock (which a process holds until it has exited, whoever reaps it).
fn drain_main(conn: &Conn, timeout: Duration) -> ExitCode {
    let mut client = match connect(conn, Tier::Read, false) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let status = match client.request(&ClientFrame::Status) {
        Ok(DaemonFrame::Status(s)) => s,
        Ok(other) => return unexpected(other),
        Err(e) => return lost(e),
    };
    drop(client);
    let pid = nix::unistd::Pid::from_raw(status.pid as i32);
    if let Err(e) = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM) {
        out!(
            "{}",
            json!({"ok": false, "error": {"kind": "io", "message": format!("cannot signal the daemon (pid {}): {e}", status.pid), "hint": "the daemon may run in another pid namespace: send it SIGTERM there (e.g. `systemctl --user stop toolvisor` or `kill -TERM` inside its container)"}})
        );
        return ExitCode::from(1);
    }
    let began = std::time::Instant::now();
    let lock = PathBuf::from(format!("{}.lock", status.socket));
    loop {
        let released = match std::fs::File::open(&lock) {
            Ok(file) => {
                nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock).is_ok()
            }
            // The daemon removes its lock file as the last thing it does.
            Err(_) => true,
        };
        if released {
            out!(
                "{}",
                json!({"ok": true, "result": {"pid": status.pid, "drained_ms": began.elapsed().as_millis() as u64}})
            );
            return ExitCode::SUCCESS;
        }
        if began.elapsed() >= timeout {
            out!(
                "{}",
                json!({"ok": false, "error": {"kind": "timeout", "message": format!("the daemon (pid {}) was still draining after {} s", status.pid, timeout.as_secs()), "hint": "it goes on draining: calls in flight get up to `limits.drain_timeout_s`; wait longer with --timeout, or SIGKILL it"}})
            );
            return ExitCode::from(1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The run's workdir, absolute (the daemon resolves a relative one against its own cwd, not
/// ours): `--workdir` or the current directory, which must be a directory.
fn mcp_workdir(workdir: Option<PathBuf>) -> Result<String, String> {
    let given = match workdir {
        Some(w) => w,
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    match std::fs::canonicalize(&given) {
        Ok(p) if p.is_dir() => Ok(p.display().to_string()),
        Ok(p) => Err(format!(
            "--workdir {}: {} is not a directory",
            given.display(),
            p.display()
        )),
        Err(e) => Err(format!(
            "--workdir {}: {e}; give a directory that exists",
            given.display()
        )),
    }
}

/// `[mcp] approvals` of the config file at `path` (elicit without one).
fn mcp_config_approvals(
    path: Option<&std::path::Path>,
) -> Result<toolvisor_mcp::Approvals, String> {
    let config = Config::load(path).map_err(|e| e.to_string())?;
    match config.mcp.approvals.as_deref() {
        None => Ok(toolvisor_mcp::Approvals::default()),
        Some(mode) => mode.parse().map_err(|e: String| {
            format!(
                "[mcp] approvals in {}: {e}",
                path.map(|p| p.display().to_string()).unwrap_or_default()
            )
        }),
    }
}

/// `toolvisor mcp`: stdout carries MCP (stdio) or the URL (HTTP); logs go to stderr.
fn mcp_main(
    options: toolvisor_mcp::Options,
    listen: Option<toolvisor_mcp::http::HttpOptions>,
) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLVISOR_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(stderr_is_terminal())
        // A log that cannot be written (a full disk) loses lines; its error report would be
        // an `eprintln!`, which panics on the same full stderr.
        .log_internal_errors(false)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolvisor mcp: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async move {
        match listen {
            None => toolvisor_mcp::serve_stdio(options).await,
            Some(listen) => {
                let stop = tokio_util_stop();
                toolvisor_mcp::http::serve_http(options, listen, stop, |ready| {
                    // The URL first (what scripts read), then where the token is.
                    println!("{}", ready.url);
                    if let Some(file) = &ready.token_file {
                        println!("token file: {}", file.display());
                    }
                    let _ = std::io::Write::flush(&mut std::io::stdout());
                })
                .await
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolvisor mcp: {e}");
            ExitCode::from(2)
        }
    }
}

/// A token cancelled by SIGINT or SIGTERM.
fn tokio_util_stop() -> toolvisor_mcp::StopToken {
    let stop = toolvisor_mcp::StopToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return,
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        on_signal.cancel();
    });
    stop
}

/// Whether the log goes to a terminal: only then is it coloured. A file, a pipe or the
/// journal gets plain text, and the call's span (its fields formatted once per call, at
/// `info`) costs no escape codes (they were a third of a call's span).
fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

fn serve_main(socket: Option<PathBuf>, config: Option<PathBuf>, log_format: &str) -> ExitCode {
    // Before any thread exists: large buffers get their own mappings and go back at once.
    toolvisor_kit::memory::tune();
    // Like ssh-agent: no core dumps, no ptrace, and /proc/<pid>/environ, mem, maps and fd
    // owned by root, so a child of the same uid cannot read the daemon's environment or memory.
    // Children are dumpable again after their execve.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        eprintln!("toolvisor: cannot make the daemon non-dumpable (PR_SET_DUMPABLE): {e}");
        return ExitCode::from(2);
    }
    {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let spec = std::env::var("TOOLVISOR_LOG").ok();
        let (filter, names_no_span) = toolvisor::logtext::filter(spec.as_deref(), "info");
        let ansi = stderr_is_terminal();
        let log = tracing_subscriber::registry().with(filter);
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            // A log on a full disk loses lines and nothing else: tracing's report of a failed
            // write is an `eprintln!`, which panics on that same stderr — inside whatever
            // actor logged (a chaos run on a full disk lost its kernels and vibe kind
            // supervisors so).
            .log_internal_errors(false);
        if log_format == "json" {
            log.with(layer.json().fmt_fields(toolvisor::logjson::SpanFields))
                .init();
        } else {
            // A call's fields as a label, not a span, where the two print the same.
            toolvisor::logtext::use_labels(!ansi && names_no_span);
            log.with(
                layer
                    .event_format(toolvisor::logtext::TextFormat::default())
                    .fmt_fields(toolvisor::logtext::TextFields),
            )
            .init();
        }
    }
    let mut config = match Config::load(config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("toolvisor: {e}");
            return ExitCode::from(2);
        }
    };
    // `[mcp]` is toolvisor mcp's; a typo in it is found here, at the daemon's start, too.
    if let Some(mode) = config.mcp.approvals.as_deref()
        && let Err(e) = mode.parse::<toolvisor_mcp::Approvals>()
    {
        eprintln!(
            "toolvisor: invalid config file {}: [mcp] approvals: {e}",
            config.source
        );
        return ExitCode::from(2);
    }
    if socket.is_some() {
        config.socket = socket;
    }
    // Socket activation: a listening socket the service manager passed wins over the path.
    let inherited = match toolvisor_kit::systemd::listen_fds() {
        Ok(inherited) => inherited,
        Err(e) => {
            eprintln!("toolvisor: {e}");
            return ExitCode::from(2);
        }
    };
    let path = config.socket_path();
    let bound = match inherited {
        Some(socket) => listener::adopt(socket),
        None => listener::bind(&path),
    };
    let bound = match bound {
        Ok(b) => b,
        Err(e) => {
            eprintln!("toolvisor: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolvisor: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let options = ServeOptions {
        shim: std::env::current_exe().ok(),
    };
    let result = runtime.block_on(async move {
        // The handlers are installed here, before `serve` tells the service manager it is
        // ready: a SIGTERM right after READY=1 must drain, not kill the daemon outright (the
        // shutdown future below is only polled once the accept loop runs).
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = int.recv() => tracing::info!("SIGINT received"),
            }
        };
        serve(bound, config, options, shutdown).await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolvisor: {e:#}");
            ExitCode::from(1)
        }
    }
}
