// The client: one Unix socket in the JSON codec. Every frame the daemon sends is routed as it
// arrives: events and results to their call, replies to their waiter; approval requests,
// questions and bridge calls run the handlers given at connect (sync or async) and their
// answers are sent back, so a handler may itself call tools on the same client.

import * as fs from "node:fs";
import * as net from "node:net";
import * as nodePath from "node:path";

import { ConnectionProblem, ToolError } from "./errors.js";
import {
  PROTOCOL_VERSION,
  type ApprovalRequest,
  type BridgeCall,
  type ClientFrame,
  type ClientKind,
  type Event,
  type Json,
  type Outcome,
  type Question,
  type StatusReport,
  type Tier,
  type ToolErrorData,
  type ToolInfo,
  type TreeSnapshot,
  type Welcome,
} from "./frames.js";

/** Until the Welcome tells the real cap, accept what the daemon's default cap allows. */
const DEFAULT_MAX_FRAME = 16 * 1024 * 1024;

/** An approval handler's answer: a boolean, or a decision with the reason for a denial. */
export type ApprovalReply = boolean | { approved: boolean; reason?: string | null };
/** The answer to an `ask_user` question: labels among its options, free text, or a skip. */
export interface Answer {
  selected?: string[];
  text?: string | null;
  skipped?: boolean;
}
/** A question handler returns an Answer, a label list, a text, or null (skip). */
export type QuestionReply = Answer | string[] | string | null;

type MaybePromise<T> = T | Promise<T>;

export interface ConnectOptions {
  /** Socket path; default `$TOOLVISOR_SOCKET`, else the daemon's default path. */
  socket?: string;
  /** Highest tier this client may see and call (default `"read"`). */
  maxTier?: Tier;
  /** Answers approval requests; its presence claims `approvals` in the surface. */
  approvalHandler?: (request: ApprovalRequest) => MaybePromise<ApprovalReply>;
  /** Answers `ask_user` questions; its presence claims `questions` in the surface. */
  questionHandler?: (question: Question) => MaybePromise<QuestionReply>;
  /** Tools this client runs itself: `tool()` calls of them from an eval cell come back here. */
  bridgeTools?: string[];
  /** Runs a bridge call: return its value, or throw (a `ToolError` keeps its kind). */
  bridgeHandler?: (call: BridgeCall) => MaybePromise<Json>;
  /** Override what the handlers claim. */
  approvals?: boolean;
  questions?: boolean;
  runId?: string;
  /** The run's working directory (default: `process.cwd()`). */
  workdir?: string;
  /** The conversation of calls that name none (default `"default"`). */
  conversation?: string;
  clientKind?: ClientKind;
  runToken?: string | null;
  /** Frame-level `error` frames (an answer that matched nothing, a withdrawn question). */
  onError?: (error: ToolError) => void;
  /** Tree updates after `subscribeTree()`. */
  onTreeUpdate?: (tree: TreeSnapshot) => void;
  protocolVersion?: number;
}

export interface CallOptions {
  conversation?: string;
  /** Each streamed event, as it arrives. */
  onEvent?: (event: Event) => void;
  /** Aborting it cancels the call on the daemon. */
  signal?: AbortSignal;
}

/** `$TOOLVISOR_SOCKET`, else `$XDG_RUNTIME_DIR/toolvisor.sock`, else `/tmp/toolvisor-$UID/toolvisor.sock`. */
export function defaultSocket(): string {
  const env = process.env.TOOLVISOR_SOCKET;
  if (env) return env;
  const runtime = process.env.XDG_RUNTIME_DIR;
  if (runtime) return nodePath.join(runtime, "toolvisor.sock");
  return `/tmp/toolvisor-${process.getuid?.() ?? 0}/toolvisor.sock`;
}

/**
 * Refuse a socket another user could be serving, before anything is sent. Node cannot read
 * SO_PEERCRED, so this checks what decides who can serve the path: the socket file must
 * belong to this user (or root), and its directory must belong to this user (or root) and be
 * writable by nobody else unless it is sticky (like /tmp), so no other user can have put the
 * socket there or swap it before the connect. Returns the resolved path to connect to.
 */
export function checkServerSocket(path: string): string {
  const uid = process.geteuid?.();
  if (uid === undefined) throw new ConnectionProblem(`cannot check who serves ${path}: no geteuid on this platform`);
  let real: string;
  let st: fs.Stats;
  try {
    real = fs.realpathSync(path);
    st = fs.statSync(real);
  } catch (e) {
    throw new ConnectionProblem(
      `cannot connect to the toolvisor daemon at ${path}: ${(e as Error).message} (is \`toolvisor serve\` running on that socket?)`,
    );
  }
  if (!st.isSocket()) throw new ConnectionProblem(`${path} is not a socket (is it the daemon's socket path?)`);
  if (st.uid !== uid && st.uid !== 0) {
    throw new ConnectionProblem(
      `refusing the server at ${path}: its socket belongs to uid ${st.uid} and this client runs as uid ${uid}; nothing was sent (point the client at your own daemon's socket)`,
    );
  }
  const dir = nodePath.dirname(real);
  const ds = fs.statSync(dir);
  const othersWrite = (ds.mode & 0o022) !== 0;
  const sticky = (ds.mode & 0o1000) !== 0;
  if ((ds.uid !== uid && ds.uid !== 0) || (othersWrite && !sticky)) {
    throw new ConnectionProblem(
      `refusing the server at ${path}: its directory ${dir} (uid ${ds.uid}, mode ${(ds.mode & 0o7777).toString(8)}) lets another user replace the socket; nothing was sent`,
    );
  }
  return real;
}

function outcomeValue(outcome: Outcome): Json {
  if ("ok" in outcome) return outcome.ok;
  throw ToolError.fromWire(outcome.err);
}

/** A call in flight: `for await (const ev of call)` streams its events; `await call.result()`
 * resolves to its value or rejects with the `ToolError` subclass of its kind. */
export class ToolCall implements AsyncIterable<Event> {
  private readonly queue: Event[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private readonly outcome: Promise<Outcome>;
  private settle!: (o: Outcome) => void;
  private fail!: (e: Error) => void;
  private failure: Error | null = null;

  constructor(
    private readonly client: Client,
    readonly id: number,
    readonly tool: string,
    readonly conversation: string,
  ) {
    this.outcome = new Promise<Outcome>((resolve, reject) => {
      this.settle = resolve;
      this.fail = reject;
    });
    // A caller that only iterates must not see an unhandled rejection.
    this.outcome.catch(() => undefined);
  }

  /** True once the result (or the connection's failure) has arrived. */
  get done(): boolean {
    return this.ended;
  }

  /** @internal */
  _event(ev: Event): void {
    this.queue.push(ev);
    this.wake?.();
  }

  /** @internal */
  _end(outcome: Outcome | null, failure?: Error): void {
    if (this.ended) return;
    this.ended = true;
    if (outcome) this.settle(outcome);
    else {
      this.failure = failure ?? new ConnectionProblem("the connection ended");
      this.fail(this.failure);
    }
    this.wake?.();
  }

  async *events(): AsyncGenerator<Event> {
    for (;;) {
      const ev = this.queue.shift();
      if (ev !== undefined) {
        yield ev;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((r) => (this.wake = r));
      this.wake = null;
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<Event> {
    return this.events();
  }

  async result(): Promise<Json> {
    return outcomeValue(await this.outcome);
  }

  /** Ask the daemon to stop the call; its result becomes `CallCancelledError`. */
  cancel(): void {
    if (!this.ended) this.client._send({ cancel: { id: this.id } });
  }
}

interface Waiter<T> {
  resolve: (v: T) => void;
  reject: (e: Error) => void;
}

/** A connection to the toolvisor daemon in the JSON codec. Use `Client.connect`. */
export class Client {
  /** The daemon's welcome: version, session id, frame cap, the tools this client may call. */
  welcome!: Welcome;
  /** Frame-level `error` frames received so far. */
  readonly errors: ToolError[] = [];
  readonly path: string;
  conversation: string;

  private readonly sock: net.Socket;
  private readonly opts: ConnectOptions;
  private maxFrame = DEFAULT_MAX_FRAME;
  private chunks: Buffer[] = [];
  private have = 0;
  private need: number | null = null;
  private nextId = 1;
  private readonly calls = new Map<number, ToolCall>();
  private readonly replies: Record<"tools" | "status" | "tree", Waiter<unknown>[]> = { tools: [], status: [], tree: [] };
  private readonly pongs = new Map<number, Waiter<number>>();
  private failure: ConnectionProblem | null = null;
  private onWelcome: Waiter<Welcome> | null = null;

  private constructor(sock: net.Socket, path: string, opts: ConnectOptions) {
    this.sock = sock;
    this.path = path;
    this.opts = opts;
    this.conversation = opts.conversation ?? "default";
    sock.on("data", (chunk: Buffer) => this.onData(chunk));
    sock.on("error", (e) => this.fail(new ConnectionProblem(`the connection to the daemon at ${path} failed: ${e.message}`)));
    sock.on("close", () => this.fail(new ConnectionProblem(`the daemon at ${path} closed the connection`)));
  }

  /** Connect, check the server's socket (see `checkServerSocket`), and say Hello. A refused
   * handshake rejects with the `ToolError` subclass of its kind (e.g. `VersionMismatchError`). */
  static async connect(opts: ConnectOptions = {}): Promise<Client> {
    const path = opts.socket ?? defaultSocket();
    const real = checkServerSocket(path);
    const sock = net.createConnection({ path: real });
    await new Promise<void>((resolve, reject) => {
      sock.once("connect", resolve);
      sock.once("error", (e) =>
        reject(new ConnectionProblem(`cannot connect to the toolvisor daemon at ${path}: ${e.message} (is \`toolvisor serve\` running on that socket?)`)),
      );
    });
    const client = new Client(sock, path, opts);
    const welcome = new Promise<Welcome>((resolve, reject) => (client.onWelcome = { resolve, reject }));
    client._send({
      hello: {
        protocol_version: opts.protocolVersion ?? PROTOCOL_VERSION,
        codec: "json",
        client_kind: opts.clientKind ?? "harness",
        run_id: opts.runId ?? "",
        workdir: opts.workdir ?? process.cwd(),
        surface: {
          max_tier: opts.maxTier ?? "read",
          approvals: opts.approvals ?? opts.approvalHandler !== undefined,
          questions: opts.questions ?? opts.questionHandler !== undefined,
          bridge_tools: opts.bridgeTools ?? [],
        },
        run_token: opts.runToken ?? null,
      },
    });
    try {
      client.welcome = await welcome;
    } catch (e) {
      sock.destroy();
      throw e;
    }
    client.maxFrame = client.welcome.max_frame;
    return client;
  }

  /** The tools the welcome listed (those this client may call). */
  get tools(): ToolInfo[] {
    return this.welcome.tools;
  }

  /** Send a call and return at once; stream and await it through the `ToolCall`. */
  start(tool: string, args: { [key: string]: Json } = {}, options: CallOptions = {}): ToolCall {
    this.checkOpen();
    const id = this.nextId++;
    const conversation = options.conversation ?? this.conversation;
    const call = new ToolCall(this, id, tool, conversation);
    this.calls.set(id, call);
    this._send({ call: { id, conversation, tool, args } });
    if (options.signal) {
      const signal = options.signal;
      if (signal.aborted) call.cancel();
      else signal.addEventListener("abort", () => call.cancel(), { once: true });
    }
    return call;
  }

  /** Call a tool and resolve to its value; `onEvent` gets each streamed event. A failure
   * rejects with the `ToolError` subclass of its kind. */
  async call(tool: string, args: { [key: string]: Json } = {}, options: CallOptions = {}): Promise<Json> {
    const call = this.start(tool, args, options);
    for await (const ev of call) options.onEvent?.(ev);
    return call.result();
  }

  /** Cancel the call with this id (see also `ToolCall.cancel`). */
  cancel(callId: number): void {
    this._send({ cancel: { id: callId } });
  }

  /** The tools this client may call now; with `all` every registered tool, each with
   * `available` and `unavailable_reason`. */
  async listTools(all = false): Promise<ToolInfo[]> {
    const body = (await this.request("tools", { list_tools: { all } })) as { tools: ToolInfo[] };
    return body.tools;
  }

  async status(): Promise<StatusReport> {
    return (await this.request("status", "status")) as StatusReport;
  }

  async tree(): Promise<TreeSnapshot> {
    return (await this.request("tree", "tree")) as TreeSnapshot;
  }

  /** Tree updates then go to `onTreeUpdate`. */
  subscribeTree(): void {
    this._send({ subscribe: { topic: "tree" } });
  }

  unsubscribeTree(): void {
    this._send({ unsubscribe: { topic: "tree" } });
  }

  /** Round trip; resolves to the nonce the daemon echoed. Frames are handled in order, so a
   * ping after an answer resolves once that answer was processed. */
  async ping(nonce?: number): Promise<number> {
    this.checkOpen();
    const n = nonce ?? this.nextId++;
    const p = new Promise<number>((resolve, reject) => this.pongs.set(n, { resolve, reject }));
    this._send({ ping: { nonce: n } });
    return p;
  }

  /** Close the connection (calls in flight run to their end on the daemon). */
  async close(): Promise<void> {
    if (this.sock.destroyed) return;
    await new Promise<void>((resolve) => {
      this.sock.once("close", () => resolve());
      this.sock.end();
      this.sock.destroy();
    });
  }

  // --- the socket ------------------------------------------------------------------------

  /** @internal */
  _send(frame: ClientFrame): void {
    this.checkOpen();
    const payload = Buffer.from(JSON.stringify(frame), "utf8");
    const head = Buffer.alloc(4);
    head.writeUInt32BE(payload.length, 0);
    this.sock.write(Buffer.concat([head, payload]));
  }

  private checkOpen(): void {
    if (this.failure) throw this.failure;
  }

  private request(kind: "tools" | "status" | "tree", frame: ClientFrame): Promise<unknown> {
    this.checkOpen();
    const p = new Promise<unknown>((resolve, reject) => this.replies[kind].push({ resolve, reject }));
    this._send(frame);
    return p;
  }

  private take(n: number): Buffer {
    const first = this.chunks[0]!;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
    } else {
      const all = Buffer.concat(this.chunks, this.have);
      out = all.subarray(0, n);
      this.chunks = all.length > n ? [all.subarray(n)] : [];
    }
    this.have -= n;
    return out;
  }

  private onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.have += chunk.length;
    try {
      for (;;) {
        if (this.need === null) {
          if (this.have < 4) return;
          const length = this.take(4).readUInt32BE(0);
          if (length > this.maxFrame) {
            throw new ConnectionProblem(`the daemon announced a frame of ${length} bytes, above the cap of ${this.maxFrame} bytes`);
          }
          this.need = length;
        }
        if (this.have < this.need) return;
        const payload = this.take(this.need);
        this.need = null;
        let value: unknown;
        try {
          value = JSON.parse(payload.toString("utf8"));
        } catch (e) {
          throw new ConnectionProblem(`the daemon sent a frame that is not JSON: ${(e as Error).message}`);
        }
        if (typeof value === "string") this.dispatch(value, null);
        else if (value && typeof value === "object" && Object.keys(value).length === 1) {
          const [name, body] = Object.entries(value)[0]!;
          this.dispatch(name, body);
        } else throw new ConnectionProblem(`the daemon sent a frame of an unknown shape: ${payload.toString("utf8").slice(0, 200)}`);
      }
    } catch (e) {
      this.fail(e instanceof ConnectionProblem ? e : new ConnectionProblem(String(e)));
      this.sock.destroy();
    }
  }

  /** The connection is gone: every waiter learns it. */
  private fail(problem: ConnectionProblem): void {
    if (this.failure) return;
    this.failure = problem;
    this.onWelcome?.reject(problem);
    this.onWelcome = null;
    for (const call of this.calls.values()) call._end(null, problem);
    this.calls.clear();
    for (const queue of Object.values(this.replies)) for (const w of queue.splice(0)) w.reject(problem);
    for (const w of this.pongs.values()) w.reject(problem);
    this.pongs.clear();
  }

  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private dispatch(name: string, body: any): void {
    if (this.onWelcome) {
      const w = this.onWelcome;
      this.onWelcome = null;
      if (name === "welcome") w.resolve(body as Welcome);
      else if (name === "refused") w.reject(ToolError.fromWire(body as ToolErrorData));
      else w.reject(new ConnectionProblem(`expected a welcome or refused frame after the hello, got ${JSON.stringify(name)}`));
      return;
    }
    switch (name) {
      case "event":
        this.calls.get(body.id)?._event(body.event as Event);
        break;
      case "result": {
        const call = this.calls.get(body.id);
        if (call) {
          this.calls.delete(body.id);
          call._end(body.outcome as Outcome);
        }
        break;
      }
      case "approval_request":
        void this.answerApproval(body as ApprovalRequest);
        break;
      case "question":
        void this.answerQuestion(body as Question);
        break;
      case "bridge_call":
        void this.answerBridge(body as BridgeCall);
        break;
      case "tools":
      case "status":
      case "tree":
        this.replies[name].shift()?.resolve(body);
        break;
      case "tree_update":
        this.opts.onTreeUpdate?.(body as TreeSnapshot);
        break;
      case "pong": {
        const w = this.pongs.get(body.nonce);
        this.pongs.delete(body.nonce);
        w?.resolve(body.nonce as number);
        break;
      }
      case "error": {
        const err = ToolError.fromWire(body as ToolErrorData);
        this.errors.push(err);
        this.opts.onError?.(err);
        break;
      }
      default:
      // Frames of a newer daemon that this client does not know are ignored.
    }
  }

  private sendIfOpen(frame: ClientFrame): void {
    if (!this.failure) this._send(frame);
  }

  private async answerApproval(req: ApprovalRequest): Promise<void> {
    let approved = false;
    let reason: string | null = "this client has no approval handler";
    if (this.opts.approvalHandler) {
      try {
        const r = await this.opts.approvalHandler(req);
        if (typeof r === "boolean") {
          approved = r;
          reason = null;
        } else {
          approved = r.approved;
          reason = r.reason ?? null;
        }
      } catch (e) {
        reason = `the approval handler threw: ${(e as Error).message}`;
      }
    }
    if (!approved && reason === null) reason = "declined by the client's approval handler";
    this.sendIfOpen({ approval_answer: { request_id: req.request_id, approved, reason } });
  }

  private async answerQuestion(q: Question): Promise<void> {
    let reply: QuestionReply = null;
    if (this.opts.questionHandler) reply = await this.opts.questionHandler(q);
    let answer: Answer;
    if (reply === null) answer = { skipped: true };
    else if (typeof reply === "string") answer = { text: reply };
    else if (Array.isArray(reply)) answer = { selected: reply };
    else answer = reply;
    this.sendIfOpen({
      question_answer: {
        question_id: q.question_id,
        selected: answer.selected ?? [],
        text: answer.text ?? null,
        skipped: answer.skipped ?? false,
        no_person: null,
      },
    });
  }

  private async answerBridge(call: BridgeCall): Promise<void> {
    let outcome: Outcome;
    if (!this.opts.bridgeHandler) {
      outcome = {
        err: {
          kind: "not_available",
          message: `this client declared ${JSON.stringify(call.tool)} as a bridge tool but has no bridge handler`,
          hint: "pass bridgeHandler when connecting",
        },
      };
    } else {
      try {
        outcome = { ok: await this.opts.bridgeHandler(call) };
      } catch (e) {
        outcome = {
          err:
            e instanceof ToolError
              ? e.toWire()
              : {
                  kind: "internal",
                  message: `the client's bridge handler for ${JSON.stringify(call.tool)} threw: ${(e as Error)?.message ?? String(e)}`,
                  hint: "fix the bridge handler",
                },
        };
      }
    }
    this.sendIfOpen({ bridge_result: { bridge_id: call.bridge_id, outcome } });
  }
}
