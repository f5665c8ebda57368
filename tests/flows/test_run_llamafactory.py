"""`evosyn run --learner llamafactory`: each round trains a tiny random model with LLaMA-Factory on CPU, serves
its checkpoint with `llamafactory-cli api` and evaluates it; killed in round 2's evaluation, the run resumes
(marker: train).

The model is random: its replies are garbage and success 0 is expected. What is checked is the loop: a
checkpoint per round, trained on that round's export, served, evaluated, and its evaluations feeding the
round's feedback (the Reflector's input), in the store and in MLflow.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from tests.agents.test_llamafactory import cli_or_skip, tiny_model
from tests.prefect_home import PREFECT_HOME

pytestmark = pytest.mark.train
RECIPE = {"bf16": False, "flash_attn": "disabled", "cutoff_len": 1024, "max_steps": 2, "num_train_epochs": 1.0,
          "preprocessing_num_workers": 1, "logging_steps": 1, "plot_loss": False, "save_strategy": "no"}


def evosyn(home, *args, fault: str | None = None) -> subprocess.CompletedProcess:
    """The CLI in its own session, its output in files, reaped here with the session (the temporary Prefect server
    a SIGKILLed run started dies with it: flows/prefect_api.py)."""
    env = {**os.environ, "EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME, "NO_PROXY": "*",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("EVOSYN_FAULT_KILL_AT", None)
    if fault:
        env["EVOSYN_FAULT_KILL_AT"] = fault
    n = len(list(home.parent.glob("out-*")))
    out, err = home.parent / f"out-{n}", home.parent / f"err-{n}"
    with out.open("w") as o, err.open("w") as e:
        p = subprocess.Popen([sys.executable, "-m", "evosyn.flows.cli", *args], env=env, stdout=o, stderr=e,
                             start_new_session=True)
        try:
            code = p.wait(timeout=1200)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return subprocess.CompletedProcess(p.args, code, out.read_text(), err.read_text())


def servers_of(home, wait_s: float = 0.0) -> list[psutil.Process]:
    """The checkpoint servers of runs on ``home`` still alive (after up to ``wait_s`` for them to go)."""
    deadline = time.monotonic() + wait_s
    while True:
        out = []
        for p in psutil.process_iter(["cmdline", "status"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if str(home) in cmd and " api " in cmd and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p)
        if not out or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    from evosyn.agents.designer import ColdStart
    from evosyn.agents.learners.llamafactory import write_dataset
    from evosyn.envs.ontology import load_initial_space
    from evosyn.envs.packs import get_domain, get_pack
    from evosyn.tasks.datasets import sft_examples
    from evosyn.tasks.stages import Ctx
    from evosyn.tasks.synthesis import run_pass
    from evosyn.storage.store import Store

    cli = cli_or_skip()
    tmp = tmp_path_factory.mktemp("lf-run")
    # the tiny model's vocabulary, learnt from a separate synthesis pass
    space = load_initial_space(get_pack("airline"), run_id="vocab")
    kept = run_pass(Ctx(Store(tmp / "vocab"), "vocab", 0, 1, get_domain("airline")), space, ColdStart(), 12).kept
    write_dataset(sft_examples([(c.task, c.trajectory) for c in kept], get_domain("airline"), 0.0, seed=0), tmp / "vocab-data",
                  system=get_domain("airline").policy)
    model = tiny_model(cli, tmp / "vocab-data" / "evosyn.json", tmp / "tiny")
    cfg = tmp / "run.yaml"
    cfg.write_text(yaml.safe_dump({
        "domain": "airline", "rounds": 2, "budget": 10, "seed": 4, "test_size": 3, "chunk_size": 10,
        "llamafactory": {"model": str(model), "deepspeed": False, "max_new_tokens": 8, "max_steps": 3,
                         "recipe": RECIPE, "serve": "llamafactory", "serve_timeout_s": 600}}))
    home = tmp / "h"
    t0 = time.monotonic()
    killed = evosyn(home, "run", "--config", str(cfg), "--learner", "llamafactory", "--rounds", "2", "--quiet",
                    fault="evaluate@2")  # dies in round 2's evaluation, its server running
    killed_s = time.monotonic() - t0
    run_id = Store(home, create=False).runs()[0]
    left = servers_of(home, wait_s=15)
    t0 = time.monotonic()
    resumed = evosyn(home, "run", "--resume", run_id, "--quiet")
    print(f"\nkilled run {killed_s:.0f}s, resume {time.monotonic() - t0:.0f}s")
    return home, run_id, killed, resumed, left


def versions(home, run_id) -> dict[int, str]:
    out = {}
    for r in (1, 2):
        marker = home / "sft" / run_id / f"round={r}" / "checkpoint" / "evosyn_checkpoint.json"
        out[r] = f"{run_id}/r{r}/{json.loads(marker.read_text())['fingerprint']}"
    return out


def test_the_run_completes_after_a_kill_in_round_2(ran):
    home, run_id, killed, resumed, left = ran
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILLed at its kill point, in round 2
    assert "round 1: verified" in killed.stdout + killed.stderr
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not left and not servers_of(home), "a checkpoint server outlived its run"
    # each round printed what its export kept, dropped and held out
    lines = [ln for ln in (killed.stdout + killed.stderr + resumed.stdout + resumed.stderr).splitlines()
             if "train:" in ln and "checkpoint llamafactory-" in ln]
    assert any("exported" in ln and "dropped 0" in ln and "held out" in ln for ln in lines), lines


def test_every_evaluation_of_both_rounds_names_its_checkpoint(ran):
    from evosyn.storage.store import Store

    home, run_id, *_ = ran
    store, want = Store(home, create=False), versions(home, run_id)
    assert want[1] != want[2] and all("/llamafactory-" in v for v in want.values())
    evs = store.read_records("evaluations", run_id=run_id)
    for r in (1, 2):
        mine = [e for e in evs if e.round == r]
        assert {e.task_set for e in mine} == {"diagnostic", "test", "test_uniform"}
        assert {e.model_version for e in mine} == {want[r]}
        assert all(len([e for e in mine if e.task_set == s]) == 3 for s in ("test", "test_uniform"))
    ids = [e.evaluation_id for e in evs]
    assert len(ids) == len(set(ids)), "the resume duplicated evaluation rows"
    trajs = {t.trajectory_id: t for t in store.read_records("trajectories", run_id=run_id) if t.producer == "learner"}
    assert all(e.trajectory_id in trajs and trajs[e.trajectory_id].model_version == e.model_version for e in evs)
    for r in (1, 2):  # served: a checkpoint folder with its log of requests answered
        ckpt = home / "sft" / run_id / f"round={r}" / "checkpoint"
        assert (ckpt / "config.json").exists() and (ckpt.parent / "serve-llamafactory.log").exists()


def test_the_reflectors_round_2_input_comes_from_the_checkpoints_evaluations(ran):
    from evosyn.storage.store import Store

    home, run_id, *_ = ran
    store, want = Store(home, create=False), versions(home, run_id)
    fb = {f.round: f for f in store.read_records("feedback", run_id=run_id)}
    diag2 = [e for e in store.read_records("evaluations", run_id=run_id) if e.round == 2 and e.task_set == "diagnostic"]
    assert fb[2].model_version == want[2] and fb[2].n_evaluated == len(diag2) > 0
    assert fb[2].overall_success == pytest.approx(sum(e.success for e in diag2) / len(diag2))
    assert len(store.read_records("reflections", run_id=run_id)) == 2


def test_mlflow_shows_each_rounds_checkpoint_and_its_scores(ran):
    from mlflow.tracking import MlflowClient

    from evosyn.storage.tracking import EXPERIMENT, default_tracking_uri

    home, run_id, *_ = ran
    want = versions(home, run_id)
    client = MlflowClient(tracking_uri=default_tracking_uri(home))
    exp = client.get_experiment_by_name(EXPERIMENT)
    for r in (1, 2):
        (child,) = client.search_runs([exp.experiment_id], f"tags.`evosyn.round` = '{r}'")
        assert child.data.params["learner"] == "llamafactory" and child.data.params["model_version"] == want[r]
        assert "success_test" in child.data.metrics and child.data.metrics["sft_exported"] > 0
        assert child.data.metrics["sft_dropped"] == 0
