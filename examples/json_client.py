#!/usr/bin/env python3
"""A toolvisor client in plain Python: the JSON codec over a Unix socket, nothing else.

Usage: python3 examples/json_client.py [SOCKET]

Frames are a 4-byte big-endian length followed by one JSON document.
"""
import json
import os
import socket
import struct
import sys


def check_server_uid(sock, path):
    """Refuse a server of another user before sending it anything (root excepted)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, server_uid, _gid = struct.unpack("3i", creds)
    our_uid = os.geteuid()
    if server_uid not in (our_uid, 0):
        sys.exit(f"refusing the server at {path}: it runs as uid {server_uid}, this client "
                 f"as uid {our_uid}; nothing was sent")


def send(sock, frame):
    data = json.dumps(frame).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("daemon closed the connection")
        buf += chunk
    return buf


def recv(sock):
    (length,) = struct.unpack(">I", recv_exact(sock, 4))
    return json.loads(recv_exact(sock, length))


def call(sock, call_id, tool, args, approve):
    """Send one call; answer approval requests; return the outcome ({"ok": ...} or {"err": ...})."""
    send(sock, {"call": {"id": call_id, "conversation": "python-demo", "tool": tool, "args": args}})
    while True:
        frame = recv(sock)
        if "approval_request" in frame:
            req = frame["approval_request"]
            send(sock, {"approval_answer": {"request_id": req["request_id"], "approved": approve, "reason": None}})
        elif "event" in frame:
            pass  # streamed output: frame["event"]["event"]["output"]["text"]
        elif "result" in frame and frame["result"]["id"] == call_id:
            return frame["result"]["outcome"]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/toolvisor-{os.getuid()}", "toolvisor.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    check_server_uid(sock, path)
    send(sock, {"hello": {
        "protocol_version": 1, "codec": "json", "client_kind": "harness",
        "run_id": "demo", "workdir": os.getcwd(),
        "surface": {"max_tier": "exec", "approvals": True, "questions": False},
    }})
    welcome = recv(sock)
    if "refused" in welcome:
        sys.exit(f"refused: {welcome['refused']}")
    print("tools:", ", ".join(t["name"] for t in welcome["welcome"]["tools"]))

    outcome = call(sock, 1, "bash", {"command": "echo hello from python"}, approve=True)
    print("bash stdout:", outcome["ok"]["stdout"].strip())

    outcome = call(sock, 2, "bash", {"command": "echo never runs"}, approve=False)
    print("declined:", outcome["err"]["kind"], "-", outcome["err"]["message"])


if __name__ == "__main__":
    main()
