"""tau2-bench airline, the default domain: ``pack.py`` holds its maps and hooks."""
from evosyn.domains.airline.pack import AirlinePack
from evosyn.envs.packs import register

register(AirlinePack())
