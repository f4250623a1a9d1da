// A session against `toolvisor mcp` over stdio with the official TypeScript SDK
// (`@modelcontextprotocol/sdk`): list (every tool has an outputSchema, which the SDK checks
// each result against), calls, an error, an image, an approval through
// elicitation, progress, cancellation by AbortSignal (the SDK's notifications/cancelled), a
// large result paged through its resource, and notifications/tools/list_changed when the
// daemon comes back with another policy.
//
// Usage: node ts_session.mjs NODE_MODULES TOOLVISOR_BIN SOCKET WORKDIR
// Prints `restart-now` and waits for a line on stdin (the Rust test restarts the daemon with
// `bash` denied), then prints one JSON object of facts.

import { existsSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [nodeModules, bin, socket, workdir] = process.argv.slice(2);
const sdk = `${nodeModules}/@modelcontextprotocol/sdk/dist/esm`;
const { Client } = await import(`${sdk}/client/index.js`);
const { StdioClientTransport } = await import(`${sdk}/client/stdio.js`);
const { ElicitRequestSchema, ToolListChangedNotificationSchema } = await import(
  `${sdk}/types.js`
);

const facts = {};
const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const client = new Client(
  { name: "toolvisor-ts-test", version: "0.0.1" },
  { capabilities: { elicitation: {} } },
);
let approveNext = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  const yes = approveNext.shift() ?? false;
  return { action: "accept", content: { approve: yes } };
});
let listChanged = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
  listChanged += 1;
});

const transport = new StdioClientTransport({
  command: bin,
  // --structured: typed results, and the tool list with each tool's outputSchema.
  args: ["mcp", "--socket", socket, "--workdir", workdir, "--poll", "0.3", "--structured"],
  env: { PATH: process.env.PATH },
  stderr: "inherit",
});
await client.connect(transport);

const listed = (await client.listTools()).tools;
let tools = listed.map((t) => t.name);
facts.tools_before = tools.includes("bash");
// Every tool declares its results; from here on the SDK checks each call's
// structuredContent against its tool's outputSchema and throws on a mismatch.
facts.without_output_schema = listed.filter((t) => t.outputSchema?.type !== "object").map((t) => t.name);

let r = await client.callTool({ name: "read", arguments: { path: "hello.txt" } });
facts.read = text(r).includes("hello from a file");

r = await client.callTool({ name: "read", arguments: { path: "nope.txt" } });
facts.error_kind = r.isError ? r.structuredContent.error.kind : null;

r = await client.callTool({ name: "read", arguments: { path: "dot.png" } });
facts.image = r.content.filter((c) => c.type === "image").map((c) => c.mimeType);

approveNext.push(true);
const progress = [];
r = await client.callTool(
  { name: "bash", arguments: { command: "echo one; sleep 0.2; echo two" } },
  undefined,
  { onprogress: (p) => progress.push(p.message) },
);
facts.bash_ok = !r.isError;
facts.progress = progress.join("");

approveNext.push(true);
r = await client.callTool({ name: "bash", arguments: { command: "seq 1 30000" } });
const link = r.content.find((c) => c.type === "resource_link");
let whole = "";
let uri = link?.uri;
let pages = 0;
while (uri && pages < 100) {
  const page = await client.readResource({ uri });
  pages += 1;
  whole += page.contents[0].text;
  uri = page.contents[0]._meta?.["toolvisor/next"];
}
let expected = "";
for (let i = 1; i <= 30000; i++) expected += `${i}\n`;
facts.large_ok = whole === expected;
facts.large_pages = pages;

// Cancellation: aborting the request sends notifications/cancelled.
approveNext.push(true);
const pidfile = `${workdir}/ts-sleeper.pid`;
const ac = new AbortController();
const pending = client
  .callTool(
    { name: "bash", arguments: { command: `echo $$ > ${pidfile}; exec sleep 60` } },
    undefined,
    { signal: ac.signal },
  )
  .catch((e) => e);
for (let i = 0; i < 400 && !(existsSync(pidfile) && readFileSync(pidfile, "utf8").trim()); i++) {
  await sleep(50);
}
const pid = readFileSync(pidfile, "utf8").trim();
ac.abort("test cancels");
await pending;
const gone = () =>
  !existsSync(`/proc/${pid}`) ||
  readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim().startsWith("Z");
for (let i = 0; i < 400 && !gone(); i++) await sleep(50);
facts.cancel_killed = gone();

// list_changed: the daemon restarts with `bash` denied by policy.
console.log("restart-now");
const rl = createInterface({ input: process.stdin });
await new Promise((resolve) => rl.once("line", resolve));
rl.close();
for (let i = 0; i < 600 && listChanged === 0; i++) await sleep(50);
facts.list_changed = listChanged;
tools = (await client.listTools()).tools.map((t) => t.name);
facts.tools_after_has_bash = tools.includes("bash");
facts.tools_after_has_read = tools.includes("read");

await client.close();
console.log(JSON.stringify(facts));
