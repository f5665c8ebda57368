"""CAR-bench (in-car assistant): an initial synthesis space only, no environment to run tasks in."""
from __future__ import annotations

from envs.packs import DomainPack


class CarBenchPack(DomainPack):
    name = "car_bench"
    description = "CAR-bench in-car assistant: synthesis space only"
