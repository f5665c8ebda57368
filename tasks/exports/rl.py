"""A run's verified tasks as RL environments: rl-jsonl rows, and the ``verifiers`` package that loads them.

One row per task (``rl_rows``): the chat prompt a policy starts from (the task's policy as the system message, the
embedded user's opening), the task's tools (the OpenAI ``tools`` field), the task itself (the stored ``SynthTask``:
its environment's definition, the user's scenario, the gold state digest), the factors its verified solution showed,
and how to score a conversation of it (``evosyn verify`` or the Python entry point). ``--format rl-jsonl`` writes the
rows; ``--format verifiers`` writes them inside an installable package whose ``load_environment`` builds an
``EvosynEnv`` (``evosyn.tasks.exports.verifiers_env``). The tasks exported are those the SFT exports train on: the
run's verified tasks with a training example (the diagnostic share held out), of rounds <= ``round``.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evosyn.agents.learners.rl_episode import RLEpisode
from evosyn.envs.base import Domain
from evosyn.storage import atomic
from evosyn.storage.records import SynthTask
from evosyn.storage.store import Store
from evosyn.tasks.exports.hf import select_examples

SCORE_ENTRY = "evosyn.agents.learners.rl_episode:score"  # (task, trajectory, env) -> Score
FORMAT = "evosyn-rl/1"


@dataclass
class RLExport:
    rows: list[dict[str, Any]]
    held_out: int = 0
    dropped: Counter = field(default_factory=Counter)


def parse_slices(values: tuple[str, ...] | list[str]) -> dict[str, set[str]]:
    """``factor=value`` options (repeatable; a factor given twice keeps either value) as {factor: values}."""
    out: dict[str, set[str]] = {}
    for v in values:
        factor, sep, value = v.partition("=")
        if not sep or not factor.strip() or not value.strip():
            raise ValueError(f"--slice {v!r}: write it as FACTOR=VALUE (e.g. num_write=2)")
        out.setdefault(factor.strip(), set()).add(value.strip())
    return out


TRIALS = "trials"  # the task sets of a served learner's pass@k trials: trials-0, trials-1, ... (tasks/served.py)


def pass_rates(store, run_id: str) -> dict[str, tuple[int, int]]:
    """task id -> (trials passed, trials) over the run's pass@k trials (``served.trials``)."""
    rates: dict[str, list[int]] = {}
    for e in store.read_fields("evaluations", ["task_id", "task_set", "success"], run_id=run_id):
        if e["task_set"].startswith(f"{TRIALS}-"):
            r = rates.setdefault(e["task_id"], [0, 0])
            r[0] += int(e["success"])
            r[1] += 1
    return {k: (v[0], v[1]) for k, v in rates.items()}


def parse_window(text: str) -> tuple[float, float]:
    """``LO,HI`` (pass rates, 0 <= LO <= HI <= 1) of ``--pass-rate``."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--pass-rate {text!r}: write it as LO,HI, e.g. 0.2,0.8") from None
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(f"--pass-rate {text!r}: needs 0 <= LO <= HI <= 1")
    return lo, hi


def rl_rows(store: Store, run_id: str, env: Domain, round: int | None = None,
            slices: dict[str, set[str]] | None = None, window: tuple[float, float] | None = None) -> RLExport:
    """The run's verified tasks (rounds <= ``round``) whose verified solution shows every ``slices`` factor at one
    of its values and, with ``window``, whose pass rate over the served learner's trials (``served.trials``) is
    within it (bounds included), as rl-jsonl rows in (round, task id) order; each row carries its pass rate where
    trials exist."""
    rates = pass_rates(store, run_id)
    if window is not None and not rates:
        raise ValueError(f"--pass-rate: run {run_id} has no pass rates (run it with learner: served and "
                         "served.trials: k)")
    chosen = select_examples(store, run_id, round)
    wanted = {e.task_id for e in chosen.train}
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=run_id) if t.task_id in wanted}
    observed: dict[str, dict[str, list[str]]] = {}
    for v in store.read_records("verdicts", run_id=run_id):
        if v.passed and v.task_id in tasks:
            observed.setdefault(v.task_id, v.observed)
    out = RLExport([], held_out=chosen.held_out)
    out.dropped["its task is not in the store"] = len(wanted - set(tasks))
    for task in sorted(tasks.values(), key=lambda t: (t.round, t.task_id)):
        seen = observed.get(task.task_id, {})
        if slices and not all(set(seen.get(f, [])) & vals for f, vals in slices.items()):
            out.dropped["outside the --slice filter"] += 1
            continue
        rate = rates.get(task.task_id)
        if window is not None:
            if rate is None:
                out.dropped["no pass rate (made without trials)"] += 1
                continue
            if not window[0] <= rate[0] / rate[1] <= window[1]:
                out.dropped["outside the --pass-rate window"] += 1
                continue
        out.rows.append(row(task, env, seen, rate))
    out.dropped = +out.dropped
    return out


def row(task, env: Domain, observed: dict[str, list[str]], rate: tuple[int, int] | None = None) -> dict[str, Any]:
    episode = RLEpisode(task, env)
    prompt = episode.opening()
    return {"format": FORMAT, "task_id": task.task_id, "domain": task.domain, "run_id": task.run_id,
            "round": task.round, "prompt": prompt, "tools": episode.tools(),
            "task": task.model_dump(mode="json"), "observed": observed,
            "pass_rate": None if rate is None else {"passed": rate[0], "trials": rate[1], "rate": rate[0] / rate[1]},
            "score": {"python": SCORE_ENTRY,
                      "cli": f"evosyn verify --domain {task.domain} --task tasks.json --task-id {task.task_id} "
                             "--trajectory TRAJECTORY.json --format json"}}


def write_rl_jsonl(rows: list[dict[str, Any]], out: Path) -> list[Path]:
    """``tasks.jsonl`` (the rows) and ``tasks.json`` (each task's definition, what ``evosyn verify --task`` reads)."""
    atomic.write_text(out / "tasks.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    atomic.write_json(out / "tasks.json", [SynthTask.model_validate(r["task"]).definition for r in rows], indent=1)
    return [out / "tasks.jsonl", out / "tasks.json"]


def module_name(run_id: str) -> str:
    """The exported package's import name: ``evosyn_env_`` and the run id as an identifier."""
    return "evosyn_env_" + re.sub(r"[^0-9a-zA-Z]+", "_", run_id).strip("_").lower()


PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "EvoSyn run {run_id}: {n} verified {domain} tasks as a verifiers environment"
requires-python = ">=3.11"
dependencies = ["evosyn[rl]>={version}"]

[tool.setuptools]
packages = ["{module}"]

[tool.setuptools.package-data]
"{module}" = ["tasks.jsonl", "tasks.json"]
"""

INIT = '''"""EvoSyn run {run_id}: {n} verified {domain} tasks as a verifiers environment (written by `evosyn export`)."""
from pathlib import Path


def load_environment(**kwargs):
    """The environment (a ``verifiers.MultiTurnEnv``): ``max_turns`` (default 40) and verifiers' own options."""
    from evosyn.flows.rl_env import load_environment as load

    return load(Path(__file__).parent / "tasks.jsonl", **kwargs)
'''

README = """# {dist}

{n} verified tasks of the `{domain}` domain from EvoSyn run `{run_id}`, as an environment of the
[verifiers](https://pypi.org/project/verifiers/) library: the policy's tool calls execute in the task's own
environment, the user's turns come from EvoSyn's embedded user simulator, and the reward is EvoSyn's verifier
(1 when every check holds, else 0; each check and tau2's reward basis are logged as metrics).

```bash
pip install -e .
```

```python
import verifiers as vf
from openai import AsyncOpenAI

env = vf.load_environment("{dist}")
client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url="http://127.0.0.1:8000/v1", api_key="EMPTY"))
results = env.evaluate_sync(client=client, model="my-model", num_examples=-1, rollouts_per_example=4)
```

The domain's pack must be installed where the environment loads (a built-in domain is; a pack of your own: set
`EVOSYN_DOMAINS` to its folder). `tasks.jsonl` holds the rows (`--format rl-jsonl`); EvoSyn's docs, "RL
environments", show how to train on them.
"""


def write_verifiers_package(rows: list[dict[str, Any]], out: Path, run_id: str, domain: str,
                            version: str) -> list[Path]:
    """An installable package (``pip install -e out``) named after the run, holding the rows."""
    module = module_name(run_id)
    dist = module.replace("_", "-")
    fields = {"dist": dist, "module": module, "run_id": run_id, "n": len(rows), "domain": domain,
              "version": version}
    (out / module).mkdir(parents=True, exist_ok=True)
    files = write_rl_jsonl(rows, out / module)
    atomic.write_text(out / module / "__init__.py", INIT.format(**fields))
    atomic.write_text(out / "pyproject.toml", PYPROJECT.format(**fields))
    atomic.write_text(out / "README.md", README.format(**fields))
    return [*files, out / module / "__init__.py", out / "pyproject.toml", out / "README.md"]
