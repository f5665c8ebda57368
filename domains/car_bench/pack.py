"""CAR-bench (in-car assistant): the App. B.1 initial space and the hooks of its environment.

The environment is ``envs.car_bench.domain.CarBenchDomain`` (CAR-bench's data
from the run config's ``carbench_data`` key, ``$EVOSYN_CARBENCH_DATA`` or the
bundled fixture); its machine-checked rules are ``envs.car_bench.policy.check_write``
before each write, and CAR-bench's reward is ``envs.car_bench.reward.reward``.
The pack does not yet return the environment from ``environment()``: that
switches it on for synthesis and the loop, which need the pack's synthesis maps
first.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envs.packs import DomainPack


class CarBenchPack(DomainPack):
    name = "car_bench"
    description = "CAR-bench in-car assistant: synthesis space only"

    def policy_rules(self) -> Callable[[Any, Any, list[Any]], list[str]] | None:
        from envs.car_bench.policy import check_write

        return check_write

    compute_tools = ("calculate_math", "calculate_datetime")
    transfer_tools = ()
    # words of the three confirmation tools' names a confirmation request need not repeat ("open the trunk?")
    confirmation_stopwords = ("open", "close", "door", "set", "head", "lights", "send")
