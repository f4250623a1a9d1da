"""A whole MCP session against `toolvisor mcp` with the official Python SDK (`mcp` on PyPI).

Usage: python_session.py stdio TOOLVISOR_BIN SOCKET WORKDIR
       python_session.py http URL WORKDIR

The workdir holds `hello.txt`, `dot.png` and `lib.py` (made by the Rust test). Prints one
JSON object of facts on stdout; the Rust test (tests/tests/mcp_python_sdk.rs) judges them.
"""

import asyncio
import json
import os
import sys
import time

import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from pydantic import AnyUrl

facts = {}
elicitations = []
answers = []  # what the elicitation callback answers next, in order


async def on_elicit(ctx, params):
    elicitations.append({"message": params.message, "schema": params.requestedSchema})
    if not answers:
        return types.ElicitResult(action="decline")
    action, content = answers.pop(0)
    return types.ElicitResult(action=action, content=content)


def text_of(result):
    return "".join(c.text for c in result.content if c.type == "text")


def json_of(result):
    """The whole result, as programs read it (`toolvisor mcp --structured`; the text is the
    model's rendering)."""
    return result.structuredContent


async def session(s: ClientSession, workdir: str):
    await s.initialize()

    tools = await s.list_tools()
    facts["tools"] = sorted(t.name for t in tools.tools)
    read_tool = next(t for t in tools.tools if t.name == "read")
    facts["read_schema_properties"] = sorted(read_tool.inputSchema.get("properties", {}))
    facts["read_description"] = read_tool.description

    r = await s.call_tool("read", {"path": "hello.txt"})
    facts["read_is_error"] = r.isError
    facts["read_text"] = text_of(r)

    r = await s.call_tool("ast_grep", {"pattern": "def $F($$$): $$$", "path": "lib.py"})
    facts["ast_grep_is_error"] = r.isError
    facts["ast_grep_text"] = text_of(r)
    facts["ast_grep_structured"] = r.structuredContent

    r = await s.call_tool("read", {"path": "no/such/file.txt"})
    facts["missing_is_error"] = r.isError
    facts["missing_error"] = json_of(r).get("error")

    r = await s.call_tool("read", {"path": "dot.png"})
    facts["image_types"] = [c.type for c in r.content]
    facts["image_mime"] = [c.mimeType for c in r.content if c.type == "image"]

    # An approval answered yes through elicitation: the command runs.
    marker = os.path.join(workdir, "approved-marker")
    answers.append(("accept", {"approve": True}))
    r = await s.call_tool("bash", {"command": f"touch {marker}"})
    facts["approved_is_error"] = r.isError
    facts["approved_ran"] = os.path.exists(marker)
    # An approval answered no: denied, and the command does not run.
    marker2 = os.path.join(workdir, "declined-marker")
    answers.append(("accept", {"approve": False}))
    r = await s.call_tool("bash", {"command": f"touch {marker2}"})
    facts["declined_error"] = json_of(r).get("error") if r.isError else None
    facts["declined_ran"] = os.path.exists(marker2)

    # Streamed output as progress notifications.
    progress = []

    async def on_progress(p, total, message):
        progress.append({"progress": p, "message": message})

    answers.append(("accept", {"approve": True}))
    r = await s.call_tool(
        "bash",
        {"command": "for i in 1 2 3; do echo line-$i; sleep 0.2; done"},
        progress_callback=on_progress,
    )
    facts["progress_is_error"] = r.isError
    facts["progress"] = progress

    # A large result: projected, with a resource link paged through resources/read.
    answers.append(("accept", {"approve": True}))
    r = await s.call_tool("bash", {"command": "seq 1 30000"})
    links = [c for c in r.content if c.type == "resource_link"]
    facts["large_links"] = [str(c.uri) for c in links]
    if links:
        uri = str(links[0].uri)
        pages, text = 0, ""
        while uri and pages < 100:
            page = await s.read_resource(AnyUrl(uri))
            pages += 1
            c = page.contents[0]
            text += c.text
            meta = c.meta or {}
            uri = meta.get("toolvisor/next")
        facts["large_pages"] = pages
        facts["large_text_ok"] = text == "".join(f"{i}\n" for i in range(1, 30001))
    bad = None
    try:
        await s.read_resource(AnyUrl("toolvisor://result/tr_nosuchref"))
    except Exception as e:  # the SDK raises McpError for a JSON-RPC error
        bad = str(e)
    facts["bad_ref_error"] = bad

    # ask_user through elicitation.
    answers.append(("accept", {"choice": "sqlite"}))
    r = await s.call_tool(
        "ask_user",
        {
            "question": "Which database should the prototype use?",
            "options": [{"label": "sqlite"}, {"label": "postgres"}],
        },
    )
    facts["ask_user"] = json_of(r) if not r.isError else {"error": text_of(r)}

    # An answer outside the options (a client that does not enforce the form's enum): the
    # person is asked again saying why, and after the third the call ends with an error.
    before = len(elicitations)
    for _ in range(3):
        answers.append(("accept", {"choice": "oracle"}))
    r = await asyncio.wait_for(
        s.call_tool(
            "ask_user",
            {
                "question": "Which database, again?",
                "options": [{"label": "sqlite"}, {"label": "postgres"}],
            },
        ),
        60,
    )
    facts["ask_user_outside"] = {
        "is_error": r.isError,
        "text": text_of(r),
        "asked": len(elicitations) - before,
        "second_message": elicitations[before + 1]["message"] if len(elicitations) > before + 1 else "",
    }

    # Cancellation: notifications/cancelled reaches the daemon's cancel, which kills the
    # command. The SDK (1.x) has no cancel call; we send the notification it defines.
    pidfile = os.path.join(workdir, "sleeper.pid")
    answers.append(("accept", {"approve": True}))
    request_id = s._request_id  # the id the next request gets
    task = asyncio.create_task(
        s.call_tool("bash", {"command": f"echo $$ > {pidfile}; exec sleep 60"})
    )
    deadline = time.monotonic() + 20
    while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
        if time.monotonic() > deadline:
            raise SystemExit("the sleeper never wrote its pid")
        await asyncio.sleep(0.05)
    pid = int(open(pidfile).read().strip())
    await s.send_notification(
        types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason="test")
            )
        )
    )
    deadline = time.monotonic() + 20
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        await asyncio.sleep(0.05)
    facts["cancel_killed"] = not os.path.exists(f"/proc/{pid}") or (
        open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    )
    task.cancel()
    try:
        await task
    except BaseException:
        pass

    # eval with the test venv's python: a matplotlib figure comes back as an image.
    answers.append(("accept", {"approve": True}))
    r = await s.call_tool(
        "eval",
        {
            "code": "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\nplt.plot([1,2,3],[1,4,9])\nplt.show()\nprint('plotted')",
            "description": "plot a small line chart for the test",
        },
    )
    facts["eval_is_error"] = r.isError
    facts["eval_types"] = [c.type for c in r.content]
    facts["eval_text_has_plotted"] = "plotted" in text_of(r)

    facts["elicitations"] = len(elicitations)


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        binary, socket, workdir = sys.argv[2], sys.argv[3], sys.argv[4]
        params = StdioServerParameters(
            command=binary,
            args=["mcp", "--socket", socket, "--workdir", workdir, "--structured"],
            env={"PATH": os.environ.get("PATH", "")},
        )
        async with stdio_client(params) as (rd, wr):
            async with ClientSession(rd, wr, elicitation_callback=on_elicit) as s:
                await session(s, workdir)
    else:
        url, workdir = sys.argv[2], sys.argv[3]
        # The listener's bearer token (toolvisor mcp wrote it to a 0600 file).
        headers = {"Authorization": "Bearer " + os.environ["TOOLVISOR_MCP_TOKEN"]}
        async with streamablehttp_client(url, headers=headers) as (rd, wr, _):
            async with ClientSession(rd, wr, elicitation_callback=on_elicit) as s:
                await session(s, workdir)
    print(json.dumps(facts))


asyncio.run(main())
