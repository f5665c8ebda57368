"""`evosyn run` with batch roles (OpenAI's Batch API, on the local batch server) SIGKILLed while the Generator's
batch is pending, then `--resume`d: it polls that batch (one submission per batch in the server's log), writes
every row once, the rows of an uninterrupted run, each call priced at batch rates (slow)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from evosyn.envs.packs import get_domain
from evosyn.agents.llm.pricing import batch_price_of, cost_usd, price_of
from evosyn.benchmarks.llm_script import RoleScript
from evosyn.storage.digest import TIME_COLUMNS, table_digests
from evosyn.storage.records import TABLES
from evosyn.storage.store import Store
from tests.fakes.batch_server import BatchServer
from tests.flows.test_run import KEYS, PREFECT_HOME, run

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)

pytestmark = pytest.mark.slow
ROLES = ("designer", "planner", "generator", "reflector")  # the batched roles; teacher and repair stay embedded
MODEL = "gpt-4o-mini"
KEY_ENV = "EVOSYN_TEST_BATCH_KEY"


def config(tmp_path, server: BatchServer):
    role = (f"{{backend: llm, provider: openai, model: {MODEL}, base_url: '{server.base_url}', "
            f"api_key_env: {KEY_ENV}, batch: true, batch_window_s: 0.3, batch_poll_s: 0.05, max_concurrency: 16, "
            "max_retries: 2}")
    path = tmp_path / "batch.yaml"
    path.write_text("domain: airline\nrounds: 1\nbudget: 6\nseed: 0\ntest_size: 4\nchunk_size: 6\nroles:\n"
                    + "".join(f"  {r}: {role}\n" for r in ROLES))
    return path


def test_a_run_killed_while_a_batch_is_pending_resumes_by_polling_it_and_writes_the_same_rows(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-batch-run")  # the children's key (inherited)
    with BatchServer(RoleScript(get_domain("airline"))) as server:
        cfg = config(tmp_path, server)
        run(tmp_path / "clean", "run", "--config", str(cfg))
        (run_id,) = [r for r in Store(tmp_path / "clean", create=False).runs() if not r.startswith("testset-")]
        clean = list(server.submissions)
        assert len(clean) >= 3  # design, plan, generate (and reflect), one batch each

        # the same run again, its Generator's batch (the third) kept pending; killed while it polls that batch
        home = tmp_path / "killed"
        server.hold_from = len(clean) + 2
        env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
               "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
        child = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while not (len(server.submissions) > server.hold_from and server.polls_of(-1) >= 2):
                assert child.poll() is None, child.communicate()[1][-3000:]
                assert time.monotonic() < deadline, "the run never submitted its Generator's batch"
                time.sleep(0.05)
        finally:
            os.killpg(child.pid, signal.SIGKILL)  # the run and what it started (its Prefect server)
            child.wait()
        assert len(server.submissions) == len(clean) + 3
        server.hold_from = None  # the batch ends while nobody polls it

        run(home, "run", "--resume", run_id)
    resumed = server.submissions[len(clean):]
    # one submission per batch: as many as the uninterrupted run's, of the same requests, none sent twice
    assert [len(s["custom_ids"]) for s in resumed] == [len(s["custom_ids"]) for s in clean]
    sent = [cid for s in resumed for cid in s["custom_ids"]]
    assert len(sent) == len(set(sent))
    store = Store(home, create=False)
    for table, key in KEYS.items():  # no row twice
        rows = [r.model_dump() for r in store.read_records(table, run_id=run_id)]
        assert len(rows) == len({tuple(r[k] for k in key) for r in rows}), table
    same = TIME_COLUMNS | {"call_id"}  # a call's id is drawn at random: any two runs' differ
    want = table_digests(Store(tmp_path / "clean", create=False), run_id, ignore=same)
    got = table_digests(store, run_id, ignore=same)
    assert [t for t in TABLES if got[t] != want[t]] == []  # the rows of the uninterrupted run, llm_calls too
    calls = store.read_records("llm_calls", run_id=run_id)
    assert {c.role for c in calls} >= {"designer", "planner", "generator"}
    price = batch_price_of("openai", MODEL, price_of("openai", MODEL))
    assert all(c.status == "ok" and c.cost_usd > 0 and c.cost_usd == pytest.approx(
        cost_usd(price, c.input_tokens, c.output_tokens)) for c in calls)
