"""HTTP/1.1 POSTs to a plain ``http://`` server on keep-alive sockets, with no HTTP library in between.

For local model servers (vLLM, ``llamafactory-cli api``, llama.cpp's server) at high concurrency: each
wave of replies waits for the client to handle the whole wave, so the client's CPU a call sets the
throughput, and aiohttp's request path is most of the transport's part of it (`evosyn bench llm`: bare
aiohttp 0.12-0.15 ms a call, a bare asyncio protocol 0.03-0.05 ms). ``agents.llm.transport`` uses this only
for ``http://`` URLs that no proxy intercepts; TLS, proxies and everything else stay on aiohttp.

What it speaks: one request at a time per connection; a reply body by ``Content-Length``, by
``Transfer-Encoding: chunked``, or up to the close; ``Connection: close`` and HTTP/1.0 replies close the
connection after reading; no compression is asked for (``Accept-Encoding: identity``). A connection that
fails before any byte of its reply arrives, when it was reused from the pool (the server may have closed
it while idle), is retried once on a new connection (the request may have reached the server; a chat call
changes nothing there, so asking once more costs at most one more call); every other failure is the
caller's to handle.
"""
from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field


class ReplyTimeout(Exception):
    """No whole reply within the timeout."""


@dataclass
class RawReply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    body: bytes = b""


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.closed = False
        self.head: tuple[int, dict[str, str], bool] | None = None  # status, headers, keep-alive
        self.got_bytes = False

    # ------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        self.buffer += data
        if self.waiter is None or self.waiter.done():
            return
        try:
            reply = self._parse(eof=False)
        except ValueError as exc:
            self._fail(ConnectionError(f"unreadable HTTP reply: {exc}"))
            return
        if reply is not None:
            self.waiter.set_result(reply)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is None or self.waiter.done():
            return
        try:
            reply = self._parse(eof=True)
        except ValueError as err:
            reply, exc = None, ConnectionError(f"unreadable HTTP reply: {err}")
        if reply is not None:
            self.waiter.set_result(reply)
        else:
            self._fail(exc if isinstance(exc, Exception) else ConnectionResetError("the server closed the connection"))

    # ------------------------------------------------------------ one request
    def send(self, request: bytes) -> asyncio.Future:
        self.buffer.clear()
        self.head, self.got_bytes = None, False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.close()

    def _parse(self, eof: bool) -> RawReply | None:
        """The reply, once whole (``eof``: the server has closed), else None; ValueError when malformed."""
        buf = self.buffer
        if self.head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if eof and buf:
                    raise ValueError("the connection closed inside the reply's head")
                return None
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            version, _, rest = lines[0].partition(" ")
            if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
                raise ValueError(f"status line {lines[0][:80]!r}")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            connection = headers.get("connection", "").lower()
            keep = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
            self.head = (int(rest[:3]), headers, keep)
            del buf[:end + 4]
        status, headers, keep = self.head
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = _dechunk(buf)
            if body is None:
                if eof:
                    raise ValueError("the connection closed inside a chunked body")
                return None
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if len(buf) < length:
                if eof:
                    raise ValueError(f"the connection closed after {len(buf)} of {length} bytes")
                return None
            body = bytes(buf[:length])
        elif status in (204, 304) or 100 <= status < 200:
            body = b""
        else:  # no length: the body runs to the close
            if not eof:
                return None
            body, keep = bytes(buf), False
        if not keep:
            self.close()
        self.head = (status, headers, keep)
        return RawReply(status, headers, body)


def _dechunk(buf: bytearray) -> bytes | None:
    out, at = bytearray(), 0
    while True:
        end = buf.find(b"\r\n", at)
        if end < 0:
            return None
        size = int(bytes(buf[at:end]).split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            return bytes(out) if buf.find(b"\r\n\r\n", end) >= 0 else None  # the last chunk, trailers, blank line
        start = end + 2
        if len(buf) < start + size + 2:
            return None
        out += buf[start:start + size]
        at = start + size + 2


class RawPool:
    """Keep-alive connections to one ``host:port``, made on first need, kept while the server keeps them."""

    def __init__(self, host: str, port: int, timeout: float):
        self.host, self.port, self.timeout = host, port, timeout
        self.idle: list[_Connection] = []
        self.all: set[_Connection] = set()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, self.host, self.port)
        self.all.add(conn)
        return conn

    async def post(self, request: bytes) -> RawReply:
        """Send ``request`` (head and body) and return the reply; OSError / ConnectionError when the
        connection fails, ReplyTimeout when no whole reply comes within the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while self.idle:
            conn = self.idle.pop()
            if conn.closed:  # the server closed it while idle
                self.all.discard(conn)
            else:
                try:
                    return await self._exchange(conn, request, deadline)
                except (ConnectionError, OSError):
                    if conn.got_bytes:
                        raise
                    # a pooled connection the server had closed while idle: once more, on a new one
                break
        return await self._exchange(await asyncio.wait_for(self._connect(), self.timeout), request, deadline)

    async def _exchange(self, conn: _Connection, request: bytes, deadline: float) -> RawReply:
        loop = asyncio.get_running_loop()
        waiter = conn.send(request)
        timer = loop.call_at(deadline, _expire, waiter)
        ok = False
        try:
            reply = await waiter
            ok = True
        finally:
            timer.cancel()
            if ok and not conn.closed:
                self.idle.append(conn)
            else:
                conn.close()
                self.all.discard(conn)
        return reply

    def close(self) -> None:
        for conn in list(self.all):
            conn.close()
        self.all.clear()
        self.idle.clear()


def _expire(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_exception(ReplyTimeout())
