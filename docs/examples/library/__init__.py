"""A worked example of a domain pack: a small lending library (docs/guides/domain-pack.md).

Copied to ``domains/library/`` it is found by the folder scan; as an installed package of its own it would be
named by an ``evosyn.domains`` entry point. Either way, importing it registers the pack and loads nothing heavy.
"""
from evosyn.envs.packs import register

from .pack import LibraryPack

register(LibraryPack())
