"""The asyncio client: an ``asyncio.Protocol`` routes every frame as its bytes arrive (events
and results to their call, replies to their waiter), with no reader task in between;
approval requests, questions and bridge calls run the handlers (plain functions or
coroutines) in their own tasks, so a slow handler never stalls other calls, and a bridge
handler may itself call tools on the same client."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
from collections import deque
from typing import Any, AsyncIterator, Callable

from . import _wire
from .errors import ConnectionProblem, ToolError
from .frames import PROTOCOL_VERSION, ClientKind, Event, Tier, StatusReport, ToolInfo, TreeSnapshot, Welcome

_END = object()


class _Frames(asyncio.Protocol):
    """Cuts the byte stream into frames and hands each to the client; applies the transport's
    write flow control."""

    def __init__(self) -> None:
        self.client: AsyncClient | None = None
        self.early: list[tuple[str, Any]] = []
        self.buf = bytearray()
        self.max_frame = _wire.DEFAULT_MAX_FRAME
        self.transport: asyncio.Transport | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.lost: ConnectionProblem | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            (length,) = _wire.HEADER.unpack_from(buf)
            if length > self.max_frame:
                self._lose(ConnectionProblem(
                    f"the daemon announced a frame of {length} bytes, above the cap of {self.max_frame} bytes"))
                return
            if len(buf) < 4 + length:
                return
            payload = bytes(buf[4:4 + length])
            del buf[:4 + length]
            try:
                frame = _wire.decode(payload)
            except ConnectionProblem as e:
                self._lose(e)
                return
            if self.client is None:
                self.early.append(frame)
            else:
                self.client._dispatch(*frame)

    def _lose(self, problem: ConnectionProblem) -> None:
        self.lost = problem
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lost is None:
            self.lost = ConnectionProblem("the daemon closed the connection" + (f": {exc}" if exc else ""))
        self.writable.set()
        if self.client is not None:
            self.client._fail(self.lost)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()


class AsyncCall:
    """A call in flight: ``async for event in call`` streams its events, ``await
    call.result()`` returns its value or raises the ``ToolError`` subclass of its kind."""

    def __init__(self, client: AsyncClient, call_id: int, tool: str, conversation: str) -> None:
        self.client = client
        self.id = call_id
        self.tool = tool
        self.conversation = conversation
        self._events: deque[Any] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    @property
    def done(self) -> bool:
        return self._outcome.done()

    def _push(self, item: Any) -> None:
        self._events.append(item)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def events(self) -> AsyncIterator[Event]:
        """Events as they arrive, until the result arrives."""
        while True:
            if not self._events:
                self._wake = asyncio.get_running_loop().create_future()
                await self._wake
                self._wake = None
                continue
            item = self._events[0]
            if item is _END:
                return  # left in place: a second iteration ends at once
            self._events.popleft()
            yield item

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def result(self) -> Any:
        return _wire.outcome_value(await self._outcome)

    async def cancel(self) -> None:
        """Ask the daemon to stop the call; its result becomes ``CallCancelledError``."""
        if not self._outcome.done():
            await self.client._send({"cancel": {"id": self.id}})


class AsyncClient:
    """A connection to the toolvisor daemon in the JSON codec. Use ``await AsyncClient.connect``."""

    def __init__(
        self,
        frames: _Frames,
        path: str,
        *,
        conversation: str,
        approval_handler: Callable[..., Any] | None,
        question_handler: Callable[..., Any] | None,
        bridge_handler: Callable[..., Any] | None,
        on_error: Callable[[ToolError], Any] | None,
    ) -> None:
        self.path = path
        self.conversation = conversation
        self.approval_handler = approval_handler
        self.question_handler = question_handler
        self.bridge_handler = bridge_handler
        self.on_error = on_error
        self.errors: list[ToolError] = []
        self.tree_updates: asyncio.Queue[TreeSnapshot] = asyncio.Queue()
        self.welcome: Welcome = {}  # type: ignore[typeddict-item]
        self._frames = frames
        self._transport: asyncio.Transport = frames.transport  # type: ignore[assignment]
        self._welcome: asyncio.Future[tuple[str, Any]] | None = None
        self._ids = itertools.count(1)
        self._calls: dict[int, AsyncCall] = {}
        self._replies: dict[str, deque[asyncio.Future[Any]]] = {"tools": deque(), "status": deque(), "tree": deque()}
        self._pongs: dict[int, asyncio.Future[int]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failure: ConnectionProblem | None = None

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        max_tier: Tier = "read",
        approval_handler: Callable[..., Any] | None = None,
        question_handler: Callable[..., Any] | None = None,
        bridge_tools: list[str] | tuple[str, ...] = (),
        bridge_handler: Callable[..., Any] | None = None,
        approvals: bool | None = None,
        questions: bool | None = None,
        run_id: str = "",
        workdir: str | None = None,
        conversation: str = "default",
        client_kind: ClientKind = "harness",
        run_token: str | None = None,
        on_error: Callable[[ToolError], Any] | None = None,
        protocol_version: int = PROTOCOL_VERSION,
    ) -> AsyncClient:
        """As ``Client.connect``; handlers may be coroutine functions. Bound waits with
        ``asyncio.timeout``/``wait_for`` around the awaits."""
        where = os.fspath(path) if path is not None else _wire.default_socket()
        loop = asyncio.get_running_loop()
        try:
            transport, frames = await loop.create_unix_connection(_Frames, where)
        except OSError as e:
            raise ConnectionProblem(
                f"cannot connect to the toolvisor daemon at {where}: {e.strerror or e} "
                "(is `toolvisor serve` running on that socket?)"
            ) from None
        try:
            _wire.check_server_uid(transport.get_extra_info("socket"), where)  # before a byte is sent
        except BaseException:
            transport.abort()
            raise
        client = cls(
            frames,
            where,
            conversation=conversation,
            approval_handler=approval_handler,
            question_handler=question_handler,
            bridge_handler=bridge_handler,
            on_error=on_error,
        )
        client._welcome = loop.create_future()
        frames.client = client
        for frame in frames.early:
            client._dispatch(*frame)
        if frames.lost is not None:
            client._fail(frames.lost)
        try:
            await client._send(
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
            name, body = await client._welcome
            client.welcome = _wire.welcome_or_raise(name, body)
        except BaseException:
            transport.abort()
            raise
        frames.max_frame = int(client.welcome["max_frame"])
        return client

    # --- the API ------------------------------------------------------------------------

    @property
    def tools(self) -> list[ToolInfo]:
        return self.welcome["tools"]

    async def start(self, tool: str, args: dict[str, Any] | None = None, *, conversation: str | None = None) -> AsyncCall:
        """Send a call and return at once; stream and await it through the ``AsyncCall``."""
        self._check_open()
        call_id = next(self._ids)
        conv = conversation or self.conversation
        handle = AsyncCall(self, call_id, tool, conv)
        self._calls[call_id] = handle
        await self._send({"call": {"id": call_id, "conversation": conv, "tool": tool, "args": args or {}}})
        return handle

    async def call(
        self,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        conversation: str | None = None,
        on_event: Callable[[Event], Any] | None = None,
    ) -> Any:
        """Call a tool and await its value; ``on_event`` (function or coroutine) gets each
        streamed event. Cancelling the awaiting task cancels the call on the daemon."""
        handle = await self.start(tool, args, conversation=conversation)
        try:
            if on_event is not None:
                async for event in handle:
                    r = on_event(event)
                    if inspect.isawaitable(r):
                        await r
            return await handle.result()
        except asyncio.CancelledError:
            if not handle.done and self._failure is None:
                await asyncio.shield(handle.cancel())
            raise

    async def cancel(self, call_id: int) -> None:
        await self._send({"cancel": {"id": call_id}})

    async def list_tools(self, all: bool = False) -> list[ToolInfo]:
        body = await self._request("tools", {"list_tools": {"all": all}})
        return body["tools"]  # type: ignore[no-any-return]

    async def status(self) -> StatusReport:
        return await self._request("status", "status")  # type: ignore[no-any-return]

    async def tree(self) -> TreeSnapshot:
        return await self._request("tree", "tree")  # type: ignore[no-any-return]

    async def subscribe_tree(self) -> None:
        """Tree updates then arrive in the ``tree_updates`` queue."""
        await self._send({"subscribe": {"topic": "tree"}})

    async def unsubscribe_tree(self) -> None:
        await self._send({"unsubscribe": {"topic": "tree"}})

    async def ping(self, nonce: int | None = None) -> int:
        self._check_open()
        n = next(self._ids) if nonce is None else nonce
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pongs[n] = fut
        await self._send({"ping": {"nonce": n}})
        return await fut

    async def close(self) -> None:
        """Close the connection (calls in flight run to their end on the daemon)."""
        for t in list(self._tasks):
            t.cancel()
        if not self._transport.is_closing():
            self._transport.close()
        self._fail(ConnectionProblem("this client is closed"))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- the socket ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._failure is not None:
            raise self._failure

    async def _request(self, kind: str, frame: Any) -> Any:
        self._check_open()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[kind].append(fut)
        await self._send(frame)
        return await fut

    async def _send(self, frame: Any) -> None:
        if self._transport.is_closing():
            raise self._failure or ConnectionProblem(f"the connection to {self.path} is closed")
        # One write per frame keeps frames whole and in order; wait only when the transport
        # asks for it (its buffer is full).
        self._transport.write(_wire.encode(frame))
        if not self._frames.writable.is_set():
            await self._frames.writable.wait()
            if self._frames.lost is not None:
                raise self._frames.lost

    def _fail(self, problem: ConnectionProblem) -> None:
        """The connection is gone: every waiter learns it."""
        if self._failure is not None:
            return
        self._failure = problem
        if self._welcome is not None and not self._welcome.done():
            self._welcome.set_exception(problem)
        for handle in self._calls.values():
            if not handle._outcome.done():
                handle._outcome.set_exception(problem)
            handle._push(_END)
        self._calls.clear()
        for queue in self._replies.values():
            for fut in queue:
                if not fut.done():
                    fut.set_exception(problem)
            queue.clear()
        for fut in self._pongs.values():
            if not fut.done():
                fut.set_exception(problem)
        self._pongs.clear()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        # An answer that could not be sent because the connection is gone is not an error of
        # its own: every waiter already got the connection's failure.
        if not task.cancelled() and not isinstance(task.exception(), (ConnectionProblem, type(None))):
            err = task.exception()
            self.errors.append(ToolError("internal", f"a handler task failed: {type(err).__name__}: {err}", ""))

    def _dispatch(self, name: str, body: Any) -> None:
        if self._welcome is not None and not self._welcome.done():
            self._welcome.set_result((name, body))
            return
        if name == "event":
            handle = self._calls.get(body["id"])
            if handle is not None:
                handle._push(body["event"])
        elif name == "result":
            handle = self._calls.pop(body["id"], None)
            if handle is not None:
                handle._outcome.set_result(body["outcome"])
                handle._push(_END)
        elif name == "approval_request":
            self._spawn(self._answer_approval(body))
        elif name == "question":
            self._spawn(self._answer_question(body))
        elif name == "bridge_call":
            self._spawn(self._answer_bridge(body))
        elif name in self._replies:
            queue = self._replies[name]
            if queue:
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(body)
        elif name == "tree_update":
            self.tree_updates.put_nowait(body)
        elif name == "pong":
            fut2 = self._pongs.pop(body["nonce"], None)
            if fut2 is not None and not fut2.done():
                fut2.set_result(body["nonce"])
        elif name == "error":
            err = ToolError.from_wire(body)
            self.errors.append(err)
            if self.on_error is not None:
                r = self.on_error(err)
                if inspect.isawaitable(r):
                    self._spawn(r)
        # Frames of a newer daemon that this client does not know are ignored.

    @staticmethod
    async def _run(handler: Callable[..., Any], arg: Any) -> Any:
        r = handler(arg)
        if inspect.isawaitable(r):
            r = await r
        return r

    async def _answer_approval(self, req: Any) -> None:
        if self.approval_handler is None:
            reply: Any = (False, "this client has no approval handler")
        else:
            try:
                reply = await self._run(self.approval_handler, req)
            except Exception as e:  # noqa: BLE001 - a failing handler denies
                reply = (False, f"the approval handler raised {type(e).__name__}: {e}")
        await self._send(_wire.approval_answer(req, reply))

    async def _answer_question(self, q: Any) -> None:
        reply = None if self.question_handler is None else await self._run(self.question_handler, q)
        await self._send(_wire.question_answer(q, reply))

    async def _answer_bridge(self, call: Any) -> None:
        if self.bridge_handler is None:
            await self._send(_wire.no_bridge_handler(call))
            return
        try:
            value = await self._run(self.bridge_handler, call)
        except Exception as e:  # noqa: BLE001 - every failure goes back into the cell
            await self._send(_wire.bridge_err(call, e))
        else:
            await self._send(_wire.bridge_ok(call, value))
