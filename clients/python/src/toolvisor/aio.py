"""The asyncio client: one reader task per connection routes every frame (events and results
to their call, replies to their waiter); approval requests, questions and bridge calls run
the handlers (plain functions or coroutines) in their own tasks, so a slow handler never
stalls other calls, and a bridge handler may itself call tools on the same client."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import socket
from collections import deque
from typing import Any, AsyncIterator, Callable

from . import _wire
from .errors import ConnectionProblem, ToolError
from .frames import PROTOCOL_VERSION, Event, StatusReport, ToolInfo, TreeSnapshot, Welcome

_END = object()


class AsyncCall:
    """A call in flight: ``async for event in call`` streams its events, ``await
    call.result()`` returns its value or raises the ``ToolError`` subclass of its kind."""

    def __init__(self, client: AsyncClient, call_id: int, tool: str, conversation: str) -> None:
        self.client = client
        self.id = call_id
        self.tool = tool
        self.conversation = conversation
        self._events: asyncio.Queue[Any] = asyncio.Queue()
        self._outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    @property
    def done(self) -> bool:
        return self._outcome.done()

    async def events(self) -> AsyncIterator[Event]:
        """Events as they arrive, until the result arrives."""
        while True:
            item = await self._events.get()
            if item is _END:
                self._events.put_nowait(_END)  # a second iteration ends at once
                return
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
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
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
        self._reader = reader
        self._writer = writer
        self._write_lock = asyncio.Lock()
        self._max_frame = _wire.DEFAULT_MAX_FRAME
        self._ids = itertools.count(1)
        self._calls: dict[int, AsyncCall] = {}
        self._replies: dict[str, deque[asyncio.Future[Any]]] = {"tools": deque(), "status": deque(), "tree": deque()}
        self._pongs: dict[int, asyncio.Future[int]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reader_task: asyncio.Task[None] | None = None
        self._failure: ConnectionProblem | None = None

    @classmethod
    async def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        max_tier: str = "read",
        approval_handler: Callable[..., Any] | None = None,
        question_handler: Callable[..., Any] | None = None,
        bridge_tools: list[str] | tuple[str, ...] = (),
        bridge_handler: Callable[..., Any] | None = None,
        approvals: bool | None = None,
        questions: bool | None = None,
        run_id: str = "",
        workdir: str | None = None,
        conversation: str = "default",
        client_kind: str = "harness",
        run_token: str | None = None,
        on_error: Callable[[ToolError], Any] | None = None,
        protocol_version: int = PROTOCOL_VERSION,
    ) -> AsyncClient:
        """As ``Client.connect``; handlers may be coroutine functions. Bound waits with
        ``asyncio.timeout``/``wait_for`` around the awaits."""
        where = os.fspath(path) if path is not None else _wire.default_socket()
        try:
            reader, writer = await asyncio.open_unix_connection(where, limit=2**16)
        except OSError as e:
            raise ConnectionProblem(
                f"cannot connect to the toolvisor daemon at {where}: {e.strerror or e} "
                "(is `toolvisor serve` running on that socket?)"
            ) from None
        sock: socket.socket = writer.get_extra_info("socket")
        try:
            _wire.check_server_uid(sock, where)  # before a byte is sent
        except BaseException:
            writer.close()
            raise
        client = cls(
            reader,
            writer,
            where,
            conversation=conversation,
            approval_handler=approval_handler,
            question_handler=question_handler,
            bridge_handler=bridge_handler,
            on_error=on_error,
        )
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
            name, body = await client._read_frame()
            client.welcome = _wire.welcome_or_raise(name, body)
        except BaseException:
            writer.close()
            raise
        client._max_frame = int(client.welcome["max_frame"])
        client._reader_task = asyncio.create_task(client._read_loop())
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
        if self._reader_task is not None:
            self._reader_task.cancel()
        for t in list(self._tasks):
            t.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

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
        async with self._write_lock:
            try:
                self._writer.write(_wire.encode(frame))
                await self._writer.drain()
            except OSError as e:
                raise ConnectionProblem(f"cannot write to the daemon at {self.path}: {e}") from None

    async def _read_frame(self) -> tuple[str, Any]:
        try:
            header = await self._reader.readexactly(4)
            (length,) = _wire.HEADER.unpack(header)
            _wire.check_length(length, self._max_frame)
            payload = await self._reader.readexactly(length)
        except asyncio.IncompleteReadError:
            raise ConnectionProblem(f"the daemon at {self.path} closed the connection") from None
        except OSError as e:
            raise ConnectionProblem(f"cannot read from the daemon at {self.path}: {e}") from None
        return _wire.decode(payload)

    async def _read_loop(self) -> None:
        try:
            while True:
                name, body = await self._read_frame()
                self._dispatch(name, body)
        except ConnectionProblem as e:
            self._fail(e)
        except asyncio.CancelledError:
            self._fail(ConnectionProblem("this client is closed"))
            raise

    def _fail(self, problem: ConnectionProblem) -> None:
        """The connection is gone: every waiter learns it."""
        self._failure = problem
        for handle in self._calls.values():
            if not handle._outcome.done():
                handle._outcome.set_exception(problem)
            handle._events.put_nowait(_END)
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
        task.add_done_callback(self._tasks.discard)

    def _dispatch(self, name: str, body: Any) -> None:
        if name == "event":
            handle = self._calls.get(body["id"])
            if handle is not None:
                handle._events.put_nowait(body["event"])
        elif name == "result":
            handle = self._calls.pop(body["id"], None)
            if handle is not None:
                handle._outcome.set_result(body["outcome"])
                handle._events.put_nowait(_END)
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
