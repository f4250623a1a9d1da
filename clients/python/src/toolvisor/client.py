"""The blocking client: one socket, one thread. Frames are read only while the caller waits
for something (a result, an event, a reply), and every frame read on the way is dispatched:
events and results to their call, approval requests, questions and bridge calls to the
handlers given at connect (their answers are sent at once), frame-level errors to
``on_error`` and ``errors``. Not thread-safe: use one ``Client`` per thread, or ``AsyncClient``.
"""

from __future__ import annotations

import itertools
import os
import socket
from collections import deque
from typing import Any, Callable, Iterator

from . import _wire
from .errors import ConnectionProblem, ToolError
from .frames import (
    PROTOCOL_VERSION,
    ClientKind,
    Tier,
    Event,
    StatusReport,
    ToolInfo,
    TreeSnapshot,
    Welcome,
)


class Call:
    """A call in flight. Iterate it (or ``events()``) for its streamed events; ``result()``
    waits for the end and returns the value or raises the ``ToolError`` subclass of its kind."""

    def __init__(self, client: Client, call_id: int, tool: str, conversation: str) -> None:
        self.client = client
        self.id = call_id
        self.tool = tool
        self.conversation = conversation
        self._events: deque[Event] = deque()
        self._outcome: Any = None

    @property
    def done(self) -> bool:
        """True once the result has arrived."""
        return self._outcome is not None

    def events(self) -> Iterator[Event]:
        """Events as they arrive (e.g. ``{"output": {"stream": "stdout", "text": …}}``),
        until the result arrives."""
        while True:
            while self._events:
                yield self._events.popleft()
            if self._outcome is not None:
                return
            self.client._read_one(waiting_for=f"call {self.id} ({self.tool})")

    __iter__ = events

    def result(self) -> Any:
        """Wait for the end of the call: its value, or its error raised."""
        while self._outcome is None:
            self.client._read_one(waiting_for=f"the result of call {self.id} ({self.tool})")
        return _wire.outcome_value(self._outcome)

    def cancel(self) -> None:
        """Ask the daemon to stop the call; its result becomes ``CallCancelledError``."""
        if self._outcome is None:
            self.client._send({"cancel": {"id": self.id}})


class Client:
    """A connection to the toolvisor daemon in the JSON codec. Use ``Client.connect``."""

    def __init__(
        self,
        sock: socket.socket,
        path: str,
        *,
        conversation: str,
        approval_handler: _wire.ApprovalHandler | None,
        question_handler: _wire.QuestionHandler | None,
        bridge_handler: _wire.BridgeHandler | None,
        on_error: Callable[[ToolError], None] | None,
    ) -> None:
        self.path = path
        self.conversation = conversation
        self.approval_handler = approval_handler
        self.question_handler = question_handler
        self.bridge_handler = bridge_handler
        self.on_error = on_error
        self.errors: list[ToolError] = []
        """Frame-level ``error`` frames received so far (e.g. an answer matching nothing)."""
        self.tree_updates: deque[TreeSnapshot] = deque()
        self._sock = sock
        self._rfile = sock.makefile("rb")
        self._max_frame = _wire.DEFAULT_MAX_FRAME
        self._ids = itertools.count(1)
        self._calls: dict[int, Call] = {}
        self._replies: dict[str, deque[Any]] = {"tools": deque(), "status": deque(), "tree": deque()}
        self._pongs: dict[int, bool] = {}
        self._closed = False
        self.welcome: Welcome = {}  # type: ignore[typeddict-item]

    @classmethod
    def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        max_tier: Tier = "read",
        approval_handler: _wire.ApprovalHandler | None = None,
        question_handler: _wire.QuestionHandler | None = None,
        bridge_tools: list[str] | tuple[str, ...] = (),
        bridge_handler: _wire.BridgeHandler | None = None,
        approvals: bool | None = None,
        questions: bool | None = None,
        run_id: str = "",
        workdir: str | None = None,
        conversation: str = "default",
        client_kind: ClientKind = "harness",
        run_token: str | None = None,
        on_error: Callable[[ToolError], None] | None = None,
        timeout: float | None = None,
        protocol_version: int = PROTOCOL_VERSION,
    ) -> Client:
        """Connect, check that the server runs as this user (or root), and say Hello.

        ``path`` defaults to ``$TOOLVISOR_SOCKET``, then the daemon's default path. The
        surface claims approvals when ``approval_handler`` is given and questions when
        ``question_handler`` is (``approvals=``/``questions=`` override). ``workdir``
        defaults to the current directory. ``timeout`` bounds every wait on the socket
        (``None``: wait as long as it takes). A refused handshake raises the ``ToolError``
        subclass of its kind (e.g. ``VersionMismatchError``)."""
        where = os.fspath(path) if path is not None else _wire.default_socket()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(where)
            _wire.check_server_uid(sock, where)
        except OSError as e:
            sock.close()
            raise ConnectionProblem(
                f"cannot connect to the toolvisor daemon at {where}: {e.strerror or e} "
                "(is `toolvisor serve` running on that socket?)"
            ) from None
        except ConnectionProblem:
            sock.close()
            raise
        client = cls(
            sock,
            where,
            conversation=conversation,
            approval_handler=approval_handler,
            question_handler=question_handler,
            bridge_handler=bridge_handler,
            on_error=on_error,
        )
        try:
            client._send(
                _wire.hello(
                    max_tier=max_tier,
                    approvals=approval_handler is not None if approvals is None else approvals,
                    questions=question_handler is not None if questions is None else questions,
                    bridge_tools=list(bridge_tools),
                    run_id=run_id,
                    workdir=os.getcwd() if workdir is None else workdir,
                    client_kind=client_kind,
                    run_token=run_token,
                    protocol_version=protocol_version,
                )
            )
            name, body = client._read_frame("the welcome")
            client.welcome = _wire.welcome_or_raise(name, body)
        except BaseException:
            client.close()
            raise
        client._max_frame = int(client.welcome["max_frame"])
        return client

    # --- the API ------------------------------------------------------------------------

    @property
    def tools(self) -> list[ToolInfo]:
        """The tools the welcome listed (those this client may call)."""
        return self.welcome["tools"]

    def start(self, tool: str, args: dict[str, Any] | None = None, *, conversation: str | None = None) -> Call:
        """Send a call and return at once; read its events and result from the ``Call``."""
        call_id = next(self._ids)
        conv = conversation or self.conversation
        handle = Call(self, call_id, tool, conv)
        self._calls[call_id] = handle
        self._send({"call": {"id": call_id, "conversation": conv, "tool": tool, "args": args or {}}})
        return handle

    def call(
        self,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        conversation: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> Any:
        """Call a tool and wait for its value; ``on_event`` gets each streamed event.
        A failure raises the ``ToolError`` subclass of its kind."""
        handle = self.start(tool, args, conversation=conversation)
        for event in handle.events():
            if on_event is not None:
                on_event(event)
        return handle.result()

    def cancel(self, call_id: int) -> None:
        """Cancel the call with this id (see also ``Call.cancel``)."""
        self._send({"cancel": {"id": call_id}})

    def list_tools(self, all: bool = False) -> list[ToolInfo]:
        """The tools this client may call now; with ``all=True`` every registered tool, each
        with ``available`` and ``unavailable_reason``."""
        self._send({"list_tools": {"all": all}})
        return self._reply("tools")["tools"]  # type: ignore[no-any-return]

    def status(self) -> StatusReport:
        """Daemon facts (version, pid, uptime, sessions, calls)."""
        self._send("status")
        return self._reply("status")  # type: ignore[no-any-return]

    def tree(self) -> TreeSnapshot:
        """A snapshot of the supervisor tree."""
        self._send("tree")
        return self._reply("tree")  # type: ignore[no-any-return]

    def subscribe_tree(self) -> None:
        """Receive tree updates into ``tree_updates`` (read while waiting for anything, or
        with ``next_tree_update``)."""
        self._send({"subscribe": {"topic": "tree"}})

    def unsubscribe_tree(self) -> None:
        self._send({"unsubscribe": {"topic": "tree"}})

    def next_tree_update(self) -> TreeSnapshot:
        while not self.tree_updates:
            self._read_one(waiting_for="a tree update")
        return self.tree_updates.popleft()

    def ping(self, nonce: int | None = None) -> int:
        """Round trip to the daemon; returns the nonce it echoed. Frames are handled in order,
        so a ping after a question answer returns once that answer was processed."""
        n = next(self._ids) if nonce is None else nonce
        self._pongs[n] = False
        self._send({"ping": {"nonce": n}})
        while not self._pongs[n]:
            self._read_one(waiting_for=f"the pong of nonce {n}")
        del self._pongs[n]
        return n

    def serve_one(self) -> None:
        """Read one frame and handle it: for a connection that only answers (a question port,
        an approver), call it in a loop."""
        self._read_one(waiting_for="a frame to handle")

    def close(self) -> None:
        """Close the connection (calls in flight run to their end on the daemon)."""
        if not self._closed:
            self._closed = True
            try:
                self._rfile.close()
            finally:
                self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the socket ---------------------------------------------------------------------

    def _send(self, frame: Any) -> None:
        if self._closed:
            raise ConnectionProblem("this client is closed")
        try:
            self._sock.sendall(_wire.encode(frame))
        except OSError as e:
            raise ConnectionProblem(f"cannot write to the daemon at {self.path}: {e}") from None

    def _read_exact(self, n: int, waiting_for: str) -> bytes:
        try:
            data = self._rfile.read(n)
        except socket.timeout:
            raise ConnectionProblem(f"timed out waiting for {waiting_for} from {self.path}") from None
        except OSError as e:
            raise ConnectionProblem(f"cannot read from the daemon at {self.path}: {e}") from None
        if data is None or len(data) < n:
            raise ConnectionProblem(f"the daemon at {self.path} closed the connection while this client waited for {waiting_for}")
        return data

    def _read_frame(self, waiting_for: str) -> tuple[str, Any]:
        (length,) = _wire.HEADER.unpack(self._read_exact(4, waiting_for))
        _wire.check_length(length, self._max_frame)
        return _wire.decode(self._read_exact(length, waiting_for))

    def _reply(self, kind: str) -> Any:
        queue = self._replies[kind]
        while not queue:
            self._read_one(waiting_for=f"the {kind} reply")
        return queue.popleft()

    def _read_one(self, waiting_for: str) -> None:
        name, body = self._read_frame(waiting_for)
        self._dispatch(name, body)

    def _dispatch(self, name: str, body: Any) -> None:
        if name == "event":
            handle = self._calls.get(body["id"])
            if handle is not None:
                handle._events.append(body["event"])
        elif name == "result":
            handle = self._calls.pop(body["id"], None)
            if handle is not None:
                handle._outcome = body["outcome"]
        elif name == "approval_request":
            if self.approval_handler is None:
                reply: Any = (False, "this client has no approval handler")
            else:
                try:
                    reply = self.approval_handler(body)
                except Exception as e:  # noqa: BLE001 - a failing handler denies
                    reply = (False, f"the approval handler raised {type(e).__name__}: {e}")
            self._send(_wire.approval_answer(body, reply))
        elif name == "question":
            if self.question_handler is None:
                self._send(_wire.question_answer(body, None))
            else:
                self._send(_wire.question_answer(body, self.question_handler(body)))
        elif name == "bridge_call":
            if self.bridge_handler is None:
                self._send(_wire.no_bridge_handler(body))
            else:
                try:
                    value = self.bridge_handler(body)
                except Exception as e:  # noqa: BLE001 - every failure goes back into the cell
                    self._send(_wire.bridge_err(body, e))
                else:
                    self._send(_wire.bridge_ok(body, value))
        elif name in self._replies:
            self._replies[name].append(body)
        elif name == "tree_update":
            self.tree_updates.append(body)
        elif name == "pong":
            if body["nonce"] in self._pongs:
                self._pongs[body["nonce"]] = True
        elif name == "error":
            err = ToolError.from_wire(body)
            self.errors.append(err)
            if self.on_error is not None:
                self.on_error(err)
        # Frames of a newer daemon that this client does not know are ignored.
