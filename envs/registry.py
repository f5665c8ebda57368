"""A registry of environment domains: names -> factories, filled by the owning packages.

Entries are registered by the package that provides them (``envs.tau2`` registers
``airline``, ``retail`` and ``telecom``); a provider package is imported only on
first lookup, and a domain's own module (its DB, its tools) only when the
factory is called.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from envs.base import Domain

_PROVIDERS = ("envs.tau2",)
_FACTORIES: dict[str, Callable[[], "Domain"]] = {}
_INSTANCES: dict[str, "Domain"] = {}
_loaded = False


class UnknownDomain(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; we want plain text
        return self.args[0]


def register(name: str, factory: Callable[[], "Domain"]) -> None:
    if name in _FACTORIES:
        raise ValueError(f"domain {name!r} is already registered")
    _FACTORIES[name] = factory


def _load_providers() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for provider in _PROVIDERS:
            importlib.import_module(provider)


def known() -> list[str]:
    _load_providers()
    return sorted(_FACTORIES)


def get_domain(name: str) -> "Domain":
    """The process-wide domain object (DB loaded once, cheap fresh episodes)."""
    _load_providers()
    if name not in _FACTORIES:
        raise UnknownDomain(f"unknown domain {name!r}; known domains: {', '.join(sorted(_FACTORIES))}")
    if name not in _INSTANCES:
        _INSTANCES[name] = _FACTORIES[name]()
    return _INSTANCES[name]
