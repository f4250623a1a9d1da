"""Typed errors: every failure the daemon reports is a ``ToolError`` with ``kind``, ``message``
and ``hint`` (docs/PROTOCOL.md §7), raised as the subclass of its kind so callers can
``except NotFoundError``. Problems of the connection itself are ``ConnectionProblem``."""

from __future__ import annotations

from typing import Any


class ToolvisorError(Exception):
    """Base of everything this package raises."""


class ConnectionProblem(ToolvisorError):
    """The socket could not be used: not connectable, closed by the daemon, a malformed frame,
    or a server of another user (refused before anything was sent)."""


class ToolError(ToolvisorError):
    """A failure reported by the daemon: a call's ``err`` outcome, a refused handshake, or a
    frame-level ``error``."""

    kind: str = ""

    def __init__(self, kind: str, message: str, hint: str = "") -> None:
        super().__init__(f"{kind}: {message}" + (f" (hint: {hint})" if hint else ""))
        self.kind = kind
        self.message = message
        self.hint = hint

    def to_wire(self) -> dict[str, str]:
        """The ``ToolError`` object of the protocol, e.g. for a bridge result."""
        return {"kind": self.kind, "message": self.message, "hint": self.hint}

    @staticmethod
    def from_wire(data: Any) -> ToolError:
        """The subclass for ``data["kind"]`` (``ToolError`` itself for a kind this client does
        not know)."""
        kind = str(data.get("kind", "internal"))
        cls = ERRORS_BY_KIND.get(kind, ToolError)
        return cls(kind, str(data.get("message", "")), str(data.get("hint", "")))



class InvalidArgsError(ToolError):
    """Arguments missing, of the wrong type, or out of range."""

    kind = "invalid_args"


class UnknownToolError(ToolError):
    """No tool of that name."""

    kind = "unknown_tool"


class NotAvailableError(ToolError):
    """The tool exists but cannot run here."""

    kind = "not_available"


class PolicyDeniedError(ToolError):
    """The operator's policy denies the tool."""

    kind = "policy_denied"


class ApprovalDeniedError(ToolError):
    """The call was not approved."""

    kind = "approval_denied"


class SurfaceDeniedError(ToolError):
    """The tool's tier is above the client's max_tier."""

    kind = "surface_denied"


class ToolTimeoutError(ToolError):
    """Something ran out of time."""

    kind = "timeout"


class CallCancelledError(ToolError):
    """The call was cancelled."""

    kind = "cancelled"


class ResourceFailedError(ToolError):
    """The resource behind the tool failed."""

    kind = "resource_failed"


class NotReadyError(ToolError):
    """The resource is still starting."""

    kind = "not_ready"


class BusyError(ToolError):
    """The resource is busy or at a limit."""

    kind = "busy"


class NotFoundError(ToolError):
    """The thing named does not exist."""

    kind = "not_found"


class OutOfScopeError(ToolError):
    """Outside the conversation, session or workdir."""

    kind = "out_of_scope"


class InvalidRefError(ToolError):
    """A stored-result reference is malformed."""

    kind = "invalid_ref"


class ProtocolError(ToolError):
    """A frame broke the protocol."""

    kind = "protocol"


class VersionMismatchError(ToolError):
    """Client and daemon speak different protocol versions."""

    kind = "version_mismatch"


class RefusedError(ToolError):
    """The daemon refused the connection."""

    kind = "refused"


class IoError(ToolError):
    """An operating-system error."""

    kind = "io"


class NoHumanError(ToolError):
    """No person is attached to answer a question."""

    kind = "no_human"


class KernelDiedError(ToolError):
    """An interpreter kernel died."""

    kind = "kernel_died"


class ExpiredError(ToolError):
    """A session outlived its hard TTL."""

    kind = "expired"


class ConflictError(ToolError):
    """Files changed since a change was staged."""

    kind = "conflict"


class InternalError(ToolError):
    """A daemon bug, or a reply too large for max_frame."""

    kind = "internal"


class ShuttingDownError(ToolError):
    """The daemon is draining; retry against the next one."""

    kind = "shutting_down"


class NetworkUnavailableError(ToolError):
    """A network endpoint the tool needs (the model hub) cannot be reached."""

    kind = "network_unavailable"

ERRORS_BY_KIND: dict[str, type[ToolError]] = {
    cls.kind: cls
    for cls in (
        InvalidArgsError, UnknownToolError, NotAvailableError, PolicyDeniedError,
        ApprovalDeniedError, SurfaceDeniedError, ToolTimeoutError, CallCancelledError,
        ResourceFailedError, NotReadyError, BusyError, NotFoundError, OutOfScopeError,
        InvalidRefError, ProtocolError, VersionMismatchError, RefusedError, IoError,
        NoHumanError, KernelDiedError, ExpiredError, ConflictError, InternalError,
        ShuttingDownError, NetworkUnavailableError,
    )
}
