"""tau2-bench airline, the default domain: ``pack.py`` holds its maps and hooks."""
from domains.airline.pack import AirlinePack
from envs.packs import register

register(AirlinePack())
