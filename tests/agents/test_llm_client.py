"""The LLM client over its one HTTP transport (aiohttp) against scripted servers on 127.0.0.1."""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from evosyn.agents.llm import LLMOutputError, LLMUnavailable, check_role_config, make_client
from evosyn.agents.llm.cache import ResponseCache
from evosyn.config import ConfigError, RoleConfig
from tests.fakes.anthropic_server import anthropic_reply
from tests.fakes.openai_server import FakeLLMServer, Reply, Script, answer, error, openai_reply

KEY = "sk-test-SECRET123"
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5", "openai_compatible": "Qwen/Qwen3-8B"}
PROVIDERS = list(MODELS)
MSGS = [{"role": "system", "content": "You plan tasks."}, {"role": "user", "content": "Plan one task."}]


class Plan(BaseModel):
    intent: str
    num_write: int
    tools: list[str]


GOOD = {"intent": "change a flight", "num_write": 2, "tools": ["update_reservation_flights"]}


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("EVOSYN_TEST_LLM_KEY", KEY)


def client(server, provider, tmp_path=None, **cfg):
    base = server.anthropic_base_url if provider == "anthropic" else server.base_url
    role = RoleConfig(backend="llm", provider=provider, model=MODELS[provider], base_url=base,
                      api_key_env="EVOSYN_TEST_LLM_KEY", **cfg)
    return make_client("planner", role, cache_dir=tmp_path / "cache" if tmp_path else None, cache=bool(tmp_path),
                       backoff_initial_s=0.01, backoff_max_s=0.05)


def good(request):
    return answer(request, GOOD)


# ---------------------------------------------------------------- structured output
@pytest.mark.parametrize("provider", PROVIDERS)
def test_structured_output_is_parsed_and_logged(provider):
    with FakeLLMServer(good) as server:
        c = client(server, provider)
        result = c.chat_sync(MSGS, schema=Plan)
        body = server.requests[0]["body"]
    assert result.parsed == Plan(**GOOD) and not result.cache_hit and result.finish_reason == "stop"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    if provider == "anthropic":  # JSON through a forced tool; the system prompt moved to `system`
        assert body["tool_choice"] == {"type": "tool", "name": "Plan"} and body["system"] == "You plan tasks."
        assert body["tools"][0]["input_schema"]["required"] == ["intent", "num_write", "tools"]
    else:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Plan" and fmt["json_schema"]["strict"]
    row = c.calls[-1]
    assert (row.status, row.provider, row.model, row.role, row.cache_hit) == ("ok", provider, MODELS[provider],
                                                                             "planner", False)
    assert (row.cost_usd > 0) == (provider != "openai_compatible")  # self-hosted models cost nothing
    assert row.input_tokens == result.usage.input_tokens


@pytest.mark.parametrize("mode, field", [("response_format", "response_format"),
                                         ("structured_outputs", "structured_outputs"),
                                         ("guided_json", "guided_json"), ("none", None)])
def test_a_local_server_gets_the_schema_in_the_configured_field(mode, field, tmp_path):
    """llama.cpp's server and vLLM constrain decoding to the schema they are sent (RoleConfig.structured_output)."""
    fields = ("response_format", "structured_outputs", "guided_json")
    with FakeLLMServer(good) as server:
        c = client(server, "openai_compatible", tmp_path, structured_output=mode)
        assert c.chat_sync(MSGS, schema=Plan).parsed == Plan(**GOOD)  # validated on our side whatever is sent
        c.chat_sync(MSGS)  # no schema: no field
        body, plain = server.requests[0]["body"], server.requests[1]["body"]
        again = client(server, "openai_compatible", tmp_path, structured_output=mode).chat_sync(MSGS, schema=Plan)
        assert again.cache_hit and server.count == 2  # the same mode: the same cache key
        if mode != "response_format":  # another way to send the schema is another request: its own key
            assert not client(server, "openai_compatible", tmp_path).chat_sync(MSGS, schema=Plan).cache_hit
    assert [f for f in fields if f in body] == ([field] if field else []) and not any(f in plain for f in fields)
    if field == "response_format":
        assert body[field]["json_schema"]["schema"]["required"] == ["intent", "num_write", "tools"]
    elif field is not None:  # vLLM's fields take the schema itself
        schema = body[field]["json"] if field == "structured_outputs" else body[field]
        assert schema["required"] == ["intent", "num_write", "tools"] and schema["additionalProperties"] is False


def test_schema_bounds_narrow_every_free_string_and_array_sent_to_a_local_server(tmp_path):
    """A grammar-constrained small model cannot fill a string or a list until max_tokens (RoleConfig bounds)."""
    class Step(BaseModel):
        tool: str
        kind: Literal["read", "write"]

    class Steps(BaseModel):
        title: str = Field(max_length=10)
        notes: list[str]
        steps: list[Step] = Field(max_length=5)
        arguments: dict[str, Any] = Field(default_factory=dict)

    reply = {"title": "short", "notes": ["a"], "steps": [{"tool": "t", "kind": "read"}], "arguments": {"n": [1]}}
    with FakeLLMServer(lambda r: answer(r, reply)) as server:
        c = client(server, "openai_compatible", tmp_path, schema_max_string=40, schema_max_items=2)
        assert c.chat_sync(MSGS, schema=Steps).parsed == Steps(**reply)
        sent = server.requests[0]["body"]["response_format"]["json_schema"]["schema"]
        assert not client(server, "openai_compatible", tmp_path).chat_sync(MSGS, schema=Steps).cache_hit
        unbounded = server.requests[1]["body"]["response_format"]["json_schema"]["schema"]
    step = sent["$defs"]["Step"]["properties"]
    props = sent["properties"]
    assert props["title"]["maxLength"] == 10 and props["notes"]["items"]["maxLength"] == 40  # the tighter bound
    assert props["notes"]["maxItems"] == 2 and props["steps"]["maxItems"] == 2 and step["tool"]["maxLength"] == 40
    assert "maxLength" not in step["kind"]  # an enum is bounded already
    # an Any value (tool arguments) becomes a short string, a number, a boolean, null or a short list of those
    flat = props["arguments"]["additionalProperties"]["anyOf"]
    assert {"type": "string", "maxLength": 40} in flat and flat[-1]["maxItems"] == 2
    assert "maxItems" not in unbounded["properties"]["notes"] and "maxLength" not in unbounded["properties"]["notes"][
        "items"]  # without bounds the role's own schema goes as it is (and the cached one is not mutated)
    with pytest.raises(ConfigError, match="^roles.planner.schema_max_string / schema_max_items: bounds for a local"):
        check_role_config("planner", RoleConfig(backend="llm", provider="openai", model="gpt-4o",
                                                api_key_env="EVOSYN_TEST_LLM_KEY", schema_max_items=2))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tool_calls_round_trip(provider):
    tools = [{"type": "function", "function": {"name": "get_user", "description": "Look up a user",
                                               "parameters": {"type": "object",
                                                              "properties": {"user_id": {"type": "string"}}}}}]
    history = MSGS + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": '{"user_id": "u1"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"name": "Ann"}'}]

    def respond(request):
        if request.anthropic:
            return anthropic_reply(tool_use={"id": "t2", "name": "get_user", "input": {"user_id": "u2"}})
        return openai_reply(tool_call={"id": "t2", "name": "get_user", "arguments": {"user_id": "u2"}})

    with FakeLLMServer(respond) as server:
        result = client(server, provider).chat_sync(history, tools=tools)
        body = server.requests[0]["body"]
    assert [(t.id, t.name, t.arguments) for t in result.tool_calls] == [("t2", "get_user", {"user_id": "u2"})]
    if provider == "anthropic":
        assert body["tools"][0]["input_schema"]["properties"] == {"user_id": {"type": "string"}}
        assert body["messages"][1]["content"][0] == {"type": "tool_use", "id": "c1", "name": "get_user",
                                                     "input": {"user_id": "u1"}}
        assert body["messages"][2]["content"][0]["type"] == "tool_result"
    else:
        assert body["tools"] == tools


# ---------------------------------------------------------------- unusable replies
FAULTS = {
    "malformed": lambda r: answer(r, '{"intent": "x", "num_write": '),
    "schema_invalid": lambda r: answer(r, {"intent": "x", "num_write": "two", "tools": []}),
    "truncated": lambda r: answer(r, GOOD, truncated=True),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_unusable_reply_raises_output_error_with_raw(provider, fault):
    with FakeLLMServer(FAULTS[fault]) as server:
        c = client(server, provider)
        with pytest.raises(LLMOutputError) as info:
            c.chat_sync(MSGS, schema=Plan)
        assert server.count == 1  # not retried by the transport: the role decides
    expected = {"malformed": "malformed JSON", "schema_invalid": "schema-invalid Plan: num_write",
                "truncated": "truncated"}[fault]
    assert str(info.value).startswith(expected) and "\n" not in str(info.value)
    assert info.value.raw and (fault != "malformed" or info.value.raw == '{"intent": "x", "num_write": ')
    assert c.calls[-1].status == "invalid" and c.calls[-1].error == str(info.value)


def test_a_reply_that_is_not_json_is_an_output_error():
    with FakeLLMServer(lambda r: Reply(body="<html>bad gateway</html>")) as server:  # a JSON string, no object
        c = client(server, "openai")
        with pytest.raises(LLMOutputError, match="not a JSON object") as info:
            c.chat_sync(MSGS, schema=Plan)
    assert "bad gateway" in info.value.raw and c.calls[-1].status == "invalid"


# ---------------------------------------------------------------- transient errors
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_429_with_retry_after_and_500_are_retried(provider):
    anth = provider == "anthropic"
    script = Script(error(429, retry_after=0.3, anthropic=anth), error(500, anthropic=anth), default=good)
    with FakeLLMServer(script) as server:
        c = client(server, provider)
        t0 = time.perf_counter()
        result = c.chat_sync(MSGS, schema=Plan)
        elapsed = time.perf_counter() - t0
        assert server.count == 3
    assert result.parsed == Plan(**GOOD)
    assert elapsed >= 0.3  # the server's retry-after, not the 10 ms backoff
    # every HTTP attempt is a row (finding 6): two retried failures, then the reply
    assert [(r.status, r.transport_attempt, r.attempt) for r in c.calls] == [("retry", 1, 0), ("retry", 2, 0),
                                                                           ("ok", 3, 0)]
    assert "429" in c.calls[0].error and "500" in c.calls[1].error and c.http_requests == 3
    assert len({r.request_hash for r in c.calls}) == 1 and all(r.latency_s > 0 for r in c.calls)
    assert sum(r.latency_s for r in c.calls) <= elapsed  # each row its own attempt: no time counted twice


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_each_protocol_sends_its_key_and_headers(provider):
    with FakeLLMServer(good) as server:
        client(server, provider).chat_sync(MSGS, schema=Plan)
        sent = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
        path = server.requests[0]["path"]
    if provider == "anthropic":
        assert path == "/v1/messages" and sent["x-api-key"] == KEY and sent["anthropic-version"] == "2023-06-01"
        assert "authorization" not in sent
    else:
        assert path == "/v1/chat/completions" and sent["authorization"] == f"Bearer {KEY}" and "x-api-key" not in sent


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_429_that_announces_the_limit_paces_every_later_call(provider):
    """A limit learned from a 429's headers: the bucket starts empty and holds one second of requests, so
    calls of any client of that model go out at the announced rate instead of meeting more 429s."""
    anth = provider == "anthropic"
    refused = error(429, retry_after=0.05, anthropic=anth)
    refused.headers["anthropic-ratelimit-requests-limit" if anth else "x-ratelimit-limit-requests"] = "600"
    with FakeLLMServer(Script(refused, default=good)) as server:
        c = client(server, provider)
        assert c.limits.rpm is None
        c.chat_sync(MSGS, schema=Plan)
        assert c.limits.rpm is not None and c.limits.rpm.per_minute == 600 and c.limits.rpm.capacity == 10
        t0 = time.perf_counter()
        for i in range(5):  # 10 a second: the bucket, empty at the 429, lets these out about 0.1 s apart
            client(server, provider).chat_sync(MSGS + [{"role": "user", "content": f"again {i}"}], schema=Plan)
        elapsed = time.perf_counter() - t0
        assert server.count == 7
    assert elapsed >= 0.3
    assert [r.status for r in c.calls] == ["retry", "ok"]


def test_retries_exhausted_raise_unavailable():
    with FakeLLMServer(lambda r: error(503)) as server:
        c = client(server, "openai", max_retries=2)
        with pytest.raises(LLMUnavailable, match="unavailable after 3 attempts"):
            c.chat_sync(MSGS, schema=Plan)
        assert server.count == 3
    assert [(r.status, r.transport_attempt) for r in c.calls] == [("retry", 1), ("retry", 2), ("error", 3)]
    assert "503" in c.calls[-1].error and "after 3 attempts" in c.calls[-1].error


def test_slow_reply_times_out_then_is_retried():
    script = Script(Reply(delay_s=1.5), default=good)  # the first reply comes too late
    with FakeLLMServer(script) as server:
        result = client(server, "openai", timeout_s=0.3, max_retries=1).chat_sync(MSGS, schema=Plan)
        assert server.count == 2
    assert result.parsed == Plan(**GOOD)


def test_bad_request_is_not_retried():
    with FakeLLMServer(lambda r: error(400, "bad schema")) as server:
        with pytest.raises(LLMUnavailable, match="refused the request"):
            client(server, "openai").chat_sync(MSGS, schema=Plan)
        assert server.count == 1


# ---------------------------------------------------------------- cache
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_rerun_hits_the_cache_without_http(provider, tmp_path):
    with FakeLLMServer(Script(FAULTS["malformed"], default=good)) as server:
        first = client(server, provider, tmp_path)
        with pytest.raises(LLMOutputError):
            first.chat_sync(MSGS, schema=Plan)
        first.chat_sync(MSGS, schema=Plan, attempt=1)  # the role's re-ask: a fresh answer
        assert server.count == 2
        rerun = client(server, provider, tmp_path)  # a new process would see the same directory
        with pytest.raises(LLMOutputError, match="malformed JSON"):
            rerun.chat_sync(MSGS, schema=Plan)  # the same rejection, replayed
        result = rerun.chat_sync(MSGS, schema=Plan, attempt=1)
        assert server.count == 2 and rerun.http_requests == 0
        other = rerun.chat_sync(MSGS, schema=Plan, temperature=0.7)  # other sampling params: another key
        assert server.count == 3 and not other.cache_hit
    assert result.cache_hit and result.parsed == Plan(**GOOD) and result.usage.cost_usd == 0
    assert [(r.status, r.cache_hit) for r in rerun.calls] == [("invalid", True), ("ok", True), ("ok", False)]
    assert len(list(ResponseCache(tmp_path / "cache").entries())) == 3 and not list((tmp_path / "cache").rglob("*.tmp"))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_cache_that_cannot_be_written_loses_no_reply(provider, tmp_path, caplog):
    (tmp_path / "cache").write_text("a file where the cache folder should be\n")  # every put fails
    with FakeLLMServer(good) as server:
        c = client(server, provider, tmp_path)
        result = c.chat_sync(MSGS, schema=Plan)
    assert result.parsed == Plan(**GOOD) and not result.cache_hit
    # the sent (paid) reply is recorded
    assert [(r.status, r.cache_hit, r.output_tokens > 0) for r in c.calls] == [("ok", False, True)]
    assert any("reply not cached" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- store and secrets
def test_calls_land_in_the_store_and_duckdb(store, tmp_path):
    from evosyn.storage.catalog import connect

    with FakeLLMServer(Script(good, FAULTS["malformed"], default=good)) as server:
        c = client(server, "anthropic", tmp_path)
        c.chat_sync(MSGS, schema=Plan)
        with pytest.raises(LLMOutputError):
            c.chat_sync(MSGS, schema=Plan, attempt=1)
        c.chat_sync(MSGS, schema=Plan)  # cached
    assert c.flush(store, run_id="r1", round=2, chunk="planner-0") == 3 and c.calls == []
    rows = connect(store).execute("SELECT run_id, round, status, cache_hit, provider, cost_usd > 0 FROM llm_calls "
                                  "ORDER BY created_at, cache_hit, status").fetchall()
    assert sorted(rows) == sorted([("r1", 2, "ok", False, "anthropic", True), ("r1", 2, "invalid", False,
                                   "anthropic", True), ("r1", 2, "ok", True, "anthropic", False)])


def test_api_key_appears_nowhere(store, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)

    def echo_auth(request):  # a hostile server that echoes the key in its error message
        auth = request.headers.get("authorization") or request.headers.get("x-api-key") or ""
        assert KEY in auth
        return error(401, f"bad key {auth}")
    messages, sent = [], ""
    for provider in ("openai", "anthropic"):
        script = Script(error(429, retry_after=0.01), echo_auth, good, default=FAULTS["malformed"])
        with FakeLLMServer(script) as server:
            c = client(server, provider, tmp_path, max_retries=1)
            for attempt in range(3):
                try:
                    c.chat_sync(MSGS, schema=Plan, attempt=attempt)
                except (LLMOutputError, LLMUnavailable) as exc:
                    messages.append(str(exc))
            c.flush(store, run_id="r1", round=0, chunk=f"secrets-{provider}")
            sent += json.dumps(server.requests)
    assert KEY in sent  # the key was really used...
    assert sum("bad key" in m and "***" in m for m in messages) == 2, messages  # both providers, scrubbed
    everything = [p.read_bytes() for p in list(tmp_path.rglob("*")) + list(store.root.rglob("*")) if p.is_file()]
    assert all(KEY.encode() not in blob for blob in everything)  # ...and stored nowhere
    assert KEY not in caplog.text and not any(KEY in m for m in messages)
    assert "SECRET123" not in repr(c)


# ---------------------------------------------------------------- config
@pytest.mark.parametrize("cfg, field", [
    (dict(provider="openai", model="gpt-4o", api_key_env="EVOSYN_NO_SUCH_KEY"), "roles.planner.api_key_env"),
    (dict(provider="anthropic", model="claude-opus-4-5"), "roles.planner.api_key_env"),  # ANTHROPIC_API_KEY unset
    (dict(provider="openai", api_key_env="EVOSYN_TEST_LLM_KEY"), "roles.planner.model"),
    (dict(provider="openai", model="gpt-17", api_key_env="EVOSYN_TEST_LLM_KEY"), "roles.planner.model"),
    (dict(model="gpt-4o"), "roles.planner.provider"),
    (dict(provider="openai_compatible", model="Qwen/Qwen3-8B"), "roles.planner.base_url"),
    (dict(provider="openai", model="gpt-4o", api_key_env="EVOSYN_TEST_LLM_KEY", structured_output="guided_json"),
     "roles.planner.structured_output"),
    (dict(provider="anthropic", model="claude-opus-4-5", api_key_env="EVOSYN_TEST_LLM_KEY",
          structured_output="none"), "roles.planner.structured_output"),
])
def test_check_role_config_gives_one_line(cfg, field):
    with pytest.raises(ConfigError) as info:
        check_role_config("planner", RoleConfig(backend="llm", **cfg))
    message = str(info.value)
    assert message.startswith(field + ":") and "\n" not in message and KEY not in message


def test_check_role_config_accepts_valid_roles():
    check_role_config("planner", RoleConfig())  # embedded: nothing to check
    check_role_config("planner", RoleConfig(backend="llm", provider="openai", model="gpt-4o-2024-08-06",
                                            api_key_env="EVOSYN_TEST_LLM_KEY"))
    check_role_config("planner", RoleConfig(backend="llm", provider="openai", model="gpt-17",
                                            api_key_env="EVOSYN_TEST_LLM_KEY", input_cost_per_mtok=1,
                                            output_cost_per_mtok=2))
    check_role_config("planner", RoleConfig(backend="llm", provider="openai_compatible", model="any",
                                            base_url="http://127.0.0.1:8000/v1"))
