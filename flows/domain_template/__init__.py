"""A domain pack written by `evosyn new-domain` (docs: Adding a domain).

Importing the package registers the pack and loads nothing heavy. It is found by the folder scan of the user's
pack folders (``EVOSYN_DOMAINS``, by default ``./domains``); as an installed package of its own it would be named
by an ``evosyn.domains`` entry point.
"""
from evosyn.envs.packs import register

from .pack import Pack

register(Pack())
