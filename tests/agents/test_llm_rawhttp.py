"""The keep-alive transport of plain-http model servers: every way a reply can be framed, and every way it can fail.

Each test runs a raw asyncio server on 127.0.0.1 that writes scripted bytes, so replies can be framed (and
broken) in ways no well-behaved server library would produce.
"""
from __future__ import annotations

import asyncio
import json

import pytest

from agents.llm.rawhttp import RawPool, ReplyTimeout
from agents.llm.transport import APIConnectionError, APIStatusError, ChatTransport

REQUEST = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


async def _serve(replies: list, *, close_after: bool = False):
    """A server answering each request it reads with the next of ``replies`` (bytes, or a list of pieces
    written with a pause between them; None: close without answering). Returns (server, port, seen)."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while replies:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n")
                                   if ln.lower().startswith(b"content-length")), b"0"))
                seen.append(head + await reader.readexactly(length))
                reply = replies.pop(0)
                if reply is None:
                    break
                for piece in reply if isinstance(reply, list) else [reply]:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], seen


def _run(coro):
    return asyncio.run(coro)


def test_content_length_chunked_and_close_delimited_bodies_are_read_whole():
    body = b'{"ok": true}'
    replies = [
        [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body), body[:4], body[4:]],  # split across packets
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"4\r\n" + body[:4] + b"\r\n",
         b"%x\r\n" % (len(body) - 4) + body[4:] + b"\r\n", b"0\r\n\r\n"],
        b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\nX-Thing: 1\r\n\r\n{}",
    ]

    async def go():
        server, port, seen = await _serve(replies)
        pool = RawPool("127.0.0.1", port, timeout=5)
        got = [await pool.post(REQUEST) for _ in range(3)]
        pool.close()
        server.close()
        return got, seen, len(pool.all)

    got, seen, _ = _run(go())
    assert [g.body for g in got] == [body, body, b"{}"] and [g.status for g in got] == [200, 200, 201]
    assert got[2].headers["x-thing"] == "1" and len(seen) == 3  # one kept-alive connection served all three


def test_http10_and_connection_close_replies_run_to_the_close_and_the_next_call_reconnects():
    replies = [b"HTTP/1.0 200 OK\r\n\r\n{\"a\": 1}", b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"]

    async def go():
        server, port, seen = await _serve(replies, close_after=True)
        pool = RawPool("127.0.0.1", port, timeout=5)
        first, second = await pool.post(REQUEST), await pool.post(REQUEST)
        pool.close()
        server.close()
        return first, second, pool.idle

    first, second, idle = _run(go())
    assert json.loads(first.body) == {"a": 1} and second.body == b"{}" and idle == []


def test_a_pooled_connection_the_server_closed_is_retried_once_on_a_new_one():
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"

    async def go():
        server, port, seen = await _serve([ok, None, ok])  # the second request finds its connection closing
        pool = RawPool("127.0.0.1", port, timeout=5)
        first = await pool.post(REQUEST)
        second = await pool.post(REQUEST)  # no byte of a reply came: sent again on a fresh connection
        pool.close()
        server.close()
        return first, second, seen

    first, second, seen = _run(go())
    assert first.body == second.body == b"{}" and len(seen) == 3


def test_a_reply_cut_short_or_never_sent_fails_as_a_connection_error_and_a_slow_one_times_out():
    async def go():
        cut, port, _ = await _serve([b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"partial"], close_after=True)
        pool = RawPool("127.0.0.1", port, timeout=5)
        with pytest.raises(ConnectionError, match="closed after 9 of 50 bytes"):
            await pool.post(REQUEST)
        cut.close()
        silent, port, _ = await _serve([[b"HTTP/1.1 200 OK\r\n"] + [b""] * 100])  # head never ends in time
        pool = RawPool("127.0.0.1", port, timeout=0.3)
        with pytest.raises(ReplyTimeout):
            await pool.post(REQUEST)
        assert pool.idle == []  # a connection with a reply pending is never reused
        pool.close()
        silent.close()
        garbage, port, _ = await _serve([b"SSH-2.0-OpenSSH\r\n\r\n"])
        pool = RawPool("127.0.0.1", port, timeout=5)
        with pytest.raises(ConnectionError, match="unreadable HTTP reply"):
            await pool.post(REQUEST)
        garbage.close()
        pool = RawPool("127.0.0.1", port, timeout=5)  # nothing listens there any more
        with pytest.raises(OSError):
            await pool.post(REQUEST)

    _run(go())


def test_the_chat_transport_uses_it_for_plain_http_and_keeps_the_sdk_s_errors():
    body = json.dumps({"error": {"message": "slow down"}}).encode()
    replies = [b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
               b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nnot json!", None]

    async def go():
        server, port, seen = await _serve(replies)
        transport = ChatTransport(f"http://127.0.0.1:{port}/v1", "sk-secret", timeout=5)
        assert transport._raw_target == ("127.0.0.1", port, "/v1")
        with pytest.raises(APIStatusError) as limited:
            await transport.post("/chat/completions", {"model": "m"})
        text = await transport.post("/chat/completions", {"model": "m"})
        with pytest.raises(APIConnectionError, match="Connection error"):
            await transport.post("/chat/completions", {"model": "m"})
        await transport.aclose()
        server.close()
        return limited.value, text, seen

    limited, text, seen = _run(go())
    assert limited.status_code == 429 and limited.response.headers.get("retry-after") == "3"
    assert "slow down" in str(limited) and "sk-secret" not in str(limited)
    assert text == "not json!"  # not JSON: its text, as the SDK hands it back
    assert seen[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Authorization: Bearer sk-secret\r\n" in seen[0] and seen[0].endswith(b'{"model": "m"}')
    assert ChatTransport("https://api.example/v1", "k", 5)._raw_target is None  # TLS stays on aiohttp
