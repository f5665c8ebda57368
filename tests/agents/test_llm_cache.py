"""The reply cache's append-only logs: what a crash, a rerun, another process and the older layout leave readable."""
from __future__ import annotations

import json
import multiprocessing
import os

from evosyn.agents.llm import cache as C
from evosyn.agents.llm.cache import ResponseCache, request_blob, request_key

REQ = {"model": "m", "messages": [{"role": "user", "content": "hi \u00e9"}], "attempt": 0}
REPLY = {"text": "hello", "input_tokens": 3, "output_tokens": 1}


def _fresh(root) -> ResponseCache:
    """A cache as a new process opens it (the process-wide index of that folder forgotten)."""
    C._logs.pop(str(root.absolute()), None)
    return ResponseCache(root)


def test_a_reply_put_is_got_in_this_process_and_the_next(tmp_path):
    key = request_key(REQ)
    ResponseCache(tmp_path).put(key, REQ, REPLY)
    assert ResponseCache(tmp_path).get(key) == REPLY  # another client of the same folder
    again = _fresh(tmp_path)
    assert again.get(key) == REPLY
    assert [e["request"] for e in again.entries()] == [json.loads(request_blob(REQ))]


def test_the_blob_and_the_request_give_the_same_entry(tmp_path):
    key = request_key(REQ)
    ResponseCache(tmp_path).put(key, request_blob(REQ), REPLY)
    assert _fresh(tmp_path).get(key) == REPLY and len(list(os.scandir(tmp_path))) == 1


def test_a_torn_last_line_reads_as_missing_and_the_rest_survives(tmp_path):
    cache = ResponseCache(tmp_path)
    good, torn = request_key(REQ), request_key({**REQ, "attempt": 1})
    cache.put(good, REQ, REPLY)
    (log,) = tmp_path.glob("log-*.jsonl")
    with open(log, "ab") as f:  # a crash in the middle of a write: no newline at the end
        f.write(f'{{"key":"{torn}","request":{{}},"reply":{{"te'.encode())
    again = _fresh(tmp_path)
    assert again.get(good) == REPLY and again.get(torn) is None
    again.put(torn, {**REQ, "attempt": 1}, {**REPLY, "text": "asked again"})  # into a new log of its own
    assert _fresh(tmp_path).get(torn)["text"] == "asked again" and len(list(tmp_path.glob("log-*.jsonl"))) == 2


def test_an_unparsable_entry_is_missing_and_the_newest_entry_of_a_key_wins(tmp_path):
    key = request_key(REQ)
    (tmp_path / "log-1-a.jsonl").write_text(f'{{"key":"{key}","request":{{}},"reply":not json}}\n')
    cache = _fresh(tmp_path)
    assert cache.get(key) is None
    cache.put(key, REQ, REPLY)
    assert cache.get(key) == REPLY and _fresh(tmp_path).get(key) == REPLY  # whichever log sorts first


def test_the_older_one_file_per_entry_layout_is_still_read(tmp_path):
    key = request_key(REQ)
    old = tmp_path / key[:2] / f"{key}.json"
    old.parent.mkdir()
    old.write_text(json.dumps({"key": key, "request": REQ, "reply": REPLY}))
    cache = _fresh(tmp_path)
    assert cache.get(key) == REPLY and [e["key"] for e in cache.entries()] == [key]


def test_a_log_deleted_under_the_process_is_replaced(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put(request_key(REQ), REQ, REPLY)
    for log in tmp_path.glob("log-*.jsonl"):
        log.unlink()
    other = {**REQ, "attempt": 2}
    cache.put(request_key(other), other, REPLY)
    assert _fresh(tmp_path).get(request_key(other)) == REPLY


def _child_put(root: str) -> None:
    req = {**REQ, "attempt": 9}
    ResponseCache(root).put(request_key(req), req, REPLY)


def test_a_forked_child_writes_a_log_of_its_own(tmp_path):
    cache = ResponseCache(tmp_path)
    cache.put(request_key(REQ), REQ, REPLY)
    child = multiprocessing.get_context("fork").Process(target=_child_put, args=(str(tmp_path),))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    again = _fresh(tmp_path)
    assert len(list(tmp_path.glob("log-*.jsonl"))) == 2
    assert again.get(request_key(REQ)) == REPLY and again.get(request_key({**REQ, "attempt": 9})) == REPLY
