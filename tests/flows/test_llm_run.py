"""`evosyn run --backend llm` against scripted OpenAI-compatible servers on 127.0.0.1.

The server plays a competent model (benchmarks/llm_script.py): every reply is
computed from the request and then parsed and validated by the real roles.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from evosyn.envs.packs import get_domain
from evosyn.benchmarks.fake_llm_server import FakeLLMServer
from evosyn.benchmarks.llm_script import Faulty, RoleScript
from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

if TYPE_CHECKING:
    from evosyn.config import RoleConfig

KEY = "sk-test-SECRET123"
ROLES = ("designer", "planner", "generator", "teacher", "user", "repair", "reflector")


def config(tmp_path, base_url: str, model: str = "gpt-4o-mini", name: str = "llm.yaml"):
    roles = "".join(f"  {r}: {{provider: openai, model: {model}, base_url: '{base_url}', max_retries: 4, "
                    f"max_invalid_retries: 3, max_concurrency: 4}}\n" for r in ROLES)
    path = tmp_path / name
    path.write_text("domain: airline\nrounds: 1\nbudget: 8\nseed: 0\ntest_size: 20\nchunk_size: 4\n"
                    f"backend: llm\nroles:\n{roles}")
    return path


def cli(home, *args, key: str | None = KEY, timeout: int = 600):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME, "NO_PROXY": "*",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"})
    if key:
        env["OPENAI_API_KEY"] = key
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=home.parent)


def kept(home) -> int:
    from evosyn.storage.store import Store

    store = Store(home, create=False)
    return len({v.task_id for v in store.read_records("verdicts") if v.passed and not v.run_id.startswith("testset-")})


def calls(home):
    from evosyn.storage.store import Store

    return Store(home, create=False).read_records("llm_calls")


@pytest.fixture(scope="module")
def server():
    faulty = Faulty(RoleScript(get_domain("airline")), rate=0.3)
    with FakeLLMServer(faulty) as s:
        s.faulty = faulty
        yield s


@pytest.mark.slow
def test_llm_run_logs_every_call_reports_cost_and_never_stores_the_key(tmp_path, server):
    cfg = config(tmp_path, server.base_url)
    # (a) fault-free
    server.faulty.arm(False)
    clean = tmp_path / "clean" / "home"
    clean.parent.mkdir()
    t0 = time.perf_counter()
    res = cli(clean, "run", "--backend", "llm", "--config", str(cfg))
    t_clean = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr[-3000:]
    rows = calls(clean)
    assert {c.role for c in rows} >= {"designer", "planner", "generator", "teacher", "user", "reflector"}
    assert all(c.status == "ok" for c in rows)
    assert all(c.input_tokens > 0 and c.output_tokens > 0 and c.latency_s > 0 and c.cost_usd > 0 for c in rows)
    requests_clean = server.count
    assert len(rows) == requests_clean  # every HTTP request is one llm_calls row (no cache hits on a first run)
    n_clean = kept(clean)
    assert n_clean >= 4, n_clean  # the scripted model's tasks genuinely verify
    run_id = calls(clean)[0].run_id
    rep = cli(clean, "report", run_id)
    assert rep.returncode == 0, rep.stderr[-2000:]
    summary = (clean / "reports" / run_id / "summary.md").read_text()
    assert "LLM cost per verified sample by role" in summary and "| generator |" in summary

    # (c) the key is nowhere: store (Parquet), MLflow, cache, reports, logs, console
    leaks = [str(p) for root in (clean, PREFECT_HOME) for p in __import__("pathlib").Path(root).rglob("*")
             if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaks
    print(f"\nclean CLI run: {t_clean:.1f}s, {len(rows)} LLM calls, kept {n_clean}")
    for r in (res, rep):
        assert KEY not in r.stdout + r.stderr

    # (b) through the real Prefect round: 30% faulty replies (429 / 500 / malformed), same kept samples
    server.faulty.arm(True)
    faulty = tmp_path / "faulty" / "home"
    faulty.parent.mkdir()
    before = server.count
    res = cli(faulty, "run", "--backend", "llm", "--config", str(cfg))
    server.faulty.arm(False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert server.count > before + len(rows)  # the faults cost extra requests ...
    assert kept(faulty) == n_clean  # ... and nothing else
    assert KEY not in res.stdout + res.stderr


@pytest.mark.parametrize("model,key,field", [("gpt-4o-mini", None, "OPENAI_API_KEY"),
                                             ("gpt-17-ultra", KEY, "roles.designer.model")])
def test_missing_key_or_unknown_model_is_one_line_before_any_work(tmp_path, model, key, field):
    home = tmp_path / "home"
    res = cli(home, "run", "--backend", "llm", "--config", str(config(tmp_path, "http://127.0.0.1:9/v1", model)),
              key=key, timeout=120)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and field in lines[0], res.stderr
    assert not (home / "runs").exists() and not any(home.rglob("*.parquet")) if home.exists() else True


def _round(home, llm: dict[str, RoleConfig]) -> tuple[int, int, object]:
    """One full round (the stage functions the Prefect round wraps), test-set evaluation left out."""
    import evosyn.tasks.loop as loop
    import evosyn.tasks.stages as stages
    from evosyn.agents.designer import ColdStart
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_pack
    from evosyn.storage.store import Store

    ctx = stages.Ctx(Store(home), "llm-run", 1, 0, get_domain("airline"), llm_roles=llm)
    space = load_initial_space(get_pack("airline"), run_id="llm-run")
    bps = stages.plan(ctx, space, stages.design(ctx, space, ColdStart(), 8, "evosyn"))
    tasks = stages.generate(ctx, space, bps)
    name = stages.chunk_name("chunk", bps)
    verdicts, examples = stages.verify_chunk(ctx, tasks, stages.rollout(ctx, tasks, name), name)
    learner = loop.train(ctx)
    diagnostic = loop.evaluate(ctx, learner, "diagnostic")
    _, _, reflection, _ = loop.reflect(ctx, space, "evosyn", diagnostic, learner, None)
    return len(bps), len({v.task_id for v in verdicts if v.passed}), reflection


def test_faulty_replies_keep_the_same_samples(tmp_path, server, monkeypatch):
    """(b) 30% of replies fail (429 / 500 / malformed): the round completes with the same kept samples."""
    from evosyn.config import RoleConfig

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    llm = {r: RoleConfig(backend="llm", provider="openai", model="gpt-4o-mini", base_url=server.base_url,
                         max_retries=4, max_invalid_retries=3, max_concurrency=4) for r in ROLES}
    server.faulty.arm(False)
    t0 = time.perf_counter()
    n_bp, n_clean, _ = _round(tmp_path / "clean", llm)
    t_clean = time.perf_counter() - t0
    server.faulty.arm(True)
    t0 = time.perf_counter()
    n_bp_f, n_faulty, reflection = _round(tmp_path / "faulty", llm)
    t_faulty = time.perf_counter() - t0
    assert min(server.faulty.faults.values()) > 0, server.faulty.faults
    bad = [c for c in calls(tmp_path / "faulty") if c.status != "ok"]
    assert any(c.status == "invalid" for c in bad)  # malformed replies were logged, re-asked, not kept
    assert n_bp == n_bp_f == 8 and n_clean >= 4 and reflection is not None
    assert n_faulty == n_clean
    print(f"\nkept clean={n_clean} faulty={n_faulty} of {n_bp}; faults {server.faulty.faults}; "
          f"calls clean={len(calls(tmp_path / 'clean'))} faulty={len(calls(tmp_path / 'faulty'))}; "
          f"time clean={t_clean:.1f}s faulty={t_faulty:.1f}s")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_llm_server_down_fails_the_run_in_one_line(tmp_path):
    """Finding 5: every call of a stage failed on transport -> one line, non-zero exit, run failed everywhere."""
    import mlflow

    from evosyn.storage.store import Store

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    roles = "".join(f"  {r}: {{provider: openai, model: gpt-4o-mini, base_url: '{url}', max_retries: 1, "
                    f"timeout_s: 5}}\n" for r in ("designer", "planner"))
    cfg = tmp_path / "down.yaml"
    cfg.write_text("domain: airline\nrounds: 1\nbudget: 8\nseed: 0\ntest_size: 10\nchunk_size: 4\n"
                   f"backend: llm\nroles:\n{roles}")
    home = tmp_path / "home"
    res = cli(home, "run", "--backend", "llm", "--config", str(cfg), timeout=300)
    assert res.returncode not in (0, 2), res.stderr[-3000:]  # failed, and not an input error
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:") or "Traceback" in ln
              or "| ERROR" in ln]
    assert len(errors) == 1, res.stderr[-3000:]
    assert "designer" in errors[0] and url in errors[0] and "unavailable after 2 attempts" in errors[0]
    assert "verified" not in res.stdout + res.stderr and KEY not in res.stdout + res.stderr
    progress = res.stderr.splitlines()
    test_line = next(i for i, ln in enumerate(progress) if ln.startswith("test set "))
    assert test_line < next(i for i, ln in enumerate(progress) if ln.startswith("round 1/1"))  # before work
    store = Store(home, create=False)
    (run,) = store.read_records("runs")
    assert run.status == "failed"
    calls = store.read_records("llm_calls", run_id=run.run_id)
    assert [(c.role, c.status, c.transport_attempt) for c in calls] == [("designer", "retry", 1),
                                                                       ("designer", "error", 2)]
    mlflow.set_tracking_uri(f"sqlite:///{home / 'mlflow.db'}")
    parent = mlflow.search_runs(experiment_names=["evosyn"], filter_string=f"tags.`evosyn.run_id` = '{run.run_id}'")
    assert list(parent["status"]) == ["FAILED"]


@pytest.mark.parametrize("url", ["not a url", "ftp://127.0.0.1/v1", "http://", "http://127.0.0.1:port/v1"])
def test_base_url_is_checked_at_config_time(tmp_path, url):
    home = tmp_path / "home"
    res = cli(home, "run", "--backend", "llm", "--config", str(config(tmp_path, url)), timeout=120)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert "roles." in lines[0] and ".base_url" in lines[0] and "http(s) URL" in lines[0]
    assert not home.exists() or not any(home.rglob("*.parquet"))


@pytest.mark.slow
def test_the_llm_roles_run_a_car_bench_round_through_the_same_prompts(tmp_path):
    """A second environment family through the LLM path: the scripted model answers CAR-bench's prompts (its space,
    tools and policy injected as for tau2's packs), and its tasks verify in our CAR-bench environment."""
    with FakeLLMServer(RoleScript(get_domain("car_bench"))) as s:
        cfg = config(tmp_path, s.base_url)
        cfg.write_text(cfg.read_text().replace("domain: airline", "domain: car_bench")
                       .replace("budget: 8", "budget: 12").replace("test_size: 20", "test_size: 10"))
        home = tmp_path / "home"
        res = cli(home, "run", "--config", str(cfg))
    assert res.returncode == 0, res.stderr[-3000:]
    assert {c.role for c in calls(home)} >= {"designer", "planner", "generator", "teacher", "user"}
    assert kept(home) >= 6, kept(home)
