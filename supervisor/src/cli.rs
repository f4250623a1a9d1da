//! The command line of the `toolvisor` binary: its subcommands and their flags (clap), whose
//! doc comments are the `--help` text. The binary's own module; the library does not use it.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use toolvisor_protocol::codec::Codec;
use toolvisor_protocol::wire::Tier;

#[derive(Parser)]
#[command(
    name = "toolvisor",
    version,
    about = "Hosts the live, server-bound tools of an AI coding agent"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Args, Clone)]
pub struct Conn {
    /// Daemon socket (default: $XDG_RUNTIME_DIR/toolvisor.sock or /tmp/toolvisor-$UID/toolvisor.sock).
    #[arg(long, env = "TOOLVISOR_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Wire codec: bincode or json.
    #[arg(long, default_value = "bincode")]
    pub codec: Codec,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the daemon (embedded defaults; no config file needed).
    Serve {
        #[arg(long, env = "TOOLVISOR_SOCKET")]
        socket: Option<PathBuf>,
        /// TOML file overriding the embedded defaults.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Log format on stderr: text or json.
        #[arg(long, default_value = "text")]
        log_format: String,
    },
    /// Call one tool and print {"ok":..,"result"|"error":..}. Exit 0 ok, 1 tool error, 2 no daemon.
    Call {
        tool: String,
        /// Arguments as a JSON object.
        #[arg(long, default_value = "{}")]
        args: String,
        #[arg(long, default_value = "cli")]
        conversation: String,
        #[arg(long, default_value = "exec")]
        surface: Tier,
        /// Approve every approval request of this call.
        #[arg(long)]
        approve: bool,
        /// Print streamed output events to stderr as they arrive.
        #[arg(long)]
        stream: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// List the tools a surface may call.
    Tools {
        #[arg(long, default_value = "exec")]
        surface: Tier,
        /// Also list tools this surface cannot call, with the reason.
        #[arg(long)]
        all: bool,
        /// Print the tools as JSON (with their schemas) instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Daemon facts: pid, uptime, socket, sessions, calls.
    Status {
        /// Print the facts as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// The data hub's trash, for the operator: `toolvisor data trash` lists it,
    /// `toolvisor data restore D-5c0e91a2f7` brings a document back. Opens the hub's database directly
    /// (the daemon may be running; SQLite's locking keeps the two apart).
    Data {
        #[command(subcommand)]
        op: DataOp,
        /// The daemon's config file (where the state directory and `[data] dir` are).
        #[arg(long, global = true)]
        config: Option<PathBuf>,
    },
    /// Drain the daemon and wait for it to exit: it stops accepting, lets calls in flight
    /// finish (up to `limits.drain_timeout_s`), answers new calls `shutting_down`, stops its
    /// resources in order and exits 0. The same as sending it SIGTERM.
    Drain {
        /// Give up waiting for the exit after this many seconds (the daemon goes on draining).
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        #[command(flatten)]
        conn: Conn,
    },
    /// A Model Context Protocol server for harnesses that speak MCP: stdio by default (the
    /// harness starts it), Streamable HTTP with --listen (a loopback port needs its bearer
    /// token). Each MCP session is one run on the daemon (on 2026-07-28, a conversation handle
    /// in _meta); approvals as --approvals says, questions through MCP elicitation.
    Mcp(McpArgs),
    /// What this machine and project lack, on one screen: `toolvisor` on PATH, the daemon
    /// (started if none answers, as `toolvisor mcp` does), the language servers and debug
    /// adapters of the languages found here, and the Claude Code and Codex configs. Exits 1
    /// when a line needs action (each says what to run).
    Doctor {
        /// Daemon socket (default: $XDG_RUNTIME_DIR/toolvisor.sock or /tmp/toolvisor-$UID/toolvisor.sock).
        #[arg(long, env = "TOOLVISOR_SOCKET")]
        socket: Option<PathBuf>,
        /// The config a daemon started here uses.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The project to look at (default: the current directory).
        #[arg(long)]
        workdir: Option<PathBuf>,
    },
    /// Answer the agent's `ask_user` questions at this terminal: each shows as a numbered
    /// card; answer with option number(s), free text, or `s` to skip.
    Operator {
        /// Answer this run's questions only (default: every run's).
        #[arg(long, env = "TOOLVISOR_RUN")]
        run: Option<String>,
        #[command(flatten)]
        conn: Conn,
    },
    /// The live supervisor tree: kind, id, pid, state, uptime, TTL left, restarts, mailbox
    /// depth and RSS of every resource; --watch redraws on every change.
    Tree {
        /// Print the tree as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Redraw on every change.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        conn: Conn,
    },
    /// Model download jobs: each job and its files with progress.
    Downloads {
        /// Progress bars, redrawn until every job has ended.
        #[arg(long)]
        watch: bool,
        /// Print the jobs as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        conn: Conn,
    },
}

/// The flags of `toolvisor mcp`.
#[derive(clap::Args)]
pub struct McpArgs {
    /// Daemon socket (default: $XDG_RUNTIME_DIR/toolvisor.sock or /tmp/toolvisor-$UID/toolvisor.sock).
    #[arg(long, env = "TOOLVISOR_SOCKET")]
    pub socket: Option<PathBuf>,
    /// The highest tier the MCP client sees and calls: read, write or exec.
    #[arg(long, default_value = "exec")]
    pub surface: Tier,
    /// The conversation all calls go to (default: a new one per MCP session).
    #[arg(long)]
    pub conversation: Option<String>,
    /// The run's id (default: a new one per MCP session).
    #[arg(long, env = "TOOLVISOR_RUN")]
    pub run: Option<String>,
    /// The run's working directory (default: the current directory).
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Serve Streamable HTTP instead of stdio, on a loopback address (127.0.0.1:8765;
    /// port 0 picks one) or a Unix socket path. The URL is printed on stdout.
    #[arg(long)]
    pub listen: Option<toolvisor_mcp::Listen>,
    /// With --listen: the file holding the bearer token every request must carry
    /// (`Authorization: Bearer <token>`); made 0600 with a fresh token if it does not exist.
    /// Default on a loopback port: a fresh token in `toolvisor-mcp-PORT.token` beside the
    /// daemon's socket, removed at exit. A Unix socket needs none (it serves our uid only).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// With --listen: the bearer token itself (at least 32 characters; --token-file wins).
    #[arg(
        long = "token-from-env",
        env = "TOOLVISOR_MCP_TOKEN",
        hide_env_values = true,
        hide = true
    )]
    pub token_env: Option<String>,
    /// With --listen: a browser origin allowed to call (`http://localhost:6274`); repeat
    /// for more. Any other `Origin` header is refused (DNS rebinding); harnesses send none.
    #[arg(long = "allow-origin")]
    pub allow_origin: Vec<String>,
    /// With --listen: MCP sessions open at once, all clients together.
    #[arg(long, default_value_t = 64)]
    pub max_sessions: usize,
    /// With --listen: MCP sessions open at once from one client process. 2026-07-28
    /// conversations (no session) count against this cap and --max-sessions alike.
    #[arg(long, default_value_t = 16)]
    pub max_sessions_per_client: usize,
    /// With --listen: seconds after which a 2026-07-28 conversation nobody used gives
    /// its daemon connection and its place under the caps back (its state stays the
    /// daemon's; the next request with its handle connects again).
    #[arg(long, default_value_t = 300.0)]
    pub run_idle_secs: f64,
    /// Seconds between looks at the tool list while a session is open (tree changes
    /// trigger a look too); a change is sent as notifications/tools/list_changed.
    #[arg(long, default_value_t = 3.0)]
    pub poll: f64,
    /// Who approves calls that need approval: elicit (a person answers each through MCP
    /// elicitation; the default), harness (the MCP client's tools/call is the approval:
    /// its own permission prompt or allow-list asked the person), deny (nothing that
    /// needs approval runs; only read tools are offered). Default: `[mcp] approvals` of
    /// --config, else elicit.
    #[arg(long)]
    pub approvals: Option<toolvisor_mcp::Approvals>,
    /// The daemon's config file, for its `[mcp]` section.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where `ask_user` questions go: auto (the MCP client's elicitation form, unless
    /// the client is one known to decline every form unseen, such as Codex; the
    /// default), elicit (the form whenever the client declares elicitation) or none (no
    /// question port). Without a port, a `toolvisor operator` attached to every run
    /// answers, else `ask_user` answers no_human; a form declined faster than a person
    /// reads one answers no_human too.
    #[arg(long, default_value = "auto")]
    pub questions: toolvisor_mcp::Questions,
    /// Typed results for clients that consume them: each result carries its whole JSON
    /// as `structuredContent`, and the tool list each tool's `outputSchema`. Off by
    /// default, because harnesses hand the model `structuredContent` in place of the
    /// rendered text.
    #[arg(long)]
    pub structured: bool,
    /// Where images in results go: auto (MCP image content, but a file for the clients
    /// known to drop images, by clientInfo.name: Codex), inline (always image content) or
    /// file (always a file under the workdir's .toolvisor/images/, named in the text).
    #[arg(long, default_value = "auto")]
    pub images: toolvisor_mcp::Images,
    /// Print a harness's config for this command instead of serving: claude (a `claude
    /// mcp add` line) or codex (the `[mcp_servers.toolvisor]` block of
    /// ~/.codex/config.toml). Made from this binary's tool list, no daemon asked;
    /// --socket, --workdir, --config, --surface and --approvals given here are carried
    /// into it.
    #[arg(long, value_name = "HARNESS", conflicts_with = "listen")]
    pub print_config: Option<toolvisor::mcpconfig::Harness>,
    /// With --print-config: for headless runs (`claude -p`, `codex exec`), where nobody
    /// can answer a prompt: `--approvals harness` (unless --approvals says otherwise),
    /// and every tool on the harness's allow list (`--allowedTools`, `approval_mode`).
    #[arg(long, requires = "print_config")]
    pub headless: bool,
}

#[derive(Subcommand)]
pub enum DataOp {
    /// List every document not in the trash, sensitive collections included (handle,
    /// collection, title): the operator's view, which no tool gives.
    List,
    /// List the documents in the trash.
    Trash,
    /// Restore a trashed document by handle.
    Restore { handle: String },
}
