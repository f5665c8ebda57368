"""A scripted batch server on 127.0.0.1: OpenAI's file and batch endpoints and Anthropic's Message Batches.

Each request of a batch is answered by the same responder a ``FakeLLMServer`` takes (``respond(Request)``),
so a batch run and an interactive run get the same scripted replies. ``submissions`` logs every batch
submitted; ``hold`` keeps every batch pending (a run killed while it waits), ``hold_from = n`` every batch from
the n-th submission on (0-based: the earlier ones end as usual); ``fate(batch_number, request)``
scripts what happens to a request: ``"ok"`` (answered), ``"expired"`` (the batch expires before it), or
``(status, message)`` (the request fails inside the batch).
"""
from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from evosyn.benchmarks.fake_llm_server import Reply, Request

Fate = Callable[[int, Request], Any]


def _multipart(content_type: str, raw: bytes) -> dict[str, bytes]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    return {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.iter_parts()}


class BatchServer:
    def __init__(self, respond: Callable[[Request], Any], fate: Fate | None = None, polls_to_end: int = 1):
        self.respond, self.fate, self.polls_to_end = respond, fate or (lambda n, r: "ok"), polls_to_end
        self.submissions: list[dict[str, Any]] = []  # {"api", "id", "custom_ids"}
        self.polls = 0
        self.hold = threading.Event()  # set: every batch stays pending
        self.hold_from: int | None = None  # a number: every batch submitted as that number or later stays pending
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: Any, text: str | None = None) -> None:
                data = text.encode() if text is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/jsonl" if text is not None else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                status, payload, text = outer.get(self.path)
                self._send(status, payload, text)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, payload = outer.post(self.path, self.headers.get("Content-Type", ""), raw)
                self._send(status, payload)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    # ------------------------------------------------------------ lifecycle
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> BatchServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def polls_of(self, n: int) -> int:
        """How often the n-th submitted batch was polled (``-1``: the latest)."""
        with self._lock:
            return self.batches[self.submissions[n]["id"]]["polls"]

    # ------------------------------------------------------------ endpoints
    def post(self, path: str, content_type: str, raw: bytes) -> tuple[int, Any]:
        with self._lock:
            if path == "/v1/files":
                parts = _multipart(content_type, raw)
                if parts.get("purpose") != b"batch":
                    return 400, {"error": {"message": "purpose must be batch"}}
                fid = f"file-{next(self._ids)}"
                self.files[fid] = parts["file"]
                return 200, {"id": fid, "object": "file", "purpose": "batch", "bytes": len(parts["file"])}
            body = json.loads(raw or b"{}")
            if path == "/v1/batches":
                lines = [json.loads(x) for x in self.files[body["input_file_id"]].decode().splitlines() if x]
                requests = [(x["custom_id"], Request("/v1/chat/completions", x["body"], {})) for x in lines]
                return 200, self._new("openai", requests)
            if path == "/v1/messages/batches":
                requests = [(x["custom_id"], Request("/v1/messages", x["params"], {})) for x in body["requests"]]
                return 200, self._new("anthropic", requests)
        return 404, {"error": {"message": f"no route {path}"}}

    def _new(self, api: str, requests: list[tuple[str, Request]]) -> dict[str, Any]:
        bid = f"batch_{next(self._ids)}"
        self.batches[bid] = {"api": api, "requests": requests, "polls": 0, "number": len(self.submissions),
                             "info": None}
        self.submissions.append({"api": api, "id": bid, "custom_ids": [cid for cid, _ in requests]})
        return self._pending(bid)

    def _pending(self, bid: str) -> dict[str, Any]:
        if self.batches[bid]["api"] == "openai":
            return {"id": bid, "object": "batch", "status": "in_progress", "output_file_id": None,
                    "error_file_id": None}
        return {"id": bid, "type": "message_batch", "processing_status": "in_progress", "results_url": None}

    def get(self, path: str) -> tuple[int, Any, str | None]:
        with self._lock:
            parts = path.strip("/").split("/")
            if path.startswith("/v1/files/") and path.endswith("/content"):
                return 200, None, self.files[parts[2]].decode()
            if path.startswith("/v1/messages/batches/") and path.endswith("/results"):
                return 200, None, self.files[f"results-{parts[3]}"].decode()
            bid = parts[-1]
            if bid not in self.batches:
                return 404, {"error": {"message": f"no batch {bid}"}}, None
            self.polls += 1
            batch = self.batches[bid]
            batch["polls"] += 1
            held = self.hold.is_set() or (self.hold_from is not None and batch["number"] >= self.hold_from)
            if batch["info"] is None and (held or batch["polls"] < self.polls_to_end):
                return 200, self._pending(bid), None
            if batch["info"] is None:
                batch["info"] = self._end(bid, batch)
            return 200, batch["info"], None

    def _end(self, bid: str, batch: dict[str, Any]) -> dict[str, Any]:
        """Answer the batch's requests (as scripted) and write its result files."""
        openai = batch["api"] == "openai"
        out, errors, expired = [], [], False
        for cid, request in batch["requests"]:
            fate = self.fate(batch["number"], request)
            if fate == "ok":
                reply = self.respond(request)
                body = reply.body if isinstance(reply, Reply) else reply
                out.append({"custom_id": cid, "response": {"status_code": 200, "body": body}, "error": None}
                           if openai else {"custom_id": cid, "result": {"type": "succeeded", "message": body}})
            elif fate == "expired":
                expired = True
                errors.append({"custom_id": cid, "response": None, "error": {
                    "code": "batch_expired", "message": "This request could not be executed before the completion "
                                                        "window expired."}}
                              if openai else {"custom_id": cid, "result": {"type": "expired"}})
            else:
                status, message = fate
                etype = "invalid_request_error" if status == 400 else "api_error"
                errors.append({"custom_id": cid, "response": {"status_code": status, "body": {
                    "error": {"message": message, "type": etype}}}, "error": None}
                              if openai else {"custom_id": cid, "result": {"type": "errored", "error": {
                                  "type": "error", "error": {"type": etype, "message": message}}}})
        if not openai:
            self.files[f"results-{bid}"] = "".join(json.dumps(x) + "\n" for x in out + errors).encode()
            return {"id": bid, "type": "message_batch", "processing_status": "ended",
                    "results_url": f"{self.anthropic_base_url}/v1/messages/batches/{bid}/results"}
        info = {"id": bid, "object": "batch", "status": "expired" if expired else "completed",
                "output_file_id": None, "error_file_id": None}
        for field, lines in (("output_file_id", out), ("error_file_id", errors)):
            if lines:
                fid = f"file-{next(self._ids)}"
                self.files[fid] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                info[field] = fid
        return info
