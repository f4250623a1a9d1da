#!/usr/bin/env python3
"""A scripted model endpoint for driving real agent harnesses headless (standard library only).

Serves, on loopback:
  POST /v1/messages                 Anthropic Messages API (SSE when "stream": true, else JSON)
  POST /v1/messages/count_tokens    Anthropic token counting (a rough estimate)
  POST /v1/responses                OpenAI Responses API (SSE when "stream": true, else JSON)
  POST /v1/chat/completions         OpenAI Chat Completions (SSE when "stream": true, else JSON)
  GET  /v1/models                   a one-model list
  anything else                     404 {"error": ...} (recorded, so a new call shows up)

The script (JSON) is a list of turns, or {"turns": [...], "side_reply": "..."}; a turn is
  {"tool": "read", "args": {"path": "x.py"}}    call the MCP tool `read` with these arguments
  {"final": "TEXT"}                             answer TEXT and stop
Tools are named by their MCP name; the endpoint maps the name to what the harness advertised
(Claude Code `mcp__toolvisor__read`, Codex a namespace `mcp__toolvisor__` + `read`, ...):
an advertised name equal to it, else one ending in `__<name>` (preferring one naming the server).

Which turn a request gets: the number of tool calls already in the conversation it carries (so a
retried request gets the same turn again, never skips one). Requests that advertise no tool of the
server (`--server`, default toolvisor) are side requests (titles, quota probes, summaries): they
get `side_reply` and do not take a turn.

Every request is appended to --record (JSONL): method, path, headers, body, plus "kind"
(turn/side/other), "turn", the "tool_names" advertised, the "reply" sent, and "tool_results":
the results the harness sent back (tool_result blocks, function_call_output items, role=tool).

Usage: endpoint.py --script S.json --record R.jsonl [--port 0] [--port-file F] [--server toolvisor]
       (prints the port on stdout when ready)
       endpoint.py check --script S.json --record R.jsonl [--expect REGEX]... [--reject REGEX]...
       (exit 0 when every turn was served and the tool results sent back match; JSON summary on stdout)
"""
import argparse
import gzip
import json
import os
import re
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
SCRIPT = []
SIDE_REPLY = "ok"
LOCK = threading.Lock()
COUNTER = {"n": 0}


def next_id(prefix):
    with LOCK:
        COUNTER["n"] += 1
        return f"{prefix}_{COUNTER['n']:04d}"


def record(entry):
    entry["t"] = time.time()
    with LOCK:
        with open(ARGS.record, "a") as f:
            f.write(json.dumps(entry) + "\n")


# ---------------------------------------------------------------- what the harness advertised

def anthropic_tool_names(body):
    return [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")]


def responses_tools(body):
    """[(name, namespace_or_None)] of the Responses API tools, namespaces flattened."""
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            for sub in t.get("tools") or []:
                if isinstance(sub, dict) and sub.get("name"):
                    out.append((sub["name"], t.get("name")))
        elif t.get("name"):
            out.append((t["name"], None))
        elif isinstance(t.get("function"), dict):
            out.append((t["function"].get("name"), None))
    return out


def chat_tool_names(body):
    out = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            f = t.get("function") or {}
            if f.get("name"):
                out.append(f["name"])
    return out


def pick_tool(mcp_name, advertised):
    """advertised: [(name, namespace)]; returns (name, namespace) or None."""
    server = ARGS.server
    exact = [a for a in advertised if a[0] == mcp_name and (a[1] is None or server in (a[1] or ""))]
    if exact:
        return exact[0]
    suffix = [a for a in advertised if (a[0] or "").endswith("__" + mcp_name)]
    suffix.sort(key=lambda a: server not in (a[0] or ""))
    return suffix[0] if suffix else None


def serves_our_server(advertised):
    s = ARGS.server
    return any(s in (n or "") or s in (ns or "") for n, ns in advertised)


def turn_for(n_calls_so_far):
    if n_calls_so_far < len(SCRIPT):
        return n_calls_so_far, SCRIPT[n_calls_so_far]
    return n_calls_so_far, {"final": "(script exhausted)"}


# ---------------------------------------------------------------- history: calls made, results sent

def anthropic_history(body):
    calls, results = 0, []
    for m in body.get("messages") or []:
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, dict):
                continue
            if m.get("role") == "assistant" and b.get("type") == "tool_use" and b.get("name") != "ToolSearch":
                calls += 1
            if b.get("type") == "tool_result":
                results.append({"tool_use_id": b.get("tool_use_id"), "is_error": b.get("is_error", False),
                                "content": b.get("content")})
    return calls, results


def responses_history(body):
    calls, results = 0, []
    inp = body.get("input")
    if isinstance(inp, list):
        for it in inp:
            if not isinstance(it, dict):
                continue
            if it.get("type") in ("function_call", "custom_tool_call"):
                calls += 1
            if it.get("type") in ("function_call_output", "custom_tool_call_output"):
                results.append({"call_id": it.get("call_id"), "output": it.get("output")})
    return calls, results


def chat_history(body):
    calls, results = 0, []
    for m in body.get("messages") or []:
        if m.get("role") == "assistant":
            calls += len(m.get("tool_calls") or [])
        if m.get("role") == "tool":
            results.append({"tool_call_id": m.get("tool_call_id"), "content": m.get("content")})
    return calls, results


# ---------------------------------------------------------------- the handler

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "scripted-endpoint/1"

    def log_message(self, fmt, *a):
        if ARGS.verbose:
            sys.stderr.write("endpoint: " + (fmt % a) + "\n")

    # -- plumbing
    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(size)
                self.rfile.readline()
        else:
            raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            raw = gzip.decompress(raw)
        elif enc == "deflate":
            raw = zlib.decompress(raw)
        elif enc:
            return raw, None, f"unsupported Content-Encoding {enc}"
        try:
            return raw, (json.loads(raw) if raw else {}), None
        except ValueError as e:
            return raw, None, f"bad json: {e}"

    def send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", next_id("req"))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", next_id("req"))
        self.end_headers()

    def chunk(self, text):
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def sse(self, event, obj):
        self.chunk((f"event: {event}\n" if event else "") + "data: " + json.dumps(obj) + "\n\n")

    def end_sse(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def base_entry(self, body, raw=None):
        return {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                "body": body if body is not None else (raw or b"").decode("utf-8", "replace")}

    # -- routes
    def do_GET(self):
        entry = self.base_entry({})
        entry["kind"] = "other"
        path = self.path.split("?")[0]
        if path.rstrip("/").endswith("/models"):
            obj = {"object": "list", "data": [{"id": "scripted", "object": "model", "created": 0,
                                               "owned_by": "lab", "type": "model", "display_name": "scripted"}],
                   "models": [], "has_more": False}
            entry["reply"] = {"status": 200}
            record(entry)
            return self.send_json(200, obj)
        entry["reply"] = {"status": 404}
        record(entry)
        self.send_json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        raw, body, err = self.read_body()
        path = self.path.split("?")[0].rstrip("/")
        entry = self.base_entry(body, raw)
        if err:
            entry.update(kind="other", reply={"status": 400, "error": err})
            record(entry)
            return self.send_json(400, {"error": {"type": "invalid_request_error", "message": err}})
        if path.endswith("/messages/count_tokens"):
            n = max(1, len(raw) // 4)
            entry.update(kind="other", reply={"status": 200, "input_tokens": n})
            record(entry)
            return self.send_json(200, {"input_tokens": n})
        if path.endswith("/messages"):
            return self.route_anthropic(body, entry)
        if path.endswith("/responses"):
            return self.route_responses(body, entry)
        if path.endswith("/chat/completions"):
            return self.route_chat(body, entry)
        entry.update(kind="other", reply={"status": 404})
        record(entry)
        self.send_json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})

    # -- Anthropic Messages
    def route_anthropic(self, body, entry):
        names = anthropic_tool_names(body)
        advertised = [(n, None) for n in names]
        calls, results = anthropic_history(body)
        # Claude Code may defer MCP tools behind ToolSearch (ENABLE_TOOL_SEARCH unset): their names are
        # then only listed in the system prompt, and a ToolSearch "select:" call loads them.
        system = json.dumps(body.get("system") or "") + json.dumps(body.get("messages") or [])
        deferred = sorted(set(re.findall(r"mcp__%s__[A-Za-z0-9_]+" % re.escape(ARGS.server), system)) - set(names))
        entry.update(tool_names=names, tool_results=results)
        if deferred and "ToolSearch" in names:
            entry["deferred_tool_names"] = deferred
        if serves_our_server(advertised) or ("ToolSearch" in names and deferred):
            idx, turn = turn_for(calls)
            entry.update(kind="turn", turn=idx)
        else:
            turn = {"final": SIDE_REPLY}
            entry.update(kind="side")
        blocks, stop = [], "end_turn"
        if "tool" in turn:
            picked = pick_tool(turn["tool"], advertised)
            lazy = pick_tool(turn["tool"], [(n, None) for n in entry.get("deferred_tool_names", [])])
            if picked is None and lazy is not None:
                # load the deferred tool first; the turn stays the same (ToolSearch calls are not counted)
                blocks.append({"type": "tool_use", "id": next_id("toolu"), "name": "ToolSearch",
                               "input": {"query": "select:" + lazy[0], "max_results": 1}})
                stop = "tool_use"
                entry["tool_search"] = lazy[0]
            elif picked is None:
                turn = {"final": f"(scripted tool {turn['tool']!r} not advertised)"}
            else:
                blocks.append({"type": "tool_use", "id": next_id("toolu"), "name": picked[0],
                               "input": turn.get("args") or {}})
                stop = "tool_use"
        if "final" in turn:
            blocks.append({"type": "text", "text": turn["final"]})
        entry["reply"] = {"stop_reason": stop, "content": blocks}
        record(entry)
        model = body.get("model", "scripted")
        msg_id = next_id("msg")
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return self.send_json(200, {"id": msg_id, "type": "message", "role": "assistant", "model": model,
                                        "content": blocks, "stop_reason": stop, "stop_sequence": None,
                                        "usage": usage})
        self.start_sse()
        self.sse("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                self.sse("content_block_start", {"type": "content_block_start", "index": i,
                                                 "content_block": {"type": "text", "text": ""}})
                self.sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                 "delta": {"type": "text_delta", "text": b["text"]}})
            else:
                self.sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                js = json.dumps(b["input"])
                for k in range(0, len(js), 40):   # a few input_json_delta pieces, as the API streams
                    self.sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                     "delta": {"type": "input_json_delta",
                                                               "partial_json": js[k:k + 40]}})
            self.sse("content_block_stop", {"type": "content_block_stop", "index": i})
        self.sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 5}})
        self.sse("message_stop", {"type": "message_stop"})
        self.end_sse()

    # -- OpenAI Responses
    def route_responses(self, body, entry):
        advertised = responses_tools(body)
        calls, results = responses_history(body)
        entry.update(tool_names=[(ns + "." if ns else "") + n for n, ns in advertised], tool_results=results)
        if serves_our_server(advertised):
            idx, turn = turn_for(calls)
            entry.update(kind="turn", turn=idx)
        else:
            turn = {"final": SIDE_REPLY}
            entry.update(kind="side")
        items = []
        if "tool" in turn:
            picked = pick_tool(turn["tool"], advertised)
            if picked is None:
                turn = {"final": f"(scripted tool {turn['tool']!r} not advertised)"}
            else:
                item = {"type": "function_call", "id": next_id("fc"), "call_id": next_id("call"),
                        "name": picked[0], "arguments": json.dumps(turn.get("args") or {}), "status": "completed"}
                if picked[1]:
                    item["namespace"] = picked[1]
                items.append(item)
        if "final" in turn:
            items.append({"type": "message", "id": next_id("msg"), "role": "assistant", "status": "completed",
                          "content": [{"type": "output_text", "text": turn["final"], "annotations": []}]})
        entry["reply"] = {"output": items}
        record(entry)
        rid = next_id("resp")
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        resp = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
                "model": body.get("model", "scripted"), "output": items, "usage": usage,
                "error": None, "incomplete_details": None}
        if not body.get("stream"):
            return self.send_json(200, resp)
        self.start_sse()
        seq = iter(range(10 ** 6))
        self.sse("response.created", {"type": "response.created", "sequence_number": next(seq),
                                      "response": dict(resp, status="in_progress", output=[], usage=None)})
        for i, it in enumerate(items):
            if it["type"] == "function_call":
                self.sse("response.output_item.added", {"type": "response.output_item.added",
                                                        "sequence_number": next(seq), "output_index": i,
                                                        "item": dict(it, arguments="", status="in_progress")})
                self.sse("response.function_call_arguments.delta", {
                    "type": "response.function_call_arguments.delta", "sequence_number": next(seq),
                    "item_id": it["id"], "output_index": i, "delta": it["arguments"]})
                self.sse("response.function_call_arguments.done", {
                    "type": "response.function_call_arguments.done", "sequence_number": next(seq),
                    "item_id": it["id"], "output_index": i, "arguments": it["arguments"]})
            else:
                text = it["content"][0]["text"]
                self.sse("response.output_item.added", {"type": "response.output_item.added",
                                                        "sequence_number": next(seq), "output_index": i,
                                                        "item": dict(it, content=[], status="in_progress")})
                self.sse("response.content_part.added", {"type": "response.content_part.added",
                                                         "sequence_number": next(seq), "item_id": it["id"],
                                                         "output_index": i, "content_index": 0,
                                                         "part": {"type": "output_text", "text": "",
                                                                  "annotations": []}})
                self.sse("response.output_text.delta", {"type": "response.output_text.delta",
                                                        "sequence_number": next(seq), "item_id": it["id"],
                                                        "output_index": i, "content_index": 0, "delta": text})
                self.sse("response.output_text.done", {"type": "response.output_text.done",
                                                       "sequence_number": next(seq), "item_id": it["id"],
                                                       "output_index": i, "content_index": 0, "text": text})
                self.sse("response.content_part.done", {"type": "response.content_part.done",
                                                        "sequence_number": next(seq), "item_id": it["id"],
                                                        "output_index": i, "content_index": 0,
                                                        "part": it["content"][0]})
            self.sse("response.output_item.done", {"type": "response.output_item.done",
                                                   "sequence_number": next(seq), "output_index": i, "item": it})
        self.sse("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                        "response": resp})
        self.end_sse()

    # -- OpenAI Chat Completions
    def route_chat(self, body, entry):
        names = chat_tool_names(body)
        advertised = [(n, None) for n in names]
        calls, results = chat_history(body)
        entry.update(tool_names=names, tool_results=results)
        if serves_our_server(advertised):
            idx, turn = turn_for(calls)
            entry.update(kind="turn", turn=idx)
        else:
            turn = {"final": SIDE_REPLY}
            entry.update(kind="side")
        tool_calls, text, finish = [], None, "stop"
        if "tool" in turn:
            picked = pick_tool(turn["tool"], advertised)
            if picked is None:
                turn = {"final": f"(scripted tool {turn['tool']!r} not advertised)"}
            else:
                tool_calls.append({"id": next_id("call"), "type": "function",
                                   "function": {"name": picked[0], "arguments": json.dumps(turn.get("args") or {})}})
                finish = "tool_calls"
        if "final" in turn:
            text = turn["final"]
        entry["reply"] = {"finish_reason": finish, "content": text, "tool_calls": tool_calls}
        record(entry)
        cid, model, now = next_id("chatcmpl"), body.get("model", "scripted"), int(time.time())
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            msg = {"role": "assistant", "content": text}
            if tool_calls:
                msg["tool_calls"] = tool_calls
            return self.send_json(200, {"id": cid, "object": "chat.completion", "created": now, "model": model,
                                        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                        "usage": usage})
        self.start_sse()

        def chunk(delta, fin=None, **extra):
            self.sse(None, dict({"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                                 "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}, **extra))
        chunk({"role": "assistant", "content": ""})
        if text:
            chunk({"content": text})
        for i, tc in enumerate(tool_calls):
            chunk({"tool_calls": [dict(tc, index=i)]})
        chunk({}, finish)
        self.sse(None, {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                        "choices": [], "usage": usage})
        self.chunk("data: [DONE]\n\n")
        self.end_sse()


def load_script(path):
    with open(path) as f:
        s = json.load(f)
    if isinstance(s, dict):
        return s.get("turns", []), s.get("side_reply", "ok")
    return s, "ok"


def check(argv):
    """endpoint.py check --script S --record R [--expect REGEX]...: did the run play the whole script?

    Exit 0 when every turn was served to the harness (the last turn's index was reached) and each
    --expect regex matches the tool results the harness sent back; else print why and exit 1.
    Prints a JSON summary on stdout."""
    ap = argparse.ArgumentParser(prog="endpoint.py check")
    ap.add_argument("--script", required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument("--expect", action="append", default=[], help="regex over the tool results sent back")
    ap.add_argument("--reject", action="append", default=[], help="regex that must NOT match them")
    a = ap.parse_args(argv)
    turns, _ = load_script(a.script)
    entries = []
    try:
        with open(a.record) as f:
            entries = [json.loads(l) for l in f if l.strip()]
    except FileNotFoundError:
        pass
    served = sorted({e["turn"] for e in entries if e.get("kind") == "turn"})
    results = [r for e in entries for r in e.get("tool_results") or []]
    # the last request carries every result of the conversation; dedupe by id
    seen, uniq = set(), []
    for r in results:
        key = json.dumps(r, sort_keys=True)
        if key not in seen:
            seen.add(key)
            uniq.append(r)
    def strings(x):
        if isinstance(x, str):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from strings(v)
        elif isinstance(x, list):
            for v in x:
                yield from strings(v)
    text = "\n".join(strings(uniq))   # the tool results' text, unescaped: match `"kind":"approval_denied"`
    problems = []
    if not entries:
        problems.append("the endpoint got no request")
    elif len(turns) - 1 not in served:
        problems.append(f"turns served {served}, the script has {len(turns)}")
    for rx in a.expect:
        if not re.search(rx, text):
            problems.append(f"no tool result matches {rx!r}")
    for rx in a.reject:
        if re.search(rx, text):
            problems.append(f"a tool result matches {rx!r}")
    summary = {"ok": not problems, "problems": problems, "requests": len(entries),
               "paths": sorted({e["path"] for e in entries}),
               "side_requests": sum(e.get("kind") == "side" for e in entries),
               "turns_served": served, "tool_results": uniq}
    print(json.dumps(summary))
    return 0 if not problems else 1


def main():
    global ARGS, SCRIPT, SIDE_REPLY
    if len(sys.argv) > 1 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--script", required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--server", default="toolvisor", help="MCP server name whose tools mark a main-loop request")
    ap.add_argument("--verbose", action="store_true")
    ARGS = ap.parse_args()
    SCRIPT, SIDE_REPLY = load_script(ARGS.script)
    for t in SCRIPT:
        if not (("tool" in t) ^ ("final" in t)):
            sys.exit(f"endpoint: a turn is either {{'tool','args'}} or {{'final'}}: {t}")
    httpd = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    httpd.daemon_threads = True
    port = httpd.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    print(port, flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
