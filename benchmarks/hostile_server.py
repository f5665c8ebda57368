"""A hostile OpenAI-compatible server on 127.0.0.1, for `evosyn bench faults` and the transport tests.

Each mode answers every request the same broken way:

================  ==========================================================================
mode              what the client gets
================  ==========================================================================
huge-length       ``Content-Length: 10000000000``, then bytes as fast as the client reads
endless-chunked   a chunked body that never ends (a chunk of 64 KiB, forever)
stalled-headers   the connection accepted, the request read, then nothing at all
big-reply         a complete 200 reply of 50 MB (a chat completion whose text is 50 MB)
deep-nesting      a 200 reply nested 100,000 brackets deep (about 200 kB)
echo-key          a valid chat completion whose answer quotes the request's Authorization header
================  ==========================================================================

Written on ``socketserver`` bytes, not an HTTP framework: the point is to break HTTP on purpose (a length
it never honours, a body without an end, headers that never come), which a well-kept server library
refuses to do. ``sent`` counts the body bytes each mode pushed before the client hung up, so a test can
see that the client stopped reading early.
"""
from __future__ import annotations

import json
import socket
import socketserver
import threading
import time

MODES = ("huge-length", "endless-chunked", "stalled-headers", "big-reply", "deep-nesting", "echo-key")
BIG_BYTES = 50 * 1000 * 1000
DEPTH = 100_000
_CHUNK = b"x" * 65536


def completion(text: str) -> bytes:
    return json.dumps({"id": "c1", "object": "chat.completion", "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def _read_request(sock: socket.socket) -> dict[str, str]:
    """The request's headers (lower-case names); its body is read and dropped."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        if not got:
            return {}
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    headers = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    left = int(headers.get("content-length") or 0) - len(body)
    while left > 0:
        got = sock.recv(min(left, 65536))
        if not got:
            break
        left -= len(got)
    return headers


class _Handler(socketserver.BaseRequestHandler):
    server: "_Server"

    def handle(self) -> None:
        sock: socket.socket = self.request
        headers = _read_request(sock)
        mode = self.server.mode
        self.server.requests += 1
        try:
            if mode == "stalled-headers":
                self.server.stop.wait(600)
            elif mode == "huge-length":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n")
                self._forever(sock, lambda: _CHUNK)
            elif mode == "endless-chunked":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                frame = b"%x\r\n%s\r\n" % (len(_CHUNK), _CHUNK)
                self._forever(sock, lambda: frame)
            else:
                if mode == "big-reply":
                    body = completion("y" * BIG_BYTES)
                elif mode == "deep-nesting":
                    body = b"[" * DEPTH + b"]" * DEPTH
                else:  # echo-key: the answer quotes what the client sent as its key
                    body = completion(json.dumps({"echo": headers.get("authorization", ""),
                                                  "x_api_key": headers.get("x-api-key", "")}))
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                             b"Connection: close\r\n\r\n" % len(body))
                self._send(sock, body)
        except OSError:  # the client hung up: what it was meant to do
            pass

    def _send(self, sock: socket.socket, body: bytes) -> None:
        view = memoryview(body)
        for at in range(0, len(body), 1 << 20):
            sock.sendall(view[at:at + (1 << 20)])
            self.server.sent += min(1 << 20, len(body) - at)

    def _forever(self, sock: socket.socket, chunk) -> None:
        deadline = time.monotonic() + 600
        while not self.server.stop.is_set() and time.monotonic() < deadline:
            data = chunk()
            sock.sendall(data)
            self.server.sent += len(data)
            if self.server.pause_s:
                time.sleep(self.server.pause_s)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str, pause_s: float = 0.0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode, self.requests, self.sent, self.stop = mode, 0, 0, threading.Event()
        self.pause_s = pause_s


class HostileServer:
    """``with HostileServer("huge-length") as s: ... s.base_url``; ``pause_s``: a pause after each chunk of an
    endless body (a trickle, whose size stays under any bound whatever the loopback's speed)."""

    def __init__(self, mode: str, pause_s: float = 0.0):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
        self._server = _Server(mode, pause_s)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def sent(self) -> int:
        return self._server.sent

    @property
    def requests(self) -> int:
        return self._server.requests

    def __enter__(self) -> "HostileServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop.set()
        self._server.shutdown()
        self._server.server_close()
