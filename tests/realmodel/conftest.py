"""The `realmodel` suite: a real instruct model (SmolLM2-135M-Instruct, llama.cpp on CPU) served on 127.0.0.1.

The runtime is `requirements/realmodel.txt` (hash-pinned, never in the base install). Without it the suite is
skipped with the install command, unless EVOSYN_REQUIRE_REALMODEL=1 (CI: `.ci/run`), where it fails instead.
One server per test process serves its tests: loading the model takes a second, each test's requests are what
cost. Under ``pytest -n 2`` (the README's command) each worker has its own one-thread server, so the two workers'
requests are decoded on both cores at once.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evosyn.agents.llm.local_model import LocalModel, missing


@pytest.fixture(scope="session")
def real_model(tmp_path_factory):
    reason = missing()
    if reason:
        if os.environ.get("EVOSYN_REQUIRE_REALMODEL"):
            pytest.fail(f"EVOSYN_REQUIRE_REALMODEL is set but {reason}")
        pytest.skip(f"realmodel: {reason}")
    log = tmp_path_factory.mktemp("realmodel") / "server.log"
    # One thread: the test process (a whole Prefect round) runs beside the server, and llama.cpp's threads spin
    # while they wait for each other; with two threads on a loaded 2-core machine a token took 676 ms, with one 44 ms.
    with LocalModel(n_ctx=8192, threads=1, seed=0, log=log) as model:
        yield model


def evosyn_cli(tmp_path, home, *args: str, timeout: int = 1450) -> subprocess.CompletedProcess:
    """``evosyn ARGS`` in its own process on the store ``home`` (no provider key in its environment)."""
    from tests.prefect_home import PREFECT_HOME

    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update({"EVOSYN_HOME": str(home), "PREFECT_HOME": PREFECT_HOME, "NO_PROXY": "*",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"})
    return subprocess.run([sys.executable, "-m", "evosyn.flows.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=tmp_path)
