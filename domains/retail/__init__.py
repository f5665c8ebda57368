"""tau2-bench retail: ``pack.py`` holds its maps and hooks."""
from evosyn.domains.retail.pack import RetailPack
from evosyn.envs.packs import register

register(RetailPack())
