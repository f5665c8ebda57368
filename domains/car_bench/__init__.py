"""CAR-bench: an initial synthesis space only (no environment to run tasks in here)."""
from envs.packs import DomainPack, register


class CarBenchPack(DomainPack):
    name = "car_bench"
    description = "CAR-bench in-car assistant: synthesis space only"


register(CarBenchPack())
