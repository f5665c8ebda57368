"""tau2-bench telecom (dual control: the user holds a device): ``pack.py`` holds its maps and hooks."""
from evosyn.domains.telecom.pack import TelecomPack
from evosyn.envs.packs import register

register(TelecomPack())
