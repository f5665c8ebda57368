"""CAR-bench's 57 tools by name: ``TOOLS`` (name -> ``CarTool``) and ``CONFIRMATION_TOOLS``.

Groups: vehicle (17 set, 12 get), navigation (6 look-ups, 7 route edits),
charging (4), productivity and communication (5), weather (1), user
preferences (1), cross-domain (calculate_math, calculate_datetime, think,
planning_tool).
"""
from __future__ import annotations

from evosyn.envs.car_bench.tools import cross_domain, navigation, services, vehicle
from evosyn.envs.car_bench.tools.base import CarTool, Raw, ToolContext, ToolFailure

TOOLS: dict[str, CarTool] = {t.name: t for module in (services, cross_domain, vehicle, navigation)
                             for t in module.TOOLS}
CONFIRMATION_TOOLS = frozenset(name for name, t in TOOLS.items() if t.confirm)

__all__ = ["CONFIRMATION_TOOLS", "TOOLS", "CarTool", "Raw", "ToolContext", "ToolFailure"]
