#!/usr/bin/env python3
"""Round trip of a trivial call through the Python client, against a raw Python socket echo
of the same payload (docs/BENCHMARKS.md, "Python client").

Starts the daemon (``--bin``, default ``target/release/toolvisor``) on a temp socket, and an
echo server in another Python process that answers every frame with the bytes the daemon
sent for the same call. Then n round trips each of these, in turns of ``--block`` round trips
per variant so that the machine's load drifts over all of them alike:

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


def call_frame() -> bytes:
    payload = json.dumps({"call": {"id": 1, "conversation": "default", "tool": "process", "args": CALL_ARGS}},
                         separators=(",", ":")).encode()
    return HEADER.pack(len(payload)) + payload


def raw_hello(sock: socket.socket) -> None:
    hello = {"hello": {"protocol_version": 1, "codec": "json", "client_kind": "harness",
                       "workdir": "/", "surface": {"max_tier": "exec"}}}
    data = json.dumps(hello).encode()
    sock.sendall(HEADER.pack(len(data)) + data)
    welcome = json.loads(recv_frame(sock))
    assert "welcome" in welcome, welcome


class Raw:
    """The same call frame each time (the daemon allows an id again once its result came),
    written and its reply read and parsed with nothing but socket, struct and json."""

    def __init__(self, path: str, hello: bool) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        if hello:
            raw_hello(self.sock)
        self.frame = call_frame()
        self.reply = b""

    def once(self) -> None:
        self.sock.sendall(self.frame)
        self.reply = recv_frame(self.sock)
        json.loads(self.reply)


class RawAsync:
    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        self.loop = loop
        self.reader, self.writer = loop.run_until_complete(asyncio.open_unix_connection(path))
        self.frame = call_frame()

    async def _block(self, k: int) -> list[float]:
        out = []
        for _ in range(k):
            t = time.perf_counter()
            self.writer.write(self.frame)
            await self.writer.drain()
            (length,) = HEADER.unpack(await self.reader.readexactly(4))
            json.loads(await self.reader.readexactly(length))
            out.append(time.perf_counter() - t)
        return out

    def block(self, k: int) -> list[float]:
        return self.loop.run_until_complete(self._block(k))


class Async:
    def __init__(self, loop: asyncio.AbstractEventLoop, path: str) -> None:
        self.loop = loop
        self.client = loop.run_until_complete(AsyncClient.connect(path, max_tier="exec", workdir="/"))

    async def _block(self, k: int) -> list[float]:
        out = []
        for _ in range(k):
            t = time.perf_counter()
            await self.client.call("process", CALL_ARGS)
            out.append(time.perf_counter() - t)
        return out

    def block(self, k: int) -> list[float]:
        return self.loop.run_until_complete(self._block(k))


def timed(k: int, f) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for _ in range(k):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("TOOLVISOR_BIN", "target/release/toolvisor"))
    ap.add_argument("-n", type=int, default=5000, help="round trips per variant")
    ap.add_argument("--block", type=int, default=250, help="round trips per variant per turn")
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
    aclient = None
    loop = asyncio.new_event_loop()
    try:
        wait_for_socket(sock, "the daemon")
        raw_daemon = Raw(sock, hello=True)
        raw_daemon.once()
        answer = json.loads(raw_daemon.reply)
        if "ok" not in answer["result"]["outcome"]:
            sys.exit(f"the trivial call failed: {answer}")
        echo_sock = os.path.join(tmp, "echo.sock")
        echo = subprocess.Popen([sys.executable, __file__, "--echo-server", echo_sock, raw_daemon.reply.hex()])
        wait_for_socket(echo_sock, "the echo server")
        raw_echo = Raw(echo_sock, hello=False)
        raw_async_echo = RawAsync(loop, echo_sock)
        client = Client.connect(sock, max_tier="exec", workdir="/")
        aclient = Async(loop, sock)
        variants = {
            "`Client.call` → daemon": lambda k: timed(k, lambda: client.call("process", CALL_ARGS)),
            "`AsyncClient.call` → daemon": aclient.block,
            "raw socket → daemon (same frame)": lambda k: timed(k, raw_daemon.once),
            "raw socket → Python echo (same bytes)": lambda k: timed(k, raw_echo.once),
            "raw asyncio streams → Python echo (same bytes)": raw_async_echo.block,
        }
        for run in variants.values():
            run(a.warm)
        # Turns of `block` round trips each, so the machine's load drifts over all alike.
        samples: dict[str, list[float]] = {name: [] for name in variants}
        while len(samples["raw socket → Python echo (same bytes)"]) < a.n:
            for name, run in variants.items():
                samples[name] += run(a.block)
    finally:
        if aclient is not None:
            loop.run_until_complete(aclient.client.close())
        daemon.terminate()
        daemon.wait()
        if echo is not None:
            echo.terminate()
            echo.wait()

    echo_med, _ = summary(samples["raw socket → Python echo (same bytes)"])
    print(f"n={a.n} per variant in turns of {a.block}, after {a.warm} warm-up calls each; trivial call "
          f"process {{\"op\":\"list\"}}, reply {len(raw_daemon.reply)} bytes; Python {sys.version.split()[0]}; "
          f"load {os.getloadavg()[0]:.2f}")
    print()
    print("| round trip | median | p99 | median vs raw echo |")
    print("|---|---|---|---|")
    for name, xs in samples.items():
        med, p99 = summary(xs)
        print(f"| {name} | {med * 1e6:.1f} µs | {p99 * 1e6:.1f} µs | {med / echo_med:.2f}× |")


if __name__ == "__main__":
    main()
