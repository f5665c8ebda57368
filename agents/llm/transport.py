"""The HTTP transport of the OpenAI-style chat endpoint: one aiohttp session, a JSON body in, JSON out.

Why not the SDK's request path: `evosyn bench llm` measured about 1.5 ms of
client CPU per call inside it (openai's request-options model and URL handling,
httpx's request, URL and header models, then its aiohttp transport under
them), most of the client's 2.1 ms, so at concurrency 64 the client's own loop,
not the server, held throughput to 87% of the ideal, and 256 could not reach
90% at all. This sends the same request (the URL, the JSON body, the bearer key
the organization / project headers and the proxy the SDK takes from the environment) on
aiohttp directly, the library the SDK itself runs on here, in a fraction of that.

A plain ``http://`` base URL that no proxy intercepts (a local vLLM, ``llamafactory-cli api`` or llama.cpp
server) goes out on keep-alive sockets with no HTTP library at all (``agents.llm.rawhttp``): at concurrency
256 aiohttp's request path was most of the transport's CPU a call. HTTPS and proxies stay on aiohttp.

Failures keep the SDK's meaning, in classes of the same names: a refused or
reset connection and a timeout are an ``APIConnectionError``; an HTTP error is
an ``APIStatusError`` with ``status_code`` and the ``response`` headers (for
``retry-after``); a body that is not JSON comes back as its text, as the SDK
returns it; one JSON cannot decode (nested too deep) raises what ``json``
raises, so the client records an unusable reply. The key never appears in an error.
"""
from __future__ import annotations

import json
import os
import urllib.request
from typing import Any
from urllib.parse import urlsplit

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"


class APIError(Exception):
    """Any failure of the API (the SDK's ``APIError``): the base of the two below."""


class APIConnectionError(APIError):
    """No reply: the connection failed or the request timed out (retried)."""


class APIStatusError(APIError):
    """An HTTP error status; ``response.headers`` holds the server's ``retry-after``."""

    def __init__(self, message: str, *, status_code: int, response: Any, body: Any):
        super().__init__(message)
        self.status_code, self.response, self.body = status_code, response, body


ERRORS = (APIConnectionError, APIStatusError, APIError)


def _error_message(status: int, body: Any) -> str:
    # the SDK's wording ("Error code: 429 - {...}"), so logs and call rows read as before
    return f"Error code: {status} - {body}"


def env_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``HTTPS_PROXY`` / ``HTTP_PROXY``, minus ``NO_PROXY``), as
    httpx and the SDK honour it; None for none."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass_environment(parts.hostname):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme) or None


class ChatTransport:
    """POSTs to one base URL's endpoints; the session is built on first use, inside the caller's loop."""

    def __init__(self, base_url: str | None, api_key: str, timeout: float):
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL).rstrip("/")
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json",
                        "Accept": "application/json"}
        for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env):
                self.headers[header] = os.environ[env]
        self.proxy = env_proxy(self.base_url)
        self._session = None
        # plain http with no proxy (a local model server): keep-alive sockets without aiohttp (agents/llm/rawhttp.py)
        parts = urlsplit(self.base_url)
        self._raw_target = (parts.hostname, parts.port or 80, parts.path.rstrip("/")) \
            if parts.scheme == "http" and parts.hostname and self.proxy is None else None
        self._raw = None
        if self._raw_target is not None:
            host = parts.netloc.rpartition("@")[2]  # as the URL writes it: "[::1]:8000", "localhost"
            self._raw_head = "".join(f"{k}: {v}\r\n" for k, v in {
                "Host": host, **self.headers, "Accept-Encoding": "identity"}.items()).encode("latin-1")

    def _get(self):
        if self._session is None:
            import aiohttp

            # no connection cap of its own: the client's slots bound how many requests are in flight
            # the environment's proxy is looked up once (env_proxy), not by aiohttp at every request
            # (trust_env), where it was a third of a call's CPU
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), headers=self.headers, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=self.timeout), json_serialize=json.dumps)
        return self._session

    async def _post_raw(self, path: str, data: bytes):
        from agents.llm.rawhttp import RawPool, ReplyTimeout

        host, port, prefix = self._raw_target
        if self._raw is None:
            self._raw = RawPool(host, port, self.timeout)
        request = (b"POST %s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (
            (prefix + path).encode("latin-1"), self._raw_head, len(data))) + data
        try:
            reply = await self._raw.post(request)
        except (ReplyTimeout, TimeoutError):
            raise APIConnectionError("Request timed out.") from None
        except (ConnectionError, OSError) as exc:
            raise APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}") from None
        return reply

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        if self._raw_target is not None:
            resp = await self._post_raw(path, data)
            raw, status = resp.body, resp.status
        else:
            import aiohttp

            session = self._get()
            try:
                async with session.post(self.base_url + path, data=data, proxy=self.proxy) as resp:
                    raw, status = await resp.read(), resp.status
            except TimeoutError:  # aiohttp's total timeout (asyncio.TimeoutError is TimeoutError)
                raise APIConnectionError("Request timed out.") from None
            except aiohttp.ClientError as exc:
                raise APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}") from None
        text = raw.decode("utf-8", "replace")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:  # not JSON: its text, as the SDK hands it back
            data = text
        if status >= 400:
            message = data.get("error", data) if isinstance(data, dict) else data
            raise APIStatusError(_error_message(status, message), status_code=status, response=resp, body=data)
        return data

    async def aclose(self) -> None:
        if self._raw is not None:
            raw, self._raw = self._raw, None
            raw.close()
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
