"""click parameter types read from a run config field: the choices of its Literal, the bounds of its number.

An option that sets a config field repeats none of its choices or bounds: it names the field (``"RunConfig.arm"``,
a model of ``evosyn.config``), and `--help`, the conversion and its error line all read them from the model. The
models import pydantic (0.1 s), which a command such as `evosyn query` starts without, so a type reads its field
only when click first needs it (a value to convert, a help page to print), not when a command module is imported.
"""
from __future__ import annotations

import importlib
import typing
from functools import cached_property
from typing import Any

import click


def field_info(where: str) -> Any:
    """``"Model.field"`` -> the pydantic ``FieldInfo`` of that field of a model of ``evosyn.config``."""
    model, name = where.split(".")
    return getattr(importlib.import_module("evosyn.config"), model).model_fields[name]


def literal_values(annotation: Any) -> tuple[Any, ...]:
    """The values of a field's Literal, also inside an optional one (``Literal[...] | None``)."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return tuple(v for arg in typing.get_args(annotation) for v in literal_values(arg))


def field_bounds(info: Any) -> dict[str, Any]:
    """The ``ge`` / ``gt`` / ``le`` / ``lt`` a field declares (pydantic keeps them in its metadata)."""
    return {attr: getattr(item, attr) for item in info.metadata for attr in ("ge", "gt", "le", "lt")
            if getattr(item, attr, None) is not None}


class FieldChoice(click.Choice):
    """``click.Choice`` over the values of a config field's Literal, e.g. ``FieldChoice("RunConfig.arm")``."""

    def __init__(self, where: str, case_sensitive: bool = True) -> None:  # no choices yet: read when first needed
        self.where, self.case_sensitive = where, case_sensitive

    @cached_property
    def choices(self) -> tuple[Any, ...]:  # type: ignore[override]
        values = literal_values(field_info(self.where).annotation)
        if not values:
            raise TypeError(f"{self.where}: no Literal to read choices from")
        return values


class _FieldBounds:
    """A click number range whose bounds are a config field's, read when first needed; ``min`` / ``max`` given
    here narrow them for an option that needs more (a benchmark that needs two rounds)."""

    kind: type = object
    clamp = False

    def __init__(self, where: str, min: float | None = None, max: float | None = None) -> None:
        self.where, self.narrowed = where, {"min": min, "max": max}

    @cached_property
    def bounds(self) -> dict[str, Any]:
        info = field_info(self.where)
        if self.kind not in (info.annotation, *typing.get_args(info.annotation)):
            raise TypeError(f"{self.where}: not a {self.kind.__name__} field ({info.annotation})")
        found = field_bounds(info)
        low, high = self.narrowed["min"], self.narrowed["max"]
        return {"min": found.get("ge", found.get("gt")) if low is None else low,
                "min_open": "gt" in found and low is None,
                "max": found.get("le", found.get("lt")) if high is None else high,
                "max_open": "lt" in found and high is None}

    min = property(lambda self: self.bounds["min"])
    max = property(lambda self: self.bounds["max"])
    min_open = property(lambda self: self.bounds["min_open"])
    max_open = property(lambda self: self.bounds["max_open"])


class FieldIntRange(_FieldBounds, click.IntRange):
    """``click.IntRange`` over an int config field's bounds, e.g. ``FieldIntRange("RunConfig.rounds")``."""

    kind = int


class FieldFloatRange(_FieldBounds, click.FloatRange):
    """``click.FloatRange`` over a float config field's bounds, e.g. ``FieldFloatRange("DedupConfig.threshold")``."""

    kind = float
