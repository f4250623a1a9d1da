"""A harness that quits in the middle of a call, with the official Python SDK over stdio.

Usage: python_quit.py TOOLVISOR_BIN SOCKET WORKDIR
Starts `bash` (approved through elicitation) running `sleep 60`, leaves the session while the
call is in flight (the SDK closes the server's stdin, then terminates it), and prints
`dead` or `alive`: whether that sleep is gone 10 s later.
"""

import asyncio
import os
import sys
import time

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def approve(ctx, params):
    return types.ElicitResult(action="accept", content={"approve": True})


async def main():
    binary, socket, workdir = sys.argv[1:4]
    pidfile = os.path.join(workdir, "quit.pid")
    params = StdioServerParameters(
        command=binary,
        args=["mcp", "--socket", socket, "--workdir", workdir],
        env={"PATH": os.environ.get("PATH", "")},
    )
    try:
        async with stdio_client(params) as (rd, wr):
            async with ClientSession(rd, wr, elicitation_callback=approve) as s:
                await s.initialize()
                call = asyncio.create_task(
                    s.call_tool("bash", {"command": f"echo $$ > {pidfile}; exec sleep 60"})
                )
                deadline = time.monotonic() + 20
                while not (os.path.exists(pidfile) and open(pidfile).read().strip()):
                    if time.monotonic() > deadline:
                        raise SystemExit("the sleeper never wrote its pid")
                    await asyncio.sleep(0.05)
                call.cancel()
    except* anyio.BrokenResourceError:
        # The SDK's own teardown race (modelcontextprotocol/python-sdk#1960): a message the
        # server wrote just before the harness left (the cancelled call's progress or answer)
        # meets the already-closed read stream. The harness has quit either way; what this
        # script checks is what it left running.
        pass
    pid = int(open(pidfile).read())

    def alive():
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("alive" if alive() else "dead")


asyncio.run(main())
