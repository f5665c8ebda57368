"""The scripted LLM server of ``benchmarks.fake_llm_server`` on one event loop, for throughput benchmarks.

The threaded server answers a request on a thread of its own: at concurrency
256 its handler threads wake together after the fixed latency and queue for one
GIL (about 0.23 ms of CPU each), so the last reply of a wave goes out tens of
milliseconds late, and even a bare aiohttp client reached only 83% of the ideal
throughput against it. Here each connection is an ``asyncio.Protocol`` and each
reply a timer (``loop.call_later``), so a reply leaves at its latency whatever
else is in flight. Same routes, same responders (``respond(request) -> Reply |
dict``), same ``/stats``; HTTP/1.1 keep-alive, one request at a time per
connection, as clients send them.

Standalone (``python -m benchmarks.fast_llm_server --latency 0.2 --responder
module:function``) it prints ``PORT <n>`` on its first line.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import socket

from benchmarks.fake_llm_server import Reply, Request, Responder, _load

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Server Error"}


class _Stats:
    def __init__(self) -> None:
        self.count = self.in_flight = self.max_in_flight = 0

    def as_dict(self) -> dict[str, int]:
        return {"requests": self.count, "max_in_flight": self.max_in_flight, "in_flight": self.in_flight}


def _response(status: int, data: bytes, headers: dict[str, str] | None = None) -> bytes:
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", "Content-Type: application/json",
            f"Content-Length: {len(data)}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


class _Connection(asyncio.Protocol):
    def __init__(self, respond: Responder, latency_s: float, stats: _Stats):
        self.respond, self.latency_s, self.stats = respond, latency_s, stats
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buffer[:end].decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
            length = int(headers.get("content-length", 0))
            if len(self.buffer) < end + 4 + length:
                return
            body, self.buffer = self.buffer[end + 4:end + 4 + length], self.buffer[end + 4 + length:]
            method, path, _ = lines[0].split(" ", 2)
            self._handle(method, path, headers, body)

    def _handle(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> None:
        if method == "GET":
            if path.rstrip("/").endswith("/stats"):
                self._send(_response(200, json.dumps(self.stats.as_dict()).encode()))
            else:
                self._send(_response(404, json.dumps({"error": {"message": f"no route {path}"}}).encode()))
            return
        stats = self.stats
        stats.count += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        try:
            reply = self.respond(Request(path, json.loads(raw or b"{}"), headers))
        except Exception as exc:  # a broken responder is a 500, not a dead connection
            reply = Reply(body={"error": {"message": f"responder failed: {exc}"}}, status=500)
        reply = reply if isinstance(reply, Reply) else Reply(body=reply)
        data = _response(reply.status, reply.raw if reply.raw is not None else json.dumps(reply.body).encode(),
                         reply.headers)
        asyncio.get_running_loop().call_later(self.latency_s + reply.delay_s, self._reply, data)

    def _reply(self, data: bytes) -> None:
        self.stats.in_flight -= 1
        self._send(data)

    def _send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(respond: Responder, latency_s: float, ready=None) -> None:
    loop = asyncio.get_running_loop()
    stats = _Stats()
    server = await loop.create_server(lambda: _Connection(respond, latency_s, stats), "127.0.0.1", 0, backlog=1024)
    if ready is not None:
        ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before every reply")
    ap.add_argument("--responder", required=True, help="module:function answering each request")
    args = ap.parse_args(argv)
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(serve(_load(args.responder), args.latency, ready=lambda port: print(f"PORT {port}", flush=True)))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
