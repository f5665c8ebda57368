"""CAR-bench: ``pack.py`` (an ontology-only pack)."""
from evosyn.domains.car_bench.pack import CarBenchPack
from evosyn.envs.packs import register

register(CarBenchPack())
