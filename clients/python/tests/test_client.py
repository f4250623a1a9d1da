"""The blocking client against a real daemon: ``TOOLVISOR_SOCKET`` names its socket (the
Rust test ``tests/tests/clients_python.rs`` starts the daemon, with eval kernels, and runs
this suite), ``TOOLVISOR_TEST_WORKDIR`` a directory the calls may work in."""

from __future__ import annotations

import os
import unittest

import toolvisor
from toolvisor import (
    Answer,
    ApprovalDeniedError,
    CallCancelledError,
    Client,
    NotFoundError,
    ToolError,
    UnknownToolError,
    VersionMismatchError,
)

SOCKET = os.environ.get("TOOLVISOR_SOCKET", "")
WORKDIR = os.environ.get("TOOLVISOR_TEST_WORKDIR", os.getcwd())
EVAL_DESCRIPTION = "run a cell for the client tests"


def connect(**kw: object) -> Client:
    kw.setdefault("workdir", WORKDIR)
    kw.setdefault("timeout", 60.0)
    return Client.connect(SOCKET, **kw)  # type: ignore[arg-type]


@unittest.skipUnless(SOCKET, "TOOLVISOR_SOCKET is not set: run through cargo test --test clients_python")
class SyncClientTest(unittest.TestCase):
    def test_installed_package_is_typed(self) -> None:
        # The suite runs against the pip-installed package, which ships its PEP 561 marker.
        here = os.path.dirname(toolvisor.__file__)
        self.assertTrue(os.path.isfile(os.path.join(here, "py.typed")), here)

    def test_handshake_and_tools(self) -> None:
        with connect(max_tier="exec") as c:
            self.assertEqual(c.welcome["protocol_version"], 1)
            self.assertEqual(c.welcome["codec"], "json")
            names = [t["name"] for t in c.tools]
            self.assertIn("bash", names)
            self.assertEqual(names, [t["name"] for t in c.list_tools()])
            every = c.list_tools(all=True)
            self.assertGreaterEqual(len(every), len(names))
            self.assertTrue(all("available" in t and "schema" in t for t in every))
        with connect(max_tier="read") as c:
            self.assertNotIn("bash", [t["name"] for t in c.tools])

    def test_a_wrong_protocol_version_is_refused_with_its_kind(self) -> None:
        with self.assertRaises(VersionMismatchError) as cm:
            connect(protocol_version=2)
        e = cm.exception
        self.assertEqual(e.kind, "version_mismatch")
        self.assertIn("version 2", e.message)
        self.assertIn("version 1", e.message)
        self.assertTrue(e.hint)

    def test_a_call_streams_its_output_events(self) -> None:
        with connect(max_tier="exec", approval_handler=lambda req: True) as c:
            seen: list[str] = []
            value = c.call(
                "bash",
                {"command": "echo one; sleep 0.3; echo two"},
                on_event=lambda ev: seen.append(ev["output"]["text"] if "output" in ev else ""),
            )
            self.assertEqual(value["stdout"], "one\ntwo\n")
            self.assertEqual("".join(seen), "one\ntwo\n")
            # The iterator form yields the same events.
            handle = c.start("bash", {"command": "echo three"})
            texts = [ev["output"]["text"] for ev in handle.events() if "output" in ev]
            self.assertEqual("".join(texts), "three\n")
            self.assertEqual(handle.result()["exit_code"], 0)

    def test_approvals_answered_yes_and_no(self) -> None:
        asked: list[str] = []

        def approve_echo_only(req: dict) -> tuple[bool, str | None]:
            asked.append(req["summary"])
            if req["args"]["command"].startswith("echo"):
                return True, None
            return False, "only echo is allowed here"

        with connect(max_tier="exec", approval_handler=approve_echo_only) as c:
            self.assertEqual(c.call("bash", {"command": "echo yes"})["stdout"], "yes\n")
            marker = os.path.join(WORKDIR, "never-created")
            with self.assertRaises(ApprovalDeniedError) as cm:
                c.call("bash", {"command": f"touch {marker}"})
            self.assertIn("only echo is allowed here", cm.exception.message)
            self.assertFalse(os.path.exists(marker))
            self.assertEqual(asked, ["bash: echo yes", f"bash: touch {marker}"])

    def test_a_question_is_answered_by_the_handler(self) -> None:
        questions: list[dict] = []

        def pick(q: dict) -> Answer:
            questions.append(q)
            return Answer(selected=["sqlite"])

        # This connection asks and is its run's question port too.
        with connect(max_tier="read", run_id="py-questions", question_handler=pick) as c:
            value = c.call(
                "ask_user",
                {"question": "Which database?", "options": [{"label": "postgres"}, {"label": "sqlite"}]},
            )
            self.assertEqual(value["selected"], ["sqlite"])
            self.assertEqual(len(questions), 1)
            self.assertEqual(questions[0]["question"], "Which database?")
            self.assertEqual([o["label"] for o in questions[0]["options"]], ["postgres", "sqlite"])

    def test_a_question_port_on_its_own_connection(self) -> None:
        answered: list[int] = []

        def text(q: dict) -> str:
            answered.append(q["question_id"])
            return "from the port"

        with connect(max_tier="read", run_id="py-port", client_kind="operator", question_handler=text) as port:
            port.ping()  # the port is connected before the question is asked
            with connect(max_tier="read", run_id="py-port") as asker:
                handle = asker.start("ask_user", {"question": "Anything to add?"})
                while not answered:
                    port.serve_one()
                self.assertEqual(handle.result()["text"], "from the port")

    def test_a_bridge_call_is_answered_by_the_handler(self) -> None:
        calls: list[dict] = []

        def bridge(call: dict) -> object:
            calls.append(call)
            if call["args"].get("fail"):
                raise NotFoundError("not_found", "no such ticket", "ask for an open ticket")
            return {"title": "ticket " + str(call["args"]["n"])}

        with connect(
            max_tier="exec",
            approval_handler=lambda req: True,
            bridge_tools=["lookup_ticket"],
            bridge_handler=bridge,
        ) as c:
            code = (
                "t = tool('lookup_ticket', {'n': 7})\n"
                "try:\n    tool('lookup_ticket', {'n': 8, 'fail': True})\n"
                "except ToolError as e:\n    err = (e.kind, e.message)\n"
                "(t['title'], err)"
            )
            value = c.call("eval", {"code": code, "description": EVAL_DESCRIPTION})
            self.assertEqual(value["status"], "ok", value)
            self.assertEqual(value["text"], "('ticket 7', ('not_found', 'no such ticket'))\n")
            self.assertEqual([x["tool"] for x in calls], ["lookup_ticket", "lookup_ticket"])

    def test_failing_or_missing_handlers_answer_for_the_client(self) -> None:
        def boom(req: object) -> bool:
            raise RuntimeError("boom")

        # A handler that raises denies, saying why; a declared bridge tool without a handler
        # answers the cell with not_available instead of leaving it waiting.
        with connect(max_tier="exec", approval_handler=boom, bridge_tools=["orphan"]) as c:
            with self.assertRaises(ApprovalDeniedError) as cm:
                c.call("bash", {"command": "echo never"})
            self.assertIn("the approval handler raised RuntimeError: boom", cm.exception.message)
        with connect(max_tier="exec", approval_handler=lambda req: True, bridge_tools=["orphan"]) as c:
            code = "try:\n    tool('orphan', {})\nexcept ToolError as e:\n    r = (e.kind, e.message)\nr"
            value = c.call("eval", {"code": code, "description": EVAL_DESCRIPTION})
            self.assertIn("not_available", value["text"])
            self.assertIn("has no bridge handler", value["text"])

    def test_cancel_ends_a_running_call(self) -> None:
        with connect(max_tier="exec", approval_handler=lambda req: True) as c:
            handle = c.start("bash", {"command": "echo started; sleep 60; echo never"})
            for ev in handle:
                if "output" in ev and "started" in ev["output"]["text"]:
                    handle.cancel()
            with self.assertRaises(CallCancelledError) as cm:
                handle.result()
            self.assertEqual(cm.exception.kind, "cancelled")
            # The connection goes on.
            self.assertEqual(c.call("bash", {"command": "echo after"})["stdout"], "after\n")

    def test_errors_are_typed_by_kind(self) -> None:
        with connect(max_tier="exec", approval_handler=lambda req: True) as c:
            with self.assertRaises(NotFoundError) as cm:
                c.call("process", {"op": "read", "id": "p999999"})
            e = cm.exception
            self.assertIsInstance(e, ToolError)
            self.assertEqual(e.kind, "not_found")
            self.assertIn("p999999", e.message)
            with self.assertRaises(UnknownToolError) as cm2:
                c.call("no_such_tool", {})
            self.assertIn("bash", cm2.exception.hint)

    def test_status_tree_and_ping(self) -> None:
        with connect(max_tier="read") as c:
            status = c.status()
            self.assertEqual(status["protocol_version"], 1)
            self.assertGreaterEqual(status["sessions"], 1)
            self.assertEqual(c.ping(41), 41)
            self.assertIsInstance(c.ping(), int)
            tree = c.tree()
            self.assertEqual(tree["root"]["id"], "toolvisor")
            self.assertIn("sessions", [n["kind"] for n in tree["root"]["children"]])


if __name__ == "__main__":
    unittest.main()
