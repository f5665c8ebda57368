"""The two batch APIs, each as submit / status / results over the provider's transport (one HTTP stack).

OpenAI's Batch API: the requests as a JSON-lines file (``POST /files``, purpose ``batch``), a batch over
it (``POST /batches``), polled (``GET /batches/{id}``) until ``completed`` / ``failed`` / ``expired`` /
``cancelled``; the replies and the failures are JSON-lines files (``output_file_id``, ``error_file_id``).
Anthropic's Message Batches: the requests in one body (``POST /v1/messages/batches``), polled until
``processing_status`` is ``ended``; the results are JSON lines at ``results_url``.

A request's ``custom_id`` is its cache key (64 hex characters: both APIs accept it), so a result maps
back to its request and its cache entry. ``results`` gives each custom id an ``Outcome``: the reply's
body (a chat completion, or a message), or why it has none and whether sending it again may help
(expired, cancelled, a 429 or 5xx inside the batch) or not (a request the API refused).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ENDED_OPENAI = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class Outcome:
    body: Any = None  # the reply as the interactive endpoint would have sent it; None: no reply
    error: str = ""
    transient: bool = False  # no reply, but another batch may get one


def _lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in (text or "").splitlines():
        if line.strip():
            try:
                item = json.loads(line)
            except json.JSONDecodeError:  # a torn line: its request has no result, and is sent again
                continue
            if isinstance(item, dict):
                out.append(item)
    return out


def _transient_status(status: Any) -> bool:
    return status in (408, 409, 429) or (isinstance(status, int) and status >= 500)


class OpenAIBatches:
    """OpenAI's Batch API over the chat completions endpoint (``base_url`` ends in /v1, as for chat)."""

    endpoint = "/v1/chat/completions"

    def __init__(self, transport: Any):
        self.transport = transport

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        text = "".join(json.dumps({"custom_id": cid, "method": "POST", "url": self.endpoint, "body": body}) + "\n"
                       for cid, body in requests)
        upload = await self.transport.upload("/files", {"purpose": "batch"}, "evosyn-batch.jsonl", text.encode())
        batch = await self.transport.post("/batches", {"input_file_id": upload["id"], "endpoint": self.endpoint,
                                                       "completion_window": "24h"})
        return batch["id"]

    async def status(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        info = await self.transport.request("GET", f"/batches/{batch_id}")
        return info.get("status") in ENDED_OPENAI, info

    async def results(self, info: dict[str, Any]) -> dict[str, Outcome]:
        out: dict[str, Outcome] = {}
        if info.get("status") == "failed":  # the batch itself was refused (e.g. its file): nothing ran
            errors = (info.get("errors") or {}).get("data") or []
            why = "; ".join(str(e.get("message", e)) for e in errors[:3]) or "the batch failed"
            return {"*": Outcome(error=f"batch {info.get('id')} failed: {why}")}
        for field in ("output_file_id", "error_file_id"):
            if info.get(field):
                text = await self.transport.request("GET", f"/files/{info[field]}/content", text=True)
                for item in _lines(text):
                    out[item.get("custom_id", "")] = self._outcome(item)
        return out

    @staticmethod
    def _outcome(item: dict[str, Any]) -> Outcome:
        response = item.get("response") or {}
        status = response.get("status_code")
        if status == 200 and isinstance(response.get("body"), dict):
            return Outcome(body=response["body"])
        error = item.get("error") or (response.get("body") or {}).get("error") or {}
        code = error.get("code", "") if isinstance(error, dict) else ""
        message = error.get("message", "") if isinstance(error, dict) else str(error)
        transient = code in ("batch_expired", "batch_cancelled") or _transient_status(status)
        return Outcome(error=f"Error code: {status or code} - {message or code}", transient=transient)


class AnthropicBatches:
    """Anthropic's Message Batches (``base_url`` without /v1, as for messages)."""

    def __init__(self, transport: Any):
        self.transport = transport

    async def submit(self, requests: list[tuple[str, dict[str, Any]]]) -> str:
        batch = await self.transport.post("/v1/messages/batches",
                                          {"requests": [{"custom_id": cid, "params": body} for cid, body in requests]})
        return batch["id"]

    async def status(self, batch_id: str) -> tuple[bool, dict[str, Any]]:
        info = await self.transport.request("GET", f"/v1/messages/batches/{batch_id}")
        return info.get("processing_status") == "ended", info

    async def results(self, info: dict[str, Any]) -> dict[str, Outcome]:
        url = info.get("results_url") or f"/v1/messages/batches/{info.get('id')}/results"
        text = await self.transport.request("GET", url, text=True)
        out: dict[str, Outcome] = {}
        for item in _lines(text):
            result = item.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded" and isinstance(result.get("message"), dict):
                out[item.get("custom_id", "")] = Outcome(body=result["message"])
                continue
            error = (result.get("error") or {}).get("error") or result.get("error") or {}
            etype = error.get("type", kind) if isinstance(error, dict) else kind
            message = error.get("message", "") if isinstance(error, dict) else str(error)
            transient = kind in ("expired", "canceled") or etype in ("rate_limit_error", "api_error",
                                                                      "overloaded_error")
            out[item.get("custom_id", "")] = Outcome(error=f"{kind}: {etype} {message}".strip(), transient=transient)
        return out


def batch_api(provider: Any) -> OpenAIBatches | AnthropicBatches:
    """The batch API of a provider adapter (``evosyn.agents.llm.providers``), on its transport."""
    if provider.name == "anthropic":
        return AnthropicBatches(provider.transport)
    if provider.name == "openai":
        return OpenAIBatches(provider.transport)
    raise ValueError(f"{provider.name}: no batch API (batch: true needs provider openai or anthropic)")
