// The frames of toolvisor's wire protocol (docs/PROTOCOL.md), as the JSON codec spells them.
//
// Each frame is a one-key object `{"<name>": payload}`, or a bare string for the unit frames
// (`"tree"`, `"status"`). `ClientFrameMap` and `DaemonFrameMap` map every frame name to its
// payload (`null` for a unit frame). `MANIFEST` lists the same names and fields as plain JSON:
// the compiler checks it against the interfaces below, and the repository's Rust test
// `clients_frames_in_step` checks it against the Rust types, so a frame added to the protocol
// and missing here fails the suite.

export const PROTOCOL_VERSION = 1;

export type Tier = "read" | "write" | "exec";
export type ClientKind = "harness" | "ops" | "operator";
export type Codec = "bincode" | "json";
export type StreamName = "stdout" | "stderr";
export type NodeState = "starting" | "ready" | "busy" | "backoff" | "failed" | "stopping" | "exited";
export type ErrorKind =
  | "invalid_args" | "unknown_tool" | "not_available" | "policy_denied" | "approval_denied"
  | "surface_denied" | "timeout" | "cancelled" | "resource_failed" | "not_ready" | "busy"
  | "not_found" | "out_of_scope" | "invalid_ref" | "protocol" | "version_mismatch" | "refused"
  | "io" | "no_human" | "kernel_died" | "expired" | "conflict" | "internal" | "shutting_down"
  | "network_unavailable";

/** Any JSON value (a tool's arguments, a result's value, a schema). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

// --- shared structures -------------------------------------------------------------------

export interface ToolErrorData {
  kind: ErrorKind;
  message: string;
  hint: string;
}

export interface Surface {
  max_tier: Tier;
  approvals: boolean;
  questions: boolean;
  bridge_tools: string[];
}

export interface ToolInfo {
  name: string;
  description: string;
  tier: Tier;
  parallel_safe: boolean;
  requires_approval: boolean;
  resource: string;
  schema: Json;
  available: boolean;
  unavailable_reason: string | null;
  destructive: boolean;
  idempotent: boolean;
  open_world: boolean;
  /** JSON Schema of the tool's results (MCP's `outputSchema`); null where not declared. */
  output_schema: Json | null;
  /** A call starts a job that goes on after its answer: how to follow it. */
  follow: JobFollow | null;
  /** A call may run for minutes (eval, bash). */
  long_running: boolean;
}

/** How to follow the job a call starts: poll and stop it (`"{id}"` in their args is the job,
 * named by the result's `id` field), its entry in the poll's `entries` list, the states that
 * end it and the one that means it succeeded. */
export interface JobFollow {
  id: string;
  poll: string;
  poll_args: Json;
  stop: string;
  stop_args: Json;
  entries: string | null;
  ended: string[];
  ok: string;
}

export interface QuestionOption {
  label: string;
  description: string | null;
}

export interface OutputEvent {
  stream: StreamName;
  text: string;
}

export interface ProgressEvent {
  message: string;
  fraction: number | null;
}

/** Something that happened during a call, before its result. */
export type Event = { output: OutputEvent } | { progress: ProgressEvent };

/** The end of a call: its value or its error. */
export type Outcome = { ok: Json } | { err: ToolErrorData };

export interface TreeNode {
  kind: string;
  id: string;
  pid: number | null;
  state: NodeState;
  uptime_ms: number;
  ttl_left_ms: number | null;
  restarts: number;
  mailbox: number;
  rss_bytes: number | null;
  detail: string;
  conversation: string | null;
  last_error: string | null;
  children: TreeNode[];
}

export interface TreeSnapshot {
  generation: number;
  taken_at_ms: number;
  root: TreeNode;
}

export interface StatusReport {
  daemon_version: string;
  protocol_version: number;
  pid: number;
  uptime_ms: number;
  socket: string;
  state_dir: string;
  config: string;
  sessions: number;
  conversations: number;
  lanes: number;
  resources: number;
  rss_bytes: number;
  calls_total: number;
  calls_failed: number;
}

// --- client frames -----------------------------------------------------------------------

export interface Hello {
  protocol_version: number;
  codec: Codec;
  client_kind: ClientKind;
  run_id: string;
  workdir: string;
  surface: Surface;
  run_token: string | null;
}

export interface Call {
  id: number;
  conversation: string;
  tool: string;
  args: Json;
}

export interface Cancel {
  id: number;
}

export interface ApprovalAnswer {
  request_id: number;
  approved: boolean;
  reason: string | null;
}

export interface QuestionAnswer {
  question_id: number;
  selected: string[];
  text: string | null;
  skipped: boolean;
  /** No person saw the question, and why (the asking call answers no_human). */
  no_person: string | null;
}

export interface BridgeResult {
  bridge_id: number;
  outcome: Outcome;
}

export interface ListTools {
  all: boolean;
}

export interface Subscribe {
  topic: "tree";
}

export interface Unsubscribe {
  topic: "tree";
}

export interface Ping {
  nonce: number;
}

export interface EndConversation {
  conversation: string;
}

export interface ClientFrameMap {
  hello: Hello;
  call: Call;
  cancel: Cancel;
  approval_answer: ApprovalAnswer;
  question_answer: QuestionAnswer;
  bridge_result: BridgeResult;
  list_tools: ListTools;
  tree: null;
  subscribe: Subscribe;
  unsubscribe: Unsubscribe;
  status: null;
  ping: Ping;
  end_conversation: EndConversation;
}

// --- daemon frames -----------------------------------------------------------------------

export interface Welcome {
  protocol_version: number;
  daemon_version: string;
  daemon_pid: number;
  session_id: number;
  codec: Codec;
  max_frame: number;
  tools: ToolInfo[];
}

export interface EventFrame {
  id: number;
  event: Event;
}

export interface ResultFrame {
  id: number;
  outcome: Outcome;
}

export interface ApprovalRequest {
  request_id: number;
  call_id: number;
  conversation: string;
  tool: string;
  tier: Tier;
  summary: string;
  args: Json;
}

export interface Question {
  question_id: number;
  run_id: string;
  conversation: string;
  question: string;
  context: string | null;
  options: QuestionOption[];
  allow_free_text: boolean;
  multi_select: boolean;
}

export interface BridgeCall {
  bridge_id: number;
  call_id: number;
  conversation: string;
  tool: string;
  args: Json;
}

export interface Tools {
  tools: ToolInfo[];
}

export interface Pong {
  nonce: number;
}

export interface DaemonFrameMap {
  welcome: Welcome;
  refused: ToolErrorData;
  event: EventFrame;
  result: ResultFrame;
  approval_request: ApprovalRequest;
  question: Question;
  bridge_call: BridgeCall;
  tools: Tools;
  tree: TreeSnapshot;
  tree_update: TreeSnapshot;
  status: StatusReport;
  pong: Pong;
  error: ToolErrorData;
}

/** Structures inside frames, by the Rust type's name (events by their variant name). */
export interface NestedMap {
  Surface: Surface;
  ToolInfo: ToolInfo;
  JobFollow: JobFollow;
  ToolError: ToolErrorData;
  QuestionOption: QuestionOption;
  TreeNode: TreeNode;
  output: OutputEvent;
  progress: ProgressEvent;
}

/** A frame the client sends, as it goes on the wire. */
export type ClientFrame = {
  [K in keyof ClientFrameMap]: ClientFrameMap[K] extends null ? K : { [P in K]: ClientFrameMap[K] };
}[keyof ClientFrameMap];

// The manifest is strict JSON between its markers (the Rust step test parses it); the
// checks after it make the compiler refuse a manifest that differs from the types above.
// manifest:begin
export const MANIFEST = {
  "client": {
    "hello": ["client_kind", "codec", "protocol_version", "run_id", "run_token", "surface", "workdir"],
    "call": ["args", "conversation", "id", "tool"],
    "cancel": ["id"],
    "approval_answer": ["approved", "reason", "request_id"],
    "question_answer": ["no_person", "question_id", "selected", "skipped", "text"],
    "bridge_result": ["bridge_id", "outcome"],
    "list_tools": ["all"],
    "tree": null,
    "subscribe": ["topic"],
    "unsubscribe": ["topic"],
    "status": null,
    "ping": ["nonce"],
    "end_conversation": ["conversation"]
  },
  "daemon": {
    "welcome": ["codec", "daemon_pid", "daemon_version", "max_frame", "protocol_version", "session_id", "tools"],
    "refused": ["hint", "kind", "message"],
    "event": ["event", "id"],
    "result": ["id", "outcome"],
    "approval_request": ["args", "call_id", "conversation", "request_id", "summary", "tier", "tool"],
    "question": ["allow_free_text", "context", "conversation", "multi_select", "options", "question", "question_id", "run_id"],
    "bridge_call": ["args", "bridge_id", "call_id", "conversation", "tool"],
    "tools": ["tools"],
    "tree": ["generation", "root", "taken_at_ms"],
    "tree_update": ["generation", "root", "taken_at_ms"],
    "status": ["calls_failed", "calls_total", "config", "conversations", "daemon_version", "lanes", "pid", "protocol_version", "resources", "rss_bytes", "sessions", "socket", "state_dir", "uptime_ms"],
    "pong": ["nonce"],
    "error": ["hint", "kind", "message"]
  },
  "nested": {
    "Surface": ["approvals", "bridge_tools", "max_tier", "questions"],
    "ToolInfo": ["available", "description", "destructive", "follow", "idempotent", "long_running", "name", "open_world", "output_schema", "parallel_safe", "requires_approval", "resource", "schema", "tier", "unavailable_reason"],
    "JobFollow": ["ended", "entries", "id", "ok", "poll", "poll_args", "stop", "stop_args"],
    "ToolError": ["hint", "kind", "message"],
    "QuestionOption": ["description", "label"],
    "TreeNode": ["children", "conversation", "detail", "id", "kind", "last_error", "mailbox", "pid", "restarts", "rss_bytes", "state", "ttl_left_ms", "uptime_ms"],
    "output": ["stream", "text"],
    "progress": ["fraction", "message"]
  },
  "error_kinds": {
    "approval_denied": null, "busy": null, "cancelled": null, "conflict": null, "expired": null,
    "internal": null, "invalid_args": null, "invalid_ref": null, "io": null, "kernel_died": null,
    "network_unavailable": null, "no_human": null, "not_available": null, "not_found": null, "not_ready": null,
    "out_of_scope": null, "policy_denied": null, "protocol": null, "refused": null,
    "resource_failed": null, "shutting_down": null, "surface_denied": null, "timeout": null,
    "unknown_tool": null, "version_mismatch": null
  }
} as const;
// manifest:end

type SameKeys<T, L extends readonly string[]> = [Exclude<keyof T, L[number]>, Exclude<L[number], keyof T>] extends [never, never]
  ? true
  : false;
type Matches<M, Man> = {
  [K in keyof M | keyof Man]: K extends keyof M
    ? K extends keyof Man
      ? M[K] extends null
        ? Man[K] extends null ? true : false
        : Man[K] extends readonly string[] ? SameKeys<M[K], Man[K]> : false
      : false
    : false;
};
type AllTrue<T> = false extends T[keyof T] ? false : true;
type KeysAre<T, U extends string> = [Exclude<keyof T, U>, Exclude<U, keyof T>] extends [never, never] ? true : false;

// A compile error on one of these lines means MANIFEST and the interfaces disagree.
export const manifestMatchesClientFrames: AllTrue<Matches<ClientFrameMap, typeof MANIFEST.client>> = true;
export const manifestMatchesDaemonFrames: AllTrue<Matches<DaemonFrameMap, typeof MANIFEST.daemon>> = true;
export const manifestMatchesNested: AllTrue<Matches<NestedMap, typeof MANIFEST.nested>> = true;
export const manifestMatchesErrorKinds: KeysAre<typeof MANIFEST.error_kinds, ErrorKind> = true;
