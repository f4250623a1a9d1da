//! The frames of the protocol: the handshake, calls and their streamed events, approval
//! requests, questions, bridge calls, tool lists, tree snapshots.
//!
//! Wire types are plain on purpose: no `flatten`, `skip`, `tag` or `untagged`, which bincode
//! cannot carry. Enums are externally tagged; JSON spells variants in snake_case, so a
//! JSON client writes `{"call": {"id": 1, ...}}` and reads `{"result": {"id": 1, ...}}`.
//!
//! A call's arguments are a JSON-shaped `Value`, not a typed enum per tool: a frame whose arguments
//! have the wrong types still decodes, and its caller gets an `invalid_args` result naming the
//! field. The typed argument structs of `crate::tools` are parsed by the daemon after schema
//! validation. Only these types cross the socket; actor messages never do. Every wire type is
//! round-trip tested in both codecs (`tests/codec_roundtrip.rs`).
//!
//! This file and `docs/PROTOCOL.md` are the one source of the protocol (`tests/protocol_doc.rs`
//! keeps the document's examples true). The client packages (`clients/python`,
//! `clients/typescript`) declare every `ClientFrame` and `DaemonFrame` variant with its fields, the
//! nested structures and every `ErrorKind`; `tests/tests/clients_frames_in_step.rs` fails, naming
//! it, when a client lacks one.

use serde::{Deserialize, Serialize};

use crate::codec::Codec;
use crate::error::ToolError;
use crate::tree::TreeSnapshot;
use crate::value::Value;

/// How much a client may do. A surface of `read` never sees write or exec tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// No side effects.
    Read,
    /// Changes files.
    Write,
    /// Starts or controls processes.
    Exec,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Read => "read",
            Tier::Write => "write",
            Tier::Exec => "exec",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Tier::Read),
            "write" => Ok(Tier::Write),
            "exec" => Ok(Tier::Exec),
            other => Err(format!(
                "unknown tier {other:?}: expected \"read\", \"write\" or \"exec\""
            )),
        }
    }
}

/// What kind of program is connecting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// An agent harness running a model loop.
    Harness,
    /// Operations tooling: `toolvisor call`, `tree`, `status`, scripts.
    Ops,
    /// A person at a terminal answering questions (`toolvisor operator`).
    Operator,
}

/// What the client can see and answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Surface {
    /// Highest tier the client may see and call.
    pub max_tier: Tier,
    /// The client answers `ApprovalRequest` frames. Without it every call that needs
    /// approval is denied.
    #[serde(default)]
    pub approvals: bool,
    /// The client answers `Question` frames (it is a question port for `ask_user`).
    #[serde(default)]
    pub questions: bool,
    /// Tools the harness runs itself; a `tool()` call from an eval cell naming one of
    /// these is forwarded to the client as a `BridgeCall`.
    #[serde(default)]
    pub bridge_tools: Vec<String>,
}

/// The first frame of every connection, from the client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol_version: u32,
    /// Codec for every frame after this one, both ways.
    pub codec: Codec,
    pub client_kind: ClientKind,
    /// The agent run this client belongs to (questions and approvals are routed per run).
    #[serde(default)]
    pub run_id: String,
    /// The run's working directory; tools resolve relative paths against it.
    #[serde(default)]
    pub workdir: String,
    pub surface: Surface,
    /// A credential the daemon handed to a process it started (a vibe worker gets it as
    /// `TOOLVISOR_RUN_TOKEN`): the daemon then sets this session's surface, approvals and
    /// run from its own config instead of the claims above. An unknown token is refused.
    /// Optional in JSON; a bincode Hello without it (protocol version 1 before the field)
    /// is still accepted.
    #[serde(default)]
    pub run_token: Option<String>,
}

/// A `Hello` as bincode clients built before `run_token` existed encode it: the same
/// fields, one fewer at the end. The daemon falls back to it when a first frame does not
/// decode as the current `Hello`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelloV1 {
    pub protocol_version: u32,
    pub codec: Codec,
    pub client_kind: ClientKind,
    pub run_id: String,
    pub workdir: String,
    pub surface: Surface,
}

/// The first frame of a pre-`run_token` bincode client: `ClientFrame::Hello` is variant 0
/// in both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstFrameV1 {
    Hello(HelloV1),
}

/// Decode a connection's first frame: a current `ClientFrame`, or (bincode only) the `Hello`
/// of a client built before `run_token`, read as a `Hello` without a token.
pub fn decode_first(
    c: crate::codec::Codec,
    payload: &[u8],
) -> Result<ClientFrame, crate::codec::CodecError> {
    match crate::codec::decode::<ClientFrame>(c, payload) {
        Ok(frame) => Ok(frame),
        Err(e) if c == crate::codec::Codec::Bincode => {
            match crate::codec::decode::<FirstFrameV1>(c, payload) {
                Ok(FirstFrameV1::Hello(h)) => Ok(ClientFrame::Hello(h.into())),
                Err(_) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

impl From<HelloV1> for Hello {
    fn from(h: HelloV1) -> Hello {
        Hello {
            protocol_version: h.protocol_version,
            codec: h.codec,
            client_kind: h.client_kind,
            run_id: h.run_id,
            workdir: h.workdir,
            surface: h.surface,
            run_token: None,
        }
    }
}

/// One tool as advertised to a client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub tier: Tier,
    /// Calls may run concurrently within a conversation.
    pub parallel_safe: bool,
    /// Some or all calls ask the client for approval first.
    pub requires_approval: bool,
    /// The resource the tool needs (e.g. `processes`, `language_servers`).
    pub resource: String,
    /// JSON Schema of the arguments (null in a `Welcome`).
    pub schema: Value,
    /// False when the tool is registered but cannot run here; `unavailable_reason` says why.
    pub available: bool,
    pub unavailable_reason: Option<String>,
    /// May change or remove what exists (false: only adds). MCP's `destructiveHint`.
    pub destructive: bool,
    /// The same call again changes nothing more. MCP's `idempotentHint`.
    pub idempotent: bool,
    /// Reaches the network, or runs code that can. MCP's `openWorldHint`.
    pub open_world: bool,
    /// JSON Schema of the tool's results as they reach the client (MCP's `outputSchema`):
    /// what the handler returns, or the result store's projection of it.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// A call starts a job that goes on after its answer: how to follow it (MCP tasks).
    #[serde(default)]
    pub follow: Option<JobFollow>,
    /// A call may run for minutes while it streams output (`eval`, `bash`): a client that
    /// can take a long call as a task should.
    #[serde(default)]
    pub long_running: bool,
}

/// How a client follows the job a call starts until it ends (what `toolvisor mcp` makes an
/// MCP task of). The job is named by the start result's string field `id`; `poll` is called
/// with `poll_args` and `stop` with `stop_args`, where each string `"{id}"` becomes the job's
/// name. The job's entry in a poll's answer is the element of the answer's list `entries`
/// whose `id` field is the job's name (the answer itself without `entries`); its `state`
/// ends the job when it is one of `ended`, successfully when it is `ok`. A start result whose
/// `state` is already `ok` has nothing to follow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobFollow {
    pub id: String,
    pub poll: String,
    pub poll_args: Value,
    pub stop: String,
    pub stop_args: Value,
    pub entries: Option<String>,
    pub ended: Vec<String>,
    pub ok: String,
}

impl JobFollow {
    /// The job a start `result` names; `None` when it names none or is already `ok`.
    pub fn job_of(&self, result: &serde_json::Value) -> Option<String> {
        let name = result.get(&self.id)?.as_str()?;
        (result.get("state").and_then(|s| s.as_str()) != Some(self.ok.as_str()))
            .then(|| name.to_string())
    }

    /// `args` with each string `"{id}"` made `job`.
    pub fn args_for(args: &Value, job: &str) -> serde_json::Value {
        fn fill(v: &serde_json::Value, job: &str) -> serde_json::Value {
            match v {
                serde_json::Value::String(s) if s == "{id}" => job.into(),
                serde_json::Value::Object(m) => {
                    m.iter().map(|(k, v)| (k.clone(), fill(v, job))).collect()
                }
                serde_json::Value::Array(a) => a.iter().map(|v| fill(v, job)).collect(),
                other => other.clone(),
            }
        }
        fill(&args.0, job)
    }

    /// The job's entry in a poll's `answer`, whether it ended, and whether it failed.
    pub fn look(
        &self,
        job: &str,
        answer: &serde_json::Value,
    ) -> Option<(serde_json::Value, bool, bool)> {
        let entry = match &self.entries {
            Some(list) => answer
                .get(list)?
                .as_array()?
                .iter()
                .find(|e| e.get(&self.id).and_then(|v| v.as_str()) == Some(job))?
                .clone(),
            None => answer.clone(),
        };
        let state = entry.get("state").and_then(|s| s.as_str()).unwrap_or("");
        let ended = self.ended.iter().any(|e| e == state);
        let failed = ended && state != self.ok;
        Some((entry, ended, failed))
    }
}

/// The daemon's answer to a valid `Hello`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub protocol_version: u32,
    pub daemon_version: String,
    pub daemon_pid: u32,
    /// This connection's id, as shown in the tree.
    pub session_id: u64,
    pub codec: Codec,
    pub max_frame: u32,
    /// The tools this client may see right now, without their schemas (`schema` null,
    /// `output_schema` absent): `ListTools` answers them.
    pub tools: Vec<ToolInfo>,
}

/// A tool call. `id` is chosen by the client and unique per connection; `conversation`
/// keys every piece of state the call touches, so state outlives the connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Call {
    pub id: u64,
    pub conversation: String,
    pub tool: String,
    pub args: Value,
}

/// The end of a call: its value or its error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok(Value),
    Err(ToolError),
}

/// Which stream a piece of output came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Something that happened during a call, before its result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Event {
    Progress {
        message: String,
        /// 0.0 ..= 1.0 when known.
        fraction: Option<f64>,
    },
    Output {
        stream: Stream,
        text: String,
    },
}

/// The daemon asks the client to approve one call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub request_id: u64,
    pub call_id: u64,
    pub conversation: String,
    pub tool: String,
    pub tier: Tier,
    /// One line a person can judge, e.g. `bash: rm -rf build/`.
    pub summary: String,
    pub args: Value,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalAnswer {
    pub request_id: u64,
    pub approved: bool,
    pub reason: Option<String>,
}

/// One option of a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuestionOption {
    pub label: String,
    pub description: Option<String>,
}

/// An `ask_user` question routed to a question port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    pub question_id: u64,
    pub run_id: String,
    pub conversation: String,
    pub question: String,
    pub context: Option<String>,
    pub options: Vec<QuestionOption>,
    pub allow_free_text: bool,
    pub multi_select: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuestionAnswer {
    pub question_id: u64,
    /// Labels chosen among the options.
    #[serde(default)]
    pub selected: Vec<String>,
    pub text: Option<String>,
    #[serde(default)]
    pub skipped: bool,
    /// Set when no person saw the question: the client refused to show it (a headless
    /// harness declines every form at once). Says how it knows; `ask_user` answers
    /// `no_human` with it instead of a skip nobody made.
    #[serde(default)]
    pub no_person: Option<String>,
}

/// A `tool()` call from inside an eval cell that the harness runs itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BridgeCall {
    pub bridge_id: u64,
    pub call_id: u64,
    pub conversation: String,
    pub tool: String,
    pub args: Value,
}

/// What a client can subscribe to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Topic {
    /// A `TreeUpdate` after every change of the supervisor tree.
    Tree,
}

/// Frames a client sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientFrame {
    Hello(Hello),
    Call(Call),
    Cancel {
        id: u64,
    },
    ApprovalAnswer(ApprovalAnswer),
    QuestionAnswer(QuestionAnswer),
    BridgeResult {
        bridge_id: u64,
        outcome: Outcome,
    },
    /// `all: true` also lists tools this client cannot call, with the reason.
    ListTools {
        all: bool,
    },
    Tree,
    Subscribe {
        topic: Topic,
    },
    Unsubscribe {
        topic: Topic,
    },
    Status,
    Ping {
        nonce: u64,
    },
    /// End a conversation this connection made calls in, and what it holds (kernels, debug
    /// session, processes, vibe workers, staged edits): its run is over. The daemon does it
    /// in a task of its own, which finishes even once the connection closes; nothing is
    /// answered. Last in the enum: bincode numbers variants by position.
    EndConversation {
        conversation: String,
    },
}

/// Daemon facts for `toolvisor status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusReport {
    pub daemon_version: String,
    pub protocol_version: u32,
    pub pid: u32,
    pub uptime_ms: u64,
    pub socket: String,
    pub state_dir: String,
    pub config: String,
    pub sessions: u32,
    pub conversations: u32,
    /// Conversations with a live lane (idle, empty lanes are pruned).
    pub lanes: u32,
    pub resources: u32,
    pub rss_bytes: u64,
    pub calls_total: u64,
    pub calls_failed: u64,
}

/// Frames the daemon sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DaemonFrame {
    Welcome(Welcome),
    /// The handshake failed; the connection closes after this frame.
    Refused(ToolError),
    Event {
        id: u64,
        event: Event,
    },
    Result {
        id: u64,
        outcome: Outcome,
    },
    ApprovalRequest(ApprovalRequest),
    Question(Question),
    BridgeCall(BridgeCall),
    Tools {
        tools: Vec<ToolInfo>,
    },
    Tree(TreeSnapshot),
    TreeUpdate(TreeSnapshot),
    Status(StatusReport),
    Pong {
        nonce: u64,
    },
    /// A frame-level error not tied to a call (a garbage frame, an unexpected frame).
    Error(ToolError),
}
