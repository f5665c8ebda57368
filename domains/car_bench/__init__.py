"""CAR-bench (in-car assistant): ``pack.py`` holds its hooks, ``generator.py`` its generator over ``recipes.py``."""
from evosyn.domains.car_bench.pack import CarBenchPack
from evosyn.envs.packs import register

register(CarBenchPack())
