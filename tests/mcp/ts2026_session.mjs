// A 2026-07-28 session against `toolvisor mcp` with the TypeScript SDK's v2 client
// (@modelcontextprotocol/client) over stdio, then a Task over Streamable HTTP with the
// official Tasks extension package (@modelcontextprotocol/ext-tasks).
//
// Usage: node ts2026_session.mjs NODE_MODULES TOOLVISOR SOCKET WORKDIR HTTP_URL TOKEN REPO
// Prints one JSON object of facts; tests/tests/mcp_2026.rs judges them.
const [nodeModules, bin, socket, workdir, url, token, repo] = process.argv.slice(2);
const mcp = `${nodeModules}/@modelcontextprotocol`;
const { Client, StreamableHTTPClientTransport } = await import(`${mcp}/client/dist/index.mjs`);
const { StdioClientTransport } = await import(`${mcp}/client/dist/stdio.mjs`);
const { createTaskSessionFromClient, resultFromTaskOutcome } = await import(
  `${mcp}/ext-tasks/dist/client/index.js`
);
const H = "toolvisor/conversation";
const facts = {};
const text = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

// --- stdio, no session: the conversation is the handle the server gave back.
const client = new Client({ name: "tv-2026", version: "1.0.0" });
client.setVersionNegotiation({ mode: "auto" });
await client.connect(
  new StdioClientTransport({
    command: bin,
    args: ["mcp", "--socket", socket, "--workdir", workdir, "--approvals", "harness"],
    stderr: "inherit",
  }),
);
facts.era = client.getProtocolEra();
facts.version = client.getNegotiatedProtocolVersion();
const listed = await client.listTools();
facts.tools = listed.tools.map((t) => t.name);
let r = await client.callTool({ name: "read", arguments: { path: "hello.txt" } });
facts.read = text(r);
const handle = r._meta?.[H];
facts.handle = handle ?? null;
const meta = { [H]: handle };
await client.callTool({ name: "eval", arguments: { code: "x = 41", description: "set a variable for the next cell" }, _meta: meta });
r = await client.callTool({ name: "eval", arguments: { code: "x + 1", description: "read the variable set before" }, _meta: meta });
facts.eval_same = text(r);
// Over stdio a request naming no handle is the session's own conversation...
r = await client.callTool({ name: "eval", arguments: { code: "'x' in globals()", description: "look for the variable without a handle" } });
facts.eval_unnamed = text(r);
facts.eval_unnamed_handle = r._meta?.[H] ?? null;
// ...and another handle is another conversation.
r = await client.callTool({ name: "eval", arguments: { code: "'x' in globals()", description: "look for the variable elsewhere" }, _meta: { [H]: "another-conversation" } });
facts.eval_other = text(r);
facts.eval_other_handle = r._meta?.[H] ?? null;
r = await client.callTool({ name: "write", arguments: { path: "made-2026.txt", content: "made in 2026\n" }, _meta: meta });
facts.write_is_error = r.isError === true;
facts.write_text = text(r);
await client.close();

// --- Approval by a person on 2026-07-28 (no server-to-client requests): the call answers
// input_required with a form; the SDK fulfils it through its elicitation handler and retries.
const asker = new Client(
  { name: "tv-2026-asker", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
asker.setVersionNegotiation({ mode: "auto" });
const answers = [true, false];
facts.asked = [];
asker.setRequestHandler("elicitation/create", async (request) => {
  facts.asked.push(request.params.message);
  return { action: "accept", content: { approve: answers.shift() } };
});
await asker.connect(
  new StdioClientTransport({ command: bin, args: ["mcp", "--socket", socket, "--workdir", workdir], stderr: "inherit" }),
);
r = await asker.callTool({ name: "bash", arguments: { command: "touch approved-2026" } });
facts.approved_is_error = r.isError === true;
r = await asker.callTool({ name: "bash", arguments: { command: "touch declined-2026" } });
facts.declined_text = text(r);
await asker.close();

// --- Streamable HTTP: download_model answers a task, which ends when the job does.
const headers = { Authorization: `Bearer ${token}` };
const http = new Client({ name: "tv-2026-tasks", version: "1.0.0" });
http.setVersionNegotiation({ mode: "auto" });
await http.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
facts.http_era = http.getProtocolEra();
const framing = {
  protocolVersion: http.getNegotiatedProtocolVersion(),
  clientInfo: { name: "tv-2026-tasks", version: "1.0.0" },
  clientCapabilities: { extensions: { "io.modelcontextprotocol/tasks": {} } },
};
// The Tasks package sends its own JSON-RPC (the SDK's codecs refuse task results).
let rawId = 0;
const rawDispatch = async (request) => {
  // The Tasks package hands over the request; the JSON-RPC envelope is ours.
  const envelope = { jsonrpc: "2.0", id: `raw-${++rawId}`, ...request };
  const res = await fetch(url, {
    method: "POST",
    headers: {
      ...headers,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": framing.protocolVersion,
      // SEP-2243's standard headers, which a 2026 transport sends beside the body.
      "Mcp-Method": request.method,
      ...(request.method === "tools/call" ? { "Mcp-Name": request.params.name } : {}),
      ...(request.method.startsWith("tasks/") ? { "Mcp-Name": request.params.taskId } : {}),
    },
    body: JSON.stringify(envelope),
  });
  const body = await res.text();
  if ((res.headers.get("content-type") || "").includes("text/event-stream")) {
    const messages = body
      .split("\n")
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).trim())
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l));
    return messages.find((m) => m.id === envelope.id) ?? messages[messages.length - 1];
  }
  return JSON.parse(body);
};
const session = createTaskSessionFromClient(http, {
  endpointId: "toolvisor-test",
  rawDispatch,
  v2RequestFraming: framing,
});
try {
  const execution = await session.callTool("download_model", { repo, variant: "Q4_K_M" });
  facts.task_id = execution.taskId ?? execution.task?.taskId ?? null;
  const { outcome } = await execution.settle();
  facts.task_outcome = outcome?.kind ?? outcome?.status ?? null;
  const result = resultFromTaskOutcome(outcome);
  facts.download_text = text(result);
  facts.download_is_error = result.isError === true;
} catch (e) {
  facts.task_error = String(e && e.stack ? e.stack : e);
} finally {
  await session.close();
}
await http.close();
console.log(JSON.stringify(facts));
