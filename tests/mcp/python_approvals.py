"""`toolvisor mcp --approvals MODE` driven by the official Python SDK, as a client WITHOUT
elicitation (a headless harness): lists the tools with their annotations and calls `bash`.

Usage: python_approvals.py TOOLVISOR_BIN SOCKET WORKDIR MODE [CONFIG]

Prints one JSON object of facts; tests/tests/mcp_approvals.rs judges them.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main():
    binary, socket, workdir, mode = sys.argv[1:5]
    args = ["mcp", "--socket", socket, "--workdir", workdir]
    if mode != "-":
        args += ["--approvals", mode]
    if len(sys.argv) > 5:
        args += ["--config", sys.argv[5]]
    params = StdioServerParameters(command=binary, args=args, env={"PATH": os.environ.get("PATH", "")})
    facts = {}
    async with stdio_client(params) as (rd, wr):
        async with ClientSession(rd, wr) as s:
            await s.initialize()
            tools = (await s.list_tools()).tools
            facts["tools"] = {
                t.name: t.annotations.model_dump(exclude_none=True) if t.annotations else {}
                for t in tools
            }
            marker = os.path.join(os.path.abspath(workdir), "harness-marker-" + mode)
            if "bash" in facts["tools"]:
                r = await s.call_tool("bash", {"command": f"touch {marker}"})
                text = "".join(c.text for c in r.content if c.type == "text")
                facts["bash"] = {"is_error": r.isError, "text": text}
            facts["ran"] = os.path.exists(marker)
    print(json.dumps(facts))


asyncio.run(main())
