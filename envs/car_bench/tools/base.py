"""How a CAR-bench tool is declared and what it acts on.

A tool is a ``CarTool``: its name and JSON schema (CAR-bench's), its kind
(``read`` tools only look, ``write`` tools change the car's state, ``generic``
tools compute or take notes), whether CAR-bench's policy makes it ask the
user's explicit confirmation first, and a handler ``(ctx, **arguments)``.

A handler returns the ``result`` object of a successful call, or raises
``ToolFailure`` for a refused one (CAR-bench's ``{"status": "FAILURE",
"errors": {code: message}}``, which counts as a tool execution error, except
for a tool CAR-bench never counts: ``CarTool.tool_error`` False). Tools
whose CAR-bench answer is not that envelope (``calculate_math``,
``calculate_datetime``, ``think``) return ``Raw`` text. Any other exception
becomes an ``Error: ...`` observation, as in CAR-bench, and is not counted as a
tool execution error (CAR-bench does not count it either).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from evosyn.envs.car_bench.data import CarBenchData
from evosyn.envs.car_bench.state import CarState, FixedContext

Kind = Literal["read", "write", "generic"]


class ToolFailure(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Raw:
    """A tool answer that is plain text, not the status envelope."""

    text: str


@dataclass
class ToolContext:
    """What one episode's tools act on."""

    state: CarState
    fixed: FixedContext
    data: CarBenchData
    calendar_id: str = ""
    plans: dict[str, Any] = field(default_factory=dict)  # the planning tool's notes (not part of the state)
    policy_errors: list[str] = field(default_factory=list)  # AUT-POL violations a tool itself detects

    def set(self, **values: Any) -> None:
        """Assign state fields one by one, validated, like CAR-bench's ``update_state``."""
        for key, value in values.items():
            setattr(self.state, key, value)
            if key == "waypoints_id" and value and value[0] != self.fixed.current_location.id:
                self.policy_errors.append("AUT-POL:016: the route must start at the car's current location")


@dataclass(frozen=True)
class CarTool:
    name: str
    kind: Kind
    group: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[..., Any]
    confirm: bool = False  # CAR-bench's REQUIRES_CONFIRMATION
    tool_error: bool = True  # whether a refusal counts as a tool execution error (not the planner's, in CAR-bench)

    def schema(self) -> dict[str, Any]:
        description = ("REQUIRES_CONFIRMATION: " if self.confirm else "") + self.description
        return {"type": "function", "function": {"name": self.name, "description": description,
                                                 "parameters": self.parameters}}


def params(properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties or {}, "required": list(required),
            "additionalProperties": False}


def integer(description: str, lo: float | None = None, hi: float | None = None, step: float = 1,
            **extra: Any) -> dict[str, Any]:
    """CAR-bench declares whole numbers as ``number`` with ``multipleOf``."""
    out: dict[str, Any] = {"type": "number", "description": description, "multipleOf": step}
    if lo is not None:
        out["minimum"] = lo
    if hi is not None:
        out["maximum"] = hi
    return {**out, **extra}


def enum(description: str, values: tuple[str, ...] | list[str]) -> dict[str, Any]:
    return {"type": "string", "description": description, "enum": list(values)}


def boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


def string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def id_ok(value: Any, kind: str) -> bool:
    """CAR-bench's id shapes: ``loc_abc_123`` / ``poi_abc_123``, routes ``rll_abc_def_123`` (rll, rlp, rpl,
    rpp), contacts ``con_123``, charging plugs ``plg_abc_123``. An id too short to have the shape raises
    ``IndexError``, an ``Error:`` answer rather than a refusal, as in CAR-bench (so it is no tool execution error)."""
    if not isinstance(value, str):
        return False
    if kind == "place":
        return value[3] == "_" and value[7] == "_" and value[8:].isdigit() and value[:3] in ("poi", "loc")
    if kind == "route":
        return (value[3] == "_" and value[7] == "_" and value[11] == "_" and value[12:].isdigit()
                and value[:3] in ("rll", "rlp", "rpl", "rpp"))
    if kind == "contact":
        return value[3] == "_" and value[4:].isdigit() and value[:3] == "con"
    if kind == "plug":
        return value[3] == "_" and value[7] == "_" and value[8:].isdigit() and value[:3] == "plg"
    raise ValueError(f"unknown id kind {kind!r}")


def percent_ok(value: Any) -> bool:
    """Within 0-100; a value that is no number raises (an ``Error:`` answer, as in CAR-bench, not a refusal)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"percentage must be a number, not {value!r}")
    return 0 <= value <= 100
