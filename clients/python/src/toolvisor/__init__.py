"""A client for the toolvisor daemon's socket protocol (docs/PROTOCOL.md), in the JSON codec,
with nothing beyond the standard library: ``Client`` (blocking) and ``AsyncClient`` (asyncio).

    from toolvisor import Client

    with Client.connect(max_tier="exec", approval_handler=lambda req: True) as c:
        print(c.call("bash", {"command": "echo hi"})["stdout"])
"""

from ._wire import Answer, default_socket
from .aio import AsyncCall, AsyncClient
from .client import Call, Client
from .errors import (
    ERRORS_BY_KIND,
    ApprovalDeniedError,
    BusyError,
    CallCancelledError,
    ConflictError,
    ConnectionProblem,
    ExpiredError,
    InternalError,
    InvalidArgsError,
    InvalidRefError,
    IoError,
    KernelDiedError,
    NoHumanError,
    NotAvailableError,
    NotFoundError,
    NotReadyError,
    OutOfScopeError,
    PolicyDeniedError,
    ProtocolError,
    RefusedError,
    NetworkUnavailableError,
    ResourceFailedError,
    ShuttingDownError,
    SurfaceDeniedError,
    ToolError,
    ToolTimeoutError,
    ToolvisorError,
    UnknownToolError,
    VersionMismatchError,
)
from .frames import PROTOCOL_VERSION

__all__ = [
    "PROTOCOL_VERSION", "Answer", "AsyncCall", "AsyncClient", "Call", "Client", "default_socket",
    "ERRORS_BY_KIND", "ApprovalDeniedError", "BusyError", "CallCancelledError", "ConflictError",
    "ConnectionProblem", "ExpiredError", "InternalError", "InvalidArgsError", "InvalidRefError",
    "IoError", "KernelDiedError", "NetworkUnavailableError", "NoHumanError", "NotAvailableError", "NotFoundError",
    "NotReadyError", "OutOfScopeError", "PolicyDeniedError", "ProtocolError", "RefusedError",
    "ResourceFailedError", "ShuttingDownError", "SurfaceDeniedError", "ToolError",
    "ToolTimeoutError", "ToolvisorError", "UnknownToolError", "VersionMismatchError",
]
