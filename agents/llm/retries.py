"""How a failed LLM request is read: whether to retry it, how long the server asks us to wait, and the request
limit a 429 announces (``LLMClient`` retries and paces by these)."""
from __future__ import annotations

import time
from email.utils import parsedate_to_datetime


def is_transient(exc: BaseException, errors: tuple[type, type, type]) -> bool:
    """``errors`` are the provider SDK's (connection, status, any API) error classes."""
    connection, status, _ = errors
    if isinstance(exc, connection):  # timeouts are connection errors too
        return True
    if isinstance(exc, status):
        code = getattr(exc, "status_code", 0) or 0
        return code in (408, 409, 429) or code >= 500
    return False


def retry_after_s(exc: BaseException) -> float | None:
    """The server's own wait (``retry-after-ms`` or ``retry-after``, seconds or an HTTP date)."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


# the request limit a provider announces with every reply: OpenAI's header, Anthropic's
RPM_HEADERS = ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")


def announced_rpm(exc: BaseException) -> int | None:
    """The requests-per-minute limit a 429 announces in its headers, if any."""
    if getattr(exc, "status_code", 0) != 429:
        return None
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name in RPM_HEADERS:
        try:
            value = int(headers.get(name) or 0)
        except (TypeError, ValueError):
            continue
        if value > 0:
            return value
    return None
