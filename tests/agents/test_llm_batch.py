"""Roles through the batch APIs (OpenAI's Batch API, Anthropic's Message Batches) against a batch server on
127.0.0.1: the same replies and rows as interactive calls, at batch prices; expired batches and failed
requests go into a later batch; a run killed while its batch is pending polls that batch, never a second."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel

from evosyn.envs.packs import get_domain
from evosyn.agents.llm import LLMRequestError, make_client
from evosyn.agents.llm.limits import reset_limits
from evosyn.agents.llm.pricing import batch_price_of, cost_usd, price_of
from evosyn.benchmarks.fake_llm_server import FakeLLMServer, answer
from evosyn.benchmarks.llm_script import texts
from evosyn.config import ConfigError, RoleConfig
from tests.fakes.batch_server import BatchServer

MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
ROOT = Path(__file__).resolve().parents[2]


class Plan(BaseModel):
    intent: str
    num_write: int


def reply(request):
    """A deterministic 'model': the plan for the item named in the prompt."""
    item = int(texts(request.body)[-1][1].split()[-1])
    return answer(request, {"intent": f"plan {item}", "num_write": item % 3})


def msgs(i: int) -> list[dict]:
    return [{"role": "user", "content": f"Plan item {i}"}]


@pytest.fixture(autouse=True)
def _keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-batch")
    reset_limits()


def role(provider: str, base: str, **extra) -> RoleConfig:
    return RoleConfig(backend="llm", provider=provider, model=MODELS[provider], base_url=base, max_concurrency=16,
                      max_retries=2, **extra)


def batch_role(provider: str, server: BatchServer, **extra) -> RoleConfig:
    base = server.anthropic_base_url if provider == "anthropic" else server.base_url
    return role(provider, base, batch=True, batch_window_s=0.3, batch_poll_s=0.05, **extra)


def ask_all(client, n: int) -> list:
    """n calls at once from worker threads, as a stage maps its items (an error is returned, not raised)."""
    def one(i):
        try:
            return client.chat_sync(msgs(i), schema=Plan).parsed
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def row_view(rows) -> list[tuple]:
    """A row as both runs must agree on it (the request hash names the server's URL: two servers here)."""
    return sorted((r.role, r.attempt, r.transport_attempt, r.status, r.cache_hit, r.input_tokens, r.output_tokens,
                   r.error) for r in rows)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_batch_role_gets_the_replies_and_rows_of_an_interactive_one_at_batch_prices(provider, tmp_path):
    with FakeLLMServer(reply) as live:
        base = live.anthropic_base_url if provider == "anthropic" else live.base_url
        interactive = make_client("planner", role(provider, base), cache_dir=tmp_path / "live")
        want = ask_all(interactive, 6)
    with BatchServer(reply) as server:
        client = make_client("planner", batch_role(provider, server), cache_dir=tmp_path / "batch")
        got = ask_all(client, 6)
        assert got == want == [Plan(intent=f"plan {i}", num_write=i % 3) for i in range(6)]
        assert len(server.submissions) == 1 and len(server.submissions[0]["custom_ids"]) == 6  # one batch
        assert row_view(client.calls) == row_view(interactive.calls)
        assert sum(r.cost_usd for r in client.calls) == pytest.approx(sum(r.cost_usd for r in interactive.calls) / 2)
        assert all(r.cost_usd > 0 for r in client.calls)  # both APIs bill half
        # a rerun (another process: a new client on the same cache) replays the replies: no batch, no cost
        again = make_client("planner", batch_role(provider, server), cache_dir=tmp_path / "batch")
        assert ask_all(again, 6) == want and len(server.submissions) == 1
        assert all(r.cache_hit and r.cost_usd == 0 for r in again.calls)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_expired_and_failed_requests_go_into_a_later_batch_and_a_refused_one_is_an_error(provider, tmp_path):
    def fate(batch: int, request):
        item = int(texts(request.body)[-1][1].split()[-1])
        if batch == 0 and item == 0:
            return "expired"
        if batch == 0 and item == 1:
            return (500, "the server had an error while processing your request")
        if item == 2:
            return (400, "invalid request: unsupported parameter")
        return "ok"

    with BatchServer(reply, fate=fate) as server:
        client = make_client("planner", batch_role(provider, server), cache_dir=tmp_path / "c")
        got = ask_all(client, 4)
        first, second = server.submissions
    assert got[0] == Plan(intent="plan 0", num_write=0) and got[1] == Plan(intent="plan 1", num_write=1)
    assert got[3] == Plan(intent="plan 3", num_write=0)
    assert isinstance(got[2], LLMRequestError) and "unsupported parameter" in str(got[2])
    assert len(first["custom_ids"]) == 4 and len(second["custom_ids"]) == 2  # only the unanswered, once more
    by_key = {}
    for r in client.calls:
        by_key.setdefault(r.request_hash, []).append((r.transport_attempt, r.status))
    assert sorted(map(sorted, by_key.values())) == sorted([[(1, "retry"), (2, "ok")], [(1, "retry"), (2, "ok")],
                                                           [(1, "error")], [(1, "ok")]])
    retried = [r for r in client.calls if r.status == "retry"]
    assert any("expire" in r.error for r in retried) and any("500" in r.error or "api_error" in r.error
                                                             for r in retried)


CHILD = """
import sys
from concurrent.futures import ThreadPoolExecutor
from evosyn.agents.llm import make_client
from evosyn.config import RoleConfig
from tests.agents.test_llm_batch import Plan, msgs
cfg = RoleConfig.model_validate_json(sys.argv[1])
client = make_client("planner", cfg, cache_dir=sys.argv[2])
print("asking", flush=True)
with ThreadPoolExecutor(max_workers=5) as pool:
    list(pool.map(lambda i: client.chat_sync(msgs(i), schema=Plan), range(5)))
print("answered", flush=True)
"""


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_run_killed_while_its_batch_is_pending_resumes_by_polling_that_batch(provider, tmp_path):
    with BatchServer(reply) as server:
        server.hold.set()  # the batch stays in progress until released
        cfg = batch_role(provider, server)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_PROXY": "*"}
        child = subprocess.Popen([sys.executable, "-c", CHILD, cfg.model_dump_json(), str(tmp_path / "c")],
                                 cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 120
            while not (server.submissions and server.polls >= 2) and child.poll() is None:
                assert time.monotonic() < deadline, "the child never submitted its batch"
                time.sleep(0.05)
            assert child.poll() is None, child.communicate()
        finally:
            child.send_signal(signal.SIGKILL)  # killed while it polls: no reply reached it
            child.wait()
        assert len(server.submissions) == 1
        server.hold.clear()  # the batch ends while nobody polls it
        resumed = make_client("planner", cfg, cache_dir=tmp_path / "c")
        got = ask_all(resumed, 5)
        assert got == [Plan(intent=f"plan {i}", num_write=i % 3) for i in range(5)]
        assert len(server.submissions) == 1  # polled the same batch: never a second submission
        # one row per request, each the batch's reply (paid once, at batch prices), none twice
        assert sorted((r.status, r.transport_attempt, r.cache_hit) for r in resumed.calls) == [("ok", 1, False)] * 5
        assert len({r.request_hash for r in resumed.calls}) == 5
        batch_price = batch_price_of(provider, MODELS[provider], price_of(provider, MODELS[provider]))
        assert batch_price == tuple(p / 2 for p in price_of(provider, MODELS[provider]))  # litellm's batch prices
        assert all(r.cost_usd == pytest.approx(cost_usd(batch_price, r.input_tokens, r.output_tokens))
                   and r.cost_usd > 0 for r in resumed.calls)
        journal = [json.loads(x) for x in (tmp_path / "c" / "batches.jsonl").read_text().splitlines()]
        assert [e.get("batch", e.get("ended")) for e in journal] == [server.submissions[0]["id"]] * 2


@pytest.mark.parametrize("cfg, field", [
    (dict(provider="openai_compatible", base_url="http://127.0.0.1:8000/v1", model="m"), "roles.planner.batch"),
])
def test_batch_is_for_the_providers_with_a_batch_api_and_the_non_interactive_roles(cfg, field):
    from evosyn.agents.llm import check_role_config

    with pytest.raises(ConfigError, match=f"^{field}: openai_compatible has no batch API"):
        check_role_config("planner", RoleConfig(backend="llm", batch=True, **cfg))
    with pytest.raises(ConfigError, match="^roles.teacher.batch: teacher talks turn by turn"):
        check_role_config("teacher", RoleConfig(backend="llm", provider="openai", model="gpt-4o", batch=True))


def test_a_pass_with_batch_roles_writes_the_rows_of_the_same_pass_with_interactive_calls(tmp_path):
    """design -> plan -> generate -> rollout -> verify with the Designer, Planner and Generator batched: the same
    directions, blueprints, tasks, verdicts and llm_calls rows as interactive calls to the same scripted model."""
    from evosyn.agents.designer import ColdStart
    from evosyn.benchmarks.llm_script import RoleScript
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_pack
    from evosyn.storage.store import Store
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass

    space = load_initial_space(get_pack("airline"), run_id="b")
    script = RoleScript(get_domain("airline"))

    def run(home, base, **extra):
        roles = {r: role("openai", base, **extra) for r in ("designer", "planner", "generator")}
        ctx = Ctx(Store(home), "b", 1, 0, get_domain("airline"), llm_roles=roles)
        run_pass(ctx, space, ColdStart(), 6, chunk_size=6)
        return ctx.store

    def rows(store, table, drop=("created_at",)):
        return sorted(json.dumps(r.model_dump(mode="json", exclude=set(drop)), sort_keys=True)
                      for r in store.read_records(table, run_id="b"))

    with FakeLLMServer(script) as live:
        interactive = run(tmp_path / "live", live.base_url)
    with BatchServer(script) as server:
        batched = run(tmp_path / "batch", server.base_url, batch=True, batch_window_s=0.3, batch_poll_s=0.05)
        stages = len(server.submissions)
    for table in ("directions", "blueprints", "tasks", "trajectories", "verdicts"):
        assert rows(batched, table) == rows(interactive, table), table
    calls = {name: store.read_records("llm_calls", run_id="b") for name, store in
             (("live", interactive), ("batch", batched))}
    assert row_view(calls["batch"]) == row_view(calls["live"]) and len(calls["batch"]) >= 3
    assert sum(c.cost_usd for c in calls["batch"]) == pytest.approx(sum(c.cost_usd for c in calls["live"]) / 2)
    # one batch per stage's ask (design; plan; generate; and each stage's re-asks, if any)
    assert 3 <= stages <= len({(c.role, c.attempt) for c in calls["batch"]})


def test_the_journal_survives_a_torn_line_and_reads_what_later_processes_append(tmp_path):
    from evosyn.agents.llm.batch import BatchJournal

    path = tmp_path / "batches.jsonl"
    path.write_text(json.dumps({"batch": "b1", "keys": ["k1", "k2"]}) + "\n" + '{"batch": "b2", "ke')  # a crash
    mine, other = BatchJournal(path), BatchJournal(path)
    assert mine.where("k1") == "b1" and mine.where("k3") is None
    other.append({"batch": "b3", "keys": ["k3"]})  # another process; never glued to the torn line
    other.append({"ended": "b1", "unanswered": ["k2"]})
    assert mine.where("k3") == "b3" and mine.keys_of("b3") == ["k3"]
    assert mine.where("k1") == "b1" and mine.where("k2") is None  # ended without k2's reply: submit it again
