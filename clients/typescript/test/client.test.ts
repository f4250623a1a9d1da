// The client against a real daemon: `TOOLVISOR_SOCKET` names its socket (the Rust test
// tests/tests/clients_typescript.rs starts the daemon, with eval kernels, compiles this
// package with tsc and runs `node --test`), `TOOLVISOR_TEST_WORKDIR` a directory the calls
// may work in.

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

import {
  ApprovalDeniedError,
  CallCancelledError,
  Client,
  ConnectionProblem,
  type ConnectOptions,
  type Json,
  NotFoundError,
  ToolError,
  UnknownToolError,
  VersionMismatchError,
} from "../src/index.js";

const SOCKET = process.env.TOOLVISOR_SOCKET ?? "";
const WORKDIR = process.env.TOOLVISOR_TEST_WORKDIR ?? process.cwd();
const DESCRIPTION = "run a cell for the client tests";
// Every test is bounded, so a hang fails naming the test instead of stalling the suite.
const LIMIT = { timeout: 60_000 };

if (!SOCKET) throw new Error("TOOLVISOR_SOCKET is not set: run through cargo test --test clients_typescript");

function connect(opts: ConnectOptions = {}): Promise<Client> {
  return Client.connect({ socket: SOCKET, workdir: WORKDIR, ...opts });
}

type Obj = { [key: string]: Json };
const obj = (v: Json): Obj => v as Obj;

test("handshake, tools, and a refused version", LIMIT, async () => {
  const c = await connect({ maxTier: "exec" });
  try {
    assert.equal(c.welcome.protocol_version, 1);
    assert.equal(c.welcome.codec, "json");
    const names = c.tools.map((t) => t.name);
    assert.ok(names.includes("bash"), names.join(","));
    assert.deepEqual((await c.listTools()).map((t) => t.name), names);
    const every = await c.listTools(true);
    assert.ok(every.length >= names.length);
    assert.ok(every.every((t) => "available" in t && "schema" in t));
  } finally {
    await c.close();
  }
  const r = await connect({ maxTier: "read" });
  assert.ok(!r.tools.some((t) => t.name === "bash"));
  await r.close();

  await assert.rejects(connect({ protocolVersion: 2 }), (e: unknown) => {
    assert.ok(e instanceof VersionMismatchError, String(e));
    assert.equal(e.kind, "version_mismatch");
    assert.match(e.message, /version 2/);
    assert.match(e.message, /version 1/);
    assert.ok(e.hint.length > 0);
    return true;
  });
});

test("a call streams its output events, by callback and by async iterator", LIMIT, async () => {
  const c = await connect({ maxTier: "exec", approvalHandler: () => true });
  try {
    const seen: string[] = [];
    const v = obj(
      await c.call("bash", { command: "echo one; sleep 0.3; echo two" }, {
        onEvent: (ev) => {
          if ("output" in ev) seen.push(ev.output.text);
        },
      }),
    );
    assert.equal(v.stdout, "one\ntwo\n");
    assert.equal(seen.join(""), "one\ntwo\n");
    const call = c.start("bash", { command: "echo three" });
    const texts: string[] = [];
    for await (const ev of call) if ("output" in ev) texts.push(ev.output.text);
    assert.equal(texts.join(""), "three\n");
    assert.equal(obj(await call.result()).exit_code, 0);
  } finally {
    await c.close();
  }
});

test("approvals answered yes and no", LIMIT, async () => {
  const asked: string[] = [];
  const c = await connect({
    maxTier: "exec",
    approvalHandler: async (req) => {
      asked.push(req.summary);
      const cmd = obj(req.args).command as string;
      return cmd.startsWith("echo") ? true : { approved: false, reason: "only echo is allowed here" };
    },
  });
  try {
    assert.equal(obj(await c.call("bash", { command: "echo yes" })).stdout, "yes\n");
    const marker = path.join(WORKDIR, "ts-never-created");
    await assert.rejects(c.call("bash", { command: `touch ${marker}` }), (e: unknown) => {
      assert.ok(e instanceof ApprovalDeniedError, String(e));
      assert.match(e.message, /only echo is allowed here/);
      return true;
    });
    assert.ok(!fs.existsSync(marker));
    assert.deepEqual(asked, ["bash: echo yes", `bash: touch ${marker}`]);
  } finally {
    await c.close();
  }
  // A handler that throws denies, saying why.
  const t = await connect({
    maxTier: "exec",
    approvalHandler: () => {
      throw new Error("boom");
    },
  });
  try {
    await assert.rejects(t.call("bash", { command: "echo never" }), (e: unknown) => {
      assert.ok(e instanceof ApprovalDeniedError, String(e));
      assert.match(e.message, /the approval handler threw: boom/);
      return true;
    });
  } finally {
    await t.close();
  }
});

test("a question is answered by the handler of the run's question port", LIMIT, async () => {
  const port = await connect({
    runId: "ts-port",
    clientKind: "operator",
    questionHandler: (q) => {
      assert.equal(q.question, "Which database?");
      return ["sqlite"];
    },
  });
  const asker = await connect({ runId: "ts-port" });
  try {
    await port.ping(); // the port is connected before the question is asked
    const v = obj(
      await asker.call("ask_user", { question: "Which database?", options: [{ label: "postgres" }, { label: "sqlite" }] }),
    );
    assert.deepEqual(v.selected, ["sqlite"]);
  } finally {
    await asker.close();
    await port.close();
  }
});

test("a bridge call is answered by the handler, a thrown ToolError keeps its kind", LIMIT, async () => {
  const seen: string[] = [];
  const c = await connect({
    maxTier: "exec",
    approvalHandler: () => true,
    bridgeTools: ["lookup_ticket"],
    bridgeHandler: async (call) => {
      seen.push(call.tool);
      const args = obj(call.args);
      if (args.fail) throw new NotFoundError("not_found", "no such ticket", "ask for an open ticket");
      // A handler may call tools on the same client while the cell waits.
      const listed = obj(await c.call("process", { op: "list" }));
      return { title: `ticket ${args.n}`, processes: (listed.processes as Json[]).length };
    },
  });
  try {
    const code =
      "t = tool('lookup_ticket', {'n': 7})\n" +
      "try:\n    tool('lookup_ticket', {'n': 8, 'fail': True})\n" +
      "except ToolError as e:\n    err = (e.kind, e.message)\n" +
      "(t['title'], t['processes'], err)";
    const v = obj(await c.call("eval", { code, description: DESCRIPTION }));
    assert.equal(v.status, "ok", JSON.stringify(v));
    assert.equal(v.text, "('ticket 7', 0, ('not_found', 'no such ticket'))\n");
    assert.deepEqual(seen, ["lookup_ticket", "lookup_ticket"]);
  } finally {
    await c.close();
  }
});

test("cancel ends a running call, by the handle and by an AbortSignal", LIMIT, async () => {
  const c = await connect({ maxTier: "exec", approvalHandler: () => true });
  try {
    const call = c.start("bash", { command: "echo started; sleep 60; echo never" });
    for await (const ev of call) if ("output" in ev && ev.output.text.includes("started")) call.cancel();
    await assert.rejects(call.result(), (e: unknown) => {
      assert.ok(e instanceof CallCancelledError, String(e));
      assert.equal(e.kind, "cancelled");
      return true;
    });
    const abort = new AbortController();
    await assert.rejects(
      c.call("bash", { command: "echo go; sleep 60" }, { signal: abort.signal, onEvent: () => abort.abort() }),
      CallCancelledError,
    );
    assert.equal(obj(await c.call("bash", { command: "echo after" })).stdout, "after\n");
  } finally {
    await c.close();
  }
});

test("errors are typed by kind", LIMIT, async () => {
  const c = await connect({ maxTier: "exec", approvalHandler: () => true });
  try {
    await assert.rejects(c.call("process", { op: "read", id: "p999999" }), (e: unknown) => {
      assert.ok(e instanceof NotFoundError && e instanceof ToolError, String(e));
      assert.equal(e.kind, "not_found");
      assert.match(e.message, /p999999/);
      return true;
    });
    await assert.rejects(c.call("no_such_tool", {}), (e: unknown) => {
      assert.ok(e instanceof UnknownToolError, String(e));
      assert.match(e.hint, /bash/);
      return true;
    });
  } finally {
    await c.close();
  }
});

test("status, tree and ping", LIMIT, async () => {
  const c = await connect();
  try {
    const status = await c.status();
    assert.equal(status.protocol_version, 1);
    assert.ok(status.sessions >= 1);
    assert.equal(await c.ping(41), 41);
    assert.equal(typeof (await c.ping()), "number");
    const tree = await c.tree();
    assert.equal(tree.root.id, "toolvisor");
    assert.ok(tree.root.children.some((n) => n.kind === "sessions"));
  } finally {
    await c.close();
  }
});

test("a socket in a directory others can write to is refused before connecting", LIMIT, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tv-client-"));
  fs.chmodSync(dir, 0o777); // anyone could have put (or swap) a socket here
  const sock = path.join(dir, "toolvisor.sock");
  let connections = 0;
  const server = net.createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((resolve) => server.listen(sock, resolve));
  try {
    await assert.rejects(Client.connect({ socket: sock }), (e: unknown) => {
      assert.ok(e instanceof ConnectionProblem, String(e));
      assert.match(e.message, /lets another user replace the socket; nothing was sent/);
      return true;
    });
    // A sticky directory (like /tmp) protects the file: the same check passes.
    fs.chmodSync(dir, 0o1777);
    await assert.rejects(Client.connect({ socket: sock }), ConnectionProblem); // not a daemon
    assert.equal(connections, 1, "only the sticky directory's socket was connected to");
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
