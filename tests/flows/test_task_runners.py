"""`task_runner: thread | dask`: the runner a round's chunk tasks go to, and the same rows on either."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys

import cloudpickle
import pytest

from evosyn.flows.run_id import run_id_for
from evosyn.flows.task_runners import THREAD_WORKERS, TaskRunnerMissing, check_task_runner, task_runner_for
from evosyn.config import ConfigError, RunConfig, validate_config
from evosyn.envs.packs import get_domain
from tests.prefect_home import PREFECT_HOME

SHARED_PREFECT_API = True  # its runs talk to one Prefect server (tests/prefect_server.py)


def test_the_config_names_a_runner_and_an_address_only_for_dask():
    assert validate_config({}).task_runner == "thread" and validate_config({}).dask_address is None
    cfg = validate_config({"task_runner": "dask", "dask_address": "tcp://10.0.0.5:8786"})
    assert (cfg.task_runner, cfg.dask_address) == ("dask", "tcp://10.0.0.5:8786")
    with pytest.raises(ConfigError, match="dask_address: only with task_runner: dask"):
        validate_config({"dask_address": "tcp://10.0.0.5:8786"})
    with pytest.raises(ConfigError, match="task_runner"):
        validate_config({"task_runner": "ray"})


def test_how_a_round_fans_out_is_neither_in_the_run_id_nor_in_the_stored_config():
    thread = validate_config({"domain": "airline", "seed": 3})
    dask = validate_config({"domain": "airline", "seed": 3, "task_runner": "dask", "dask_address": "tcp://h:1"})
    assert run_id_for(thread) == run_id_for(dask)
    assert thread.stored_json() == dask.stored_json() and "task_runner" not in thread.stored_json()


def test_each_round_gets_a_fresh_runner_of_its_kind():
    from prefect.task_runners import ThreadPoolTaskRunner
    from prefect_dask import DaskTaskRunner

    threads = task_runner_for(RunConfig())
    assert threads == ThreadPoolTaskRunner(max_workers=THREAD_WORKERS)  # the round's two threads, as before
    assert threads != ThreadPoolTaskRunner(max_workers=THREAD_WORKERS + 1)
    assert task_runner_for(RunConfig()) is not threads
    local = task_runner_for(RunConfig(task_runner="dask", concurrency=3))
    assert isinstance(local, DaskTaskRunner) and local.address is None
    assert local.cluster_kwargs["n_workers"] == 3 and local.cluster_kwargs["processes"] is True
    remote = task_runner_for(RunConfig(task_runner="dask", dask_address="tcp://127.0.0.1:8786"))
    assert remote.address == "tcp://127.0.0.1:8786"


def test_dask_without_prefect_dask_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "prefect_dask", None)  # an import of it fails, as when not installed
    check_task_runner(RunConfig())  # the thread runner needs nothing
    with pytest.raises(TaskRunnerMissing, match=r"pip install 'evosyn\[dask\]'"):
        check_task_runner(RunConfig(task_runner="dask"))


def test_a_rounds_context_pickles_into_a_worker_process(tmp_path):
    """A process runner ships the context to its workers: the environment (its DB, weak references) travels
    by its name and data folder, and the worker's registry builds it there."""
    from evosyn.envs import packs
    from evosyn.tasks.stages import Ctx

    env = packs.get_domain("airline")
    ctx = Ctx.for_run(RunConfig(domain="airline", store={"root": str(tmp_path)}), "r", 1, env)
    data = cloudpickle.dumps(ctx)
    assert len(data) < 4096  # no DB inside
    back = pickle.loads(data)
    assert (back.store.root, back.run_id, back.round, back.seed, back.domain) == \
        (ctx.store.root, ctx.run_id, ctx.round, ctx.seed, ctx.domain)
    assert back.env is env  # this process's registry: the same environment
    assert packs.pickled(env) == (packs.rebuilt, ("airline", None))  # the default data: no folder travels


CONFIG = "domain: airline\nrounds: 1\nbudget: 12\nseed: 2\ntest_size: 10\nchunk_size: 4\ntask_runner: {runner}\n"


@pytest.mark.slow
def test_dask_gives_the_rows_of_the_thread_runner(tmp_path):
    """The same run on threads and on a LocalCluster of two worker processes: every table equal (digests)."""
    from evosyn.tasks import testset
    from evosyn.agents.servers import family, wait_gone
    from evosyn.storage.digest import table_digests
    from evosyn.storage.records import TABLES
    from evosyn.storage.store import Store

    digests = {}
    for runner in ("thread", "dask"):
        cfg, home = tmp_path / f"{runner}.yaml", tmp_path / runner
        cfg.write_text(CONFIG.format(runner=runner))
        env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME,
               "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
        # its own session: a process it left there (a LocalCluster's worker or nanny) is found afterwards by
        # session, and must be gone
        proc = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", "run", "--config", str(cfg), "--quiet"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            _, err = proc.communicate(timeout=600)
        finally:
            proc.kill()
        assert proc.returncode == 0, err[-3000:]
        assert not wait_gone(family({proc.pid}), 30.0), f"{runner}: processes of the run outlived it"
        store = Store(home, create=False)
        (run_id,) = [r for r in store.runs() if not r.startswith("testset-")]
        digests[runner] = run_id, table_digests(store, [run_id, testset.test_set_run_id(get_domain("airline"), n=10)])
    (tid, want), (did, got) = digests["thread"], digests["dask"]
    assert tid == did
    assert [t for t in TABLES if got[t] != want[t]] == []
    assert want["evaluations"] != table_digests(Store(tmp_path / "thread", create=False), [])["evaluations"]


def test_the_cli_refuses_dask_without_prefect_dask_before_any_work(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from evosyn.flows.cli import main

    monkeypatch.setitem(sys.modules, "prefect_dask", None)
    cfg = tmp_path / "run.yaml"
    cfg.write_text("domain: airline\ntask_runner: dask\n")
    out = CliRunner().invoke(main, ["--home", str(tmp_path / "h"), "run", "--config", str(cfg)])
    assert out.exit_code == 2 and "task_runner: dask needs prefect-dask" in out.output
    assert not (tmp_path / "h").exists()  # refused before the store was made
