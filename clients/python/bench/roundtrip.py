#!/usr/bin/env python3
"""Round trip of a trivial call through the Python client, against a raw Python socket echo
of the same payload (docs/BENCHMARKS.md, "Python client").

Starts the daemon (``--bin``, default ``target/release/toolvisor``) on a temp socket, and an
echo server in another Python process that answers every frame with the bytes the daemon
sent for the same call. Then, one after the other, n round trips each of:

- ``Client.call("process", {"op": "list"})`` — the package's blocking client;
- ``AsyncClient.call`` — the asyncio client, awaited one at a time;
- raw socket → daemon: the same call frame written and its result read and parsed with
  nothing but ``socket``, ``struct`` and ``json`` (the protocol's own cost, no client library);
- raw socket → echo: the same bytes both ways to the Python echo server (no daemon);
- raw asyncio streams → echo: the same, through asyncio (the event loop's own floor, the
  peer of ``AsyncClient``).

Prints a Markdown table of medians and p99s. Usage:
    python3 clients/python/bench/roundtrip.py [--bin PATH] [-n 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from toolvisor import AsyncClient, Client  # noqa: E402

CALL_ARGS = {"op": "list"}
HEADER = struct.Struct(">I")


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def recv_frame(sock: socket.socket) -> bytes:
    (n,) = HEADER.unpack(recv_exact(sock, 4))
    return recv_exact(sock, n)


def echo_server(path: str, reply: bytes) -> None:
    """Answer every frame on every connection with `reply` (one thread per connection)."""
    import threading

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    frame = HEADER.pack(len(reply)) + reply

    def serve(conn: socket.socket) -> None:
        try:
            while True:
                recv_frame(conn)
                conn.sendall(frame)
        except (ConnectionError, OSError):
            conn.close()

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def wait_for_socket(path: str, what: str, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.close()
            return
        except OSError:
            s.close()
            time.sleep(0.02)
    sys.exit(f"{what} did not accept connections on {path} within {limit_s} s")


def summary(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s), s[min(len(s) - 1, int(len(s) * 0.99))]


def bench_client(path: str, n: int, warm: int) -> list[float]:
    out = []
    with Client.connect(path, max_tier="exec", workdir="/") as c:
        for i in range(warm + n):
            t = time.perf_counter()
            c.call("process", CALL_ARGS)
            if i >= warm:
                out.append(time.perf_counter() - t)
    return out


def bench_async(path: str, n: int, warm: int) -> list[float]:
    async def run() -> list[float]:
        out = []
        async with await AsyncClient.connect(path, max_tier="exec", workdir="/") as c:
            for i in range(warm + n):
                t = time.perf_counter()
                await c.call("process", CALL_ARGS)
                if i >= warm:
                    out.append(time.perf_counter() - t)
        return out

    return asyncio.run(run())


def raw_hello(sock: socket.socket) -> None:
    hello = {"hello": {"protocol_version": 1, "codec": "json", "client_kind": "ops",
                       "workdir": "/", "surface": {"max_tier": "exec"}}}
    data = json.dumps(hello).encode()
    sock.sendall(HEADER.pack(len(data)) + data)
    welcome = json.loads(recv_frame(sock))
    assert "welcome" in welcome, welcome


def bench_raw(path: str, n: int, warm: int, hello: bool) -> tuple[list[float], bytes]:
    """The same call frame each time (the daemon allows an id again once its result came)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    if hello:
        raw_hello(sock)
    payload = json.dumps({"call": {"id": 1, "conversation": "default", "tool": "process", "args": CALL_ARGS}},
                         separators=(",", ":")).encode()
    frame = HEADER.pack(len(payload)) + payload
    out = []
    reply = b""
    for i in range(warm + n):
        t = time.perf_counter()
        sock.sendall(frame)
        reply = recv_frame(sock)
        answer = json.loads(reply)
        if i == 0 and "ok" not in answer["result"]["outcome"]:
            sys.exit(f"the trivial call failed: {answer}")
        if i >= warm:
            out.append(time.perf_counter() - t)
    sock.close()
    return out, reply


def bench_raw_async(path: str, n: int, warm: int) -> list[float]:
    """The echo again, through asyncio streams: the event loop's own floor."""

    async def run() -> list[float]:
        reader, writer = await asyncio.open_unix_connection(path)
        payload = json.dumps({"call": {"id": 1, "conversation": "default", "tool": "process", "args": CALL_ARGS}},
                             separators=(",", ":")).encode()
        frame = HEADER.pack(len(payload)) + payload
        out = []
        for i in range(warm + n):
            t = time.perf_counter()
            writer.write(frame)
            await writer.drain()
            (length,) = HEADER.unpack(await reader.readexactly(4))
            json.loads(await reader.readexactly(length))
            if i >= warm:
                out.append(time.perf_counter() - t)
        writer.close()
        return out

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("TOOLVISOR_BIN", "target/release/toolvisor"))
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--warm", type=int, default=500)
    ap.add_argument("--echo-server", nargs=2, metavar=("PATH", "REPLY_HEX"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.echo_server:
        echo_server(a.echo_server[0], bytes.fromhex(a.echo_server[1]))
        return

    tmp = tempfile.mkdtemp(prefix="tv-bench-")
    sock = os.path.join(tmp, "toolvisor.sock")
    cfg = os.path.join(tmp, "config.toml")
    with open(cfg, "w") as f:
        f.write(f'state_dir = "{tmp}/state"\n')
    daemon = subprocess.Popen([a.bin, "serve", "--socket", sock, "--config", cfg],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=open(os.path.join(tmp, "daemon.log"), "w"))
    echo = None
    try:
        wait_for_socket(sock, "the daemon")
        raw_daemon, reply = bench_raw(sock, a.n, a.warm, hello=True)
        echo_sock = os.path.join(tmp, "echo.sock")
        echo = subprocess.Popen([sys.executable, __file__, "--echo-server", echo_sock, reply.hex()])
        wait_for_socket(echo_sock, "the echo server")
        raw_echo, _ = bench_raw(echo_sock, a.n, a.warm, hello=False)
        raw_async_echo = bench_raw_async(echo_sock, a.n, a.warm)
        client = bench_client(sock, a.n, a.warm)
        aclient = bench_async(sock, a.n, a.warm)
    finally:
        daemon.terminate()
        daemon.wait()
        if echo is not None:
            echo.terminate()
            echo.wait()

    echo_med, echo_p99 = summary(raw_echo)
    print(f"n={a.n} after {a.warm} warm-up calls; trivial call process {{\"op\":\"list\"}}, "
          f"reply {len(reply)} bytes; Python {sys.version.split()[0]}; load {os.getloadavg()[0]:.2f}")
    print()
    print("| round trip | median | p99 | median vs raw echo |")
    print("|---|---|---|---|")
    for name, samples in [
        ("`Client.call` → daemon", client),
        ("`AsyncClient.call` → daemon", aclient),
        ("raw socket → daemon (same frame)", raw_daemon),
        ("raw socket → Python echo (same bytes)", raw_echo),
        ("raw asyncio streams → Python echo (same bytes)", raw_async_echo),
    ]:
        med, p99 = summary(samples)
        print(f"| {name} | {med * 1e6:.1f} µs | {p99 * 1e6:.1f} µs | {med / echo_med:.2f}× |")


if __name__ == "__main__":
    main()
