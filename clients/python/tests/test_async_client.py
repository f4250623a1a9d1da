"""The asyncio client against a real daemon (see test_client.py for the environment)."""

from __future__ import annotations

import asyncio
import os
import unittest

from toolvisor import (
    Answer,
    ApprovalDeniedError,
    AsyncClient,
    CallCancelledError,
    NotFoundError,
    VersionMismatchError,
)

SOCKET = os.environ.get("TOOLVISOR_SOCKET", "")
WORKDIR = os.environ.get("TOOLVISOR_TEST_WORKDIR", os.getcwd())
EVAL_DESCRIPTION = "run a cell for the client tests"
# Every await of the daemon is bounded, so a hang fails naming what it waited for.
LIMIT_S = 60.0


async def connect(**kw: object) -> AsyncClient:
    kw.setdefault("workdir", WORKDIR)
    return await asyncio.wait_for(AsyncClient.connect(SOCKET, **kw), LIMIT_S)  # type: ignore[arg-type]


async def within(what: str, aw: object) -> object:
    try:
        return await asyncio.wait_for(aw, LIMIT_S)  # type: ignore[arg-type]
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {LIMIT_S} s waiting for {what}") from None


@unittest.skipUnless(SOCKET, "TOOLVISOR_SOCKET is not set: run through cargo test --test clients_python")
class AsyncClientTest(unittest.IsolatedAsyncioTestCase):
    async def test_handshake_refusal_and_tools(self) -> None:
        with self.assertRaises(VersionMismatchError) as cm:
            await connect(protocol_version=7)
        self.assertIn("version 7", cm.exception.message)
        async with await connect(max_tier="exec") as c:
            names = [t["name"] for t in c.tools]
            self.assertIn("bash", names)
            listed = await within("list_tools", c.list_tools())
            self.assertEqual(names, [t["name"] for t in listed])  # type: ignore[union-attr]

    async def test_streamed_events_with_an_async_iterator(self) -> None:
        async with await connect(max_tier="exec", approval_handler=lambda req: True) as c:
            call = await c.start("bash", {"command": "echo one; sleep 0.3; echo two"})
            texts: list[str] = []

            async def drain() -> None:
                async for ev in call:
                    if "output" in ev:
                        texts.append(ev["output"]["text"])

            await within("the events of the bash call", drain())
            value = await within("the bash result", call.result())
            self.assertEqual(value["stdout"], "one\ntwo\n")  # type: ignore[index]
            self.assertEqual("".join(texts), "one\ntwo\n")

    async def test_async_approval_handler_yes_and_no(self) -> None:
        async def approve(req: dict) -> bool:
            await asyncio.sleep(0)
            return req["args"]["command"] == "echo ok"

        async with await connect(max_tier="exec", approval_handler=approve) as c:
            v = await within("the approved call", c.call("bash", {"command": "echo ok"}))
            self.assertEqual(v["stdout"], "ok\n")  # type: ignore[index]
            with self.assertRaises(ApprovalDeniedError) as cm:
                await within("the declined call", c.call("bash", {"command": "echo no"}))
            self.assertIn("declined", cm.exception.message)

    async def test_question_and_bridge_call(self) -> None:
        async def answer(q: dict) -> Answer:
            return Answer(selected=["b"])

        async def bridge(call: dict) -> object:
            # A bridge handler may call tools on the same client while the cell waits.
            listed = await c.call("process", {"op": "list"})
            return {"n": call["args"]["n"] * 2, "processes": len(listed["processes"])}

        c = await connect(
            max_tier="exec",
            run_id="py-async",
            approval_handler=lambda req: True,
            question_handler=answer,
            bridge_tools=["double"],
            bridge_handler=bridge,
        )
        async with c:
            v = await within(
                "ask_user",
                c.call("ask_user", {"question": "a or b?", "options": [{"label": "a"}, {"label": "b"}]}),
            )
            self.assertEqual(v["selected"], ["b"])  # type: ignore[index]
            code = "r = tool('double', {'n': 21})\n(r['n'], r['processes'])"
            v = await within("the eval cell", c.call("eval", {"code": code, "description": EVAL_DESCRIPTION}))
            self.assertEqual(v["text"], "(42, 0)\n", v)  # type: ignore[index]

    async def test_cancel_typed_error_status_and_ping(self) -> None:
        async with await connect(max_tier="exec", approval_handler=lambda req: True) as c:
            call = await c.start("bash", {"command": "echo started; sleep 60"})

            async def until_started() -> None:
                async for ev in call:
                    if "output" in ev and "started" in ev["output"]["text"]:
                        await call.cancel()

            await within("the cancelled call to end", until_started())
            with self.assertRaises(CallCancelledError):
                await call.result()
            # Cancelling the awaiting task cancels the call on the daemon too.
            task = asyncio.create_task(c.call("bash", {"command": "echo go; sleep 60"}, on_event=lambda ev: task.cancel()))
            with self.assertRaises(asyncio.CancelledError):
                await within("the task to end", task)
            with self.assertRaises(NotFoundError) as cm:
                await within("process read", c.call("process", {"op": "read", "id": "p424242"}))
            self.assertEqual(cm.exception.kind, "not_found")
            status = await within("status", c.status())
            self.assertEqual(status["protocol_version"], 1)  # type: ignore[index]
            self.assertEqual(await within("ping", c.ping(9)), 9)
            tree = await within("tree", c.tree())
            self.assertEqual(tree["root"]["id"], "toolvisor")  # type: ignore[index]


if __name__ == "__main__":
    unittest.main()
