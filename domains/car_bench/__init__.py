"""CAR-bench: ``pack.py`` (an ontology-only pack)."""
from domains.car_bench.pack import CarBenchPack
from envs.packs import register

register(CarBenchPack())
