"""A scripted LLM server on 127.0.0.1: OpenAI chat completions and Anthropic messages over real HTTP.

Used by the tests (through ``tests/fakes``) and by ``evosyn bench llm``, so the
real ``openai`` and ``anthropic`` SDKs are exercised end to end without a
network. ``POST /v1/chat/completions`` and ``POST /v1/messages`` are answered
by a responder (``respond(request) -> Reply | dict``) after a fixed latency;
``GET /stats`` reports how many requests came and the most ever in flight.
A ``Script`` scripts replies per request: valid, malformed, truncated, 429
with retry-after, 500, slow. Threaded, keep-alive, a deep accept queue: it
serves 64+ concurrent clients.

Run it standalone (the benchmark does, so the server has its own CPU and GIL):
``python -m evosyn.benchmarks.fake_llm_server --latency 0.2 --responder evosyn.benchmarks.llm:planner_reply``
prints ``PORT <n>`` on its first line.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass
class Request:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]  # names in lower case

    @property
    def anthropic(self) -> bool:
        return self.path.rstrip("/").endswith("/messages")


@dataclass
class Reply:
    body: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # on top of the server's fixed latency
    raw: bytes | None = None  # sent as the body instead of ``body`` (bytes no JSON encoder would write)


Responder = Callable[[Request], "Reply | dict[str, Any]"]


# ---------------------------------------------------------------- reply builders
def _tokens(body: dict[str, Any]) -> int:
    return max(1, len(json.dumps(body.get("messages", []))) // 4)


def openai_reply(content: str | None = None, tool_call: dict[str, Any] | None = None, *,
                 finish_reason: str | None = None, model: str = "scripted", prompt_tokens: int = 10,
                 completion_tokens: int = 5) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_call is not None:
        args = tool_call["arguments"]
        message["tool_calls"] = [{"id": tool_call.get("id", "call_0"), "type": "function",
                                  "function": {"name": tool_call["name"],
                                               "arguments": args if isinstance(args, str) else json.dumps(args)}}]
    finish = finish_reason or ("tool_calls" if tool_call else "stop")
    return {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


def anthropic_reply(text: str | None = None, tool_use: dict[str, Any] | None = None, *,
                    stop_reason: str | None = None, model: str = "scripted", input_tokens: int = 10,
                    output_tokens: int = 5) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    if tool_use is not None:
        content.append({"type": "tool_use", "id": tool_use.get("id", "toolu_0"), "name": tool_use["name"],
                        "input": tool_use["input"]})
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": stop_reason or ("tool_use" if tool_use else "end_turn"), "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def answer(request: Request, payload: dict[str, Any] | str, *, truncated: bool = False) -> dict[str, Any]:
    """The model's answer in the requester's protocol: JSON text (OpenAI) or the forced tool (Anthropic).

    A string payload is sent as-is (malformed JSON, prose); ``truncated`` marks the
    reply as cut off by max_tokens.
    """
    text = payload if isinstance(payload, str) else json.dumps(payload)
    if request.anthropic:
        choice = request.body.get("tool_choice") or {}
        tool = choice.get("name") or ((request.body.get("tools") or [{}])[-1].get("name"))
        stop = "max_tokens" if truncated else None
        if tool and isinstance(payload, dict):
            return anthropic_reply(tool_use={"name": tool, "input": payload}, stop_reason=stop,
                                   input_tokens=_tokens(request.body), output_tokens=max(1, len(text) // 4))
        return anthropic_reply(text=text, stop_reason=stop, input_tokens=_tokens(request.body),
                               output_tokens=max(1, len(text) // 4))
    return openai_reply(text, finish_reason="length" if truncated else None, prompt_tokens=_tokens(request.body),
                        completion_tokens=max(1, len(text) // 4))


def error(status: int, message: str = "scripted error", retry_after: float | None = None,
          anthropic: bool = False) -> Reply:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    if anthropic:
        body = {"type": "error", "error": {"type": "rate_limit_error" if status == 429 else "api_error",
                                           "message": message}}
    else:
        body = {"error": {"message": message, "type": "rate_limit" if status == 429 else "server_error"}}
    return Reply(body=body, status=status, headers=headers)


class Script:
    """Replies in order, one per request (thread-safe), then ``default`` for every later request.

    Each step is a ``Reply``, a dict (200 JSON), or a callable ``(Request) -> Reply | dict``.
    """

    def __init__(self, *steps: Any, default: Any = None):
        self.steps = list(steps)
        self.default = default
        self._lock = threading.Lock()

    def __call__(self, request: Request) -> Reply | dict[str, Any]:
        with self._lock:
            step = self.steps.pop(0) if self.steps else self.default
        if step is None:
            return error(500, "script exhausted", anthropic=request.anthropic)
        return step(request) if callable(step) else step


# ---------------------------------------------------------------- the server
class FakeLLMServer:
    def __init__(self, respond: Responder, latency_s: float = 0.0, keep_requests: bool = True):
        self.respond, self.latency_s, self.keep_requests = respond, latency_s, keep_requests
        self.requests: list[dict[str, Any]] = []
        self.count = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: clients reuse connections
            # headers and body go out as two writes; with Nagle on, the body waits for the
            # client's delayed ACK of the headers (~40 ms a reply on Linux)
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None,
                      raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/stats"):
                    self._send(200, outer.stats())
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                body = json.loads(raw or b"{}")
                request = Request(self.path, body, {k.lower(): v for k, v in self.headers.items()})
                with outer._lock:
                    outer.count += 1
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    if outer.keep_requests:
                        outer.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                try:
                    reply = outer.respond(request)
                    reply = reply if isinstance(reply, Reply) else Reply(body=reply)
                    if outer.latency_s + reply.delay_s > 0:
                        time.sleep(outer.latency_s + reply.delay_s)
                finally:
                    with outer._lock:
                        outer.in_flight -= 1
                self._send(reply.status, reply.body, reply.headers, reply.raw)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 512  # the default (5) drops connects under a burst of 64

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    @property
    def base_url(self) -> str:  # OpenAI SDKs: ".../v1"
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:  # the Anthropic SDK appends /v1/messages itself
        return f"http://127.0.0.1:{self.port}"

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"requests": self.count, "max_in_flight": self.max_in_flight, "in_flight": self.in_flight}

    def start(self) -> "FakeLLMServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _load(dotted: str) -> Responder:
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before every reply")
    ap.add_argument("--responder", required=True, help="module:function answering each request")
    args = ap.parse_args(argv)
    sys.setswitchinterval(0.0005)  # many handler threads wake at once; let each reply go out promptly
    server = FakeLLMServer(_load(args.responder), args.latency, keep_requests=False)
    print(f"PORT {server.port}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
