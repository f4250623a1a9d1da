"""The frames of toolvisor's wire protocol (docs/PROTOCOL.md), as the JSON codec spells them.

Each frame is a one-key object ``{"<name>": payload}``, or a bare string for the unit frames
(``"tree"``, ``"status"``). The TypedDicts below are the payloads; ``CLIENT_FRAMES`` and
``DAEMON_FRAMES`` map every frame name to its payload type (``None`` for a unit frame) and
``NESTED`` names the structures inside them. ``manifest()`` lists all of them with their
fields: the repository's test ``clients_frames_in_step`` compares it with the Rust types, so a
frame added to the protocol and missing here fails the suite.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, Union

from .errors import ERRORS_BY_KIND

PROTOCOL_VERSION = 1

Tier = Literal["read", "write", "exec"]
ClientKind = Literal["harness", "ops", "operator"]
Codec = Literal["bincode", "json"]
StreamName = Literal["stdout", "stderr"]
NodeState = Literal["starting", "ready", "busy", "backoff", "failed", "stopping", "exited"]
ErrorKindName = Literal[
    "invalid_args", "unknown_tool", "not_available", "policy_denied", "approval_denied",
    "surface_denied", "timeout", "cancelled", "resource_failed", "not_ready", "busy",
    "not_found", "out_of_scope", "invalid_ref", "protocol", "version_mismatch", "refused",
    "io", "no_human", "kernel_died", "expired", "conflict", "internal", "shutting_down",
    "network_unavailable",
]

# --- shared structures ---------------------------------------------------------------------


class ToolErrorData(TypedDict):
    kind: str
    message: str
    hint: str


class Surface(TypedDict):
    max_tier: Tier
    approvals: bool
    questions: bool
    bridge_tools: list[str]


class JobFollow(TypedDict):
    """How to follow the job a call starts: poll and stop it ("{id}" in their args is the
    job, named by the result's `id` field), its entry in the poll's `entries` list, the
    states that end it and the one that means it succeeded."""

    id: str
    poll: str
    poll_args: Any
    stop: str
    stop_args: Any
    entries: str | None
    ended: list[str]
    ok: str


class ToolInfo(TypedDict):
    name: str
    description: str
    tier: Tier
    parallel_safe: bool
    requires_approval: bool
    resource: str
    schema: Any
    available: bool
    unavailable_reason: str | None
    destructive: bool
    idempotent: bool
    open_world: bool
    output_schema: Any
    follow: JobFollow | None
    long_running: bool


class QuestionOption(TypedDict):
    label: str
    description: str | None


class OutputEvent(TypedDict):
    stream: StreamName
    text: str


class ProgressEvent(TypedDict):
    message: str
    fraction: float | None


class Output(TypedDict):
    output: OutputEvent


class Progress(TypedDict):
    progress: ProgressEvent


# An event is {"output": OutputEvent} or {"progress": ProgressEvent}: narrow it with
# `if "output" in event`.
Event = Union[Output, Progress]
# An outcome is {"ok": value} or {"err": ToolErrorData}.
Outcome = dict[str, Any]


class TreeNode(TypedDict):
    kind: str
    id: str
    pid: int | None
    state: NodeState
    uptime_ms: int
    ttl_left_ms: int | None
    restarts: int
    mailbox: int
    rss_bytes: int | None
    detail: str
    conversation: str | None
    last_error: str | None
    children: list[TreeNode]


class TreeSnapshot(TypedDict):
    generation: int
    taken_at_ms: int
    root: TreeNode


class StatusReport(TypedDict):
    daemon_version: str
    protocol_version: int
    pid: int
    uptime_ms: int
    socket: str
    state_dir: str
    config: str
    sessions: int
    conversations: int
    lanes: int
    resources: int
    rss_bytes: int
    calls_total: int
    calls_failed: int


# --- client frames -------------------------------------------------------------------------


class Hello(TypedDict):
    protocol_version: int
    codec: Codec
    client_kind: ClientKind
    run_id: str
    workdir: str
    surface: Surface
    run_token: str | None


class Call(TypedDict):
    id: int
    conversation: str
    tool: str
    args: Any


class Cancel(TypedDict):
    id: int


class ApprovalAnswer(TypedDict):
    request_id: int
    approved: bool
    reason: str | None


class QuestionAnswer(TypedDict):
    question_id: int
    selected: list[str]
    text: str | None
    skipped: bool
    # No person saw the question, and why (the asking call answers no_human).
    no_person: str | None


class BridgeResult(TypedDict):
    bridge_id: int
    outcome: Outcome


class ListTools(TypedDict):
    all: bool


class Subscribe(TypedDict):
    topic: Literal["tree"]


class Unsubscribe(TypedDict):
    topic: Literal["tree"]


class Ping(TypedDict):
    nonce: int


class EndConversation(TypedDict):
    conversation: str


# --- daemon frames -------------------------------------------------------------------------


class Welcome(TypedDict):
    protocol_version: int
    daemon_version: str
    daemon_pid: int
    session_id: int
    codec: Codec
    max_frame: int
    tools: list[ToolInfo]


class EventFrame(TypedDict):
    id: int
    event: Event


class ResultFrame(TypedDict):
    id: int
    outcome: Outcome


class ApprovalRequest(TypedDict):
    request_id: int
    call_id: int
    conversation: str
    tool: str
    tier: Tier
    summary: str
    args: Any


class Question(TypedDict):
    question_id: int
    run_id: str
    conversation: str
    question: str
    context: str | None
    options: list[QuestionOption]
    allow_free_text: bool
    multi_select: bool


class BridgeCall(TypedDict):
    bridge_id: int
    call_id: int
    conversation: str
    tool: str
    args: Any


class Tools(TypedDict):
    tools: list[ToolInfo]


class Pong(TypedDict):
    nonce: int


CLIENT_FRAMES: dict[str, type | None] = {
    "hello": Hello,
    "call": Call,
    "cancel": Cancel,
    "approval_answer": ApprovalAnswer,
    "question_answer": QuestionAnswer,
    "bridge_result": BridgeResult,
    "list_tools": ListTools,
    "tree": None,
    "subscribe": Subscribe,
    "unsubscribe": Unsubscribe,
    "status": None,
    "ping": Ping,
    "end_conversation": EndConversation,
}

DAEMON_FRAMES: dict[str, type | None] = {
    "welcome": Welcome,
    "refused": ToolErrorData,
    "event": EventFrame,
    "result": ResultFrame,
    "approval_request": ApprovalRequest,
    "question": Question,
    "bridge_call": BridgeCall,
    "tools": Tools,
    "tree": TreeSnapshot,
    "tree_update": TreeSnapshot,
    "status": StatusReport,
    "pong": Pong,
    "error": ToolErrorData,
}

# Structures inside frames, by the Rust type's name (events by their variant name).
NESTED: dict[str, type] = {
    "Surface": Surface,
    "ToolInfo": ToolInfo,
    "JobFollow": JobFollow,
    "ToolError": ToolErrorData,
    "QuestionOption": QuestionOption,
    "TreeNode": TreeNode,
    "output": OutputEvent,
    "progress": ProgressEvent,
}


def _fields(t: type | None) -> list[str] | None:
    if t is None:
        return None
    keys = set(getattr(t, "__required_keys__", set())) | set(getattr(t, "__optional_keys__", set()))
    return sorted(keys)


def manifest() -> dict[str, dict[str, list[str] | None]]:
    """Every frame and nested structure this client declares, with its sorted field names
    (``None`` for a unit frame)."""
    return {
        "client": {name: _fields(t) for name, t in CLIENT_FRAMES.items()},
        "daemon": {name: _fields(t) for name, t in DAEMON_FRAMES.items()},
        "nested": {name: _fields(t) for name, t in NESTED.items()},
        "error_kinds": {kind: None for kind in sorted(ERRORS_BY_KIND)},
    }


if __name__ == "__main__":
    import json

    print(json.dumps(manifest(), sort_keys=True))
