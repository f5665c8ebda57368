"""tau2-bench retail: ``pack.py`` holds its maps and hooks."""
from domains.retail.pack import RetailPack
from envs.packs import register

register(RetailPack())
