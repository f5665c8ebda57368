"""tau2's own evaluator, for agreement tests and the benchmark (slow: reloads the DB per task).

Importing this module imports tau2's registry and therefore litellm; the
offline defaults (``LITELLM_LOCAL_MODEL_COST_MAP``) are set by ``evosyn.storage.offline``.
"""
from __future__ import annotations

from typing import Any

import evosyn.storage.offline  # noqa: F401
from evosyn.envs.tau2.convert import simulation_run
from evosyn.storage.records import Message


def tau2_reward(domain: str, task: Any, messages: list[Message], termination: str = "agent_stop") -> tuple[float, str]:
    """(reward, note) from ``tau2.evaluator.evaluator.evaluate_simulation`` with EvaluationType.ALL.

    tau2 raises when the recorded tool messages do not replay; that counts as reward 0.
    """
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    sim = simulation_run(task.id, messages, termination)
    try:
        info = evaluate_simulation(simulation=sim, task=getattr(task, "tau2", task), evaluation_type=EvaluationType.ALL,
                                   solo_mode=False, domain=domain)
    except Exception as exc:  # tau2 refuses trajectories that do not replay
        return 0.0, f"tau2 evaluator raised: {str(exc).splitlines()[0][:200]}"
    return float(info.reward), ""
