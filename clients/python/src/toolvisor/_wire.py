"""What the sync and asyncio clients share: the socket path, the server-uid check, framing
(a 4-byte big-endian length, then one JSON document), the Hello, and the answers built from
the caller's handlers."""

from __future__ import annotations

import json
import os
import socket
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from .errors import ConnectionProblem, ToolError
from .frames import PROTOCOL_VERSION, ApprovalRequest, BridgeCall, ClientKind, Hello, Question, Tier

HEADER = struct.Struct(">I")
# Until the Welcome tells the real cap, accept what the daemon's default cap allows.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024


def default_socket() -> str:
    """``$TOOLVISOR_SOCKET``, else ``$XDG_RUNTIME_DIR/toolvisor.sock``, else
    ``/tmp/toolvisor-$UID/toolvisor.sock`` (the daemon's own default)."""
    env = os.environ.get("TOOLVISOR_SOCKET")
    if env:
        return env
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "toolvisor.sock")
    return f"/tmp/toolvisor-{os.getuid()}/toolvisor.sock"


def check_server_uid(sock: socket.socket, path: str) -> None:
    """Refuse a server that runs as another user (root excepted) before anything is sent:
    its uid comes from ``SO_PEERCRED``."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        raise ConnectionProblem(
            f"cannot check who serves {path}: this platform has no SO_PEERCRED (toolvisor runs on Linux)"
        )
    creds = sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    _pid, server_uid, _gid = struct.unpack("3i", creds)
    ours = os.geteuid()
    if server_uid not in (ours, 0):
        raise ConnectionProblem(
            f"refusing the server at {path}: it runs as uid {server_uid} and this client as uid "
            f"{ours}; nothing was sent (point the client at your own daemon's socket)"
        )


def encode(frame: Any) -> bytes:
    data = json.dumps(frame, separators=(",", ":")).encode()
    return HEADER.pack(len(data)) + data


def decode(payload: bytes) -> tuple[str, Any]:
    """A daemon frame as (name, payload); a unit frame has payload ``None``."""
    try:
        value = json.loads(payload)
    except ValueError as e:
        raise ConnectionProblem(f"the daemon sent a frame that is not JSON: {e}") from None
    if isinstance(value, str):
        return value, None
    if isinstance(value, dict) and len(value) == 1:
        ((name, body),) = value.items()
        return name, body
    raise ConnectionProblem(f"the daemon sent a frame of an unknown shape: {str(value)[:200]}")


def check_length(length: int, max_frame: int) -> None:
    if length > max_frame:
        raise ConnectionProblem(
            f"the daemon announced a frame of {length} bytes, above the cap of {max_frame} bytes"
        )


def hello(
    *,
    max_tier: Tier,
    approvals: bool,
    questions: bool,
    bridge_tools: list[str],
    run_id: str,
    workdir: str,
    client_kind: ClientKind,
    run_token: str | None,
    protocol_version: int = PROTOCOL_VERSION,
) -> dict[str, Hello]:
    return {
        "hello": {
            "protocol_version": protocol_version,
            "codec": "json",
            "client_kind": client_kind,
            "run_id": run_id,
            "workdir": workdir,
            "surface": {
                "max_tier": max_tier,
                "approvals": approvals,
                "questions": questions,
                "bridge_tools": list(bridge_tools),
            },
            "run_token": run_token,
        }
    }


def welcome_or_raise(name: str, body: Any) -> Any:
    if name == "welcome":
        return body
    if name == "refused":
        raise ToolError.from_wire(body)
    raise ConnectionProblem(f"expected a welcome or refused frame after the hello, got {name!r}")


@dataclass
class Answer:
    """The answer to an ``ask_user`` question: labels among its options, free text, or a skip."""

    selected: list[str] = field(default_factory=list)
    text: str | None = None
    skipped: bool = False


# An approval handler returns True/False, or (approved, reason).
ApprovalReply = Union[bool, "tuple[bool, str | None]"]
ApprovalHandler = Callable[[ApprovalRequest], Any]
QuestionHandler = Callable[[Question], Any]
BridgeHandler = Callable[[BridgeCall], Any]


def approval_answer(request: ApprovalRequest, reply: Any) -> dict[str, Any]:
    if isinstance(reply, tuple):
        approved, reason = reply
    else:
        approved, reason = bool(reply), None
    if not approved and reason is None:
        reason = "declined by the client's approval handler"
    return {
        "approval_answer": {
            "request_id": request["request_id"],
            "approved": bool(approved),
            "reason": reason,
        }
    }


def question_answer(question: Question, reply: Any) -> dict[str, Any]:
    if isinstance(reply, str):
        reply = Answer(text=reply)
    elif isinstance(reply, (list, tuple)):
        reply = Answer(selected=list(reply))
    elif reply is None:
        reply = Answer(skipped=True)
    if not isinstance(reply, Answer):
        raise TypeError(
            f"a question handler returns an Answer, a label list, a text or None, not {type(reply).__name__}"
        )
    return {
        "question_answer": {
            "question_id": question["question_id"],
            "selected": list(reply.selected),
            "text": reply.text,
            "skipped": reply.skipped,
            "no_person": None,
        }
    }


def bridge_ok(call: BridgeCall, value: Any) -> dict[str, Any]:
    return {"bridge_result": {"bridge_id": call["bridge_id"], "outcome": {"ok": value}}}


def bridge_err(call: BridgeCall, error: BaseException) -> dict[str, Any]:
    if isinstance(error, ToolError):
        err = error.to_wire()
    else:
        err = {
            "kind": "internal",
            "message": f"the client's bridge handler for {call['tool']!r} raised {type(error).__name__}: {error}",
            "hint": "fix the bridge handler",
        }
    return {"bridge_result": {"bridge_id": call["bridge_id"], "outcome": {"err": err}}}


def no_bridge_handler(call: BridgeCall) -> dict[str, Any]:
    return bridge_err(
        call,
        ToolError(
            "not_available",
            f"this client declared {call['tool']!r} as a bridge tool but has no bridge handler",
            "pass bridge_handler= when connecting",
        ),
    )


def outcome_value(outcome: Any) -> Any:
    """The value of an ``{"ok": …}`` outcome; raises the typed error of an ``{"err": …}``."""
    if "ok" in outcome:
        return outcome["ok"]
    raise ToolError.from_wire(outcome.get("err", {}))
