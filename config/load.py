"""A run config from its YAML file, the ``EVOSYN_*`` environment variables and the command's flags; every
problem is one line (``ConfigError``)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from evosyn.config.env import env_overrides
from evosyn.config.run import RunConfig
from evosyn.storage.userfiles import ConfigError, read_yaml_file


def _describe(err: dict[str, Any]) -> str:
    loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
    if err["type"] == "extra_forbidden":
        return f"field '{loc}': unknown field (remove it or check its spelling)"
    if err["loc"] and err["loc"][-1] == "base_url":  # it may hold credentials: never echoed
        return f"field '{loc}': {err['msg']}"
    return f"field '{loc}': {err['msg']} (got {err.get('input')!r})"


def validate_config(data: Any, source: str = "config") -> RunConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {source}: the top level must be a mapping of fields, "
                          f"got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"invalid {source}: " + "; ".join(_describe(e) for e in exc.errors())) from None


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A config file's YAML (``{}`` for an empty one); a key written twice is refused with its line, as every
    other problem of the file (storage/userfiles.py)."""
    data = read_yaml_file(path)
    return data if data is not None else {}


def load_config(path: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None,
                env: Mapping[str, str] | None = None) -> RunConfig:
    """File, then ``EVOSYN_*`` environment variables (config/env.py; ``env``: instead of the process's), then
    explicit overrides (CLI flags)."""
    data = read_config_file(path) if path is not None else {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {path}: the top level must be a mapping of fields")
    data.update(env_overrides(env))
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    return validate_config(data, source=f"config {path}" if path else "config")
