"""The HTTP transport of every LLM call: one aiohttp session per client, a JSON body in, JSON out.

One stack for all providers: OpenAI's chat completions, OpenAI-compatible servers (vLLM,
``llamafactory-cli api``, llama.cpp's server) and Anthropic's messages endpoint are each a
POST of a JSON body with a few headers; aiohttp sends them all. Why not the SDKs' request path:
`evosyn bench llm` measured about 1.5 ms of client CPU per call inside the openai SDK (its
request-options model and URL handling, then httpx's request, URL and header models, then its
aiohttp transport under them), for five fields read from the reply; the Anthropic SDK is built the
same way. Building the body and reading the reply is the providers' job (``evosyn.agents.llm.providers``);
retries are the client's (``evosyn.agents.llm.client``), so backoff, ``retry-after`` and the retry bound are
the same for every provider.

Failures keep the SDKs' meaning, in classes of the same names: a refused or reset connection and a
timeout are an ``APIConnectionError``; an HTTP error is an ``APIStatusError`` with ``status_code`` and
the ``response`` headers (for ``retry-after``); a body that is not JSON comes back as its text, as the
SDKs return it; one JSON cannot decode (nested too deep) raises what ``json`` raises, so the client
records an unusable reply. The key never appears in an error.

What is read is bounded while it is read: a reply is at most ``max_reply_bytes`` (a role's
``max_reply_bytes``; 8 MiB by default, some hundred times a long completion), refused as soon as its
``Content-Length`` announces more or its body grows past it, so a hostile or broken server cannot fill
memory (``ReplyTooLarge``: an unusable reply, re-asked like any other). The whole exchange, headers and
body, ends at the request's timeout (aiohttp's ``total``), so a stalled or endless reply ends there in
one line; aiohttp parses a chunked body once as it arrives, and ``json`` decodes it once.
"""
from __future__ import annotations

import json
import os
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import aiohttp

DEFAULT_OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_ANTHROPIC_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"  # the API version the messages body is written for (providers.AnthropicProvider)
DEFAULT_MAX_REPLY_BYTES = 8 * 1024 * 1024
READ_CHUNK = 64 * 1024


class APIError(Exception):
    """Any failure of the API (the SDKs' ``APIError``): the base of the two below."""


class APIConnectionError(APIError):
    """No reply: the connection failed or the request timed out (retried)."""


class APIStatusError(APIError):
    """An HTTP error status; ``response.headers`` holds the server's ``retry-after``."""

    def __init__(self, message: str, *, status_code: int, response: Any, body: Any):
        super().__init__(message)
        self.status_code, self.response, self.body = status_code, response, body


ERRORS = (APIConnectionError, APIStatusError, APIError)


class ReplyTooLarge(ValueError):
    """The reply announced or sent more than the role's ``max_reply_bytes``: not an API error (so not retried as
    one); the client records it as an unusable reply."""


def _error_message(status: int, body: Any) -> str:
    # the SDKs' wording ("Error code: 429 - {...}"), so logs and call rows read as before
    return f"Error code: {status} - {body}"


def env_proxy(url: str) -> str | None:
    """The proxy the environment sets for ``url`` (``HTTPS_PROXY`` / ``HTTP_PROXY``, minus ``NO_PROXY``), as
    httpx and the SDKs honour it; None for none."""
    parts = urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass_environment(parts.hostname):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme) or None


def openai_headers(api_key: str) -> dict[str, str]:
    """The bearer key and the organization / project headers the openai SDK takes from the environment."""
    headers = {"Authorization": f"Bearer {api_key}"}
    for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
        if os.environ.get(env):
            headers[header] = os.environ[env]
    return headers


def anthropic_headers(api_key: str) -> dict[str, str]:
    return {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}


class ChatTransport:
    """POSTs to one base URL's endpoints; the session is built on first use, inside the caller's loop."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        self.base_url = base_url.rstrip("/")
        self.timeout, self.max_reply_bytes = timeout, max_reply_bytes
        self.headers = {**headers, "Content-Type": "application/json", "Accept": "application/json"}
        self.proxy = env_proxy(self.base_url)
        self._session: aiohttp.ClientSession | None = None

    def _get(self) -> aiohttp.ClientSession:
        if self._session is None:
            # no connection cap of its own: the client's slots bound how many requests are in flight;
            # the environment's proxy is looked up once (env_proxy), not by aiohttp at every request
            # (trust_env), where it was a third of a call's CPU
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), headers=self.headers, trust_env=False,
                timeout=aiohttp.ClientTimeout(total=self.timeout), json_serialize=json.dumps)
        return self._session

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        return await self.request("POST", path, data=json.dumps(body).encode())

    async def request(self, method: str, path: str, *, data: bytes | None = None, text: bool = False) -> Any:
        """One request (``path`` below the base URL, or a full URL a reply named); the JSON reply, or its text
        with ``text`` (a batch's results: JSON lines)."""
        url = path if path.startswith(("http://", "https://")) else self.base_url + path
        return await self._reply(self._get().request(method, url, data=data, proxy=self.proxy), text)

    async def upload(self, path: str, fields: dict[str, str], filename: str, content: bytes) -> Any:
        """A multipart upload (a batch's input file). Its own short-lived session: the shared one sends a JSON
        content type with every request, which would hide the multipart boundary."""
        form = aiohttp.FormData()
        for name, value in fields.items():
            form.add_field(name, value)
        form.add_field("file", content, filename=filename, content_type="application/jsonl")
        headers = {k: v for k, v in self.headers.items() if k != "Content-Type"}
        async with aiohttp.ClientSession(headers=headers, trust_env=False,
                                         timeout=aiohttp.ClientTimeout(total=self.timeout)) as session:
            return await self._reply(session.post(self.base_url + path, data=form, proxy=self.proxy), False)

    async def _reply(self, pending: Any, text: bool) -> Any:
        try:
            async with pending as resp:
                raw, status = await self._body(resp), resp.status
        except TimeoutError:  # aiohttp's total timeout (asyncio.TimeoutError is TimeoutError)
            raise APIConnectionError("Request timed out.") from None
        except aiohttp.ClientError as exc:
            raise APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}") from None
        body = raw.decode("utf-8", "replace")
        try:
            parsed = body if text and status < 400 else json.loads(body)
        except json.JSONDecodeError:  # not JSON: its text, as the SDKs hand it back
            parsed = body
        if status >= 400:
            message = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
            raise APIStatusError(_error_message(status, message), status_code=status, response=resp, body=parsed)
        return parsed

    async def _body(self, resp: aiohttp.ClientResponse) -> bytes:
        """The body, refused once it is (or is announced to be) over ``max_reply_bytes``; leaving the ``async
        with`` early closes the connection, so the rest is never read."""
        limit = self.max_reply_bytes
        if resp.content_length is not None and resp.content_length > limit:
            raise ReplyTooLarge(f"the server announced a reply of {resp.content_length} bytes, over the "
                                f"{limit}-byte bound (max_reply_bytes)")
        raw = bytearray()
        async for chunk in resp.content.iter_chunked(READ_CHUNK):
            raw += chunk
            if len(raw) > limit:
                raise ReplyTooLarge(f"the server's reply passed the {limit}-byte bound (max_reply_bytes)")
        return bytes(raw)

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
